"""The new-events harness (cmsafe_harness/new_events.py, c-tests/new-events) on the host.

tests/harness/data/new-events holds a Soft-RoCE guest's `c-tests/new-events` (bookworm's
librdmacm, rdma-core 44: no RDMACM_1.4): its stdout (run.out) and each run's log, the program's
"skip:" line and exit 77. The runs that pass (rdma-core 60 and later) are the same logs edited:
the program's count line and exit 0, and a JSON report with or without a finding record.
"""

from __future__ import annotations

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import new_events, proc, stack_suite  # noqa: E402
from cmsafe_harness.tally import Tally  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "new-events")
REASON = ("this librdmacm has no RDMACM_1.4 (rdma_write_cm_event, rdma_resolve_addrinfo: "
          "rdma-core 60 and later)")
PASSED = ["step: USER events with their arg", "test_new_events: 65 passed, 0 failed"]
EVENT = ('{"record":"event","seq":1,"type":"USER","status":0,"id":"0x1","thread":9,"get_ns":1,'
         '"ack_ns":2,"private_data_len":0}')
FINDING = ('{"record":"finding","finding":"never-acked","seq":2,"type":"ADDRINFO_RESOLVED",'
           '"id":"0x1","thread":9,"where":"exit","message":"never acked"}')


def log(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name + ".log"))


class RecordedTest(unittest.TestCase):
    def test_exit_77_is_counted_apart_with_its_reason(self):
        s = io.StringIO()
        t = Tally("new-events", s)
        for name, mode, _ in new_events.RUNS:
            v = new_events.check_run(mode, 77, log(name), None)
            self.assertEqual((v.kind, v.text), ("skip", REASON), name)
            new_events.say_verdict(t, name, v)
        t.say(new_events.summary(t))
        recorded = proc.read_lines(os.path.join(DATA, "run.out"))
        self.assertEqual(s.getvalue().splitlines(), recorded)
        self.assertEqual(recorded[-1], "new-events: 0 passed, 0 failed, 4 counted apart")
        self.assertEqual((t.passed, t.failed, t.apart), (0, 0, 4))
        self.assertEqual(stack_suite.counts(recorded), (0, 0))

    def test_the_four_runs(self):
        self.assertEqual([(n, m, a[0]) for n, m, a in new_events.RUNS], [
            ("new_events_api", "none", "test_new_events"),
            ("new_events_raw", "none", "test_new_events_plain"),
            ("new_events_audit", "audit", "test_new_events_plain"),
            ("new_events_safe", "safe", "test_new_events_plain")])


class VerdictTest(unittest.TestCase):
    def test_a_passing_run(self):
        v = new_events.check_run("none", 0, PASSED, None)
        self.assertEqual((v.kind, v.text), ("ok", "(65 passed, 0 failed)"))
        v = new_events.check_run("audit", 0, PASSED, [EVENT])
        self.assertEqual((v.kind, v.text), ("ok", "(65 passed, 0 failed, 0 findings)"))
        s = io.StringIO()
        new_events.say_verdict(Tally("new-events", s), "new_events_audit", v)
        self.assertEqual(s.getvalue(), "ok   new_events_audit (65 passed, 0 failed, 0 findings)\n")

    def test_a_finding_fails_the_run_and_is_shown(self):
        v = new_events.check_run("safe", 0, PASSED, [EVENT, FINDING])
        self.assertEqual((v.kind, v.text), ("FAIL", "exit 0, 1 findings"))
        self.assertEqual(v.details, ["     | " + x for x in PASSED] + ["     | " + FINDING])

    def test_a_preloaded_run_without_its_report_fails(self):
        v = new_events.check_run("audit", 0, PASSED, None)
        self.assertEqual((v.kind, v.text), ("FAIL", "exit 0, ? findings"))
        self.assertEqual(new_events.check_run("audit", 0, PASSED, []).kind, "ok")

    def test_no_count_line_fails(self):
        v = new_events.check_run("none", 0, PASSED[:1], None)
        self.assertEqual((v.kind, v.text), ("FAIL", "exit 0, 0 findings"))

    def test_a_failed_or_killed_run_fails(self):
        failed = PASSED[:1] + ["test_new_events: 64 passed, 1 failed"]
        v = new_events.check_run("none", 1, failed, None)
        self.assertEqual((v.kind, v.text), ("FAIL", "exit 1, 0 findings"))
        v = new_events.check_run("audit", new_events.TIMEOUT_STATUS, PASSED[:1], None)
        self.assertEqual((v.kind, v.text), ("FAIL", "exit 124, ? findings"))
        s = io.StringIO()
        t = Tally("new-events", s)
        new_events.say_verdict(t, "new_events_audit", v)
        self.assertEqual(s.getvalue().splitlines(), ["FAIL new_events_audit: exit 124, ? findings",
                                                     "     | step: USER events with their arg"])
        self.assertEqual(new_events.summary(t), "new-events: 0 passed, 1 failed, 0 counted apart")

    def test_exit_77_without_a_skip_line_has_no_reason(self):
        v = new_events.check_run("none", 77, ["nothing said"], None)
        self.assertEqual((v.kind, v.text), ("skip", ""))

    def test_the_log_tail_is_twenty_lines(self):
        lines = ["l%d" % i for i in range(30)]
        v = new_events.check_run("none", 2, lines, None)
        self.assertEqual(v.details, ["     | l%d" % i for i in range(10, 30)])


if __name__ == "__main__":
    unittest.main()
