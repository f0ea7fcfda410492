"""A JSON report's lines as the harnesses read them: whole lines only.

The preload writes a report a line at a time (preload/src/audit/report.rs), so a report cut short
(a full disk, a process killed while a line was written, its last line cut at any byte, even
inside a UTF-8 sequence) is whole lines and then a cut one, without its newline. The whole lines
are the report; the cut one is skipped, and said in one line on stderr naming the file, as
bin/cmsafe-timeline does: a last line without its newline that is a whole JSON value (the newline
alone was lost) is kept.
"""

from __future__ import annotations

import json
import sys


def whole_lines(name: str, raw: bytes) -> list[str]:
    """RAW, the bytes of the report NAME, as its whole lines (bytes that are not UTF-8
    replaced); a cut last line skipped, and said."""
    lines = raw.split(b"\n")
    last = lines.pop()
    if last.strip():
        try:
            json.loads(last.decode("utf-8"))
            lines.append(last)
        except (ValueError, RecursionError):
            print("%s: the last line is cut (%d bytes, no newline): skipped" % (name, len(last)),
                  file=sys.stderr)
    return [line.decode("utf-8", "replace") for line in lines]


def report_lines(path: str) -> list[str] | None:
    """The whole lines of the report at PATH; None when it cannot be read (none written)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return whole_lines(path, raw)
