"""The preload's memory stays bounded however many events pass through it (make soak-test,
make soak-bench).

c-tests/soak_events (create an id, resolve an address, get and ack its ADDR_RESOLVED, destroy
the id; EVENTS times) runs raw, under safe mode and under audit, the three at once (the guest
has two vCPUs and each run mostly waits for the kernel's address resolution; a run's resident
set does not depend on the others). Each prints its resident set at CHECKPOINTS checkpoints.
Warm-up is the first fifth of the events (the preload's fixed-size structures fill: acked events
kept for double-ack detection, guard pages, its histogram); from there to the end the resident
set may grow by at most GROWTH_MAX_KIB (32 pages, below 2 bytes per event for 100,000 events),
a count, not a time. Under the preload the exit summary must count exactly EVENTS events and 0
findings, and stderr hold nothing else. Prints one line per run and a table (also written to
MARKDOWN_FILE when given), and ends with "soak-events: N passed, N failed".
"""

from __future__ import annotations

import os
import re
import shutil
import time
from typing import Sequence

from . import guest as guest_mod
from . import proc
from .tally import Tally

PROG = "soak-events"
GROWTH_MAX_KIB = 128
CHECKPOINTS = 20
WARMUP_CHECKPOINT = 4
RUNS = ["raw", "safe", "audit"]
RUN_TIMEOUT = 1800  # seconds for one run of a million events, in the x86_64 guest's time

_RSS = re.compile(r"^rss ([0-9]+) events [0-9]+$")


def check_run(run: str, events: int, rc: int, out: Sequence[str],
              err: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """One run's problems, and its table row's values."""
    problems = []
    if rc != 0:
        problems.append("exit status %d: %s" % (rc, " ".join(err[-3:])))
    rss = [int(m.group(1)) for m in map(_RSS.match, out) if m]
    if "events %d" % events not in out:
        problems.append("no 'events %d' line" % events)
    row = {"warm": "-", "end": "-", "growth": "-", "per": "-", "summary": "-"}
    if len(rss) == CHECKPOINTS:
        warm, end = rss[WARMUP_CHECKPOINT - 1], rss[CHECKPOINTS - 1]
        growth = end - warm
        measured = events - events * WARMUP_CHECKPOINT / CHECKPOINTS
        row.update(warm=str(warm), end=str(end), growth=str(growth),
                   per="%.3f" % (growth * 1024 / measured))
        if growth > GROWTH_MAX_KIB:
            problems.append("resident set grew by %d KiB after warm-up (%s KiB), at most %d allowed"
                            % (growth, " ".join(map(str, rss)), GROWTH_MAX_KIB))
    else:
        problems.append("%d rss checkpoints, want %d" % (len(rss), CHECKPOINTS))
    if run != "raw":
        first = next((line for line in err if line.startswith("==cmsafe== summary: ")), "")
        summary = re.sub(r"^==cmsafe== summary: pid [0-9]*, ", "", first)
        row["summary"] = summary
        want = "mode %s, %d events, 0 findings" % (run, events)
        if summary != want:
            problems.append("summary '%s', want '%s'" % (summary or "none", want))
        other = [line for line in err if not re.match(r"^==cmsafe== (summary|  )", line)]
        if other:
            problems.append("unexpected stderr: %s" % " ".join(other[:2]))
    return problems, row


def table(events: int, rows: Sequence[tuple[str, dict[str, str], str]]) -> list[str]:
    lines = ["| run | events | RSS after warm-up KiB | RSS at end KiB | growth KiB | growth per event, bytes | preload summary | time s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run, row, secs in rows:
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            run, events, row["warm"], row["end"], row["growth"], row["per"], row["summary"], secs))
    return lines


def markdown(events: int, lines: Sequence[str]) -> str:
    return "\n".join([
        "## Soak: the preload's memory over %d events" % events,
        "",
        "Guest: `scripts/rxe-vm -- scripts/soak-events %d` (`make soak-bench`). Each event is one" % events,
        "iteration of c-tests/soak_events: rdma_create_id, rdma_resolve_addr, rdma_get_cm_event",
        "(ADDR_RESOLVED), rdma_ack_cm_event, rdma_destroy_id. Resident set (/proc/self/statm) after",
        "the first fifth of the events (warm-up) and at the end; the test allows at most",
        "%d KiB of growth after warm-up. The three runs go at the same time; times are the" % GROWTH_MAX_KIB,
        "emulator's (qemu TCG), informative only.",
        "",
    ] + list(lines)) + "\n"


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        guest_mod.die(PROG, "usage: soak-events EVENTS [MARKDOWN_FILE]")
    if not argv[0].isdigit():
        guest_mod.die(PROG, "EVENTS must be a number")
    events = int(argv[0])
    if events < 1000:
        guest_mod.die(PROG, "EVENTS must be at least 1000")
    md = argv[1] if len(argv) == 2 else None
    g = guest_mod.from_env(PROG)
    root = guest_mod.project_root()
    os.chdir(root)
    prog = os.path.join(root, "target", "preload-tests", "soak_events")
    lib = os.path.join(root, "target", "release", "libcmsafe_preload.so")
    out = os.path.join("target", "soak-events")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    base = {"LD_PRELOAD": None, "CMSAFE_MODE": None, "CMSAFE_REPORT": None, "CMSAFE_LOG": None}
    started = {}
    for run in RUNS:
        env = dict(base) if run == "raw" else dict(base, LD_PRELOAD=lib, CMSAFE_MODE=run)
        started[run] = proc.Background([prog, str(events), str(CHECKPOINTS)],
                                       os.path.join(out, run), proc.environment(env))
    # Each run's end, seen as it comes: its time is its own, whichever ends first.
    ended: dict[str, tuple[int, float]] = {}
    deadline = time.monotonic() + RUN_TIMEOUT * g.time_scale
    while len(ended) < len(RUNS):
        for run in RUNS:
            if run not in ended and not started[run].alive():
                ended[run] = (started[run].wait(0) or 0, time.monotonic())
        if time.monotonic() >= deadline:
            for run in RUNS:
                if run not in ended:
                    ended[run] = (started[run].stop(), time.monotonic())
        time.sleep(proc.POLL)
    t = Tally(PROG)
    rows = []
    for run in RUNS:
        b = started[run]
        rc, at = ended[run]
        secs = "%.1f" % (int((at - b.t0) * 10) / 10)
        problems, row = check_run(run, events, rc, b.out(), b.err())
        rows.append((run, row, secs))
        for p in problems:
            t.problem(p)
        if not problems:
            t.verdict("soak %s: %d events, resident set %s KiB after warm-up, %s KiB at the end "
                      "(growth %s KiB, at most %d); %ss" % (run, events, row["warm"], row["end"],
                                                             row["growth"], GROWTH_MAX_KIB, secs))
        else:
            t.verdict("soak %s:" % run)
    lines = table(events, rows)
    for line in lines:
        t.say(line)
    if md:
        with open(md, "w") as f:
            f.write(markdown(events, lines))
    t.say("soak-events: %d passed, %d failed" % (t.passed, t.failed))
    return 1 if t.failed else 0
