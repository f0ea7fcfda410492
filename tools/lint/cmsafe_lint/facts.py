"""Pass 1: the facts of every function of the files analyzed (rules/facts.cocci), by function."""

import os

from . import ctext, spatch

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rules")


class Call:
    __slots__ = ("name", "args", "file", "line", "col", "line_end", "col_end", "fn")

    def __init__(self, rec):
        self.name = rec["name"]
        self.args = ctext.split_args(rec["args"])
        self.file, self.fn = rec["file"], rec["fn"]
        self.line, self.col = rec["line"], rec["col"]
        self.line_end, self.col_end = rec["line_end"], rec["col_end"]

    @property
    def place(self):
        return (self.file, self.line, self.col)


class Function:
    """One function definition and what its body does, as texts without blanks."""

    def __init__(self, rec):
        self.name = rec["name"]
        self.file = rec["file"]
        self.line = rec["line"]
        self.end = int(rec["end"])
        self.type = ctext.norm(rec["type"])
        self.params = ctext.param_names(rec["params"])
        self.param_types = ctext.param_types(rec["params"])
        self.calls = []
        self.returns = []  # (expression, line)
        self.assigns = []  # (lhs, rhs, line)
        self.derefs = []  # (name, line)
        self.locals = set()  # names declared in the body

    def param_index(self, expr):
        """The index of the parameter `expr` names (casts and parentheses aside), or None."""
        e = ctext.norm(expr)
        return self.params.index(e) if e in self.params else None


class Facts:
    def __init__(self):
        self.functions = []  # Function
        self.by_file = {}  # file -> {name: Function}

    def define(self, fn):
        self.functions.append(fn)
        self.by_file.setdefault(fn.file, {})[fn.name] = fn

    def resolve(self, name, from_file):
        """The definition a call of `name` in `from_file` reaches: the file's own first, then
        the one other definition in the files analyzed; None when there is none (or several)."""
        own = self.by_file.get(from_file, {}).get(name)
        if own:
            return own
        found = [d[name] for d in self.by_file.values() if name in d]
        return found[0] if len(found) == 1 else None

    def function_at(self, file, line):
        best = None
        for fn in self.by_file.get(file, {}).values():
            if fn.line <= line <= fn.end and (best is None or fn.line >= best.line):
                best = fn
        return best


def collect(files, extra=()):
    recs = spatch.run(os.path.join(RULES, "facts.cocci"), files, "@F", extra=extra)
    facts = Facts()
    for r in recs:
        if r["k"] == "def":
            facts.define(Function(r))
    # Fields given functions in initializers: field -> the function names given it.
    ops = {}
    for r in recs:
        if r["k"] == "op":
            ops.setdefault(r["field"], set()).add(r["name"])
    for r in recs:
        k = r["k"]
        if k in ("def", "op"):
            continue
        if k == "fcall":
            # A call through a field is a call of the one function the files give that field
            # (and defines); with none or several it is not known, and not recorded.
            names = [n for n in ops.get(r["name"], ()) if facts.resolve(n, r["file"])]
            if len(names) != 1:
                continue
            r = dict(r, name=names[0])
            k = "call"
        fn = facts.by_file.get(r["file"], {}).get(r["fn"])
        if fn is None:
            continue
        if k == "call":
            fn.calls.append(Call(r))
        elif k == "ret":
            fn.returns.append((ctext.norm(r["expr"]), r["line"]))
        elif k == "asg":
            fn.assigns.append((ctext.norm(r["lhs"]), ctext.norm(r["rhs"]), r["line"]))
        elif k == "deref":
            fn.derefs.append((r["name"], r["line"]))
        elif k == "decl":
            fn.locals.add(r["name"])
    for fn in facts.functions:
        fn.calls.sort(key=lambda c: (c.line, c.col))
    return facts
