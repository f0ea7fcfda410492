#!/usr/bin/env python3
"""make lint-field: cmsafe-lint on the programs of programs.py (sources from fetch-sources),
each finding matched with its reading by a person (verdicts.txt), written as
bench/results/lint.md: the precision table, then every finding with its verdict.

  field.py --src DIR --verdicts FILE --out FILE

A finding nobody has read yet is listed as unread and makes the run fail (exit 1): the table
holds only read findings. A verdict whose finding is gone is listed too (the rules changed:
read again). Exit 2 for a usage error, 3 when spatch fails.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cmsafe_lint import api, lint, spatch  # noqa: E402
from programs import PROGRAMS  # noqa: E402

VERDICTS = ("bug", "fp", "exit")


def read_verdicts(path):
    """{(package/path, line, kind): (verdict, note)} from lines
    `PACKAGE/PATH:LINE KIND VERDICT | note` (# comments and blank lines skipped)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = re.match(r"^(\S+):(\d+) (\S+) (\S+) \| (.+)$", line)
            if not m or m.group(4) not in VERDICTS:
                raise ValueError("%s:%d: not `PKG/PATH:LINE KIND %s | note`" % (
                    path, n, "|".join(VERDICTS)))
            out[(m.group(1), int(m.group(2)), m.group(3))] = (m.group(4), m.group(5))
    return out


def event_calls(files):
    """How many calls of the event functions (gets and acks of the three families) the files
    hold, by a plain count of their names followed by a parenthesis."""
    pat = re.compile(r"\b(%s)\s*\(" % "|".join(api.EVENT_CALLS))
    n = 0
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            n += len(pat.findall(fh.read()))
    return n


def main(argv):
    ap = argparse.ArgumentParser(prog="field.py")
    ap.add_argument("--src", required=True)
    ap.add_argument("--verdicts", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    verdicts = read_verdicts(args.verdicts)
    src = os.path.abspath(args.src)
    rows, listing, unread, seen = [], [], [], set()
    totals = dict(files=0, calls=0, warnings=0, bug=0, fp=0, exit=0, notchecked=0, secs=0.0)
    for prog in PROGRAMS:
        root = os.path.join(src, prog.package)
        paths = [os.path.join(root, p) for p in prog.paths]
        macros = os.path.join(HERE, "macros", prog.macros) if prog.macros else None
        t0 = time.monotonic()
        files, found = lint.run(paths, macros=macros)
        secs = time.monotonic() - t0
        calls = event_calls(files)
        counts = dict(warnings=0, bug=0, fp=0, exit=0, notchecked=0)
        items = []
        for f in found:
            rel = os.path.relpath(f.file, src)
            if f.kind == "not-checked":
                counts["notchecked"] += 1
                items.append((f, rel, "not checked", ""))
                continue
            key = (rel, f.line, f.kind)
            seen.add(key)
            if f.severity == "warning":
                counts["warnings"] += 1
            v = verdicts.get(key)
            if v is None:
                unread.append((prog.name, rel, f))
                items.append((f, rel, "UNREAD", ""))
                continue
            counts[v[0]] += 1
            items.append((f, rel, v[0], v[1]))
        rows.append((prog, len(files), calls, counts, secs))
        listing.append((prog, items))
        for k in ("warnings", "bug", "fp", "exit", "notchecked"):
            totals[k] += counts[k]
        totals["files"] += len(files)
        totals["calls"] += calls
        totals["secs"] += secs
        print("lint-field: %-55s %3d files %4d calls %3d warnings %5.1f s" % (
            prog.name, len(files), calls, counts["warnings"], secs), flush=True)
    stale = sorted(k for k in verdicts if k not in seen)
    write(args.out, src, rows, listing, totals, unread, stale)
    if unread or stale:
        for name, rel, f in unread:
            sys.stderr.write("lint-field: unread: [%s] %s\n" % (name, f.text(rel)))
        for k in stale:
            sys.stderr.write("lint-field: verdict without its finding: %s:%d %s\n" % k)
        return 1
    return 0


def write(out, src, rows, listing, totals, unread, stale):
    sources = ""
    try:
        with open(os.path.join(src, "SOURCES"), encoding="utf-8") as f:
            sources = f.read()
    except OSError:
        pass
    try:
        spatch_version = subprocess.run(["spatch", "--version"], stdout=subprocess.PIPE,
                                        text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        spatch_version = "spatch"
    lines = []
    w = lines.append
    w("## cmsafe-lint on code nobody here wrote")
    w("")
    w("Written by `make lint-field` on %s (%s; the machine shared, times are wall clock). "
      "Each finding was read by a person and judged: **bug** (the code does what the finding "
      "says on a path that can run; the write-up is in docs/lint.md), **fp** (a false "
      "positive: the finding is wrong, or its path cannot run; its kind is named) or "
      "**exit** (a note: an event left unacked where the process ends, which nothing waits "
      "for). Notes are not warnings: they do not make cmsafe-lint fail." % (
          datetime.date.today().isoformat(), spatch_version))
    w("")
    w("Sources (tools/lint/field/fetch-sources):")
    w("")
    for line in sources.splitlines():
        w("- " + line)
    w("")
    w("| program | files | event calls | warnings | bugs | false positives | notes (process end) "
      "| functions not parsed | seconds |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for prog, nfiles, calls, c, secs in rows:
        w("| %s | %d | %d | %d | %d | %d | %d | %d | %.0f |" % (
            prog.name, nfiles, calls, c["warnings"], c["bug"], c["fp"], c["exit"],
            c["notchecked"], secs))
    t = totals
    rate = 100.0 * t["fp"] / t["warnings"] if t["warnings"] else 0.0
    w("| **all** | %d | %d | %d | %d | %d | %d | %d | %.0f |" % (
        t["files"], t["calls"], t["warnings"], t["bug"], t["fp"], t["exit"], t["notchecked"],
        t["secs"]))
    w("")
    w("False positives: %d of %d warnings (%.1f%%). Event calls: calls of %s in the files "
      "read." % (t["fp"], t["warnings"], rate, ", ".join(api.EVENT_CALLS)))
    if unread or stale:
        w("")
        w("**Not read yet** (%d findings unread, %d verdicts without their finding): this table "
          "is not final." % (len(unread), len(stale)))
    w("")
    w("### Every finding, by program")
    for prog, items in listing:
        if not items:
            continue
        w("")
        w("**%s**" % prog.name)
        w("")
        for f, rel, verdict, note in items:
            w("- `%s:%d` %s `%s`: %s" % (rel, f.line, f.severity, f.kind, _md(f.message)))
            if note:
                w("  - %s: %s" % (verdict, _md(note)))
            else:
                w("  - %s" % verdict)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _md(s):
    return s.replace("|", "\\|")


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, ValueError) as e:
        sys.stderr.write("lint-field: %s\n" % e)
        sys.exit(2)
    except spatch.SpatchError as e:
        sys.stderr.write("lint-field: %s\n" % e)
        sys.exit(3)
    except Exception as e:  # noqa: BLE001 (one line, not a traceback)
        sys.stderr.write("lint-field: internal error: %s: %s\n" % (type(e).__name__, e))
        sys.exit(3)
