"""make harness-record (cmsafe_harness/record.py): a run's logs into fixtures with no pid in a
name, and back to what the harness's checks read."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import record  # noqa: E402


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class RecordTest(unittest.TestCase):
    def setUp(self):
        self.src, self.dst, self.back = (tempfile.mkdtemp(prefix="rec-") for _ in range(3))
        # A forked run: the parent's report and the child's; its status as the harness wrote it.
        write(os.path.join(self.src, "fork_after.out"), "parent\n")
        write(os.path.join(self.src, "fork_after.err"), "==cmsafe== summary: pid 467\n")
        write(os.path.join(self.src, "fork_after.run"), '{"hung": false, "pid": 467, "rc": 0}\n')
        write(os.path.join(self.src, "fork_after.468.jsonl"), '{"record":"child"}\n')
        write(os.path.join(self.src, "fork_after.467.jsonl"), '{"record":"parent"}\n')
        # Another run whose name begins with this one's.
        write(os.path.join(self.src, "fork_after_exec.out"), "x\n")

    def run_main(self, *argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = record.main(list(argv))
        return rc, out.getvalue() + err.getvalue()

    def test_reports_by_ordinal_and_back(self):
        rc, said = self.run_main(self.src, self.dst, "fork_after")
        self.assertEqual(rc, 0, said)
        self.assertEqual(sorted(os.listdir(self.dst)),
                         ["fork_after.1.jsonl", "fork_after.2.jsonl", "fork_after.err",
                          "fork_after.out", "fork_after.run"])
        with open(os.path.join(self.dst, "fork_after.1.jsonl")) as f:
            self.assertEqual(f.read(), '{"record":"parent"}\n')
        with open(os.path.join(self.dst, "fork_after.run")) as f:
            self.assertEqual(json.load(f), {"hung": False, "pid": 467, "rc": 0,
                                            "reports": [467, 468]})
        log, meta = record.materialize(self.dst, "fork_after", self.back)
        self.assertEqual(log, os.path.join(self.back, "fork_after"))
        self.assertEqual(meta["pid"], 467)
        with open(log + ".468.jsonl") as f:
            self.assertEqual(f.read(), '{"record":"child"}\n')

    def test_recording_again_replaces_the_old_reports(self):
        self.run_main(self.src, self.dst, "fork_after")
        os.unlink(os.path.join(self.src, "fork_after.468.jsonl"))
        self.run_main(self.src, self.dst, "fork_after")
        self.assertNotIn("fork_after.2.jsonl", os.listdir(self.dst))

    def test_every_run_when_none_is_named(self):
        rc, said = self.run_main(self.src, self.dst)
        self.assertEqual(rc, 0, said)
        self.assertIn("fork_after_exec.out", os.listdir(self.dst))
        self.assertEqual(said.splitlines()[0].split(":")[0], "fork_after")

    def test_a_run_not_there(self):
        self.assertEqual(self.run_main(self.src, self.dst, "nosuch"),
                         (1, "harness-record: no run nosuch in %s\n" % self.src))
        self.assertEqual(self.run_main("/nonexistent", self.dst)[0], 2)

    def test_a_run_without_a_report(self):
        log, meta = record.materialize(self.src, "fork_after_exec", self.back)
        self.assertEqual((log, meta), (os.path.join(self.src, "fork_after_exec"), {}))


if __name__ == "__main__":
    unittest.main()
