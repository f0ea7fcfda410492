"""The instruction counts (cmsafe_harness/insns.py, cmtime.py, and the preload reader of
callgrind.py) on the host, on recorded runs.

tests/harness/data/insns holds a Soft-RoCE guest's `scripts/insn-count --n 100 --check` run
(x86_64): callgrind's log of each loop at 100 and 200 iterations, the safe and audit loops'
profiles trimmed to the lines the preload reader reads (its object's functions and their calls),
the names the preload exported, and what it printed. tests/harness/data/cmtime holds the same
guest's `scripts/cmtime-insns --n 200 --check`: the four profiles of cmtime under the preload,
trimmed alike, raw cmtime's logs, and what it printed.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import callgrind, cmtime, insns, proc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
INSNS = os.path.join(HERE, "data", "insns")
CMTIME = os.path.join(HERE, "data", "cmtime")
N = 100
CONNECTIONS = 200
# bench/budgets.tsv's x86_64 rows when the runs were recorded.
BUDGETS = {"api": 810, "safe": 1330, "audit": 930, "api-life": 1625, "safe-life": 4600,
           "audit-life": 3660}
CMTIME_BUDGETS = {"client.safe": 2260, "server.safe": 2455, "client.audit": 1840,
                  "server.audit": 1995}
PRELOAD = "target/release/libcmsafe_preload.so"
# The recorded run's instructions per iteration (the same on every run of that build).
RECORDED_COUNTS = {"raw": 789, "api": 1529, "safe": 1979, "audit": 1675, "raw-life": 4258,
                   "api-life": 5738, "safe-life": 8512, "audit-life": 7777}
# The preload's share of the safe and audit loops' profiles, at 100 and 200 iterations.
SHARES = {"safe.1.cg": 5142036, "safe.2.cg": 5260641, "audit.1.cg": 4624753, "audit.2.cg": 4712934}
# cmtime's profiles: the preload's instructions, and its reads (the events cmtime got).
CMTIME_SHARES = {"safe.client.cg": (1738990, 801), "safe.server.cg": (1415029, 601),
                 "audit.client.cg": (1400445, 801), "audit.server.cg": (1148415, 601)}


def lines(d: str, name: str) -> list[str]:
    return proc.read_lines(os.path.join(d, name))


def wrapped() -> set[str]:
    return set(lines(INSNS, "exported.txt"))


def got() -> dict[str, int]:
    out = {}
    for label, *_ in insns.ROWS:
        a = callgrind.collected(lines(INSNS, label + ".1.log"))
        b = callgrind.collected(lines(INSNS, label + ".2.log"))
        out[label] = insns.steady(a, b, N)
    return out


def share(d: str, name: str) -> callgrind.Share:
    return callgrind.read_share(os.path.join(d, name), PRELOAD, wrapped())


class InsnCountTest(unittest.TestCase):
    def test_the_recorded_table(self):
        g = got()
        self.assertEqual(g, RECORDED_COUNTS)
        table = [line.text for line in insns.table(g, BUDGETS, N)]
        printed = lines(INSNS, "insn-count.out")
        self.assertEqual(table, printed[:len(table)])
        self.assertTrue(all(line.missed is None for line in insns.table(g, BUDGETS, N)))

    def test_a_row_over_its_budget(self):
        g = got()
        budgets = dict(BUDGETS, safe=g["safe"] - g["raw"] - 1)
        rows = insns.table(g, budgets, N)
        row = [r for r in rows if r.missed]
        self.assertEqual(len(row), 1)
        self.assertTrue(row[0].text.endswith("| +%d | NOT met |" % budgets["safe"]), row[0].text)
        self.assertEqual(row[0].missed, "safe: +%d over raw, budget +%d" % (g["safe"] - g["raw"], budgets["safe"]))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(insns.finish([row[0].missed], True), 1)
            self.assertEqual(insns.finish([row[0].missed], False), 0)
            self.assertEqual(insns.finish([], True), 0)
        self.assertEqual(err.getvalue().splitlines()[0], "insn-count: not met: " + row[0].missed)
        # A row without a budget (an architecture's row missing) is said, not failed.
        no = insns.table_line("x", 10, 5, False, None, "x")
        self.assertEqual((no.text, no.missed), ("| x | 10 | +5 | 2.00x | - | no budget |", None))

    def test_the_reader_finds_the_preload_s_share(self):
        g = got()
        printed = lines(INSNS, "insn-count.out")
        for label in insns.ATTRIBUTED:
            first, second = share(INSNS, label + ".1.cg"), share(INSNS, label + ".2.cg")
            own = insns.trunc_div(second.total - first.total, N)
            line, miss = insns.attribution(label, own, g[label] - g["raw"])
            self.assertIsNone(miss)
            self.assertIn(line, printed)
            table = callgrind.per_iteration(N, first, second, insns.TOP)
            at = printed.index(table[0], printed.index(
                "Where the %s loop's extra instructions per event go (scripts/preload-insns.py --per):" % label))
            self.assertEqual(table, printed[at:at + len(table)])
        self.assertEqual(SHARES, {name: share(INSNS, name).total
                                  for name in ("safe.1.cg", "safe.2.cg", "audit.1.cg", "audit.2.cg")})

    def test_a_reader_that_loses_code_is_caught(self):
        # Without the exported names every wrapper counts as the preload's own, real work too;
        # a reader that cannot place the preload's object finds nothing.
        first, second = share(INSNS, "safe.1.cg"), share(INSNS, "safe.2.cg")
        extra = got()["safe"] - got()["raw"]
        with open(os.path.join(INSNS, "safe.2.cg")) as f:
            lost = callgrind.share(f, "libcmsafe_preload.so.1", wrapped())
        self.assertEqual(lost.total, 0)
        line, miss = insns.attribution("safe", insns.trunc_div(lost.total - first.total, N), extra)
        self.assertTrue(miss.startswith("preload-insns.py finds -"), miss)
        own = insns.trunc_div(second.total - first.total, N)
        _, miss = insns.attribution("safe", own, int(own * 1.03))
        self.assertIsNotNone(miss)
        _, miss = insns.attribution("safe", own, int(own * 1.01))
        self.assertIsNone(miss)

    def test_trunc_div_and_steady(self):
        self.assertEqual(insns.trunc_div(-7, 2), -3)
        self.assertEqual(insns.trunc_div(7, 2), 3)
        self.assertEqual(insns.steady(1000, 1250, 100), 2)  # 2.5 rounds to even, as %.0f
        self.assertEqual(insns.steady(1000, 1350, 100), 4)


class CmtimeInsnsTest(unittest.TestCase):
    def rows(self, budgets):
        out = []
        for mode in cmtime.MODES:
            for side in cmtime.SIDES:
                s = share(CMTIME, "%s.%s.cg" % (mode, side))
                out.append(cmtime.row(side, mode, s.total, s.reads, CONNECTIONS,
                                      budgets.get("%s.%s" % (side, mode))))
        return out

    def test_the_recorded_table(self):
        rows = self.rows(CMTIME_BUDGETS)
        self.assertTrue(all(miss is None for _, miss in rows))
        raw = [str(callgrind.collected(lines(CMTIME, "raw.%s.log" % side))) for side in cmtime.SIDES]
        printed = cmtime.header(CONNECTIONS) + [r for r, _ in rows] + cmtime.footer(
            raw[0], raw[1], "target/insn-test/cmtime", PRELOAD)
        self.assertEqual(printed, lines(CMTIME, "cmtime-insns.out"))
        self.assertEqual({name: (s.total, s.reads) for name, s in
                          ((n, share(CMTIME, n)) for n in ("safe.client.cg", "safe.server.cg",
                                                           "audit.client.cg", "audit.server.cg"))},
                         CMTIME_SHARES)

    def test_a_row_over_its_budget(self):
        rows = self.rows(dict(CMTIME_BUDGETS, **{"server.audit": 1000}))
        missed = [miss for _, miss in rows if miss]
        self.assertEqual(len(missed), 1)
        self.assertEqual(missed[0], "server audit: 1911 per event, budget 1000")
        self.assertEqual(rows[3][0], "| cmtime server, CMSAFE_MODE=audit | 1148415 | 601 | 1911 | 1000 | NOT met | 5742 |")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(cmtime.finish(missed, True), 1)
            self.assertEqual(cmtime.finish(missed, False), 0)
        self.assertEqual(err.getvalue().splitlines()[0], "cmtime-insns: over budget: " + missed[0])

    def test_rounding_per_event_and_per_connection(self):
        line, miss = cmtime.row("client", "safe", 1709695, 802, 200, 2132)
        self.assertEqual(line, "| cmtime client, CMSAFE_MODE=safe | 1709695 | 802 | 2132 | 2132 | met | 8548 |")
        self.assertIsNone(miss)
        _, miss = cmtime.row("client", "safe", 1709695, 802, 200, 2131)
        self.assertEqual(miss, "client safe: 2132 per event, budget 2131")


if __name__ == "__main__":
    unittest.main()
