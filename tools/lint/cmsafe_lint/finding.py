"""A finding and its line, as compilers print theirs (`file:line:col: warning: KIND: message`),
so that editors and CI read it. Columns count from 1; spatch's from 0."""

import re


class Finding:
    __slots__ = ("kind", "file", "line", "col", "message", "severity")

    def __init__(self, kind, file, line, col, message, severity="warning"):
        self.kind = kind
        self.file = file
        self.line = line
        self.col = col  # from 0, as spatch gives it
        self.message = message
        self.severity = severity

    def key(self):
        return (self.file, self.line, self.col, self.kind)

    def text(self, shown_file=None):
        return "%s:%d:%d: %s: %s: %s" % (escape(shown_file or self.file), self.line,
                                         self.col + 1, self.severity, self.kind,
                                         escape(self.message))


def escape(s):
    """Text from the files read, safe on one line: control characters as \\n, \\x1b, ..."""
    def one(m):
        c = m.group(0)
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, "\\x%02x" % ord(c))
    return re.sub(r"[\x00-\x1f\x7f]", one, s)
