"""One lint run: the files, pass 1 (facts), the summaries and the helpers that ack on every
path, pass 2 per file (each family's rules, expanded), the judge; findings sorted."""

import os
import re
import tempfile

from . import api, ctext, expand, facts, fields, spatch, summary
from .finding import Finding
from .judge import Judge, Pos

RULES = facts.RULES
FAMILIES = ("cm", "cq", "async")


def c_files(paths):
    """The C files to read: each file named, and each directory's *.c files (recursively)
    that name an event call or a call that waits for one; sorted, each once. Raises OSError
    for a path that is neither."""
    out = []
    wanted = tuple(api.family_calls())
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for n in sorted(names):
                    if n.endswith(".c"):
                        f = os.path.join(root, n)
                        if _names_any(f, wanted):
                            out.append(f)
        elif os.path.isfile(p):
            out.append(p)
        elif os.path.exists(p):
            raise OSError("%s: not a regular file or a directory" % p)
        else:
            raise OSError("%s: no such file or directory" % p)
    seen, uniq = set(), []
    for f in out:
        k = os.path.realpath(f)
        if k not in seen:
            seen.add(k)
            uniq.append(f)
    return uniq


def _names_any(path, names):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return any(n in text for n in names)


def _ack_all_paths(fx, sums, workdir, extra=()):
    """Marks the helpers that ack a parameter on every path (ack_*_all), by asking spatch
    whether each candidate's body acks that parameter on all paths (`when strict`), until
    no more are found (a helper acking through another helper is found in a later round)."""
    props = {"cm": ("ack_cm", "ack_cm_all"), "cq": ("ack_cq", "ack_cq_all"),
             "as": ("ack_as", "ack_as_all")}
    for _ in range(4):
        rules = []
        wanted = []
        for fn, s in sums.of.items():
            for fam, (some, allp) in props.items():
                for i in s.props[some]:
                    if i in getattr(s, allp) or i >= len(fn.params):
                        continue
                    wanted.append((fn, fam, i))
        if not wanted:
            return
        for n, (fn, fam, i) in enumerate(wanted):
            p = fn.params[i]
            alts = _acks_of(fam, p, sums, fn.file)
            rules.append(
                "@a%d@\nposition p;\n@@\n%s@p(...) {\n... when strict\n%s\n... when strict\n}\n\n"
                "@script:python@\np << a%d.p;\n@@\nemit(%d, p)\n" % (n, fn.name, alts, n, n))
        cocci = os.path.join(workdir, "ackall.cocci")
        with open(cocci, "w") as f:
            f.write("@initialize:python@\n@@\nimport json\n"
                    "def emit(n, p):\n    print('@A ' + json.dumps([n, p[0].file]))\n\n")
            f.write("\n".join(rules))
        files = sorted({fn.file for fn, _, _ in wanted})
        found = spatch.run(cocci, files, "@A", extra=extra)
        new = False
        for n, file in found:
            fn, fam, i = wanted[n]
            if file == fn.file:
                getattr(sums.of[fn], props[fam][1]).add(i)
                new = True
        if not new:
            return


def _acks_of(fam, p, sums, file):
    """The SmPL disjunction of the acks of `p` in `fam`: the library's, and those of the
    helpers already known to ack on every path (the argument at any place)."""
    if fam == "cm":
        alts, attr = ["rdma_ack_cm_event(%s)" % p], "ack_cm_all"
    elif fam == "cq":
        alts, attr = ["ibv_ack_cq_events(%s, ...)" % p], "ack_cq_all"
    else:
        alts, attr = ["ibv_ack_async_event(%s)" % p, "ibv_ack_async_event(&%s)" % p], "ack_as_all"
    for fn, s in sums.of.items():
        if getattr(s, attr) and sums.facts.resolve(fn.name, file) is fn:
            alts.append("%s(..., %s, ...)" % (fn.name, p))
    return alts[0] if len(alts) == 1 else "\\( " + " \\| ".join(alts) + " \\)"


def unparsed_functions(fx, sums, files, sources):
    """Notes for functions that name an event call, an event type or a helper of the rules but
    that spatch could not parse (no rule saw them): found by a plain scan for top-level
    definitions."""
    notes = []
    names = set(api.EVENT_CALLS)
    for fn, s in sums.of.items():
        if any(s.props[p] for p in ("ack_cm", "ack_cq", "ack_as", "get_cm_out", "get_cq_out",
                                    "get_as_out")) or s.ret_cm or s.ret_cq or s.ret_as:
            names.add(fn.name)
    wanted = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\s*\(|"
                        r"\bstruct\s+(rdma_cm_event|ibv_async_event)\b")
    for f in files:
        src = sources[f]
        parsed = {fn.name for fn in fx.by_file.get(f, {}).values()}
        for name, line, body in _definitions(src):
            if name not in parsed and wanted.search(body):
                notes.append(Finding("not-checked", f, line, 0,
                                     "spatch could not parse %s(): its events are not checked"
                                     % name, severity="note"))
    return notes


def _definitions(src):
    """(name, line, body text) of each top-level function definition, by braces."""
    m = src.masked
    out = []
    depth = 0
    i = 0
    start_stmt = 0
    while i < len(m):
        c = m[i]
        if c == "{":
            if depth == 0:
                head = m[start_stmt:i]
                fm = re.search(r"([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:__attribute__\s*\(\(.*\)\)\s*)?$",
                               head, re.S)
                close = ctext._match_close(m, i)
                if fm and not re.search(r"=\s*$", head):
                    name = fm.group(1)
                    if name not in ("if", "for", "while", "switch", "return", "sizeof",
                                    "__attribute__", "__declspec", "defined"):
                        out.append((name, src.line_of(start_stmt + fm.start(1)),
                                    m[i:close + 1]))
                i = close + 1
                start_stmt = i
                continue
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            start_stmt = i + 1
        i += 1
    return out


def run(paths, macros=None):
    """Lints `paths` (files and directories); returns (files read, findings and notes sorted).
    `macros`: a file of #defines for spatch (--macro-file), for a project's own macros that
    keep functions from being parsed (each such function is a note)."""
    files = c_files(paths)
    if not files:
        return [], []
    extra = ("--macro-file", macros) if macros else ()
    fx = facts.collect(files, extra)
    sums = summary.Summaries(fx)
    fsums = fields.FieldSummaries(fx, sums)
    sources = {f: ctext.Source(f) for f in files}
    judge = Judge(fx, sums, sources, fsums)
    templates = []
    for fam in FAMILIES:
        with open(os.path.join(RULES, fam + ".cocci")) as t:
            templates.append((fam, t.read()))
    with tempfile.TemporaryDirectory(prefix="cmsafe-lint-") as work:
        _ack_all_paths(fx, sums, work, extra)
        # Each file gets the rules of the families it touches; files whose rules expand the
        # same way share one spatch run (one parse of each file).
        groups = {}
        for f in files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            parts = [expand.Expander(fx, sums, f, fsums).expand(t)
                     for fam, t in templates if _touches(text, fam, fx, sums)]
            if parts:
                groups.setdefault("\n".join(parts), []).append(f)
        for n, (rules, group) in enumerate(groups.items()):
            cocci = os.path.join(work, "rules%d.cocci" % n)
            with open(cocci, "w") as out:
                out.write(rules)
            for rec in spatch.run(cocci, group, "@C", extra=extra):
                judge.judge(rec)
    notes = unparsed_functions(fx, sums, files, sources)
    found = list(judge.findings.values()) + notes
    found.sort(key=lambda x: (x.file, x.line, x.col, x.kind))
    return files, found


# What makes a family's rules worth running on a file: its library calls, and helpers with a
# property of the family (a file calling none of them cannot match).
_FAMILY_PROPS = {
    "cm": ("ack_cm", "get_cm_out", "destroy_id", "destroy_migrate", "destroy_channel",
           "destroy_qp", "destroy_id_ev", "destroy_migrate_ev", "destroy_qp_ev"),
    "cq": ("ack_cq", "get_cq_out", "destroy_cq"),
    "async": ("ack_as", "get_as_out", "destroy_verbs"),
}
_FAMILY_CALLS = {
    "cm": tuple(api.CM_GET) + tuple(api.CM_ACK),
    "cq": tuple(api.CQ_GET) + tuple(api.CQ_ACK),
    "async": tuple(api.AS_GET) + tuple(api.AS_ACK),
}


def _touches(text, fam, fx, sums):
    """Whether the file's text names an event call of the family, or a helper that gets or
    acks one (a file with only destroys of its own cannot hold an event of that family)."""
    if any(n in text for n in _FAMILY_CALLS[fam]):
        return True
    for fn, s in sums.of.items():
        gets_or_acks = any(s.props[p] for p in _FAMILY_PROPS[fam][:2]) or (
            fam == "cm" and (s.ret_cm or s.ret_cm_typed)) or (
            fam == "cq" and s.ret_cq) or (fam == "async" and s.ret_as)
        if gets_or_acks and re.search(r"\b%s\s*\(" % re.escape(fn.name), text):
            return True
    return False
