"""CPU time per event (cmsafe_harness/event_cpu.py) on the host, on a recorded run.

tests/harness/data/event-cpu holds a Soft-RoCE guest's `scripts/event-cpu --rounds 2 --events
300 --warmup 100`: its runs.tsv (mode, round, CPU us, minor faults and context switches per
event), the last round's raw loop output, and what it printed. A time: the figures are that
run's, the test holds how they are read and summed up, not their size.
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import event_cpu, figures, proc  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "event-cpu")
EVENTS = 300
RAW_WINDOW = ["45.05", "0.000", "1.000"]  # the last round's raw loop: 13514 us, 0 faults, 300 switches


def recorded(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


def runs() -> list[list[str]]:
    return [line.split("\t") for line in recorded("runs.tsv")]


class EventCpuTest(unittest.TestCase):
    def test_the_window_line(self):
        got = event_cpu.window(recorded("raw.out"), EVENTS)
        last = [r for r in runs() if r[0] == "raw"][-1]
        self.assertEqual(got, last[2:])
        self.assertEqual(got, RAW_WINDOW)
        self.assertIsNone(event_cpu.window(["events 300"], EVENTS))
        self.assertEqual(event_cpu.window(["window cpu_us=3000 minflt=30 csw=301"], EVENTS),
                         ["10.00", "0.100", "1.003"])

    def test_the_recorded_table(self):
        printed = recorded("event-cpu.out")
        table = event_cpu.table(runs())
        at = printed.index(table[0])
        self.assertEqual(table, printed[at:at + len(table)])
        self.assertEqual([line.split(" | ")[0][2:] for line in table[2:]],
                         [event_cpu.WHAT[m] for m in event_cpu.MODES])
        self.assertIn("| (baseline) |  |", table[2])

    def test_medians_and_ratios(self):
        rows = [["raw", "0", "10.00", "0.000", "1.000"], ["raw", "1", "12.00", "0.000", "1.000"],
                ["api", "0", "15.00", "0.020", "1.000"], ["api", "1", "16.50", "0.030", "1.000"]]
        table = event_cpu.table(rows)
        self.assertEqual(table[2], "| %s | 11 | 10 12 | (baseline) |  | 0 | 1 |" % event_cpu.WHAT["raw"])
        self.assertEqual(table[4], "| %s | 15.75 | 15 16 | +4.8 | 1.43 | 0.025 | 1 |" % event_cpu.WHAT["api"])

    def test_the_order_rotates(self):
        order = event_cpu.order(2)
        self.assertEqual([m for r, m in order if r == 0], event_cpu.MODES)
        self.assertEqual([m for r, m in order if r == 1], event_cpu.MODES[1:] + event_cpu.MODES[:1])
        self.assertEqual([(x[1], x[0]) for x in runs()], [(str(r), m) for r, m in order])


class FiguresTest(unittest.TestCase):
    """The medians and numbers of cmsafe_harness/figures.py (event-cpu's and cm-setup's)."""

    def test_median(self):
        self.assertEqual(figures.median(["3.10", "1.00", "2.50"]), "2.50")  # as printed
        self.assertEqual(figures.median(["1.00", "2.50"]), "1.75")
        self.assertEqual(figures.median(["12.00", "14.00"]), "13")
        self.assertEqual(figures.median(["1234.567", "1234.568"]), "1234.57")
        self.assertEqual(figures.median([]), "0")
        self.assertEqual(figures.median(["", "7"]), "7")
        self.assertEqual(figures.median(["-", "1.2", "1.4"]), "1.2")  # no number sorts first

    def test_number(self):
        self.assertEqual(figures.number("1.5x"), 1.5)
        self.assertEqual(figures.number("-"), 0.0)
        self.assertEqual(figures.shortest(2500000.0), "2500000")


if __name__ == "__main__":
    unittest.main()
