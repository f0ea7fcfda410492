"""Instructions per event and per id, raw librdmacm against the cmsafe API and the preload,
counted in the guest (scripts/insn-count; make insn-test, make insn-bench, make arm64-insn-test).

Run inside scripts/rxe-vm; needs target/bench/syscall_loop and
target/release/libcmsafe_preload.so. Each loop of bench/syscall_loop.c runs under valgrind's
callgrind, which counts the instructions executed in user space (system calls run natively and
are not counted: syscall-count counts those), only inside fetch_one (one event got and acked) or
id_life (an id created, two events, destroyed). Each row is run twice, with N and 2N measured
iterations after the same warm-up, and the difference divided by N, so that first-use costs
(symbol lookups, the state's creation, the watcher's start) drop out and the figure is the
steady state's. The same binary and input give the same count, however busy the machine is: this
is the CPU the program pays per event, by count rather than by time.

    scripts/insn-count [--n N] [--preload PATH] [--out DIR] [--check]

--preload: another build of libcmsafe_preload.so (to compare two builds in one run); --out:
where the profiles go (default target/bench/insns); --check: exit 1 unless every row's extra
instructions over raw are within its budget (`make insn-test`, part of `make test`).

The budgets are ceilings on the extra instructions over the matching raw loop, per
architecture, in bench/budgets.tsv (bench/README.md, "Instruction budgets": how they were set
and which regressions they catch). With --check, an architecture without rows there fails.

Then scripts/preload-insns.py's reader (cmtime-insns' count of the preload's own instructions in
a whole process) on the safe and audit loops' profiles must find what the loop's count says the
preload added per event: a reader that loses part of the preload's code (an object it cannot
place) fails here. Within 2%: the preload's exported stubs bear the real functions' names, and
the reader leaves their few instructions out with the real work. And where those instructions
go, by part: the cost the time ratios are made of (cm-setup.md, storm.md), by count.

Not on aarch64: there callgrind cannot see a return through the entry trampoline's tail call
(`b`, preload/src/entry.rs): a `bl` moves no stack pointer, by which callgrind unwinds its
shadow stack, so the trampoline's frame outlives the call and what runs next (librdmacm's
malloc, the program's own code) is booked as the preload's callee. The loops' counts are right
there (collection stops when fetch_one, which has a frame, returns); which of the preload's
calls cost what is not, so the attribution is neither checked nor printed.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from typing import Sequence

from . import budgets as budgets_mod
from . import callgrind
from . import guest as guest_mod
from . import proc

PROG = "insn-count"
USAGE = "usage: scripts/insn-count [--n N] [--preload PATH] [--out DIR] [--check]"
BIN = "target/bench/syscall_loop"

# label, function, mode, warm-up, CMSAFE_MODE under the preload (None: no preload).
ROWS = [
    ("raw", "fetch_one", "raw", 50, None),
    ("api", "fetch_one", "api", 50, None),
    ("safe", "fetch_one", "raw", 4200, "safe"),
    ("audit", "fetch_one", "raw", 4200, "audit"),
    ("raw-life", "id_life", "raw-life", 50, None),
    ("api-life", "id_life", "api-life", 50, None),
    ("safe-life", "id_life", "raw-life", 2100, "safe"),
    ("audit-life", "id_life", "raw-life", 2100, "audit"),
]
# The table's lines: what, label, base.
LINES = [
    ("raw: one event, rdma_get_cm_event + rdma_ack_cm_event", "raw", "raw"),
    ("cmsafe_get_event + cmsafe_event_release", "api", "raw"),
    ("raw under the preload, CMSAFE_MODE=safe (after 4200 events)", "safe", "raw"),
    ("raw under the preload, CMSAFE_MODE=audit (after 4200 events)", "audit", "raw"),
    ("raw-life: one id, rdma_create_id, two resolutions and their events, rdma_destroy_id",
     "raw-life", "raw-life"),
    ("the same on the API", "api-life", "raw-life"),
    ("raw-life under the preload, CMSAFE_MODE=safe (after 2100 ids)", "safe-life", "raw-life"),
    ("raw-life under the preload, CMSAFE_MODE=audit (after 2100 ids)", "audit-life", "raw-life"),
]
ATTRIBUTED = ["safe", "audit"]  # the loops whose profiles the reader is held to
TOP = 12  # parts shown per attributed loop


class Failed(Exception):
    """A run that counted nothing: the harness stops, saying which and why."""


def steady(a: int, b: int, n: int) -> int:
    """Instructions per iteration in the steady state: (Ir at 2N - Ir at N) / N, rounded as
    printf's %.0f rounds."""
    return int("%.0f" % ((b - a) / n))


@dataclass
class Line:
    text: str
    missed: str | None = None  # the message of a budget not met


def table_line(what: str, v: int, b: int, baseline: bool, budget: int | None, label: str) -> Line:
    if baseline:
        return Line("| %s | %d | (baseline) | | | |" % (what, v))
    verdict, missed = "met", None
    if budget is None:
        verdict = "no budget"
    elif v - b > budget:
        verdict = "NOT met"
        missed = "%s: +%d over raw, budget +%d" % (label, v - b, budget)
    return Line("| %s | %d | %+d | %.2fx | %s | %s |" % (
        what, v, v - b, v / b, "-" if budget is None else "+%d" % budget, verdict), missed)


def table(got: dict[str, int], budget: dict[str, int], n: int) -> list[Line]:
    lines = [Line("User-space instructions per iteration in the steady state (valgrind "
                  "--tool=callgrind, only inside bench/syscall_loop.c's fetch_one or id_life; "
                  "(Ir at %d iterations - Ir at %d) / %d, after the warm-up each row names); system "
                  "calls are not counted here." % (2 * n, n, n)),
             Line(""),
             Line("| loop | instructions | extra over raw | ratio to raw | budget | verdict |"),
             Line("|---|---:|---:|---:|---:|---|")]
    for what, label, base in LINES:
        lines.append(table_line(what, got[label], got[base], label == base, budget.get(label), label))
    return lines


def trunc_div(a: int, b: int) -> int:
    """Integer division toward zero, as the shell's $(( )) divides."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def attribution(label: str, own: int, extra: int) -> tuple[str, str | None]:
    """The reader's share of LABEL's loop against its count: the line, and the miss when off by
    more than 2%."""
    line = "preload-insns.py on the %s loop: %d of the %d extra instructions per event." % (label, own, extra)
    ok = own * 100 >= extra * 98 and own * 100 <= extra * 102
    return line, None if ok else (
        "preload-insns.py finds %d of the preload's %d instructions per event in the %s loop"
        % (own, extra, label))


def ir(out: str, label: str, fn: str, mode: str, iters: int, warm: int,
       env: dict[str, str]) -> int:
    """Instructions inside FN over ITERS measured iterations of MODE (OUT/LABEL.cg and .log)."""
    log = os.path.join(out, label + ".log")
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/%s.cg" % (out, label),
            "--toggle-collect=" + fn, BIN, mode, str(iters), str(warm)]
    rc = proc.run_to(argv, log, env=proc.environment(env))
    lines = proc.read_lines(log)
    if rc != 0 or "events %d" % iters not in lines:
        raise Failed("%s failed:" % label, lines)
    count = callgrind.collected(lines)
    if count is None:
        raise Failed("%s: no instructions counted in %s" % (label, fn))
    return count


def main(argv: Sequence[str]) -> int:
    os.environ["LC_ALL"] = "C"
    root = guest_mod.project_root()
    os.chdir(root)
    n, preload, out, check = 200, os.path.join(root, "target/release/libcmsafe_preload.so"), \
        "target/bench/insns", False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("--n", "--preload", "--out") and args:
            v = args.pop(0)
            if a == "--n":
                if not v.isdigit() or int(v) < 1:
                    guest_mod.die(PROG, "--n takes a whole number, not %s" % v)
                n = int(v)
            elif a == "--preload":
                preload = os.path.realpath(v)
            else:
                out = v
        elif a == "--check":
            check = True
        else:
            print(USAGE, file=sys.stderr)
            return 2
    budget = budgets_mod.load(PROG, check)
    if not os.environ.get("RXE_ADDR"):
        guest_mod.die(PROG, "run inside scripts/rxe-vm", 1)
    os.makedirs(out, exist_ok=True)
    if not shutil.which("valgrind"):
        guest_mod.die(PROG, "valgrind is missing", 1)
    if not os.path.isfile(preload):
        guest_mod.die(PROG, "%s is missing (make preload)" % preload, 1)

    def say(line: str = "") -> None:
        print(line, flush=True)

    got: dict[str, int] = {}
    irs: dict[str, tuple[int, int]] = {}
    try:
        for label, fn, mode, warm, cmsafe_mode in ROWS:
            env = {}
            if cmsafe_mode is not None:
                env = {"LD_PRELOAD": preload, "CMSAFE_LOG": "error", "CMSAFE_MODE": cmsafe_mode}
            a = ir(out, label + ".1", fn, mode, n, warm, env)
            b = ir(out, label + ".2", fn, mode, 2 * n, warm, env)
            irs[label] = (a, b)
            got[label] = steady(a, b, n)
    except Failed as e:
        print("%s: %s" % (PROG, e.args[0]), file=sys.stderr)
        for line in e.args[1] if len(e.args) > 1 else []:
            print(line, file=sys.stderr)
        return 1
    missed = []
    for line in table(got, budget, n):
        say(line.text)
        if line.missed:
            missed.append(line.missed)
    say()
    say("Profiles: %s/*.cg (callgrind_annotate FILE)." % out)
    attributed = os.uname().machine != "aarch64"
    if not attributed:
        say("preload-insns.py's attribution: not on aarch64 (callgrind's call tracking, see insn-count).")
    else:
        wrapped = callgrind.exported(preload)
        shares = {}
        for label in ATTRIBUTED:
            first = callgrind.read_share(os.path.join(out, label + ".1.cg"), preload, wrapped)
            second = callgrind.read_share(os.path.join(out, label + ".2.cg"), preload, wrapped)
            shares[label] = (first, second)
            line, miss = attribution(label, trunc_div(second.total - first.total, n),
                                     got[label] - got["raw"])
            say(line)
            if miss:
                missed.append(miss)
        for label in ATTRIBUTED:
            say()
            say("Where the %s loop's extra instructions per event go (scripts/preload-insns.py --per):" % label)
            say()
            for line in callgrind.per_iteration(n, shares[label][0], shares[label][1], TOP):
                say(line)
    return finish(missed, check)


def finish(missed: Sequence[str], check: bool) -> int:
    """The budgets not met, on stderr; the exit status: 1 under CHECK when there are any."""
    for m in missed:
        print("%s: not met: %s" % (PROG, m), file=sys.stderr)
    return 1 if missed and check else 0
