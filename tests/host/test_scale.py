"""The preload's cost per id life and per event does not grow with the events a program holds
unacked: counted by valgrind's callgrind on tests/host/programs/scale.c (the instructions of the
whole process inside its loop), not timed. A destroy that looked at every event held, of every
id, cost an id life 66 times more beside 10,000 held events than beside 10. The whole table, up
to 50,000 ids and with the API, is `make scale-host`'s (bench/results/scale.md)."""

from __future__ import annotations

import shutil
import unittest

from hostrun import PRELOAD, HostTest, program
from cmsafe_harness import scale_host

FEW, MANY = 10, 10_000
# Loop iterations measured, and warm-up ones before them: past audit's quarantine and safe
# mode's kept copies (4,096 each, two events an iteration), so that both sizes run in the same
# steady state.
M, WARM = 2048, 2100


@unittest.skipUnless(shutil.which("valgrind"),
                     "valgrind is missing (scripts/setup-deps installs it)")
class HeldEvents(HostTest):
    def count(self, mode: str, n: int) -> scale_host.Count:
        work = self.tmpdir()
        return scale_host.count(program("scale"), PRELOAD, mode, n, M, WARM, "held", 1, work)

    def test_an_id_life_and_an_event_cost_the_same_beside_10000_events_held(self):
        for mode in ("audit", "safe"):
            with self.subTest(mode=mode):
                few, many = self.count(mode, FEW), self.count(mode, MANY)
                said = "%s: %.0f and %.0f instructions per id life, %.0f and %.0f per event, " \
                       "beside %d and %d events held" % (mode, few.life, many.life, few.event,
                                                         many.event, FEW, MANY)
                self.assertLessEqual(many.life, few.life * scale_host.LIMIT, said)
                self.assertLessEqual(many.event, few.event * scale_host.LIMIT, said)
                # Not a loop that counted nothing: an id life is the preload's wrappers of four
                # calls, with the stand-in's work behind them.
                self.assertGreater(few.life, 2000, said)


if __name__ == "__main__":
    unittest.main()
