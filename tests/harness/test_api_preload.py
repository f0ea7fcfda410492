"""The api-under-preload harness (cmsafe_harness/api_preload.py, c-tests/api-under-preload) on
the host.

tests/harness/data/api-preload holds a Soft-RoCE guest's `c-tests/api-under-preload`: its
stdout (run.out), each mode's server and client log, and their JSON reports trimmed (the
server's: its first 8 records and every later CONNECT_REQUEST event record, 26 lines with the
20 CONNECT_REQUEST; the client's: its first 8 records; neither had a finding record).
"""

from __future__ import annotations

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import api_preload, proc, stack_suite  # noqa: E402
from cmsafe_harness.tally import Tally  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "api-preload")
FINDING = ('{"record":"finding","finding":"late-ack","seq":3,"type":"ESTABLISHED","id":"0x1",'
           '"thread":9,"where":"rdma_ack_cm_event","message":"held 1200 ms"}')


def recorded(mode: str) -> list[list[str]]:
    """The server's and the client's log, then their reports."""
    return [proc.read_lines(os.path.join(DATA, name % mode))
            for name in ("server-%s.log", "client-%s.log", "server-%s.jsonl", "client-%s.jsonl")]


class RecordedTest(unittest.TestCase):
    def test_both_modes_pass_with_their_counts(self):
        s = io.StringIO()
        t = Tally(api_preload.PROG, s)
        for mode in api_preload.MODES:
            slog, clog, srep, crep = recorded(mode)
            self.assertEqual(len(srep), 26, mode)
            v = api_preload.check_mode(mode, 20, 0, 0, slog, clog, srep, crep)
            self.assertTrue(v.ok, v.text)
            api_preload.say_verdict(t, v)
        t.say("api-under-preload: %d passed, %d failed" % (t.passed, t.failed))
        out = proc.read_lines(os.path.join(DATA, "run.out"))
        self.assertEqual(s.getvalue().splitlines(), out)
        self.assertEqual(out[0], "ok   token_server and token_client under audit: 20/20 tokens "
                                 "verified, 20 CONNECT_REQUEST through the preload, 0 findings")
        self.assertEqual(stack_suite.counts(out), (2, 0))


class FailureTest(unittest.TestCase):
    def verdict(self, mode="audit", src=0, crc=0, slog=None, clog=None, srep=None, crep=None):
        r = recorded(mode)
        return api_preload.check_mode(mode, 20, src, crc, r[0] if slog is None else slog,
                                      r[1] if clog is None else clog,
                                      r[2] if srep is None else srep,
                                      r[3] if crep is None else crep, "s.log", "c.log")

    def test_a_lost_connect_request_fails(self):
        srep = recorded("audit")[2]
        i = next(n for n, x in enumerate(srep) if '"type":"CONNECT_REQUEST"' in x)
        v = self.verdict(srep=srep[:i] + srep[i + 1:])
        self.assertFalse(v.ok)
        self.assertEqual(v.text, "under audit: server exit 0, client exit 0, 19 CONNECT_REQUEST, "
                                 "0 findings")

    def test_a_finding_in_either_report_fails_and_is_shown(self):
        crep = recorded("safe")[3] + [FINDING]
        v = self.verdict("safe", crep=crep)
        self.assertEqual((v.ok, v.text), (False, "under safe: server exit 0, client exit 0, "
                                                 "20 CONNECT_REQUEST, 1 findings"))
        self.assertEqual(v.details[-1], "     | " + FINDING)

    def test_a_symbol_lookup_error_or_an_unverified_token_fails(self):
        clog = ["token_client: symbol lookup error: undefined symbol: cmsafe_get_event"]
        self.assertFalse(self.verdict(clog=clog).ok)
        slog = [x.replace("verified 20/20", "verified 19/20") for x in recorded("audit")[0]]
        self.assertFalse(self.verdict(slog=slog).ok)

    def test_a_killed_side_fails_with_its_status_and_both_tails(self):
        v = self.verdict(src=api_preload.TIMEOUT_STATUS, crc=1)
        self.assertEqual(v.text, "under audit: server exit 124, client exit 1, 20 CONNECT_REQUEST, "
                                 "0 findings")
        slog, clog = recorded("audit")[:2]
        want = (["     | ==> s.log <=="] + ["     | " + x for x in slog[-15:]] + ["     | ",
                "     | ==> c.log <=="] + ["     | " + x for x in clog[-15:]])
        self.assertEqual(v.details, want)
        s = io.StringIO()
        api_preload.say_verdict(Tally(api_preload.PROG, s), v)
        self.assertEqual(s.getvalue().splitlines()[0], "FAIL " + v.text)


if __name__ == "__main__":
    unittest.main()
