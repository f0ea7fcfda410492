"""The host's scale benchmark (cmsafe_harness/scale_host.py): its reading of callgrind's file,
its tables and their verdicts, and its rewrite of bench/results/scale.md's host section, on
recorded and made-up inputs (the runs themselves need valgrind and the stand-in: make
scale-host, tests/host/test_scale.py)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import scale_host  # noqa: E402

# The `measure` block of a recorded profile (safe mode, 10 ids, 100 iterations of each loop),
# as callgrind wrote it: each callee's name given with its id at the first mention.
RECORDED = """\
fn=(2408) measure
100 5
+1 2
cfn=(2410) measure_lives
calls=1 -15 
* 437872
+1 3
cfn=(2412) measure_events
calls=1 -10 
* 200371
+1 4

fn=(2410)
86 2
-1 5
+1 1
""".splitlines()


class Profile(unittest.TestCase):
    def test_each_call_of_measure_is_read_with_its_inclusive_cost(self):
        self.assertEqual(scale_host.calls_from(RECORDED, "measure"),
                         {"measure_lives": 437872, "measure_events": 200371})

    def test_a_name_given_before_the_block_is_known_by_its_id(self):
        # A larger run names the loops where main calls them first; `measure` then refers to
        # them by id alone.
        lines = ["fn=(7) main", "cfn=(2410) measure_lives", "calls=1 3", "5 9",
                 "cfn=(2412) measure_events", "calls=1 3", "5 8", "",
                 "fn=(2408) measure", "cfn=(2410)", "calls=1 -15", "* 1000", "cfn=(2412)",
                 "calls=1 -10", "* 500", "cfn=(2410)", "calls=1 -15", "* 24"]
        self.assertEqual(scale_host.calls_from(lines, "measure"),
                         {"measure_lives": 1024, "measure_events": 500})

    def test_no_measure_block_counts_nothing(self):
        self.assertEqual(scale_host.calls_from(RECORDED, "main"), {})

    def test_the_calls_of_a_function_from_every_caller_are_summed(self):
        # scale_event called 3 times from run_lives and twice from measure, where run_lives
        # was inlined: 5 calls, 50 + 40 instructions.
        lines = ["fn=(1) run_lives", "cfn=(2) scale_event", "calls=3 10", "12 50",
                 "fn=(3) measure", "cfn=(2)", "calls=2 10", "14 40",
                 "cfn=(4) rdma_create_id", "calls=7 1", "15 700"]
        self.assertEqual(scale_host.calls_to(lines, "scale_event"), (5, 90))
        self.assertEqual(scale_host.calls_to(lines, "rdma_create_id"), (7, 700))
        self.assertEqual(scale_host.calls_to(lines, "scale_life"), (0, 0))


class Tables(unittest.TestCase):
    def test_a_cost_that_grows_past_the_limit_is_said(self):
        counts = {("raw", 10): scale_host.Count(1404, 678),
                  ("raw", 10000): scale_host.Count(1404, 678),
                  ("audit", 10): scale_host.Count(4253, 1818),
                  ("audit", 10000): scale_host.Count(278315, 1817)}
        lines, over = scale_host.cost_table(counts, ["raw", "audit"], [10, 10000])
        self.assertEqual(lines[2:], ["| raw | 10 | 1404 | 1.000 | 678 | 1.000 |",
                                     "| raw | 10000 | 1404 | 1.000 | 678 | 1.000 |",
                                     "| audit | 10 | 4253 | 1.000 | 1818 | 1.000 |",
                                     "| audit | 10000 | 278315 | 65.440 | 1817 | 0.999 |"])
        self.assertEqual(over, ["audit at 10000 ids: 278315 instructions per id life, 65.440 "
                                "times those at 10"])

    def test_memory_is_told_per_id_and_over_raw_from_ten_thousand_ids(self):
        rss = {("acked", "raw", 10000): 5_520_000, ("acked", "audit", 10000): 6_080_000,
               ("acked", "raw", 1000): 528_000, ("acked", "audit", 1000): 516_000}
        table = scale_host.memory_table(rss, ["raw", "audit"], [1000, 10000], ["acked"])
        self.assertEqual(table[2:], ["| raw | acked | 10000 | 552 | (baseline) |",
                                     "| audit | acked | 10000 | 608 | +56 |"])

    def test_the_first_looks_figure_is_the_slope_between_its_two_sizes(self):
        rss = {("raw", 200): 106_496, ("raw", 20000): 11_034_624,
               ("audit", 200): 634_880, ("audit", 20000): 28_545_024}
        self.assertEqual(scale_host.first_look_table(rss, ["raw", "audit"])[2:],
                         ["| raw | 552 | (baseline) |", "| audit | 1410 | +858 |"])


class Options(unittest.TestCase):
    def test_what_each_option_sets(self):
        o = scale_host.options(["--sizes", "10000,10,10", "--m", "500", "--warm", "300",
                                "--modes", "raw,safe", "--variants", "held", "--out", "f.md",
                                "--check"])
        self.assertEqual((o.sizes, o.m, o.warm, o.modes, o.variants, o.out, o.check),
                         ([10, 10000], 500, 300, ["raw", "safe"], ["held"], "f.md", True))
        o = scale_host.options([])
        self.assertEqual((o.sizes, o.m, o.modes, o.out, o.check),
                         ([10, 1000, 10000, 50000], 8192, ["raw", "api", "audit", "safe"],
                          None, False))

    def test_an_unknown_option_or_one_without_its_value_is_the_usage(self):
        self.assertIsNone(scale_host.options(["--n", "10"]))
        self.assertIsNone(scale_host.options(["--m"]))

    def test_a_bad_value_is_a_one_line_error(self):
        for argv, said in ((["--sizes", "10,x"], "--sizes takes whole numbers above 0, "
                            "comma-separated, not 10,x"),
                           (["--m", "0"], "--m takes whole numbers above 0, comma-separated, "
                            "not 0"),
                           (["--warm", "5,6"], "--warm takes one whole number above 0, not 5,6"),
                           (["--modes", "audit"], "--modes takes raw, every other mode's base, "
                            "not audit"),
                           (["--variants", "acked,all"], "--variants takes some of "
                            "acked,held,channels, not acked,all")):
            err = io.StringIO()
            with self.subTest(argv=argv), contextlib.redirect_stderr(err):
                with self.assertRaises(SystemExit) as e:
                    scale_host.options(argv)
                self.assertEqual(e.exception.code, 2)
                self.assertEqual(err.getvalue(), "scale-host: %s\n" % said)


class Results(unittest.TestCase):
    def write(self, text: str) -> str:
        fd, path = tempfile.mkstemp()
        os.close(fd)
        self.addCleanup(os.unlink, path)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_the_host_section_is_replaced_and_the_others_kept(self):
        path = self.write("# Title\n\nintro\n\n%s\n\nold table\n\n## Guest\n\nguest table\n"
                          % scale_host.HEADING)
        scale_host.replace_section(path, [scale_host.HEADING, "", "new table"])
        with open(path) as f:
            self.assertEqual(f.read(), "# Title\n\nintro\n\n%s\n\nnew table\n\n## Guest\n\n"
                             "guest table\n" % scale_host.HEADING)

    def test_a_file_without_the_section_gets_it_at_its_end(self):
        path = self.write("# Title\n\n## Guest\n\nguest table\n")
        scale_host.replace_section(path, [scale_host.HEADING, "", "new table"])
        with open(path) as f:
            self.assertEqual(f.read(), "# Title\n\n## Guest\n\nguest table\n\n%s\n\nnew table\n"
                             % scale_host.HEADING)


if __name__ == "__main__":
    unittest.main()
