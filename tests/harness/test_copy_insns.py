"""The copy path's count (cmsafe_harness/copy_insns.py) on the host, on a recorded run.

tests/harness/data/copy-insns holds a `scripts/copy-insns --check` run on x86-64: callgrind's
log of each loop (count_cmsafe and count_hand, each event kind, 20000 copies), the bench's name
of each kind, and the table it printed.
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import callgrind, copy_insns, proc  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "copy-insns")
N = 20000
BUDGET = 615  # bench/budgets.tsv's x86_64 copy row when recorded


def recorded(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


def per_event(fn: str, kind: int) -> int:
    ir = callgrind.collected(recorded("%s.%d.log" % (fn, kind)))
    assert ir is not None
    return copy_insns.per_event(ir, N)


class CopyInsnsTest(unittest.TestCase):
    def test_the_recorded_table(self):
        lines = copy_insns.header(N)
        for k in copy_insns.KINDS:
            line, over = copy_insns.row(recorded("count_cmsafe.%d.out" % k)[0],
                                        per_event("count_cmsafe", k), per_event("count_hand", k), BUDGET)
            self.assertFalse(over, line)
            lines.append(line)
        self.assertEqual(lines, recorded("copy-insns.out"))
        self.assertEqual(callgrind.collected(recorded("count_cmsafe.1.log")), 11740018)
        self.assertEqual(lines[5], "| ESTABLISHED (196 B) | 587 | 345 | 1.70x | 615 | met |")

    def test_a_kind_over_the_budget(self):
        line, over = copy_insns.row("ESTABLISHED (196 B)", 587, 345, 586)
        self.assertTrue(over)
        self.assertEqual(line, "| ESTABLISHED (196 B) | 587 | 345 | 1.70x | 586 | NOT met |")
        line, over = copy_insns.row("ESTABLISHED (196 B)", 587, 345, None)
        self.assertEqual((line.endswith("| - | no budget |"), over), (True, False))

    def test_a_log_without_a_count(self):
        log = recorded("count_hand.0.log")
        self.assertIsNone(callgrind.collected([line for line in log if "Collected" not in line]))
        self.assertIsNone(callgrind.collected(["==1== Collected : 0"]))
        self.assertIsNone(callgrind.collected(log + log))  # two runs in one log
        self.assertEqual(copy_insns.per_event(11740018, N), 587)


if __name__ == "__main__":
    unittest.main()
