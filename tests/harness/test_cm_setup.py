"""Connection setup's tables (cmsafe_harness/cm_setup.py) on the host, on a recorded run.

tests/harness/data/cm-setup holds a Soft-RoCE guest's `scripts/bench-cm-setup-in-guest 20 2`:
the client logs of each variant and round (cmtime's step table, the preload's exit summary;
cm_setup's steps), what it printed, and `perf report`'s text of two of its client profiles. A
time: the figures are that run's, the test holds how they are read and summed up.
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import cm_setup, figures, proc  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cm-setup")
N = 20
ROUNDS = 2
RAW_1_STEPS = [("create_id", "0.42"), ("resolve_addr", "18.66"), ("resolve_route", "5.79"),
               ("create_qp", "8.39"), ("connect", "116.25"), ("disconnect", "152.83"),
               ("destroy", "0.68")]
AUDIT_SEALS = "80"  # the audit client's events, by its exit summary: 4 per connection
# perf report's shares of the raw client's samples, by library (its text as the host's perf
# reads the guest's profile: the kernel's modules are not "kernel" there).
RAW_DSO_ROW = "| raw | 343 | 65.3 | 0.0 | 0.0 | 21.9 | 7.6 | 5.2 |"


def recorded(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


def log(variant: str, r: int) -> list[str]:
    if variant.startswith("api_"):
        return recorded("%s.%d.log" % (variant, r))
    return recorded("%s.%d.client.log" % (variant, r))


def results() -> cm_setup.Results:
    res = cm_setup.Results(ROUNDS)
    for r in range(1, ROUNDS + 1):
        for v in cm_setup.VARIANTS:
            pattern = cm_setup._SETUP_STEP if v.startswith("api_") else cm_setup._CMTIME_STEP
            res.record(v, r, cm_setup.steps(log(v, r), pattern))
    return res


class CmSetupTest(unittest.TestCase):
    def test_the_steps_of_each_program(self):
        cmtime = cm_setup.steps(log("raw", 1), cm_setup._CMTIME_STEP)
        self.assertEqual([s for s, _ in cmtime], cm_setup.STEPS[:-1])
        self.assertEqual(cmtime, RAW_1_STEPS)
        setup = cm_setup.steps(log("api_cmsafe", 2), cm_setup._SETUP_STEP)
        self.assertEqual([s for s, _ in setup], cm_setup.STEPS[:-1])

    def test_the_recorded_tables(self):
        res = results()
        printed = recorded("cm-setup.out")
        tables = cm_setup.tables(res, N)
        self.assertEqual(tables, printed[:len(tables)])
        # Each round's total is its steps' running sum, two decimals at each step.
        total = "0"
        for _, ms in cm_setup.steps(log("safe", 2), cm_setup._CMTIME_STEP):
            total = cm_setup.add(total, ms)
        self.assertEqual(res.totals[("safe", 2)], total)
        seals = figures.median(m.group(1) for r in range(1, ROUNDS + 1)
                               for m in map(cm_setup._SUMMARY.match, log("audit", r)) if m)
        self.assertEqual(seals, AUDIT_SEALS)
        at = len(tables)
        ns = {row.split(" | ")[0][2:]: row.split(" | ")[1] for row in printed
              if row.startswith(("| alone |", "| spinning |", "| sleeping |"))}
        seal = cm_setup.seal_table(seals, ns, res.median("audit", "total"), res.median("raw", "total"))
        self.assertEqual(seal, printed[at:at + len(seal)])

    def test_ratios_verdicts_and_spreads(self):
        self.assertEqual(cm_setup.ratio("1.5", "0"), "-")
        self.assertEqual(cm_setup.verdict("-", "1.03"), "not met")
        self.assertEqual(cm_setup.verdict("1.030", "1.03"), "met")
        res = cm_setup.Results(4)
        for r, (a, b) in enumerate((("10", "10"), ("12", "10"), ("11", "10"), ("30", "10")), 1):
            res.record("safe", r, [("connect", a)])
            res.record("raw", r, [("connect", b)])
        self.assertEqual(res.ratios("safe", "raw"), ["1.000", "1.200", "1.100", "3.000"])
        self.assertEqual(res.per_round("safe", "raw"), "1.15")
        self.assertEqual(res.spread("safe", "raw"), "1.000-3.000")
        self.assertEqual(res.median("safe", "total"), "11.5")
        self.assertEqual(res.median("off", "total"), "0")

    def test_the_order_is_fixed_per_round(self):
        self.assertEqual(sorted(cm_setup.order(1)), sorted(cm_setup.VARIANTS))
        self.assertEqual(cm_setup.order(3), cm_setup.order(3))
        self.assertNotEqual(cm_setup.order(1), cm_setup.order(2))

    def test_perf_s_shares(self):
        self.assertEqual(cm_setup.dso_row("raw", recorded("raw.perf-dso.txt")), RAW_DSO_ROW)
        self.assertEqual(cm_setup.dso_row("x", []), "| x | 0 | | | | | | |")
        hot = cm_setup.hottest("safe", recorded("safe.perf-sym.txt"))
        self.assertEqual(hot, [line for line in recorded("cm-setup.out") if line.startswith("    safe: ")])
        self.assertEqual(len(hot), 5)
        self.assertTrue(hot[0].endswith("[.] cmsafe_preload::cm::wrap_events::judge_wait"), hot[0])

    def test_seal_cost_lines(self):
        self.assertEqual(cm_setup.seal_costs(["seal alone 10238", "seal spinning 19821", ""]),
                         {"alone": "10238", "spinning": "19821"})



# rdma-core 56's cmtime: a table per test; the first is the one read.
CMTIME56 = """Connect (200) simulated QPs test (delay 0 us)
cm_conn               200
step             avg/iter  total(us)    us/conn    sum(us)    max(us)    min(us)
full connect        24916    4983270          0          0    4952932     287718
create id              22       4559         22       4465        756          6
resolve addr          220      44042      12128    2425767      20032       1585
resolve route          65      13032       4612     922572      10227       3959
create qp              28       5642          0         55         36          0
init qp attr            0          0          8       1757        168          4
cm connect          24519    4903953    4427350  885470108    4843983     208404
disconnect             92      18441         72      14530       4601         17
destroy id            147      29406        146      29319      12053         26
Connect (200) test - no QPs
step             avg/iter  total(us)    us/conn    sum(us)    max(us)    min(us)
create id             113      22646        112      22500      16621         12
""".splitlines()


class Cmtime56Test(unittest.TestCase):
    def test_the_first_tables_steps_in_ms(self):
        self.assertEqual(cm_setup.steps56(CMTIME56), [
            ("create_id", "4.6"), ("resolve_addr", "44.0"), ("resolve_route", "13.0"),
            ("create_qp", "5.6"), ("connect", "4904.0"), ("disconnect", "18.4"),
            ("destroy", "29.4")])

    def test_44s_table_is_not_56s(self):
        self.assertEqual(cm_setup.steps56(["create id   :       10.00"]), [])


if __name__ == "__main__":
    unittest.main()
