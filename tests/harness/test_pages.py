"""The page-size harness (cmsafe_harness/pages.py, scripts/pages-in-guest) on the host.

Its guest is the emulated arm64 one with 16K pages (make arm64-16k-test, about 26 minutes), so
its run is not recorded here: tests/harness/data/pages holds hand-made logs in its parts'
output formats (libtest's -q output of the three unit-test programs, c-tests/run-in-guest's
lines with its two TSan skips on a 47-bit address space, preload-misuse-tests' last line) and
run.out, the whole run they make (its counts and times those of docs/testing.md's last run).
Each test builds a work tree whose programs print those logs and exit as the case needs, and
runs the harness on it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import pages, proc, stack_suite  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pages")
SYSTEM = ("6.12.118+deb12-arm64-16k", "aarch64")
UNITS = ("cmsafe_core", "cmsafe_preload", "cmsafe_sync")
_SECS = re.compile(r" in [0-9]+s$")


def seconds_out(lines: list[str]) -> list[str]:
    """The verdict lines' wall times are the clock's: the rest of each line is held."""
    return [_SECS.sub(" in Ns", x) for x in lines]


class PagesTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        self.calls = os.path.join(self.root, "calls")
        for name in UNITS:
            self.program("target/unit-tests/" + name, name + ".out",
                          '[ "$CMSAFE_TEST_PAGE_SIZE" = 16384 ] && [ "$*" = "--test-threads=1 -q" ]'
                          ' || exit 3')
        # cargo's dependency file beside a test program: not executable, not run.
        with open(os.path.join(self.root, "target/unit-tests/cmsafe_core.d"), "w") as f:
            f.write("cmsafe_core: src/lib.rs\n")
        self.program("c-tests/run-in-guest", "run-in-guest.out",
                     '[ "$CTESTS_DETECT_LEAKS" = 0 ] || exit 3')
        self.program("scripts/preload-misuse-tests", "preload-misuse-tests.out", "")
        self.cwd = os.getcwd()
        os.chdir(self.root)
        self.addCleanup(os.chdir, self.cwd)

    def program(self, path: str, output: str, check: str, rc: int = 0) -> None:
        """A program at PATH that checks how it was called (CHECK: a shell condition), notes its
        call, prints the hand-made log OUTPUT and exits RC."""
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write('#!/bin/sh\n%s\necho %s >>"%s"\ncat "%s"\nexit %d\n'
                    % (check, path, self.calls, os.path.join(DATA, output), rc))
        os.chmod(full, os.stat(full).st_mode | stat.S_IXUSR)

    def run_pages(self, parts=(), got=16384) -> tuple[int, list[str], list[str]]:
        out_path, err_path = os.path.join(self.root, "out"), os.path.join(self.root, "err")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            rc = pages.pages("16384", list(parts), got, SYSTEM, out, err)
        return rc, proc.read_lines(out_path), proc.read_lines(err_path)

    def called(self) -> list[str]:
        return proc.read_lines(self.calls)

    def test_the_whole_run(self):
        rc, out, err = self.run_pages()
        want = proc.read_lines(os.path.join(DATA, "run.out"))
        self.assertEqual((rc, err), (0, []))
        self.assertEqual(seconds_out(out), seconds_out(want))
        self.assertEqual(out[-1], "pages-in-guest: 3 passed, 0 failed")
        self.assertEqual(stack_suite.counts(out), (3, 0))
        self.assertEqual(self.called(), ["target/unit-tests/" + n for n in UNITS]
                         + ["c-tests/run-in-guest", "scripts/preload-misuse-tests"])

    def test_another_page_size_stops_at_once(self):
        rc, out, err = self.run_pages(got=4096)
        self.assertEqual(rc, 1)
        self.assertEqual(out, ["pages-in-guest: kernel 6.12.118+deb12-arm64-16k, aarch64, "
                               "page size 4096"])
        self.assertEqual(err, ["pages-in-guest: the page size is 4096, not 16384"])
        self.assertEqual(self.called(), [])

    def test_a_failing_unit_program_ends_the_part(self):
        self.program("target/unit-tests/cmsafe_preload", "cmsafe_preload.out", "", rc=101)
        rc, out, _ = self.run_pages(["unit", "misuse"])
        self.assertEqual(rc, 1)
        self.assertEqual(self.called(), ["target/unit-tests/cmsafe_core",
                                         "target/unit-tests/cmsafe_preload",
                                         "scripts/preload-misuse-tests"])
        self.assertEqual(seconds_out([x for x in out if x.startswith("pages-in-guest: ")]), [
            "pages-in-guest: kernel 6.12.118+deb12-arm64-16k, aarch64, page size 16384",
            "pages-in-guest: unit FAILED (exit 1) in Ns",
            "pages-in-guest: misuse ok in Ns",
            "pages-in-guest: 1 passed, 1 failed"])
        self.assertNotIn("-- cmsafe_sync", out)

    def test_no_unit_programs_is_a_failure(self):
        shutil.rmtree(os.path.join(self.root, "target", "unit-tests"))
        rc, out, err = self.run_pages(["unit"])
        self.assertEqual(rc, 1)
        self.assertEqual(err, ["no unit tests in target/unit-tests: run make arm64-unit-tests"])
        self.assertEqual(seconds_out(out[1:]), ["pages-in-guest: unit FAILED (exit 1) in Ns",
                                                "pages-in-guest: 0 passed, 1 failed"])

    def test_a_failed_part_keeps_its_status_and_the_next_runs(self):
        self.program("c-tests/run-in-guest", "run-in-guest.out", "", rc=2)
        rc, out, _ = self.run_pages(["c", "misuse"])
        self.assertEqual(rc, 1)
        verdicts = seconds_out([x for x in out if x.startswith("pages-in-guest: ")][1:])
        self.assertEqual(verdicts, ["pages-in-guest: c FAILED (exit 2) in Ns",
                                    "pages-in-guest: misuse ok in Ns",
                                    "pages-in-guest: 1 passed, 1 failed"])
        self.assertIn("c-tests: 18 passed, 0 failed, 2 skipped", out)

    def test_an_unknown_part_is_a_failed_one(self):
        rc, out, err = self.run_pages(["c", "bogus"])
        self.assertEqual(rc, 1)
        self.assertEqual(err, ["pages-in-guest: unknown part bogus (unit, c or misuse)"])
        self.assertEqual(seconds_out(out[-2:]), ["pages-in-guest: bogus FAILED (exit 1) in Ns",
                                                 "pages-in-guest: 1 passed, 1 failed"])

    def test_the_verdict_line(self):
        self.assertEqual(pages.verdict_line("misuse", 0, 1031), "pages-in-guest: misuse ok in 1031s")
        self.assertEqual(pages.verdict_line("c", 137, 5), "pages-in-guest: c FAILED (exit 137) in 5s")


if __name__ == "__main__":
    unittest.main()
