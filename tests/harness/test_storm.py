"""The reconnect storm's checks and tables (cmsafe_harness.storm) on the host.

Held to a run recorded in the Soft-RoCE guest (tests/harness/data/storm: 100 connections x 2
waves, the checked runs with the legacy server under valgrind, the control): the servers' lines,
storm.tsv, rss.tsv and the storm.md its tables came to.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import guest, proc, storm, tally  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "storm")


def log(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, "logs", name))


def replaced(lines: list[str], old: str, new: str) -> list[str]:
    return [line.replace(old, new) for line in lines]


class WaveTest(unittest.TestCase):
    def test_fields_of_a_wave_line(self):
        line = storm.grep("STORM wave=1 ", log("cmsafe-plain.out"))[0]
        v = storm.fields(line)
        self.assertEqual((v["wave"], v["conns"], v["last_destroy_us"], v["cpu_drain_us"]),
                         ("1", "100", "1796408131325149", "58778"))

    def test_row_and_summary(self):
        out = log("cmsafe-plain.out")
        ready = storm.grep("STORM ready wave=1 ", out)[0].rsplit("us=", 1)[-1]
        est = storm.grep("STORM established wave=1 ", out)[0].rsplit("us=", 1)[-1]
        row = storm.tsv_row("cmsafe", "plain", storm.grep("STORM wave=1 ", out)[0],
                            1796408131.17, ready, est, [10, 20, 30, 0], [110, 120, 130, 2])
        # The values the bash driver's awk gave for the same line and kill time.
        self.assertEqual(row, ["cmsafe", "plain", "1", "100", "50.8", "154.3", "155.1", "1514.2",
                               "1.8", "300", "100", "0", "0", "145.2", "58.8", "100", "100",
                               "100", "2"])
        self.assertEqual(
            storm.wave_summary("cmsafe-plain", row),
            "storm: cmsafe-plain wave 1: kill -> first event 50.8 ms, -> last event 154.3 ms, "
            "-> last id destroyed 155.1 ms (100 DISCONNECTED, 0 TIMEWAIT_EXIT, 0 other; server "
            "CPU 59 ms; CM: 100 DREQ sent, 100 received, 2 resent, 100 DREP sent)")

    def test_a_missing_field_counts_zero(self):
        row = storm.tsv_row("raw", "asan", "STORM wave=3 conns=5", 0.0, "", "", [0] * 4, [0] * 4)
        self.assertEqual(row[2:4] + row[8:10], ["3", "5", "0.0", "0"])


class ServerChecksTest(unittest.TestCase):
    def test_every_wave_seen(self):
        out = log("cmsafe-plain.out")
        self.assertTrue(storm.waves_seen(out, 2))
        self.assertFalse(storm.waves_seen(out, 3))
        self.assertFalse(storm.waves_seen([x for x in out if not x.startswith("STORM wave=2")], 2))
        self.assertFalse(storm.waves_seen([x for x in out if not x.startswith("STORM done")], 2))

    def test_cmsafe_counters(self):
        ok, text = storm.cmsafe_counters(log("cmsafe-asan.out"))
        self.assertTrue(ok)
        self.assertEqual(text, "fetched=600 acked=600 released=600 live_events=0 live_buffers=0 "
                               "pending=0 alloc_failures=0 batches=53 mean_batch=11.32 "
                               "max_batch=64")
        for old, new in (("acked=600", "acked=599"), ("released=600", "released=598"),
                         ("live_events=0", "live_events=2"), ("pending=0", "pending=1")):
            ok, text = storm.cmsafe_counters(replaced(log("cmsafe-asan.out"), old, new))
            self.assertFalse(ok, new)
            self.assertIn(new, text)
        self.assertEqual(storm.cmsafe_counters([]), (False, ""))

    def test_raw_acks(self):
        self.assertEqual(storm.raw_acks(log("raw-asan.out")),
                         (True, "600 got=600 acked=600 maxrss_kb=11564"))
        self.assertEqual(storm.raw_acks(replaced(log("raw-asan.out"), "acked=600", "acked=597")),
                         (False, "600 got=600 acked=597 maxrss_kb=11564"))

    def test_legacy_preload(self):
        ok, text = storm.legacy_preload(log("legacy-valgrind.out"), log("legacy-valgrind.err"))
        self.assertTrue(ok)
        self.assertEqual(text, "600 got=600 acked=600 maxrss_kb=71340; preload: pid 332, mode "
                               "safe, 600 events, 0 findings")
        self.assertTrue(storm.legacy_preload(log("legacy-plain.out"), log("legacy-plain.err"))[0])
        # A finding, an event count that is not the server's, an unacked event, no summary.
        for err in (replaced(log("legacy-plain.err"), "0 findings", "2 findings"),
                    replaced(log("legacy-plain.err"), "600 events", "601 events"), []):
            self.assertFalse(storm.legacy_preload(log("legacy-plain.out"), err)[0])
        ok, text = storm.legacy_preload(replaced(log("legacy-plain.out"), "acked=600", "acked=1"),
                                        log("legacy-plain.err"))
        self.assertFalse(ok)
        self.assertTrue(text.startswith("600 got=600 acked=1 "), text)

    def test_sanitizers(self):
        self.assertFalse(storm.sanitizer_reported(log("cmsafe-asan.err")))
        self.assertTrue(storm.sanitizer_reported(["==1==ERROR: LeakSanitizer: detected leaks"]))
        self.assertTrue(storm.sanitizer_reported(["x.c:3:5: runtime error: signed overflow"]))

    def test_valgrind(self):
        self.assertEqual(storm.valgrind_verdict(log("legacy-valgrind.err")),
                         (True, "memcheck: 0 errors; definitely lost: 0 bytes,indirectly lost: "
                                "0 bytes,possibly lost: 17,297 bytes"))
        err = log("legacy-valgrind.err")
        self.assertFalse(storm.valgrind_verdict(err + ["==332== Invalid read of size 8"])[0])
        self.assertFalse(storm.valgrind_verdict(
            err + ["==332== 64 bytes in 1 blocks are definitely lost in loss record 3 of 9"])[0])
        self.assertFalse(storm.valgrind_verdict(
            replaced(err, "ERROR SUMMARY: 0 errors", "ERROR SUMMARY: 3 errors"))[0])
        self.assertEqual(storm.valgrind_verdict([]), (False, "memcheck: 0 errors; no leak summary"))

    def test_control(self):
        err = log("legacy-control.err")
        self.assertEqual(storm.control_verdict(1, err),
                         (True, "without the preload ASan reports the bug: heap-use-after-free, "
                                "freed in rdma_ack_cm_event, read at storm_server_legacy.c:39"))
        failed = (False, "ASan did not report the legacy server's use after ack (exit 0)")
        self.assertEqual(storm.control_verdict(0, err), failed)
        self.assertEqual(storm.control_verdict(0, []), failed)
        # The free must be rdma_ack_cm_event's, the allocation rdma_get_cm_event's.
        self.assertFalse(storm.control_verdict(1, replaced(err, "in rdma_ack_cm_event", "in x"))[0])
        self.assertFalse(storm.control_verdict(1, replaced(err, "in rdma_get_cm_event", "in y"))[0])


class TablesTest(unittest.TestCase):
    def test_the_recorded_tables(self):
        md = "\n".join(proc.read_lines(os.path.join(DATA, "storm.md"))) + "\n"
        tables = storm.timing_tables(storm.read_tsv(os.path.join(DATA, "storm.tsv")),
                                     ["cmsafe", "legacy", "raw"], 100, 5, "ib")
        tables += storm.rss_table([x.split("\t") for x in
                                   proc.read_lines(os.path.join(DATA, "rss.tsv"))])
        body = md.split("\n\n", 1)[1]
        self.assertEqual(tables, body[:body.index("\nChecks (")])

    def test_iwarp_has_no_cm_table(self):
        tables = storm.timing_tables(storm.read_tsv(os.path.join(DATA, "storm.tsv")),
                                     ["cmsafe", "raw"], 100, 5, "iwarp")
        self.assertTrue(tables.endswith("No IB CM on iWARP: no DREQ/DREP counters (counted apart "
                                        "under Checks).\n"))
        # Only the servers named have columns and rows (the target line reads the legacy rows).
        self.assertNotIn("legacy + safe preload", tables)
        self.assertIn("\n| wave | cmsafe API | raw baseline |\n", tables)

    def test_profile(self):
        dso = ["# Overhead  Samples  Shared Object", "    61.20%     612  [kernel.kallsyms]",
               "    30.00%     300  libcmsafe.so", "     8.80%      88  storm_server_cmsafe"]
        rows = storm.profile_rows("cmsafe", dso)
        self.assertEqual(rows, ["cmsafe\t612\t[kernel.kallsyms]", "cmsafe\t300\tlibcmsafe.so",
                                "cmsafe\t88\tstorm_server_cmsafe"])
        table = storm.profile_table([r.split("\t") for r in rows], ["cmsafe", "raw"])
        self.assertEqual(table.splitlines()[2],
                         "| cmsafe API | 1000 | 61.2 | 30.0 | 0.0 | 0.0 | 0.0 | 0.0 | 8.8 |")
        sym = ["     5.00%  libcmsafe.so  [.] cmsafe_get_events"] * 6
        self.assertEqual(storm.profile_symbols("cmsafe", sym),
                         ["cmsafe: 5.00%  libcmsafe.so  [.] cmsafe_get_events"] * 4)


class OptionsTest(unittest.TestCase):
    def test_defaults_follow_the_timed_runs(self):
        o = storm.parse_args(["--conns", "50", "--waves", "3", "--control"])
        self.assertEqual((o.conns, o.check_conns, o.waves, o.check_waves, o.control),
                         (50, 50, 3, 3, True))
        o = storm.parse_args(["--conns", "500", "--check-waves", "2", "--legacy-check", "asan"])
        self.assertEqual((o.check_conns, o.check_waves, o.legacy_check), (500, 2, "asan"))

    def test_bad_options_exit_2(self):
        for argv in (["--bogus"], ["--legacy-check", "gdb"], ["--conns", "many"], ["--conns"]):
            with self.assertRaises(SystemExit) as e:
                old, sys.stderr = sys.stderr, io.StringIO()
                try:
                    storm.parse_args(argv)
                finally:
                    sys.stderr = old
            self.assertEqual(e.exception.code, 2, argv)


class ReportsTest(unittest.TestCase):
    """--reports: each run's server writes what its library records, named by the run."""

    def storm(self, argv: list[str]) -> storm.Storm:
        g = guest.Guest("192.0.2.1", "rxe0", "ib", 1)
        s = storm.Storm(storm.parse_args(argv), g, io.StringIO())
        self.addCleanup(shutil.rmtree, s.tmp, True)
        s.root = "/src"
        return s

    def test_each_run_names_its_report(self):
        s = self.storm(["--reports", "--results", "target/storm/picture"])
        rep = "target/storm/picture/reports"
        cmd, shown = s.server_cmd("legacy", "plain")
        self.assertEqual(shown, ["LD_PRELOAD=target/release/libcmsafe_preload.so",
                                 "CMSAFE_MODE=safe",
                                 "CMSAFE_REPORT=%s/legacy-plain-%%p.json" % rep,
                                 "target/storm/storm_server_legacy"])
        self.assertEqual(cmd, ["env", "LD_PRELOAD=/src/target/release/libcmsafe_preload.so",
                               "CMSAFE_MODE=safe",
                               "CMSAFE_REPORT=/src/%s/legacy-plain-%%p.json" % rep,
                               "target/storm/storm_server_legacy"])
        # The checked runs keep their own variables, and the report its run's name.
        cmd, _ = s.server_cmd("legacy", "asan")
        self.assertEqual(cmd[0], "env")
        self.assertTrue(cmd[1].startswith("ASAN_OPTIONS="))
        self.assertIn("CMSAFE_REPORT=/src/%s/legacy-asan-%%p.json" % rep, cmd)
        cmd, _ = s.server_cmd("legacy", "valgrind")
        self.assertLess(cmd.index("CMSAFE_REPORT=/src/%s/legacy-valgrind-%%p.json" % rep),
                        cmd.index("valgrind"))
        cmd, shown = s.server_cmd("cmsafe", "asan")
        self.assertEqual(cmd, ["env", "CMSAFE_FLIGHT_DUMP=/src/%s/cmsafe-asan-flight.json" % rep,
                               "target/storm/asan/storm_server_cmsafe"])
        _, shown = s.server_cmd("cmsafe", "profile")
        self.assertEqual(shown[shown.index("--"):], [
            "--", "env", "CMSAFE_FLIGHT_DUMP=%s/cmsafe-profile-flight.json" % rep,
            "target/storm/storm_server_cmsafe"])
        # The raw server links neither library: nothing to write.
        self.assertEqual(s.server_cmd("raw", "plain")[0], ["target/storm/storm_server_raw"])

    def test_without_reports_nothing_is_written(self):
        s = self.storm([])
        self.assertFalse(s.o.reports)
        self.assertEqual(s.server_cmd("cmsafe", "plain")[0], ["target/storm/storm_server_cmsafe"])
        cmd, _ = s.server_cmd("legacy", "plain")
        self.assertFalse([v for v in cmd if v.startswith("CMSAFE_REPORT")])


class RecordTest(unittest.TestCase):
    def test_verdict_lines_are_recorded(self):
        out, record = io.StringIO(), io.StringIO()
        t = tally.Tally("storm", out, record)
        t.say("storm: a word")
        t.check("a", True, "fine")
        t.check("b", False, "broken")
        t.say("     | a log line")
        t.skip("c", "no IB CM")
        self.assertEqual(record.getvalue(), "ok   a: fine\nFAIL b: broken\nskip c: no IB CM\n")
        self.assertEqual(out.getvalue().splitlines(),
                         ["storm: a word", "ok   a: fine", "FAIL b: broken", "     | a log line",
                          "skip c: no IB CM"])
        self.assertEqual((t.passed, t.failed, t.apart), (1, 1, 1))


if __name__ == "__main__":
    unittest.main()
