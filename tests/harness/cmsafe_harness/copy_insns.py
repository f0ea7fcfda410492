"""The copy path by count, on the host (scripts/copy-insns; make copy-insn-test, make copy-bench).

User-space instructions per event of cmsafe_event_copy + cmsafe_event_release against the hand
copy (malloc the struct, malloc and memcpy the private data, free both), for each event kind of
target/bench/copy_path, counted by valgrind's callgrind on the host (only inside the bench's
count_cmsafe / count_hand loops, after a warm-up). The copy-path times (`make copy-bench`) move
by 2x on these shared machines; this count is the same on every run of the same build. No guest:
the copy path makes no system call of the kernel's RDMA stack.

    scripts/copy-insns [--n N] [--bin PATH] [--check]

--bin: another build of the bench (linked against another libcmsafe.so, to compare builds).
--check: exit 1 unless each kind's cmsafe count is within the budget (`make copy-insn-test`,
part of `make test`). The budget, per architecture, is in bench/budgets.tsv (bench/README.md,
"Instruction budgets").
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Sequence

from . import budgets as budgets_mod
from . import callgrind
from . import guest as guest_mod
from . import proc

PROG = "copy-insns"
USAGE = "usage: scripts/copy-insns [--n N] [--bin PATH] [--check]"
OUT = "target/bench/copy-insns"
KINDS = range(6)  # the bench's event kinds (copy_path.c)


class Failed(Exception):
    pass


def per_event(ir: int, n: int) -> int:
    """Instructions per event, rounded as printf's %.0f rounds."""
    return int("%.0f" % (ir / n))


def row(name: str, cmsafe: int, hand: int, budget: int | None) -> tuple[str, bool]:
    """One kind's table row, and whether it is over the budget."""
    over = budget is not None and cmsafe > budget
    verdict = "no budget" if budget is None else "NOT met" if over else "met"
    return ("| %s | %d | %d | %.2fx | %s | %s |" % (
        name, cmsafe, hand, cmsafe / hand, "-" if budget is None else budget, verdict), over)


def header(n: int) -> list[str]:
    return ["Instructions per event (valgrind --tool=callgrind, %d copies of each kind after 1000 "
            "warm-up copies; the loop's own few included both ways):" % n,
            "",
            "| event | cmsafe copy + release | hand copy | cmsafe / hand | budget (cmsafe) | verdict |",
            "|---|---:|---:|---:|---:|---|"]


def count(binary: str, fn: str, kind: int, n: int) -> int:
    """Instructions per event inside FN (OUT/FN.KIND.cg, .out: the kind's name, .log)."""
    base = os.path.join(OUT, "%s.%d" % (fn, kind))
    rc = proc.run_to(["valgrind", "--tool=callgrind", "--callgrind-out-file=%s.cg" % base,
                      "--toggle-collect=" + fn, binary, "insns", str(kind), str(n)],
                     base + ".out", base + ".log")
    lines = proc.read_lines(base + ".log")
    if rc != 0:
        raise Failed("%s on kind %d failed:" % (fn, kind), lines)
    ir = callgrind.collected(lines)
    if ir is None:
        # 0 or nothing: the toggle matched no function (inlined, renamed?), not a free copy.
        raise Failed("no instructions counted in %s" % fn, [])
    return per_event(ir, n)


def main(argv: Sequence[str]) -> int:
    os.environ["LC_ALL"] = "C"
    n, check, binary = 20000, False, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("--n", "--bin"):
            if not args:
                guest_mod.die(PROG, "%s needs a value" % a)
            v = args.pop(0)
            if a == "--n":
                if not v.isdigit() or int(v) < 1:
                    guest_mod.die(PROG, "--n takes a whole number, not %s" % v)
                n = int(v)
            else:
                binary = os.path.realpath(v)
        elif a == "--check":
            check = True
        else:
            print(USAGE, file=sys.stderr)
            return 2
    root = guest_mod.project_root()
    os.chdir(root)
    binary = binary or os.path.join(root, "target/bench/copy_path")
    if not os.access(binary, os.X_OK):
        guest_mod.die(PROG, "%s is missing (make target/bench/copy_path)" % binary, 1)
    if not shutil.which("valgrind"):
        guest_mod.die(PROG, "valgrind is missing", 1)
    os.makedirs(OUT, exist_ok=True)
    budget = budgets_mod.load(PROG, check).get("copy")
    for line in header(n):
        print(line, flush=True)
    failed = False
    try:
        for k in KINDS:
            c = count(binary, "count_cmsafe", k, n)
            h = count(binary, "count_hand", k, n)
            with open(os.path.join(OUT, "count_cmsafe.%d.out" % k)) as f:
                name = f.read().rstrip("\n")
            line, over = row(name, c, h, budget)
            failed |= over
            print(line, flush=True)
    except Failed as e:
        print("%s: %s" % (PROG, e.args[0]), file=sys.stderr)
        for line in e.args[1]:
            print(line, file=sys.stderr)
        return 1
    if check and failed:
        print("%s: a kind is over its budget" % PROG, file=sys.stderr)
        return 1
    return 0
