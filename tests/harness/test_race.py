"""The race harness's checks (cmsafe_harness/race.py) on the host, on a recorded run.

tests/harness/data/race holds a Soft-RoCE guest's `scripts/race-cancelled-read 20 1` (in make
preload-test): target and initiator, raw, under audit and under safe mode.
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import proc, race  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "race")


def recorded(mode: str):
    p = os.path.join(DATA, mode + ".1.")
    return [proc.read_lines(p + f) for f in
            ("initiator.out", "initiator.err", "target.out", "target.err")]


class RaceTest(unittest.TestCase):
    def test_the_recorded_modes_pass_with_their_counts(self):
        got = {}
        for mode in race.MODES:
            problems, hangs, cancels = race.check_mode(mode, 20, 0, *recorded(mode))
            self.assertEqual(problems, [], mode)
            got[mode] = (hangs, cancels)
        self.assertEqual(got, {"raw": (1, 13), "audit": (0, 19), "safe": (4, 17)})

    def test_an_unnamed_hang_is_a_problem(self):
        ini_out, ini_err, t_out, t_err = recorded("safe")
        ini_err = [l for l in ini_err if "destroy-waits-for-lost-event" not in l][:]
        problems, hangs, _ = race.check_mode("safe", 20, 0, ini_out, ini_err, t_out, t_err)
        self.assertEqual(hangs, 4)
        self.assertEqual(problems, ["4 hangs, 0 destroy-waits-for-lost-event lines"])

    def test_other_findings_and_a_short_target_are_problems(self):
        ini_out, ini_err, t_out, t_err = recorded("audit")
        ini_err = ini_err + ["==cmsafe== late-ack: seq=3"]
        t_err = [l.replace("0 findings", "1 findings") for l in t_err] + ["==cmsafe== never-acked: x"]
        t_out = [l for l in t_out if "connections served" not in l]
        problems, _, _ = race.check_mode("audit", 20, 1, ini_out, ini_err, t_out, t_err)
        self.assertEqual(problems[0], "initiator: exit 1, no result line")
        self.assertTrue(problems[1].startswith("target: did not serve 20 connections"), problems[1])
        self.assertEqual(problems[2:], [
            "initiator: another finding: ==cmsafe== late-ack: seq=3",
            "target: a finding: ==cmsafe== never-acked: x",
            "target: no summary with 0 findings",
        ])

    def test_the_table(self):
        lines = race.table({"raw": [20, 0, 19], "audit": [20, 0, 19], "safe": [20, 4, 19]})
        self.assertEqual(lines[-1], "| safe | 20 | 4 | 19 |")


if __name__ == "__main__":
    unittest.main()
