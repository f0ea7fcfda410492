"""CPU time per event, raw librdmacm against the pass-through preload, the cmsafe API and the
preload's safe and audit modes, measured in the guest (scripts/event-cpu; make event-cpu-bench).

Run inside scripts/rxe-vm; needs target/bench/syscall_loop and target/release/libcmsafe_preload.so.
Each mode runs bench/syscall_loop.c's blocking loop of ADDR_RESOLVED events, which reports its
CPU time, minor page faults and context switches between its markers (getrusage(2)): start-up,
the warm-up and teardown are left out. The warm-up (8000 events) is long enough for safe mode's
kept copies (4096) and audit's quarantine to stop growing, and the window (8000 to 11000) falls
between two doublings of the preload's tables of ids: every event of the loop has an id of its
own, all living to the end, and a table that doubles at 7168 ids (a one-time cost per doubling,
about 350 page faults) would be charged to the events of a window holding it. Rounds alternate
the modes, the order rotating, so a slow spell of the emulated machine falls on all of them
alike; each figure is the median over the rounds. This is a time: it is printed, never held by a
test (the counts that are held: syscall-count, insn-count).

    scripts/event-cpu [--rounds R] [--events N] [--warmup N]
"""

from __future__ import annotations

import os
import re
import sys
from typing import Sequence

from . import figures
from . import guest as guest_mod
from . import proc

PROG = "event-cpu"
USAGE = "usage: scripts/event-cpu [--rounds R] [--events N] [--warmup N]"
BIN = "target/bench/syscall_loop"
OUT = "target/bench/event-cpu"
MODES = ["raw", "off", "api", "safe", "audit"]
WHAT = {
    "raw": "raw: rdma_get_cm_event + rdma_ack_cm_event",
    "off": "the same under the preload, CMSAFE_MODE=off (every call passed straight on)",
    "api": "cmsafe_get_event + cmsafe_event_release",
    "safe": "raw under the preload, CMSAFE_MODE=safe",
    "audit": "raw under the preload, CMSAFE_MODE=audit",
}

_WINDOW = re.compile(r"^window cpu_us=([0-9]*) minflt=([0-9]*) csw=([0-9]*)$")


def window(lines: Sequence[str], events: int) -> list[str] | None:
    """The loop's window line, per event: CPU us, minor faults, context switches (as text)."""
    for line in lines:
        m = _WINDOW.match(line)
        if m:
            us, flt, csw = (int(g or 0) for g in m.groups())
            return ["%.2f" % (us / events), "%.3f" % (flt / events), "%.3f" % (csw / events)]
    return None


def order(rounds_: int) -> list[tuple[int, str]]:
    """(round, mode) in the order they run: every mode each round, the order rotating."""
    return [(r, MODES[(i + r) % len(MODES)]) for r in range(rounds_) for i in range(len(MODES))]


def table(runs: Sequence[Sequence[str]]) -> list[str]:
    """The table's rows from the runs (mode, round, us, faults, csw per event; runs.tsv's)."""

    def col(mode: str, c: int) -> str:
        return figures.median(r[c] for r in runs if r[0] == mode)

    raw_us = col("raw", 2)
    lines = ["| loop | CPU us/event | each round | over raw | ratio to raw | minor faults/event | context switches/event |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for m in MODES:
        us = col(m, 2)
        each = " ".join("%.0f" % figures.number(r[2]) for r in runs if r[0] == m)
        if m == "raw":
            over, ratio = "(baseline)", ""
        else:
            over = "%+.1f" % (figures.number(us) - figures.number(raw_us))
            ratio = "%.2f" % (figures.number(us) / figures.number(raw_us))
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (WHAT[m], us, each, over, ratio,
                                                               col(m, 3), col(m, 4)))
    return lines


def machine() -> str:
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            clock = f.read().strip()
    except OSError:
        clock = ""
    return "%d vCPUs, kernel %s, clocksource %s." % (len(os.sched_getaffinity(0)),
                                                     os.uname().release, clock)


def main(argv: Sequence[str]) -> int:
    os.environ["LC_ALL"] = "C"
    rounds, events, warmup = 5, 3000, 8000
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("--rounds", "--events", "--warmup") and args:
            v = args.pop(0)
            if not v.isdigit() or int(v) < 1:
                guest_mod.die(PROG, "%s takes a whole number, not %s" % (a, v))
            if a == "--rounds":
                rounds = int(v)
            elif a == "--events":
                events = int(v)
            else:
                warmup = int(v)
        else:
            print(USAGE, file=sys.stderr)
            return 2
    root = guest_mod.project_root()
    os.chdir(root)
    if not os.environ.get("RXE_ADDR"):
        guest_mod.die(PROG, "run inside scripts/rxe-vm", 1)
    preload = os.path.join(root, "target/release/libcmsafe_preload.so")
    if not os.access(BIN, os.X_OK):
        guest_mod.die(PROG, "%s is missing (make %s)" % (BIN, BIN), 1)
    if not os.path.isfile(preload):
        guest_mod.die(PROG, "%s is missing (make preload)" % preload, 1)
    os.makedirs(OUT, exist_ok=True)
    tsv = os.path.join(OUT, "runs.tsv")
    open(tsv, "w").close()
    envs = {
        "raw": ({}, "raw"), "api": ({}, "api"),
        "off": ({"LD_PRELOAD": preload, "CMSAFE_MODE": "off"}, "raw"),
        "safe": ({"LD_PRELOAD": preload, "CMSAFE_MODE": "safe", "CMSAFE_LOG": "error"}, "raw"),
        "audit": ({"LD_PRELOAD": preload, "CMSAFE_MODE": "audit", "CMSAFE_LOG": "error"}, "raw"),
    }
    runs = []
    for r, m in order(rounds):
        env, loop = envs[m]
        base = os.path.join(OUT, m)
        rc = proc.run_to([BIN, loop, str(events), str(warmup)], base + ".out", base + ".err",
                         env=proc.environment(env))
        out = proc.read_lines(base + ".out")
        if rc != 0 or "events %d" % events not in out:
            print("%s: %s failed:" % (PROG, m), file=sys.stderr)
            for path, lines in ((base + ".out", out), (base + ".err", proc.read_lines(base + ".err"))):
                print("==> %s <==" % path, file=sys.stderr)
                for line in lines[-5:]:
                    print(line, file=sys.stderr)
            return 1
        got = window(out, events)
        if got is None:
            guest_mod.die(PROG, "%s printed no window line" % m, 1)
        run = [m, str(r)] + got
        runs.append(run)
        with open(tsv, "a") as f:
            f.write("\t".join(run) + "\n")
    print("CPU time per event: bench/syscall_loop.c's blocking loop of ADDR_RESOLVED events, %d "
          "events after %d warm-up events; the process's CPU time (user + system), minor page "
          "faults and context switches between the loop's markers (getrusage(2)), divided by %d; "
          "median of %d alternated rounds. %s" % (events, warmup, events, rounds, machine()))
    print()
    for line in table(runs):
        print(line)
    print()
    print("Minor faults are getrusage's: a trap to the fault handler and a page that "
          "madvise(MADV_POPULATE_WRITE) made writable (audit, once per page run) count alike.")
    print("Runs: %s (mode, round, CPU us, minor faults and context switches per event)." % tsv)
    return 0
