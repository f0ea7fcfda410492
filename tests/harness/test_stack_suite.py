"""The suite on one stack (cmsafe_harness.stack_suite): its parts' counts and summary lines.

Held to the logs of a recorded run on bookworm with Soft-iWARP (tests/harness/data/stack-suite:
its parts' logs, the .apart files and the summary.txt scripts/stacks read; install.log from
bullseye, where install runs), and to commands run on the host in place of the parts' scripts.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import proc, stack_suite  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "stack-suite")


def log(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


class CountsTest(unittest.TestCase):
    def test_recorded_parts(self):
        self.assertEqual(stack_suite.counts(log("storm.log")), (16, 0))
        self.assertEqual(stack_suite.counts(log("real.log")), (20, 0))
        self.assertEqual(stack_suite.counts(log("new-events.log")), (0, 0))
        self.assertEqual(stack_suite.counts(["crashed", "passed, failed"]), None)
        self.assertEqual(stack_suite.counts(["a: 3 passed, 1 failed", "b: 7 checks passed, 0 "
                                             "failed, 2 apart"]), (7, 0))

    def test_apart_files(self):
        self.assertEqual(stack_suite.apart_lines(log("storm.log"), []), log("storm.log.apart"))
        self.assertEqual(stack_suite.apart_lines(log("real.log"), []), log("real.log.apart"))
        self.assertEqual(stack_suite.apart_lines(["skip ", "skip x: y"], ["safe: qperf: none"]),
                         ["apart: x: y", "apart: safe: qperf: none"])

    def test_demo(self):
        self.assertEqual(stack_suite.demo_counts(log("demo.log"), 0), (3, 0))
        self.assertEqual(stack_suite.demo_counts(log("demo.log"), 1), (3, 1))
        failed = [x.replace("  OK: ", "  FAIL: ", 1) if "tokens verified" in x else x
                  for x in log("demo.log")]
        self.assertEqual(stack_suite.demo_counts(failed, 1), (2, 1))

    def test_failure_lines(self):
        self.assertEqual(stack_suite.failure_lines(
            ["ok   a", "FAIL b: x", "  FAIL: the demo", "apart: c", "     - FAIL d"]),
            ["  FAIL b: x", "  FAIL: the demo", "  apart: c"])
        self.assertEqual(stack_suite.failure_lines(log("install.log")), [])

    def test_stack_names(self):
        release = ['PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"', "VERSION_CODENAME=bookworm"]
        self.assertEqual(stack_suite.stack_name("console=ttyS0 rxevm.stack=bullseye x=1",
                                                release), ("bullseye", False))
        self.assertEqual(stack_suite.stack_name("rxevm.arch=arm64 rxevm.run=3", release),
                         ("arm64", True))
        self.assertEqual(stack_suite.stack_name("console=ttyS0", release), ("bookworm", False))
        self.assertEqual(stack_suite.stack_name("", ['PRETTY_NAME="Debian sid"']),
                         ("Debian sid", False))

    def test_build_reason(self):
        self.assertEqual(stack_suite.build_reason(
            ["cc -o x", "x.c:(.text+0x1): undefined reference to `rdma_resolve_addrinfo'",
             "error: later"]), "undefined reference to `rdma_resolve_addrinfo'")
        self.assertEqual(stack_suite.build_reason(["warning: x"]), "")

    def test_real_programs(self):
        only, missing = stack_suite.real_sets({"rping": True, "rdma_server": True,
                                               "rstream": True})
        self.assertEqual(only, ["rping", "rstream_sockets", "rstream_rsocket"])
        self.assertIn("rdma_server_client: this suite's root has no rdma_client", missing)
        self.assertIn("ib_send_bw_events: this suite's root has no ib_send_bw", missing)
        self.assertEqual(len(missing), 8)


class SummaryTest(unittest.TestCase):
    """Parts run as commands on the host, in a scratch tree: the summary's lines."""

    def setUp(self):
        self.old = os.getcwd()
        self.tree = tempfile.mkdtemp()
        os.chdir(self.tree)
        os.makedirs(stack_suite.OUT)
        self.suite = stack_suite.Suite("192.0.2.1")

    def tearDown(self):
        self.suite.summary.close()
        os.chdir(self.old)
        shutil.rmtree(self.tree)

    def summary(self) -> list[str]:
        self.suite.summary.flush()
        return proc.read_lines(os.path.join(stack_suite.OUT, "summary.txt"))

    def part(self, name: str, script: str, extra=()) -> bool:
        with redirect_stdout(io.StringIO()):
            return self.suite.part_script(name, ["sh", "-c", script], extra)

    def test_the_recorded_storm_part(self):
        shutil.copy(os.path.join(DATA, "storm.log"), "storm.txt")
        self.assertTrue(self.part("storm", "cat storm.txt"))
        recorded = log("summary.txt")
        i = recorded.index("part storm: 16 passed, 0 failed, 1 apart")
        self.assertEqual(self.summary(), recorded[i:i + 2])

    def test_a_failure_said_only_by_the_exit_status(self):
        self.assertFalse(self.part("misuse", "echo 'misuse: 5 passed, 0 failed'; exit 3"))
        self.assertEqual(self.summary(), ["part misuse: 5 passed, 1 failed, 0 apart"])

    def test_failures_and_aparts_repeated(self):
        self.assertFalse(self.part("real", "echo 'FAIL rping (safe): hung'; echo 'skip a: b'; "
                                           "echo '1 passed, 1 failed'; exit 1", ["safe: x: none"]))
        self.assertEqual(self.summary(), ["part real: 1 passed, 1 failed, 2 apart",
                                          "  FAIL rping (safe): hung",
                                          "  apart: a: b", "  apart: safe: x: none"])

    def test_no_count(self):
        self.assertFalse(self.part("c-tests", "echo crashed; exit 139"))
        self.assertEqual(self.summary(), [
            "part c-tests: 0 passed, 1 failed, 0 apart",
            "  FAIL no count from 'sh -c echo crashed; exit 139' (exit 139; log: "
            "target/stack-suite/c-tests.log)"])


if __name__ == "__main__":
    unittest.main()
