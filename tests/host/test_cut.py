"""Reads of rdma_get_cm_event left without returning (tests/host/programs/cut.c): glibc runs the
preload's cleanup record for a cancelled thread and for a longjmp out of a signal handler alike;
the summary counts each by what it was, and the program's output is as raw."""

from __future__ import annotations

from hostrun import MODES, HostTest, program, run

CANCELLED = "==cmsafe==   threads cancelled inside rdma_get_cm_event: %d"
LONGJMP = "==cmsafe==   rdma_get_cm_event calls left by a longjmp (out of a signal handler): %d"


class LeftReads(HostTest):
    def check(self, case: str, n: int, said: str, not_said: str) -> None:
        raw = run([program("cut"), case, str(n)])
        self.assertStatus(raw, 0)
        for mode in MODES:
            with self.subTest(mode=mode):
                r = run([program("cut"), case, str(n)], mode)
                self.assertStatus(r, 0)
                self.assertEqual(r.out_lines, raw.out_lines, r)
                self.assertSummary(r, mode, 1, 0)
                self.assertIn(said % n, r.err_lines, r)
                self.assertFalse([line for line in r.err_lines
                                  if line.startswith(not_said.partition(":")[0])], r)

    def test_a_longjmp_timeout_is_no_cancellation(self):
        self.check("longjmp", 3, LONGJMP, CANCELLED)

    def test_cancelled_threads_are_counted_as_cancelled(self):
        self.check("cancel", 2, CANCELLED, LONGJMP)
