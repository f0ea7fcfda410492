"""A guest run's logs made into the harness's fixtures (make harness-record): the files of each
run copied from where the harness left them into tests/harness/data/, the preload's reports
renamed from STEM.<pid>.jsonl to STEM.1.jsonl, STEM.2.jsonl (in the order of their pids, so
the started process's first), and the pids kept in STEM.run with what the harness wrote there
(the started pid, the status). A fixture recorded again then changes only where the run did,
not in every name.

    scripts/harness record FROM TO [STEM...]

FROM: a folder of logs (target/preload-misuse/audit, target/preload-real/basic, ...); TO: the
fixtures' folder; STEM: the runs to take (each file FROM/STEM.*), all when none is named.
Tests read a fixture back with `materialize`, which gives the reports their pids again in a
folder of its own, so that the harness's checks run on it unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from typing import Sequence

PROG = "harness-record"
USAGE = "usage: scripts/harness record FROM TO [STEM...]"
_REPORT = re.compile(r"^(.+)\.([0-9]+)\.jsonl$")
RUN = ".run"  # STEM.run: {"pid": ..., "rc": ..., "hung": ..., "reports": [pid, ...]}


def stems(folder: str) -> list[str]:
    """The runs in FOLDER: the stems of its .out, .err, .run and report files."""
    out = set()
    for f in os.listdir(folder):
        m = _REPORT.match(f)
        if m:
            out.add(m.group(1))
        elif f.endswith((".out", ".err", RUN)):
            out.add(f.rsplit(".", 1)[0])
    return sorted(out)


def record(src: str, dst: str, stem: str) -> list[str]:
    """STEM's files from SRC into DST, its reports by ordinal; the names written."""
    meta: dict = {}
    if os.path.exists(os.path.join(src, stem + RUN)):
        with open(os.path.join(src, stem + RUN)) as f:
            meta = json.load(f)
    reports = sorted(int(m.group(2)) for m in map(_REPORT.match, os.listdir(src))
                     if m and m.group(1) == stem)
    written = []
    for old in os.listdir(dst) if os.path.isdir(dst) else []:
        m = _REPORT.match(old)
        if (m and m.group(1) == stem) or old == stem + RUN:
            os.unlink(os.path.join(dst, old))
    os.makedirs(dst, exist_ok=True)
    for f in sorted(os.listdir(src)):
        if not f.startswith(stem + ".") or _REPORT.match(f) or f == stem + RUN:
            continue
        rest = f[len(stem) + 1:]
        if "." in rest and rest.split(".")[0] not in ("out", "err", "cmd"):
            continue  # another stem's file that begins with this one's (NAME.x.out)
        shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
        written.append(f)
    for k, pid in enumerate(reports, 1):
        name = "%s.%d.jsonl" % (stem, k)
        shutil.copyfile(os.path.join(src, "%s.%d.jsonl" % (stem, pid)), os.path.join(dst, name))
        written.append(name)
    if reports or meta:
        meta["reports"] = reports
        meta.setdefault("pid", reports[0] if reports else 0)
        with open(os.path.join(dst, stem + RUN), "w") as f:
            json.dump(meta, f, sort_keys=True)
            f.write("\n")
        written.append(stem + RUN)
    return written


def materialize(folder: str, stem: str, into: str) -> tuple[str, dict]:
    """A recorded run's reports given their pids again (INTO/STEM.<pid>.jsonl, as the harness
    names them); the log path the checks take (INTO/STEM, or FOLDER/STEM when the run wrote no
    report), and the run's STEM.run."""
    path = os.path.join(folder, stem + RUN)
    meta: dict = {}
    if os.path.exists(path):
        with open(path) as f:
            meta = json.load(f)
    reports = meta.get("reports", [])
    if not reports:
        return os.path.join(folder, stem), meta
    os.makedirs(into, exist_ok=True)
    for k, pid in enumerate(reports, 1):
        shutil.copyfile(os.path.join(folder, "%s.%d.jsonl" % (stem, k)),
                        os.path.join(into, "%s.%d.jsonl" % (stem, pid)))
    return os.path.join(into, stem), meta


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or not os.path.isdir(argv[0]):
        print(USAGE, file=sys.stderr)
        return 2
    src, dst, wanted = argv[0], argv[1], list(argv[2:])
    have = stems(src)
    missing = [s for s in wanted if s not in have]
    if missing:
        print("%s: no run %s in %s" % (PROG, ", ".join(missing), src), file=sys.stderr)
        return 1
    for stem in wanted or have:
        names = record(src, dst, stem)
        print("%s: %s" % (stem, " ".join(names)))
    return 0
