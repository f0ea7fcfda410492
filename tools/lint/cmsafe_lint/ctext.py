"""C source text: expressions as spatch prints them, argument lists, parameter names, and what
a plain reading of a file says about a place in it (the event types a switch or an if restricts
it to, the loops around it).

spatch prints a matched expression token by token with blanks between (`& ids [ i ]`); the
helpers here compare such texts with the blanks removed. Nothing here parses C fully: it reads
only tokens, brackets and a few keywords, after blanking comments, strings and character
constants (so that a brace or a `case` inside one counts for nothing).
"""

import re

# One character class, not alternatives of words under a repeat: those backtrack through every
# split of a long name that is not followed by `)` (exponential in its length).
_CAST = re.compile(r"^\([\w*\s]+\)(?=[\w(&*])")


def norm(text):
    """An expression's text without blanks, outer parentheses or leading casts."""
    s = re.sub(r"\s+", "", text or "")
    while True:
        if s.startswith("(") and _closing(s, 0) == len(s) - 1:
            s = s[1:-1]
            continue
        m = _CAST.match(s)
        if m and not _is_call_or_paren_expr(m.group(0)):
            s = s[m.end():]
            continue
        return s


def _is_call_or_paren_expr(cast):
    # "(x)" followed by more is a parenthesized name, not a cast, when x is lower-case and
    # not a type word: keep "(a)->b" as it is. Types in casts here are struct/const/... or a
    # typedef; a single bare identifier is taken for a cast only when it ends in _t.
    inner = cast[1:-1]
    if re.fullmatch(r"\w+", inner):
        return not inner.endswith("_t")
    return False


def _closing(s, i):
    """Index of the bracket closing the one at s[i], or -1."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for j in range(i, len(s)):
        c = s[j]
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return j
    return -1


def split_args(text):
    """A printed argument list split at its top-level commas, each part normalized."""
    parts, depth, cur, quote = [], 0, [], None
    for c in text or "":
        if quote:
            cur.append(c)
            if c == quote:
                quote = None
            continue
        if c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(norm("".join(cur)))
            cur = []
            continue
        cur.append(c)
    last = norm("".join(cur))
    if last or parts:
        parts.append(last)
    return parts


def param_names(text):
    """The names of a printed parameter list: `struct rdma_cm_event * ev , int ( * f ) ( void * )`
    gives ['ev', 'f']; `void` gives []."""
    names = []
    for part in split_args(text):
        if part in ("", "void", "..."):
            continue
        m = re.match(r"^[\w\s\*]*\(\*(\w+)\)", part)  # a function pointer
        if m:
            names.append(m.group(1))
            continue
        ids = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[.*\]", "", part))
        names.append(ids[-1] if ids else "")
    return names


def param_types(text):
    """The printed types of a parameter list, normalized (`structrdma_cm_event*`)."""
    out = []
    for part, name in zip(split_args(text), param_names(text)):
        out.append(part[: len(part) - len(name)] if name and part.endswith(name) else part)
    return out


def is_type(text, want):
    """Whether a printed type is `want` (both compared without blanks or const)."""
    def clean(t):
        return re.sub(r"\bconst\b", "", re.sub(r"\s+", "", t or "")).replace("const", "")
    return clean(text) == clean(want)


def calls_in(text):
    """(name, arguments) of every call in a normalized text, nested ones included."""
    out = []
    for m in re.finditer(r"([A-Za-z_]\w*)\(", text):
        close = _closing(text, m.end() - 1)
        if close > 0 and m.group(1) not in ("if", "while", "for", "switch", "return", "sizeof"):
            out.append((m.group(1), split_args(text[m.end(): close])))
    return out


def hands_over(expr, name):
    """Whether a returned expression hands `name` itself over: the name alone, or as an
    argument of a call in it (not a field read through it: `ev->status` hands nothing)."""
    if expr == name:
        return True
    return any(name in args or "&" + name in args for _, args in calls_in(expr))


def mentions(expr, name):
    """Whether the normalized expression `expr` contains `name` as a whole operand."""
    if not name:
        return False
    return re.search(r"(?<![\w.>])" + re.escape(name) + r"(?![\w])", expr) is not None


class Source:
    """One file's text, with comments, strings and character constants blanked for the scans
    below, and line/column conversions (lines from 1, columns from 0, as spatch gives them)."""

    def __init__(self, path):
        with open(path, encoding="utf-8", errors="replace") as f:
            self.text = f.read()
        self.lines = self.text.split("\n")
        self._starts = [0]
        for line in self.lines:
            self._starts.append(self._starts[-1] + len(line) + 1)
        self.masked = _mask(self.text)
        self._regions = None
        self._loops = None

    def offset(self, line, col):
        if line < 1 or line > len(self.lines):
            return len(self.text)
        return self._starts[line - 1] + col

    def line_of(self, offset):
        lo, hi = 0, len(self._starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def line_text(self, line):
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""

    def span(self, line, col, line_end, col_end):
        return self.text[self.offset(line, col): self.offset(line_end, col_end)]

    def statement_at(self, line, col):
        """The text from (line, col) to the next top-level `;` or `{`: the statement there."""
        start = self.offset(line, col)
        return self.text[start:_statement_edge(self.masked, start, 1)]

    def enclosing_statement(self, line, col):
        """The text of the simple statement (or condition) holding (line, col): from the
        `;`, `{` or `}` before it to the `;` or `{` after it, parentheses balanced."""
        off = self.offset(line, col)
        return self.text[_statement_edge(self.masked, off, -1): _statement_edge(self.masked, off, 1)]

    def failure_branch_of(self, line, col):
        """When the call at (line, col) is the condition of an `if` whose then-branch runs
        when the call fails (`if (f(x))`, `if (f(x) != 0)`, `if (f(x) < 0)`,
        `if ((ret = f(x)))`), that branch's (start, end) offsets; else None."""
        m = self.masked
        off = self.offset(line, col)
        # the innermost `if (` whose parenthesis encloses off
        depth = 0
        i = off
        while i > 0:
            c = m[i - 1]
            if c == ")":
                depth += 1
            elif c == "(":
                if depth == 0:
                    head = m[:i - 1].rstrip()
                    if head.endswith("if") and not (len(head) > 2 and
                                                    (head[-3].isalnum() or head[-3] == "_")):
                        close = _match_close(m, i - 1)
                        cond = re.sub(r"\s+", "", m[i:close])
                        if cond.startswith("!") or re.search(r"==0$", cond):
                            return None
                        return (close + 1, _statement_end(m, close + 1))
                    i -= 1
                    continue
                depth -= 1
            elif c in ";{}":
                return None
            i -= 1
        return None

    def flag_guard_of(self, line, col):
        """When the statement at (line, col) is the body of `if (!flag)` (or `flag == 0`,
        `!*flag`, `!p->flag`): a flag the program keeps to say whether it acked. The flag's
        text, else None."""
        m = self.masked
        i = self.offset(line, col)
        # back over blanks and an opening brace to the `)` of the if's condition
        j = i - 1
        while j >= 0 and (m[j].isspace() or m[j] == "{"):
            j -= 1
        if j < 0 or m[j] != ")":
            return None
        depth = 0
        k = j
        while k >= 0:
            if m[k] == ")":
                depth += 1
            elif m[k] == "(":
                depth -= 1
                if depth == 0:
                    break
            k -= 1
        if k < 0 or not re.search(r"\bif\s*$", m[:k]):
            return None
        cond = re.sub(r"\s+", "", m[k + 1:j])
        g = re.fullmatch(r"!([\w*>.\-]+)|([\w*>.\-]+)==(0|false)", cond)
        return (g.group(1) or g.group(2)) if g else None

    # --- event types by place ---------------------------------------------------------------

    def event_types_at(self, line, col):
        """The CM event types the code at (line, col) runs for, as far as an enclosing
        `switch (x->event)` case or `if (x->event == RDMA_CM_EVENT_...)` says: a frozenset of
        names (RDMA_CM_EVENT_*, or "default" for a default label), or None when nothing does."""
        if self._regions is None:
            self._regions = _type_regions(self.masked)
        off = self.offset(line, col)
        best = None
        for start, end, types in self._regions:
            if start <= off < end and (best is None or start >= best[0]):
                best = (start, end, types)
        return best[2] if best else None

    def iterates(self, name, places):
        """Whether every (line, col) of PLACES is in the body of one iterator macro's loop that
        names `name` among its arguments (`STAILQ_FOREACH_SAFE(entry, ...)`,
        `list_for_each_entry(entry, ...)`): the macro gives `name` a new value at each turn,
        out of the rules' sight."""
        offs = [self.offset(line, col) for line, col in places]
        for m in _ITERATOR.finditer(self.masked):
            close = _match_close(self.masked, m.end() - 1)
            if close < 0 or not re.search(r"\b%s\b" % re.escape(name),
                                          self.masked[m.end():close]):
                continue
            start, end = close + 1, _statement_end(self.masked, close + 1)
            if all(start <= o < end for o in offs):
                return True
        return False

    def blocks_of(self, line, col, most=3):
        """The texts of the `{ ... }` blocks around (line, col), masked, innermost first, at
        most MOST of them."""
        m, i = self.masked, self.offset(line, col)
        out, depth = [], 0
        for k in range(i - 1, -1, -1):
            if m[k] == "}":
                depth += 1
            elif m[k] == "{":
                if depth == 0:
                    close = _match_close(m, k)
                    if close > i:
                        out.append(m[k:close + 1])
                        if len(out) == most:
                            break
                else:
                    depth -= 1
        return out

    def loop_conditions(self, line, col):
        """The conditions (masked text) of the for and while loops whose bodies hold (line,
        col)."""
        m, i = self.masked, self.offset(line, col)
        out = []
        for lp in re.finditer(r"\b(for|while)\s*\(", m):
            close = _match_close(m, lp.end() - 1)
            if close < 0:
                continue
            if close + 1 <= i < _statement_end(m, close + 1):
                out.append(m[lp.end():close])
        return out

    def in_loop(self, line, col):
        """Whether (line, col) is inside the body of a for, while or do loop."""
        if self._loops is None:
            self._loops = _loop_bodies(self.masked)
        off = self.offset(line, col)
        return any(start <= off < end for start, end in self._loops)


def _statement_edge(m, off, step):
    """From offset off, going forward (step 1) or back (-1), the offset of the first `;`, `{`
    or `}` outside parentheses and brackets (going back: just after it)."""
    opening, closing = ("([", ")]") if step > 0 else (")]", "([")
    depth = 0
    i = off if step > 0 else off - 1
    while 0 <= i < len(m):
        c = m[i]
        if c in opening:
            depth += 1
        elif c in closing:
            depth -= 1
        elif c in ";{}" and depth <= 0:
            break
        i += step
    return i if step > 0 else i + 1


def _mask(text):
    """The text with comments, string literals and character constants replaced by blanks
    (newlines kept), so that offsets still match."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            # a preprocessor line (and its continuations): its braces are not code's
            j = i
            while True:
                e = text.find("\n", j)
                if e < 0:
                    e = n
                    break
                if e > 0 and text[e - 1] == "\\":
                    j = e + 1
                    continue
                break
            for k in range(i, e):
                if out[k] != "\n":
                    out[k] = " "
            i = e
        else:
            i += 1
    return "".join(out)


def _match_close(m, i):
    """Offset of the bracket closing m[i] in masked text, or len(m)."""
    j = _closing(m, i)
    return len(m) if j < 0 else j


def _statement_end(m, i):
    """The end of the statement starting at offset i (after blanks): a block's closing brace,
    or the `;` ending a simple statement (an if/for/while's own body included)."""
    n = len(m)
    while i < n and m[i].isspace():
        i += 1
    if i < n and m[i] == "{":
        return _match_close(m, i) + 1
    kw = re.match(r"(if|for|while|switch)\s*\(", m[i:])
    if kw:
        close = _match_close(m, i + kw.end() - 1)
        end = _statement_end(m, close + 1)
        if kw.group(1) == "if":
            rest = re.match(r"\s*else\b", m[end:])
            if rest:
                end = _statement_end(m, end + rest.end())
        return end
    if re.match(r"do\b", m[i:]):
        end = _statement_end(m, i + 2)
        semi = m.find(";", end)
        return n if semi < 0 else semi + 1
    depth = 0
    while i < n:
        c = m[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif c == ";" and depth == 0:
            return i + 1
        i += 1
    return n


_EVENT_FIELD = r"[\w\]\[\.\->\s\(\)\*]*?(?:->|\.)\s*event\s*"


def _type_regions(m):
    """(start, end, types) for each case group of a switch whose labels are RDMA_CM_EVENT_*
    (on `ev->event`, or a variable given it) and each branch of an
    `if (X == / != RDMA_CM_EVENT_...)`."""
    regions = []
    for sw in re.finditer(r"\bswitch\s*\(", m):
        close = _match_close(m, sw.end() - 1)
        brace = m.find("{", close)
        if brace < 0:
            continue
        end = _match_close(m, brace)
        body = m[brace + 1: end]
        base = brace + 1
        # Labels at the switch's own depth: a nested switch's labels are its own.
        labels = []
        depth = 0
        i = 0
        while i < len(body):
            c = body[i]
            if c in "({[":
                depth += 1
            elif c in ")}]":
                depth -= 1
            elif depth == 0:
                lm = re.match(r"case\s+([A-Za-z_]\w*)\s*:|default\s*:", body[i:])
                if lm and (i == 0 or not (body[i - 1].isalnum() or body[i - 1] == "_")):
                    labels.append((base + i, base + i + lm.end(), lm.group(1) or "default"))
                    i += lm.end()
                    continue
            i += 1
        if not any(re.match(r"RDMA_CM_EVENT_\w+$", name) for _, _, name in labels):
            continue  # not a switch on a CM event's type
        # Consecutive labels with no code between share the code after the last of them.
        k = 0
        while k < len(labels):
            names = {labels[k][2]}
            j = k
            while j + 1 < len(labels) and not m[labels[j][1]: labels[j + 1][0]].strip():
                j += 1
                names.add(labels[j][2])
            start = labels[j][1]
            stop = labels[j + 1][0] if j + 1 < len(labels) else end
            regions.append((start, stop, frozenset(names)))
            k = j + 1
    # The type compared with a constant RDMA_CM_EVENT_* (`ev->event`, or a variable given it).
    cond = re.compile(r"\bif\s*\(\s*[\w\]\[\.\->\s\(\)\*]*?\s*(==|!=)\s*(RDMA_CM_EVENT_\w+)\s*\)")
    for c in re.finditer(cond, m):
        close = c.end() - 1
        then_end = _statement_end(m, close + 1)
        name = c.group(2)
        if c.group(1) == "==":
            regions.append((close + 1, then_end, frozenset([name])))
        else:
            rest = re.match(r"\s*else\b", m[then_end:])
            if rest:
                else_start = then_end + rest.end()
                regions.append((else_start, _statement_end(m, else_start), frozenset([name])))
            elif re.search(r"\b(return|continue|break|goto|exit|abort)\b[^;]*;\s*\}?\s*$",
                           m[close + 1:then_end]):
                # `if (ev->event != X) return ...;`: the rest of the block runs for X only
                regions.append((then_end, _block_end(m, then_end), frozenset([name])))
    return regions


def _block_end(m, i):
    """The offset of the `}` closing the block that holds offset i."""
    depth = 0
    while i < len(m):
        c = m[i]
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return len(m)


# Iterator macros, by the names the kernel's, BSD's queue.h and SPDK's give them.
_ITERATOR = re.compile(r"\b(?:\w*for_each\w*|\w*FOREACH\w*)\s*\(")


def _loop_bodies(m):
    out = []
    for lp in re.finditer(r"\b(for|while)\s*\(", m):
        before = m[: lp.start()].rstrip()
        close = _match_close(m, lp.end() - 1)
        if lp.group(1) == "while" and before.endswith("}"):
            # the `while (...)` of a do loop: its body is found from the `do`
            after = m[close + 1:].lstrip()
            if after.startswith(";"):
                continue
        out.append((close + 1, _statement_end(m, close + 1)))
    for do in re.finditer(r"\bdo\b", m):
        out.append((do.end(), _statement_end(m, do.end())))
    return out
