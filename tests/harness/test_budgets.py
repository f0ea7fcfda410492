"""bench/budgets.tsv's reader (cmsafe_harness/budgets.py), on the host: the rows insn-count,
cmtime-insns and copy-insns hold their counts to."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import budgets, guest  # noqa: E402

ROOT = guest.project_root()


class BudgetsTest(unittest.TestCase):
    def test_the_tree_s_rows(self):
        with open(os.path.join(ROOT, budgets.PATH)) as f:
            lines = f.readlines()
        insn = budgets.parse(lines, "insn-count", "x86_64")
        self.assertEqual(sorted(insn), ["api", "api-life", "audit", "audit-life", "safe", "safe-life"])
        self.assertTrue(all(v > 0 for v in insn.values()))
        self.assertEqual(sorted(budgets.parse(lines, "cmtime-insns", "x86_64")),
                         ["client.audit", "client.safe", "server.audit", "server.safe"])
        self.assertEqual(list(budgets.parse(lines, "copy-insns", "x86_64")), ["copy"])
        # cmtime-insns has no aarch64 rows: callgrind's call tracking there (callgrind.py).
        self.assertEqual(budgets.parse(lines, "cmtime-insns", "aarch64"), {})
        self.assertEqual(len(budgets.parse(lines, "insn-count", "aarch64")), 6)

    def test_comments_other_scripts_and_architectures_are_skipped(self):
        lines = ["# x86_64\tinsn-count\tapi\t1\n", "\n", "x86_64\tinsn-count\tapi\t810\n",
                 "aarch64\tinsn-count\tapi\t999\n", "x86_64\tcopy-insns\tcopy\t615\n"]
        self.assertEqual(budgets.parse(lines, "insn-count", "x86_64"), {"api": 810})
        self.assertEqual(budgets.parse(lines, "copy-insns", "aarch64"), {})

    def test_an_architecture_without_rows(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(budgets.load("insn-count", False, ROOT, arch="riscv64"), {})
        self.assertEqual(err.getvalue(), "insn-count: bench/budgets.tsv has no budgets for riscv64\n")
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit) as e:
                budgets.load("insn-count", True, ROOT, arch="riscv64")
        self.assertEqual(e.exception.code, 1)
        self.assertEqual(budgets.load("copy-insns", True, ROOT, arch="x86_64"), {"copy": 615})


if __name__ == "__main__":
    unittest.main()
