"""The USDT harness's checks (cmsafe_harness/usdt.py) on the host, on a recorded run.

tests/harness/data/usdt holds a Soft-RoCE guest's run of soak_events 50 under the preload's audit
mode with bpftrace attached (bpftrace's lines and the JSON report), of misuse_double_ack, and of
bench/syscall_loop's API loop (bpftrace's lines and the flight recorder's dump).
"""

from __future__ import annotations

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import usdt  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "usdt")
TYPES = {"ADDR_RESOLVED": 0, "ROUTE_RESOLVED": 2, "CONNECT_REQUEST": 4}


def recorded(name: str):
    with open(os.path.join(DATA, name + ".bpftrace.out")) as f:
        lines = f.read().splitlines()
    reports = sorted(os.path.join(DATA, f) for f in os.listdir(DATA)
                     if f.startswith(name + ".") and f.endswith(".jsonl"))
    return usdt.parse_firings(lines), usdt.read_report(reports)


class UsdtTest(unittest.TestCase):
    def test_soak_firings_match_the_report(self):
        firings, records = recorded("soak")
        self.assertEqual([len(firings[p]) for p in usdt.PROBES], [50, 50, 0, 51, 51])
        self.assertEqual(usdt.check_events(firings, records, TYPES, 50), [])
        self.assertEqual(usdt.check_destroys(firings, records), [])

    def test_a_lost_firing_is_named(self):
        firings, records = recorded("soak")
        firings["event_acked"] = firings["event_acked"][1:]
        p = usdt.check_events(firings, records, TYPES, 50)
        self.assertEqual(p[0], "49 event_acked firings, want 50")
        self.assertTrue(p[1].startswith("event_acked of seq 1: None"), p[1])

    def test_a_wrong_time_is_named(self):
        firings, records = recorded("soak")
        f = firings["event_fetched"][0]
        f[4] = str(int(f[4]) + 1)
        p = usdt.check_events(firings, records, TYPES, 50)
        self.assertEqual(len(p), 1, p)
        self.assertTrue(p[0].startswith("event_fetched of seq %s" % f[0]), p[0])

    def test_destroys_against_the_report(self):
        firings, records = recorded("soak")
        firings["destroy_done"][0][1] = "-1"
        p = usdt.check_destroys(firings, records)
        self.assertEqual(len(p), 1)
        self.assertIn("destroy_done (rc 0) ids 50, the report's destroy records 51", p[0])

    def test_the_double_ack_finding(self):
        firings, records = recorded("double_ack")
        self.assertEqual(usdt.check_finding(firings, records), [])
        firings["finding"][0][1] = "3"
        self.assertTrue(usdt.check_finding(firings, records)[0].startswith("finding firing"))

    def test_api_firings_match_the_flight_dump(self):
        with open(os.path.join(DATA, "api.bpftrace.out")) as f:
            firings = usdt.parse_api_firings(f.read().splitlines())
        dump = usdt.read_report([os.path.join(DATA, "api.flight.jsonl")])
        self.assertEqual([len(firings[p]) for p in usdt.API_PROBES], [60, 60, 60])
        self.assertEqual(usdt.check_api(firings, dump, TYPES, 60), [])
        # A firing with another fetch time, and a copy released twice, are named.
        firings["event_fetched"][3][5] = "1"
        firings["copy_released"].append(firings["copy_released"][0])
        p = usdt.check_api(firings, dump, TYPES, 60)
        self.assertEqual(p[0], "61 copy_released firings, want 60")
        self.assertTrue(p[1].startswith("copy_released seqs"), p[1])
        self.assertTrue(p[2].startswith("event_fetched of seq 4: "), p[2])

    def test_perf_stat_count(self):
        lines = ["50,,sdt_cmsafe:event_fetched,1234,100.00,,", "other"]
        self.assertEqual(usdt.perf_stat_count(lines, "sdt_cmsafe:event_fetched"), 50)
        self.assertIsNone(usdt.perf_stat_count(["<not counted>,,sdt_cmsafe:event_fetched,0"],
                                               "sdt_cmsafe:event_fetched"))

    def test_the_script_prints_every_argument(self):
        s = usdt.script("/lib/x.so")
        for p in usdt.PROBES:
            self.assertIn("usdt:/lib/x.so:cmsafe:%s {" % p, s)
        self.assertIn('BEGIN { printf("attached\\n"); }', s)


if __name__ == "__main__":
    unittest.main()
