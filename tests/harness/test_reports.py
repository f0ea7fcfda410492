"""The harnesses' report readers on a report cut at any byte (cmsafe_harness/reports.py and its
callers: audit.check_report, real.check_reports, usdt.read_report, api_preload's and new_events'
counts): the whole lines are the report, the cut last line is skipped, said in one line on
stderr naming the file, and no check fails for it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import audit, real, reports, usdt  # noqa: E402

EVENT = {"record": "event", "seq": 1, "type": "ESTABLISHED", "status": 0, "id": "0x10",
         "listen_id": None, "thread": 7, "get_ns": 5, "ack_ns": 9, "private_data_len": 0,
         "internal": False}
FINDING = {"record": "finding", "finding": "late-ack", "seq": 1, "type": "ESTABLISHED",
           "id": "0x10", "thread": 7, "where": "w", "message": "held 1.5 \u00b5s \u2013 late"}


def line(rec: dict) -> bytes:
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class Cut(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, name: str, raw: bytes) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(raw)
        return path

    def quietly(self, fn, *args, **kw):
        """FN's result and what it said on stderr."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            result = fn(*args, **kw)
        return result, err.getvalue()

    def test_every_cut_of_the_last_line(self):
        whole = line(EVENT) + line(dict(EVENT, seq=2))
        last = line(FINDING)
        for cut in range(len(last) + 1):
            path = self.write("r.1.jsonl", whole + last[:cut])
            got, err = self.quietly(reports.report_lines, path)
            kept = 3 if cut >= len(last) - 1 else 2
            self.assertEqual(len(got), kept, cut)
            self.assertEqual([json.loads(x) for x in got][:2], [EVENT, dict(EVENT, seq=2)])
            if cut in (0, len(last) - 1, len(last)):
                self.assertEqual(err, "", cut)
            else:
                self.assertEqual(err, "%s: the last line is cut (%d bytes, no newline): "
                                      "skipped\n" % (path, cut), cut)
        self.assertIsNone(reports.report_lines(os.path.join(self.dir, "none.jsonl")))

    def cut_report(self, name: str) -> str:
        """A report of two events whose last line, a finding's, is cut in its message's
        three-byte character."""
        last = line(FINDING)
        return self.write(name, line(EVENT) + line(dict(EVENT, seq=2))
                          + last[:last.index("\u2013".encode()) + 1])

    def test_check_report(self):
        path = self.cut_report("r.1.jsonl")
        r, err = self.quietly(audit.check_report, [path], "-", "*", "*", "2", "")
        self.assertEqual((r.problems, len(r.events), r.findings), ([], 2, []))
        self.assertEqual(len(err.splitlines()), 1)
        self.assertIn("r.1.jsonl: the last line is cut", err)

    def test_check_reports_of_a_real_program(self):
        path = self.cut_report("rping.r1.server.77.jsonl")
        problems, err = self.quietly(real.check_reports, "server", [path], 2, "audit")
        self.assertEqual(problems, [])
        self.assertIn("rping.r1.server.77.jsonl: the last line is cut", err)

    def test_usdt_reads_the_whole_lines(self):
        path = self.cut_report("soak.1.jsonl")
        records, err = self.quietly(usdt.read_report, [path])
        self.assertEqual(records, [EVENT, dict(EVENT, seq=2)])
        self.assertIn("soak.1.jsonl: the last line is cut", err)
        with self.assertRaises(OSError):
            usdt.read_report([os.path.join(self.dir, "none.jsonl")])


if __name__ == "__main__":
    unittest.main()
