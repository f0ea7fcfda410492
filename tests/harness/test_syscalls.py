"""The system-call count (cmsafe_harness/syscalls.py) on the host, on a recorded run.

tests/harness/data/syscalls holds a Soft-RoCE guest's `scripts/syscall-count --events 200
--check` run (x86_64): each loop's calls by name between the markers (LABEL.counts; LABEL.others:
the other threads' calls in the window), the table it printed, and excerpts of two strace -f
traces (the window's start and end: raw, and audit's id-life loop with the preload's watcher
thread).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import proc, syscalls  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "syscalls")
EVENTS = 200
WARMUP = 50
# Audit's extra mprotect calls over raw in 200 events: a seal each, and 3 page runs of 64.
AUDIT_MPROTECT = 203
# The preload's watcher thread in audit's id-life window (a tick every 2.5 s: a time, so a
# count of that run, not of the build).
AUDIT_LIFE_OTHERS = "clock_nanosleep 5"
# The excerpts' windows: raw's first and last events, audit's id-life loop with its seals, a
# write cut by the watcher's line (counted once) and the watcher's own call.
RAW_EXCERPT = ({"write": 17}, {})
AUDIT_LIFE_EXCERPT = ({"write": 17, "ioctl": 4, "mprotect": 5}, {"clock_nanosleep": 1})


def recorded(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


def counts(label: str) -> syscalls.Counts:
    return syscalls.read_counts(recorded(label + ".counts"))


class Recorded:
    """The loops' counts as the recorded run got them; CHANGES alter some of them."""

    def __init__(self, changes: dict | None = None):
        self.changes = changes or {}
        self.asked: list[tuple] = []

    def __call__(self, label, mode, preload_mode, warmup):
        self.asked.append((label, mode, preload_mode, warmup))
        c = counts(label)
        for name, n in self.changes.get(label, {}).items():
            c[name] = c.get(name, 0) + n
            if not c[name]:
                del c[name]  # as a trace without the call gives it
        return c, syscalls.read_counts(recorded(label + ".others"))


def table(count, **kw) -> tuple[list[str], bool]:
    lines: list[str] = []
    args = dict(events=EVENTS, warmup=WARMUP, cq_only=False, preload_built=True, cq_built=True)
    args.update(kw)
    failed = syscalls.report(count, lines.append, **args)
    return lines, failed


class SyscallsTest(unittest.TestCase):
    def test_the_recorded_table(self):
        count = Recorded()
        lines, failed = table(count)
        self.assertFalse(failed)
        self.assertEqual(lines, recorded("syscall-count.out"))
        # What each loop asked for: its mode, the preload's mode, its warm-up.
        self.assertIn(("preload-audit-life", "raw-life", "audit", 2100), count.asked)
        self.assertIn(("cq-preload-safe", "cq", "safe", 10), count.asked)
        self.assertEqual(len(count.asked), 20)

    def test_the_real_counts(self):
        self.assertEqual(counts("raw"), {"write": 800})
        self.assertEqual(counts("raw-nb"), {"poll": 200, "write": 1000})
        self.assertEqual(counts("api-timed"), {"poll": 200, "write": 800})
        self.assertEqual(syscalls.extra(counts("api-batch"), counts("raw"), EVENTS), "poll +2")
        self.assertEqual(syscalls.extra(counts("api-nb-batch0"), counts("raw-nb"), EVENTS), "write +1")
        self.assertEqual(syscalls.total(counts("raw-life"), EVENTS), "11.00")
        audit = counts("preload-audit")
        self.assertEqual(audit["mprotect"] - counts("raw").get("mprotect", 0), AUDIT_MPROTECT)
        self.assertTrue(syscalls.seals_ok(audit, counts("raw"), EVENTS, 1, 1))
        self.assertTrue(syscalls.seals_ok(counts("preload-audit-life"), counts("raw-life"), EVENTS, 2, 2))
        self.assertEqual(syscalls.others_text(syscalls.read_counts(recorded("preload-audit-life.others"))),
                         AUDIT_LIFE_OTHERS)

    def test_a_row_over_its_budget(self):
        # One more write per event in the API loop: off its budget of none.
        lines, failed = table(Recorded({"api": {"write": EVENTS}}))
        self.assertTrue(failed)
        row = [line for line in lines if line.startswith("| api (vs raw) |")]
        self.assertEqual(row, ["| api (vs raw) | 5.00 | write +1 | none | blocking cmsafe_get_event: "
                               "0 extra | NOT met |"])
        # A timed wait that polls twice per call: "poll +2" is not its budget's "poll +1".
        lines, failed = table(Recorded({"api-timed": {"poll": EVENTS}}))
        self.assertTrue(failed)
        self.assertTrue([line for line in lines if line.startswith("| api-timed") and line.endswith("| NOT met |")])

    def test_check_exits_1_on_a_row_off_budget(self):
        for check, changes, want in ((True, {}, 0), (True, {"cq-preload-audit": {"futex": 100}}, 1),
                                     (False, {"cq-preload-audit": {"futex": 100}}, 0)):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = syscalls.execute(Recorded(changes), EVENTS, WARMUP, check, False, True, True)
            self.assertEqual(rc, want, changes)
            self.assertEqual(err.getvalue(), "syscall-count: a row is off its budget\n" if want else "")
            if changes:
                self.assertIn("| the same under the preload, CMSAFE_MODE=audit (vs cq-raw) | 4.00 | "
                              "futex +1 | none | no system call per completion event | NOT met |",
                              out.getvalue().splitlines())

    def test_audit_s_seals_and_page_runs(self):
        raw = counts("raw")
        audit = counts("preload-audit")
        # A seal fewer, a madvise without its mprotect, another call: each is off the budget.
        for change in ({"mprotect": -1, "madvise": -1}, {"madvise": 1}, {"ioctl": 1},
                       {"mprotect": -EVENTS}):
            c = dict(audit)
            for k, v in change.items():
                c[k] = c.get(k, 0) + v
            self.assertFalse(syscalls.seals_ok(c, raw, EVENTS, 1, 1), change)
        # 200 events: 3 or 4 page runs of 64, either rounding.
        for runs, ok in ((2, False), (3, True), (4, True), (5, False)):
            c = dict(raw, mprotect=raw.get("mprotect", 0) + EVENTS + runs,
                     madvise=raw.get("madvise", 0) + runs)
            self.assertEqual(syscalls.seals_ok(c, raw, EVENTS, 1, 1), ok, runs)

    def test_the_traces(self):
        main, others = syscalls.parse_trace(recorded("raw.trace"), "syscall_loop")
        self.assertEqual((main, others), RAW_EXCERPT)
        main, others = syscalls.parse_trace(recorded("preload-audit-life.trace"), "syscall_loop")
        self.assertEqual((main, others), AUDIT_LIFE_EXCERPT)
        # Without its begin marker a trace counts nothing.
        lines = [line for line in recorded("raw.trace") if "syscall_loop: begin" not in line]
        self.assertEqual(syscalls.parse_trace(lines, "syscall_loop"), ({}, {}))

    def test_missing_loops_and_programs(self):
        with self.assertRaises(syscalls.Failed):
            table(Recorded({"raw-nb": {"poll": -EVENTS}}))
        lines, failed = table(Recorded(), preload_built=False)
        self.assertTrue(failed)
        self.assertIn("| preload | | (target/release/libcmsafe_preload.so not built: make preload) | | | |", lines)
        self.assertIn("| cq | | (target/preload-tests/preload_cq_loop or the preload not built: make "
                      "preload preload-tests) | | | |", lines)
        lines, failed = table(Recorded(), cq_only=True)
        self.assertFalse(failed)
        self.assertTrue(lines[0].startswith("System calls per completion event;"))
        # The header, the three completion-event rows as the whole run printed them, the traces.
        self.assertEqual(lines[4:7], [line for line in recorded("syscall-count.out") if "cq-raw" in line])
        self.assertEqual(len(lines), 9)


if __name__ == "__main__":
    unittest.main()
