"""exit() from a signal handler that interrupted a wrapped call: the preload's exit handler
(preload/src/lifecycle.rs, at_exit) must not wait for a lock the interrupted thread may hold.
tests/host/programs/exit.c says each program."""

from __future__ import annotations

import unittest

from hostrun import MODES, HostTest, program, run, run_all

# Each mode's ack says a late-ack finding on stderr (the pipe the program filled).
LATE = {"CMSAFE_LATE_ACK_MS": "0"}
# The loop's runs, per mode, all at once (a run exits 2 to 22 ms in).
LOOPS = 20
# A run takes tens of milliseconds; sixty at once on a loaded 2-core machine took up to 3 s.
# A hang is a run still going after this (it costs nothing when none hangs).
LOOP_DEADLINE = 20.0
BLOCKED = [program("exit"), "blocked"]
LOOP = [program("exit"), "loop"]
LOOP_FORK = [program("exit"), "loop", "fork"]
# Events held at exit: a never-acked finding each, written before the summary. 10,000 keep the
# summary being written long after the second thread sees the first of them (without the wait
# for it, 18 runs of 18 lost it; 2,000 lost it in 8 of 15).
HELD = 10000
BOTH = [program("exit"), "both", str(HELD)]


class LoopTest(HostTest):
    def assertLoopsEnd(self, argv: list[str]) -> None:
        """LOOPS runs of ARGV per mode of the preload, all at once: each exits 0 in time."""
        runs = run_all([(argv, mode) for mode in MODES for _ in range(LOOPS)],
                       timeout=LOOP_DEADLINE)
        for mode in MODES:
            with self.subTest(mode=mode):
                bad = [r for r in runs if r.mode == mode and r.rc != 0]
                self.assertEqual(len(bad), 0, "%d of %d runs did not exit 0; the first:\n%s"
                                 % (len(bad), LOOPS, bad[0] if bad else ""))


class ExitFromHandler(LoopTest):
    def test_raw_exits_from_the_alarm(self):
        r = run(BLOCKED)
        self.assertStatus(r, 0)
        self.assertEqual(r.out_lines, ["acking", "acked; waiting for the alarm", "alarm: exit(0)"], r)

    def test_exit_while_the_preload_writes_under_its_lock(self):
        # The alarm comes 300 ms in; exit is at once.
        for r in run_all([(BLOCKED, mode) for mode in MODES], LATE, timeout=1.5):
            with self.subTest(mode=r.mode):
                self.assertStatus(r, 0)
                self.assertLine(r, "alarm: exit(0)")

    def test_raw_loops_exit_from_their_timer(self):
        runs = run_all([(LOOP, "raw")] * LOOPS, timeout=LOOP_DEADLINE)
        self.assertEqual([str(r) for r in runs if r.rc != 0], [])

    def test_loops_exit_from_their_timer_under_the_preload(self):
        self.assertLoopsEnd(LOOP)

class ExitOnTwoThreads(HostTest):
    """exit(3) on a second thread while the first writes the summary (rping's CM thread exits
    while its main thread returns): glibc gives the summary's handler to one of them and lets the
    other end the process; the preload's last handler makes the other wait for the summary."""

    def test_raw_exits_and_says_nothing(self):
        r = run(BOTH)
        self.assertStatus(r, 0)
        self.assertEqual(r.err, "")

    def test_the_summary_is_whole_when_a_second_thread_exits(self):
        # One at a time: the summary must be written within the second a waiting exit gives
        # it, which nine runs at once on a loaded 2-core machine could stretch.
        for r in [run(BOTH, mode) for mode in MODES for _ in range(3)]:
            with self.subTest(mode=r.mode):
                self.assertIn(r.rc, (0, 3), r)
                self.assertLine(r, "holding %d events; exit(0)" % HELD)
                self.assertSummary(r, r.mode, HELD, HELD)
                self.assertKindCount(r, "never-acked", HELD)


class ForkFromHandler(LoopTest):
    """fork(2) from a signal handler that interrupted a wrapped call: the preload's fork handlers
    (lifecycle.rs) must not wait for a lock the interrupted thread holds, in the parent or the
    child."""

    def test_raw_loops_fork_from_their_timer(self):
        runs = run_all([(LOOP_FORK, "raw")] * LOOPS, timeout=LOOP_DEADLINE)
        self.assertEqual([str(r) for r in runs if r.rc != 0], [])

    def test_loops_fork_from_their_timer_under_the_preload(self):
        self.assertLoopsEnd(LOOP_FORK)

if __name__ == "__main__":
    unittest.main()
