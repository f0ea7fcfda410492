"""The C tests' harness (cmsafe_harness/ctests.py, c-tests/run-in-guest) on the host.

tests/harness/data/c-tests holds a Soft-RoCE guest's `c-tests/run-in-guest`: its stdout
(run.out) and the logs of some of its programs (stdout and stderr together): the Rust real-stack
tests, test_event_types, and the seed incident raw (its AddressSanitizer report, trimmed to the
header and the three stacks; the binary's path made relative to the work tree), through cmsafe
and built with cmsafe_compat.h.
"""

from __future__ import annotations

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import ctests, proc, stack_suite  # noqa: E402
from cmsafe_harness.tally import Tally  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "c-tests")
CLEAN = ctests.clean_text("1")


def log(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name + ".log"))


class RecordedRunTest(unittest.TestCase):
    def test_the_run_names_every_case_in_order_and_passes(self):
        out = proc.read_lines(os.path.join(DATA, "run.out"))
        names = [line[5:].split(" ")[0] for line in out[:-1]]
        self.assertEqual(names, [c.name for c in ctests.CASES])
        self.assertEqual(len(names), 20)
        self.assertTrue(all(line.startswith("ok   ") for line in out[:-1]))
        self.assertEqual(out[-1], "c-tests: 20 passed, 0 failed")
        self.assertEqual(stack_suite.counts(out), (20, 0))

    def test_the_recorded_logs_give_the_recorded_lines(self):
        out = proc.read_lines(os.path.join(DATA, "run.out"))
        lines = {line[5:].split(" ")[0]: line for line in out}
        s = io.StringIO()
        t = Tally("c-tests", s)
        for case in ctests.CASES:
            recorded = log(case.name)
            if not recorded:
                continue
            took = lines[case.name].rsplit(" ", 1)[1]
            rc = 1 if case.kind == "seed_raw" else 0
            ctests.say_outcome(t, case.name, ctests.checker(case.kind, CLEAN)(rc, recorded), took,
                               recorded)
        got = s.getvalue().splitlines()
        self.assertEqual(got, [lines[n] for n in ("rust_real_stack", "test_event_types",
                                                  "seed_incident_raw", "seed_incident_cmsafe",
                                                  "seed_incident_compat")])
        self.assertEqual(got[0], "ok   rust_real_stack (1 passed; 0 failed) [1.3s]")
        self.assertEqual(got[2], "ok   seed_incident_raw (ASan: heap-use-after-free, freed in "
                                 "rdma_ack_cm_event) [6.4s]")


class ProgramTest(unittest.TestCase):
    def test_counts_are_the_last_of_either_form(self):
        self.assertEqual(ctests.counts_of(log("rust_real_stack")), "1 passed; 0 failed")
        self.assertEqual(ctests.counts_of(log("test_event_types")), "667 passed, 0 failed")
        self.assertEqual(ctests.counts_of(["a: 3 passed, 0 failed", "b: 5 passed, 1 failed, 2 skipped"]),
                         "5 passed, 1 failed, 2 skipped")
        self.assertEqual(ctests.counts_of(["nothing"]), "")

    def test_exit_status_is_the_verdict(self):
        lines = log("test_event_types")
        self.assertEqual(ctests.check_program(0, lines), (True, "667 passed, 0 failed", []))
        failed = lines[:-1] + ["test_event_types: 666 passed, 1 failed"]
        self.assertEqual(ctests.check_program(1, failed), (False, "exit status 1", []))
        self.assertEqual(ctests.check_program(134, lines), (False, "exit status 134", []))
        self.assertEqual(ctests.check_program(0, lines[:-1]),
                         (False, "exit status 0 without a count line", []))

    def test_skip_lines_are_shown_under_the_ok(self):
        lines = log("test_event_types")[:-1] + [
            "skip: UD: resolve: siw has no UD", "test_event_types: 600 passed, 0 failed, 1 skipped"]
        self.assertEqual(ctests.check_program(0, lines), (
            True, "600 passed, 0 failed, 1 skipped", ["     | skip: UD: resolve: siw has no UD"]))

    def test_a_failure_shows_the_log_tail(self):
        s = io.StringIO()
        t = Tally("c-tests", s)
        lines = ["line %d" % i for i in range(50)]
        ctests.say_outcome(t, "test_misuse", ctests.check_program(1, lines), "[2.0s]", lines)
        got = s.getvalue().splitlines()
        self.assertEqual(got[0], "FAIL test_misuse: exit status 1 [2.0s]")
        self.assertEqual(got[1:], ["     | line %d" % i for i in range(10, 50)])
        self.assertEqual(ctests.summary(t), "c-tests: 0 passed, 1 failed")


class SeedTest(unittest.TestCase):
    def test_raw_is_caught_by_asan(self):
        lines = log("seed_incident_raw")
        self.assertEqual(ctests.check_seed_raw(1, lines),
                         (True, "ASan: heap-use-after-free, freed in rdma_ack_cm_event", []))

    def test_raw_without_the_report_or_its_frames_fails(self):
        lines = log("seed_incident_raw")
        why = "AddressSanitizer did not report the use after ack (exit %d)"
        self.assertEqual(ctests.check_seed_raw(0, lines)[:2], (False, why % 0))
        freed_elsewhere = [x.replace("rdma_ack_cm_event", "rdma_destroy_id") for x in lines]
        self.assertEqual(ctests.check_seed_raw(1, freed_elsewhere)[:2], (False, why % 1))
        # The allocation frame must be within 12 lines of its header, as grep -A12 looked.
        i = lines.index("previously allocated by thread T0 here:")
        self.assertIn("in rdma_get_cm_event", lines[i + 2])
        near = lines[:i + 1] + ["    #9 0x0 in f"] * 10 + lines[i + 1:]
        self.assertTrue(ctests.check_seed_raw(1, near)[0])
        far = lines[:i + 1] + ["    #9 0x0 in f"] * 11 + lines[i + 1:]
        self.assertEqual(ctests.check_seed_raw(1, far)[:2], (False, why % 1))
        self.assertEqual(ctests.check_seed_raw(134, ["Aborted"])[:2], (False, why % 134))

    def test_through_cmsafe_is_clean(self):
        lines = log("seed_incident_cmsafe")
        self.assertEqual(ctests.check_seed_cmsafe(0, lines, CLEAN)[:2],
                         (True, "ASan and LSan clean, token read after the ack"))
        self.assertEqual(ctests.check_seed_cmsafe(0, lines, ctests.clean_text("0"))[1],
                         "ASan clean, LSan off, token read after the ack")
        fail = (False, "not clean (exit status or sanitizer report)", [])
        leak = lines + ["==7==ERROR: LeakSanitizer: detected memory leaks"]
        self.assertEqual(ctests.check_seed_cmsafe(0, leak, CLEAN), fail)
        self.assertEqual(ctests.check_seed_cmsafe(1, lines, CLEAN), fail)
        no_token = [x for x in lines if "read the token" not in x]
        self.assertEqual(ctests.check_seed_cmsafe(0, no_token, CLEAN), fail)

    def test_compat_reads_the_right_token(self):
        lines = log("seed_incident_compat")
        self.assertTrue(ctests.check_seed_compat(0, lines)[0])
        wrong = [x.replace("node-17", "node-18") for x in lines]
        self.assertEqual(ctests.check_seed_compat(0, wrong), (False, "not clean or wrong token", []))
        ubsan = lines + ["seed_incident.c:25: runtime error: UndefinedBehaviorSanitizer"]
        self.assertFalse(ctests.check_seed_compat(0, ubsan)[0])


class TsanTest(unittest.TestCase):
    # /proc/self/maps' stack lines: a 48-bit arm64 address space (4K pages, the arm64 guest), a
    # 47-bit one (16K pages), x86_64's 47 bits.
    MAPS_48 = ["aaaad0a10000-aaaad0a31000 rw-p 00000000 00:00 0          [heap]",
               "ffffe1b3e000-ffffe1b5f000 rw-p 00000000 00:00 0          [stack]"]
    MAPS_47 = ["7fffe7ed8000-7fffe7efc000 rw-p 00000000 00:00 0          [stack]"]

    def test_stack_top_and_bits(self):
        self.assertEqual(ctests.stack_top(self.MAPS_48), "ffffe1b5f000")
        self.assertEqual(ctests.vma_bits("ffffe1b5f000"), 48)
        self.assertEqual(ctests.vma_bits(ctests.stack_top(self.MAPS_47)), 47)
        self.assertEqual(ctests.vma_bits("8000000000"), 39)
        self.assertEqual(ctests.stack_top(["55d0-55d1 r--p 00000000 08:01 1 /bin/cat"]), "")
        self.assertEqual(ctests.vma_bits(""), 0)

    def test_skip_only_on_an_aarch64_layout_tsan_lacks(self):
        self.assertEqual(ctests.tsan_skip_reason("aarch64", "ffffe1b5f000", 4096), "")
        self.assertEqual(ctests.tsan_skip_reason("aarch64", "40000000000", 4096), "")
        self.assertEqual(ctests.tsan_skip_reason("x86_64", "7fffe7efc000", 4096), "")
        self.assertEqual(
            ctests.tsan_skip_reason("aarch64", "7fffe7efc000", 16384),
            "GCC 12's ThreadSanitizer supports aarch64 address spaces of 39, 42 and 48 bits; "
            "this kernel's is 47 (16384-byte pages)")

    def test_skips_are_counted_apart_in_the_last_line(self):
        s = io.StringIO()
        t = Tally("c-tests", s)
        t.check("test_threads (1 passed, 0 failed) [1.0s]", True)
        t.skip("test_threads_tsan", "why [0.0s]")
        self.assertEqual(ctests.summary(t), "c-tests: 1 passed, 0 failed, 1 skipped")
        self.assertEqual(s.getvalue().splitlines()[1], "skip test_threads_tsan: why [0.0s]")


class EnvironmentTest(unittest.TestCase):
    def test_sanitizer_options(self):
        env = ctests.sanitizer_env("/src", "0")
        self.assertEqual(env["ASAN_OPTIONS"], "detect_leaks=0:halt_on_error=1:color=never")
        self.assertEqual(env["LSAN_OPTIONS"], "suppressions=/src/c-tests/lsan.supp:print_suppressions=0")
        self.assertEqual(env["UBSAN_OPTIONS"], "print_stacktrace=1:halt_on_error=1")


if __name__ == "__main__":
    unittest.main()
