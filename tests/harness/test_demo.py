"""The demo's outcomes (cmsafe_harness.demo) on the host.

Held to the logs of a run recorded in the Soft-RoCE guest (tests/harness/data/demo: the token
server and client with 50 clients, the seed incident raw and through cmsafe).
"""

from __future__ import annotations

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import demo, proc, tally  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "demo")


def log(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


class DemoTest(unittest.TestCase):
    def test_tokens(self):
        server, client = log("token_server.log"), log("token_client.log")
        self.assertEqual(demo.token_verdict(0, 0, server, client),
                         (True, "all 50 tokens verified by the server and echoes verified by "
                                "the client"))
        failed = (False, "token demo (server exit 0, client exit 124)")
        self.assertEqual(demo.token_verdict(0, 124, server, client), failed)
        short = [x.replace("50 disconnected", "49 disconnected") for x in server]
        self.assertFalse(demo.token_verdict(0, 0, short, client)[0])
        short = [x.replace("verified 50/50", "verified 49/50") for x in server]
        self.assertFalse(demo.token_verdict(0, 0, short, client)[0])
        self.assertFalse(demo.token_verdict(0, 0, server, client[:-1])[0])

    def test_seed_incident_raw(self):
        raw = log("seed_incident_raw.log")
        self.assertEqual(demo.frame(raw, "^READ of size"), "raw_server c-tests/seed_incident.c:25")
        ok, seen = demo.seed_raw_verdict(1, raw)
        self.assertTrue(ok)
        self.assertEqual(seen, [
            "  Seen:     SUMMARY: AddressSanitizer: heap-use-after-free, exit status 1",
            "            READ of size 36 in raw_server c-tests/seed_incident.c:25",
            "            freed in     rdma_ack_cm_event (librdmacm.so.1)",
            "            allocated in rdma_get_cm_event (librdmacm.so.1)"])
        self.assertEqual(demo.seed_raw_verdict(0, raw), (False, []))
        # Freed elsewhere than in rdma_ack_cm_event: not the seed incident.
        moved = [x.replace("in rdma_ack_cm_event", "in rdma_destroy_id") for x in raw]
        self.assertFalse(demo.seed_raw_verdict(1, moved)[0])
        self.assertFalse(demo.seed_raw_verdict(1, log("seed_incident_cmsafe.log"))[0])

    def test_seed_incident_cmsafe(self):
        clean = log("seed_incident_cmsafe.log")
        self.assertEqual(demo.seed_cmsafe_verdict(0, clean),
                         (True, ["  Seen:     clean (exit 0, no sanitizer report); cmsafe "
                                 "server read the token: token:7f3a9c21-acme-storage-node-17"]))
        self.assertFalse(demo.seed_cmsafe_verdict(1, clean)[0])
        self.assertFalse(demo.seed_cmsafe_verdict(0, clean + ["==9==ERROR: LeakSanitizer"])[0])
        self.assertFalse(demo.seed_cmsafe_verdict(0, clean[1:])[0])

    def test_verdict_prefixes(self):
        out = io.StringIO()
        t = tally.Tally("demo", out, ok_prefix="  OK: ", fail_prefix="  FAIL: ")
        t.check("seen", True)
        t.check("not seen", False)
        self.assertEqual(out.getvalue(), "  OK: seen\n  FAIL: not seen\n")


if __name__ == "__main__":
    unittest.main()
