"""The soak harness's checks (cmsafe_harness/soak.py) on the host, on a recorded run.

tests/harness/data/soak holds a Soft-RoCE guest's `make soak-test` run: soak_events 40000 raw,
under safe mode and under audit (each run's stdout, the resident set at its checkpoints, and
stderr, the preload's exit summary).
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import proc, soak  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "soak")


def recorded(run: str):
    base = os.path.join(DATA, run)
    return proc.read_lines(base + ".out"), proc.read_lines(base + ".err")


class SoakTest(unittest.TestCase):
    def test_the_recorded_runs_pass(self):
        for run in soak.RUNS:
            out, err = recorded(run)
            problems, row = soak.check_run(run, 40000, 0, out, err)
            self.assertEqual(problems, [], run)
            self.assertEqual(row["growth"], "0", run)
        _, row = soak.check_run("audit", 40000, 0, *recorded("audit"))
        self.assertEqual((row["warm"], row["end"], row["per"]), ("21312", "21312", "0.000"))
        self.assertEqual(row["summary"], "mode audit, 40000 events, 0 findings")

    def test_growth_beyond_the_bound_is_named(self):
        out, err = recorded("safe")
        last = out.index([line for line in out if line.startswith("rss ")][-1])
        kib, rest = out[last].split(" ", 2)[1], out[last].split(" ", 2)[2]
        out[last] = "rss %d %s" % (int(kib) + 129, rest)
        problems, row = soak.check_run("safe", 40000, 0, out, err)
        self.assertEqual(row["growth"], "129")
        self.assertEqual(len(problems), 1)
        self.assertTrue(problems[0].startswith("resident set grew by 129 KiB after warm-up"), problems[0])
        self.assertTrue(problems[0].endswith("at most 128 allowed"), problems[0])

    def test_a_wrong_summary_or_count_is_named(self):
        out, err = recorded("audit")
        err = [line.replace("0 findings", "1 findings") for line in err] + ["==cmsafe== late-ack: x"]
        problems, _ = soak.check_run("audit", 40000, 0, out[:-1], err)
        self.assertEqual(problems, [
            "no 'events 40000' line",
            "summary 'mode audit, 40000 events, 1 findings', want 'mode audit, 40000 events, 0 findings'",
            "unexpected stderr: ==cmsafe== late-ack: x",
        ])

    def test_missing_checkpoints_and_a_failed_run(self):
        problems, row = soak.check_run("raw", 40000, 1, ["events 40000"], ["no device"])
        self.assertEqual(problems, ["exit status 1: no device", "0 rss checkpoints, want 20"])
        self.assertEqual(row["warm"], "-")

    def test_the_table(self):
        rows = [(run, soak.check_run(run, 40000, 0, *recorded(run))[1], "16.4") for run in soak.RUNS]
        lines = soak.table(40000, rows)
        self.assertEqual(len(lines), 5)
        self.assertEqual(lines[2], "| raw | 40000 | 3104 | 3104 | 0 | 0.000 | - | 16.4 |")
        self.assertTrue(soak.markdown(40000, lines).startswith(
            "## Soak: the preload's memory over 40000 events\n"))


if __name__ == "__main__":
    unittest.main()
