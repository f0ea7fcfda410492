"""The migrate harness's checks (cmsafe_harness/migrated.py) on the host, on a recorded run.

tests/harness/data/migrated holds a Soft-RoCE guest's `scripts/migrate-in-guest` (in make
migrate-test): rping, cmatose, udaddy and rdma_server/rdma_client as rdma-core 44 has them and
as cmsafe-migrate ports them, and ack_then_read, all built with AddressSanitizer (the work
tree's path in them written <repo>), and Debian's ucmatose server refusing a second connection
under cmsafe-audit (ucmatose_reject). In that run every rping side ended in rping's own teardown
race (status 255 after "rdma_get_cm_event: Bad file descriptor"), in both builds.
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import migrated, proc  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "migrated")


def lines(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


def recorded(case: str, rcs: dict) -> dict:
    """A pair's RESULTS as run_pair gives them; RCS: (server, client) status per build."""
    out = {}
    for build in ("orig", "port"):
        b = "%s.%s." % (case, build)
        out[build] = (rcs[build][0], lines(b + "server.out"), lines(b + "server.err"),
                      rcs[build][1], lines(b + "client.out"), lines(b + "client.err"))
    return out


CASES = {c.name: c for c in migrated.CASES}
CLEAN = {"orig": (0, 0), "port": (0, 0)}
RACED = {"orig": (255, 255), "port": (255, 255)}


class MigratedTest(unittest.TestCase):
    def test_the_recorded_pairs_pass(self):
        for name, rcs in (("cmatose", CLEAN), ("udaddy", CLEAN),
                          ("rdma_server_client", CLEAN), ("rping", RACED)):
            with self.subTest(case=name):
                self.assertEqual(migrated.check_pair(CASES[name], recorded(name, rcs)), [])

    def test_rpings_race_is_named_side_by_side(self):
        self.assertEqual(migrated.raced(recorded("rping", RACED)),
                         ["orig server", "orig client", "port server", "port client"])

    def test_another_failure_of_rping_is_not_its_race(self):
        results = recorded("rping", RACED)
        srv_rc, s_out, s_err, cli_rc, c_out, c_err = results["port"]
        results["port"] = (1, s_out, s_err, cli_rc, c_out, c_err[:-1] + ["some other error"])
        self.assertEqual(migrated.check_pair(CASES["rping"], results),
                         ["port server: exit 1", "port client: exit 255"])

    def test_the_race_is_accepted_only_for_rping(self):
        results = recorded("cmatose", {"orig": (0, 0), "port": (0, 255)})
        c = results["port"]
        results["port"] = c[:5] + (c[5] + [migrated.RPING_RACE],)
        self.assertEqual(migrated.check_pair(CASES["cmatose"], results),
                         ["port client: exit 255"])

    def test_a_port_that_says_other_lines_fails(self):
        results = recorded("cmatose", CLEAN)
        c = results["port"]
        port_out = [l for l in c[4] if l != "test complete"]
        results["port"] = c[:4] + (port_out, c[5])
        self.assertEqual(migrated.check_pair(CASES["cmatose"], results), [
            "port client: its output does not say '^test complete\\\\|return status 0$'",
            "client: the port's lines ['return status 0'] are not the original's "
            "['test complete', 'return status 0']"])

    def test_a_sanitizer_report_fails(self):
        results = recorded("udaddy", CLEAN)
        c = results["port"]
        results["port"] = c[:2] + (c[2] + ["==12==ERROR: AddressSanitizer: heap-use-after-free "
                                           "on address 0x1"],) + c[3:]
        self.assertEqual(migrated.check_pair(CASES["udaddy"], results),
                         ["port server: ==12==ERROR: AddressSanitizer: heap-use-after-free on "
                          "address 0x1"])

    def test_ack_then_read(self):
        self.assertEqual(migrated.check_ack_then_read(
            "orig", 1, lines("ack_then_read.orig.out"), lines("ack_then_read.orig.err")), [])
        self.assertEqual(migrated.check_ack_then_read(
            "port", 0, lines("ack_then_read.port.out"), lines("ack_then_read.port.err")), [])
        # The original not caught, the port not reading the token: each a problem.
        self.assertEqual(migrated.check_ack_then_read("orig", 0, ["token: x"], []),
                         ["the original: no heap-use-after-free of memory rdma_ack_cm_event "
                          "freed (exit 0)"])
        self.assertEqual(migrated.check_ack_then_read("port", 1, ["token: \x01"], []),
                         ["the port: exit 1, read 'token: \\x01'"])


class RejectedSeenTest(unittest.TestCase):
    def test_the_recorded_server_names_it(self):
        self.assertEqual(migrated.check_rejected_seen(lines("ucmatose_reject.server.err")), [])

    def test_a_server_that_names_nothing_fails(self):
        err = [l for l in lines("ucmatose_reject.server.err")
               if not l.startswith("==cmsafe== rejected-id-never-destroyed")]
        self.assertEqual(migrated.check_rejected_seen(err),
                         ["the server's preload said no rejected-id-never-destroyed"])


if __name__ == "__main__":
    unittest.main()
