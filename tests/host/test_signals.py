"""A program's SIGSEGV handling reaches it exactly as without the preload. Audit mode installs
its SIGSEGV handler when it maps its guarded pages, at the first CM event
(preload/src/audit/segv.rs, pages.rs); tests/host/programs/signals.c says each case. Each is run
raw once (its facts held by a plain test), then under the preload and compared."""

from __future__ import annotations

import signal
import unittest

from hostrun import MODES, HostTest, Run, program, run

SIGSEGV = -signal.SIGSEGV
TOKEN = "crash reporter's token 42"


class Chain(HostTest):
    """The program's action set BEFORE the first CM event: the preload's handler chains to it."""

    # What each case does raw: its wait status and its stdout.
    RAW = {
        "resethand": (SIGSEGV, ["SIGSEGV handler ran"]),
        "nodefer": (0, ["recovered from fault 1", "recovered from fault 2"]),
        "mask": (0, ["in the handler: SIGUSR1 blocked, SIGSEGV blocked"]),
        "default": (SIGSEGV, []),
        "ignore": (SIGSEGV, []),
    }
    raw: dict[str, Run] = {}

    @classmethod
    def raw_run(cls, case: str) -> Run:
        if case not in cls.raw:
            cls.raw[case] = run([program("signals"), case])
        return cls.raw[case]

    def assertAsRaw(self, case: str) -> None:
        """Under each mode of the preload, the case ends as raw, having said the same."""
        raw = self.raw_run(case)
        for mode in MODES:
            with self.subTest(mode=mode):
                r = run([program("signals"), case], mode)
                self.assertSameStatus(r, raw)
                self.assertEqual(r.out_lines, raw.out_lines, "stdout as raw (%s)\n%s" % (raw, r))

    def test_raw_runs_do_what_each_case_says(self):
        for case, (rc, out) in self.RAW.items():
            with self.subTest(case=case):
                raw = self.raw_run(case)
                self.assertStatus(raw, rc)
                self.assertEqual(raw.out_lines, out, raw)

    def test_resethand_handler_runs_once_then_the_fault_kills(self):
        self.assertAsRaw("resethand")

    def test_nodefer_longjmp_recovers_twice(self):
        self.assertAsRaw("nodefer")

    def test_mask_blocks_sigusr1_in_the_handler(self):
        self.assertAsRaw("mask")

    def test_default_and_ignore_die_of_the_fault_as_raw(self):
        for case in ("default", "ignore"):
            with self.subTest(case=case):
                self.assertAsRaw(case)


class HandlerAfterFirstEvent(HostTest):
    """A crash reporter (a SIGSEGV handler that exits 99) installed AFTER the first CM event,
    then a read of an acked event's private data."""

    argv = [program("signals"), "after", TOKEN]

    def test_raw_reads_freed_memory_and_exits_0(self):
        r = run(self.argv)
        self.assertStatus(r, 0)
        self.assertEqual(len(r.out_lines), 1, r)

    def test_audit_says_the_read_and_exits_0(self):
        for mode in ("audit", "audit+mprotect"):
            with self.subTest(mode=mode):
                r = run(self.argv, mode)
                self.assertStatus(r, 0)
                self.assertEqual(r.out_lines, ["after the ack: " + TOKEN], r)
                self.assertFinding(r, "use-after-ack", "1", "CONNECT_REQUEST")

    def test_each_of_glibcs_names_is_kept_as_the_programs(self):
        # The crash reporter set through each of glibc's other names for sigaction and signal:
        # raw it never runs (the read of freed memory succeeds); under the mprotect guard it
        # must not take audit's fault either.
        for how in ("__sigaction", "signal", "ssignal", "bsd_signal", "sysv_signal"):
            argv = self.argv + [how]
            self.assertStatus(run(argv), 0)
            with self.subTest(how=how):
                r = run(argv, "audit+mprotect")
                self.assertStatus(r, 0)
                self.assertEqual(r.out_lines, ["after the ack: " + TOKEN], r)
                self.assertFinding(r, "use-after-ack", "1", "CONNECT_REQUEST")


if __name__ == "__main__":
    unittest.main()
