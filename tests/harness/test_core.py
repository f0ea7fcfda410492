"""The harness package's core (guest, proc, tally, audit) on the host: no guest, no RDMA.

The audit checks are held to logs recorded from a real run in the Soft-RoCE guest
(tests/harness/data/misuse: the preload's misuse programs under audit and safe mode).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HARNESS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HARNESS)

from cmsafe_harness import audit, guest, proc, tally  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
TOKEN = "PDTOKEN-5e7d1c"


def recorded(mode: str, name: str) -> tuple[list[str], list[str], list[str]]:
    """A recorded run's stderr and stdout lines and its report files."""
    d = os.path.join(DATA, "misuse", mode)
    reports = sorted(os.path.join(d, f) for f in os.listdir(d)
                     if f.startswith(name + ".") and f.endswith(".jsonl"))
    return (proc.read_lines(os.path.join(d, name + ".err")),
            proc.read_lines(os.path.join(d, name + ".out")), reports)


class GuestTest(unittest.TestCase):
    def test_transport_from_node_type(self):
        self.assertEqual(guest.transport_of("4: RNIC\n"), "iwarp")
        self.assertEqual(guest.transport_of("1: CA\n"), "ib")

    def test_time_scale(self):
        self.assertEqual(guest.time_scale_of("8"), 8)
        self.assertEqual(guest.time_scale_of("99"), 99)
        for bad in (None, "", "0", "08", "100", "x", "-1"):
            self.assertEqual(guest.time_scale_of(bad), 1, bad)

    def test_from_env_reads_the_device(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        os.makedirs(os.path.join(root, "siw0"))
        with open(os.path.join(root, "siw0", "node_type"), "w") as f:
            f.write("4: RNIC\n")
        old = dict(os.environ)
        self.addCleanup(os.environ.update, old)
        os.environ.update(RXE_ADDR="10.0.2.15", RXE_DEV="siw0", RXE_TIME_SCALE="8")
        g = guest.from_env("t", root)
        self.assertEqual((g.addr, g.dev, g.transport, g.time_scale, g.transport_name),
                         ("10.0.2.15", "siw0", "iwarp", 8, "iWARP"))

    def test_from_env_outside_a_guest_exits_2(self):
        old = dict(os.environ)
        self.addCleanup(os.environ.update, old)
        os.environ.pop("RXE_ADDR", None)
        with self.assertRaises(SystemExit) as e, _quiet_stderr():
            guest.from_env("t")
        self.assertEqual(e.exception.code, 2)


class _quiet_stderr:
    def __enter__(self):
        self.old, sys.stderr = sys.stderr, io.StringIO()

    def __exit__(self, *exc):
        sys.stderr = self.old


class ProcTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.log = os.path.join(self.dir, "sub", "p")

    def test_read_lines_like_mapfile(self):
        p = os.path.join(self.dir, "f")
        for text, want in ((b"a\nb\n", ["a", "b"]), (b"a\nb", ["a", "b"]), (b"", []),
                           (b"\n", [""]), (b"x\xff\n", ["x\ufffd"])):
            with open(p, "wb") as f:
                f.write(text)
            self.assertEqual(proc.read_lines(p), want, text)
        self.assertEqual(proc.read_lines(os.path.join(self.dir, "none")), [])

    def test_exit_status_and_logs(self):
        r = proc.run(["sh", "-c", "echo out; echo err >&2; exit 3"], self.log, timeout=10)
        self.assertEqual((r.rc, r.hung, r.out, r.err), (3, False, ["out"], ["err"]))

    def test_signal_is_128_plus_n(self):
        r = proc.run(["sh", "-c", "kill -ABRT $$"], self.log, timeout=10)
        self.assertEqual(r.rc, 128 + signal.SIGABRT)

    def test_environment_reaches_the_program(self):
        env = proc.environment({"CMSAFE_T": "v", "HOME": None})
        r = proc.run(["sh", "-c", 'echo "$CMSAFE_T ${HOME-unset}"'], self.log, env=env)
        self.assertEqual(r.out, ["v unset"])

    def test_timeout_kills(self):
        r = proc.run(["sleep", "30"], self.log, timeout=0.3)
        self.assertTrue(r.hung)
        self.assertEqual(r.rc, 128 + signal.SIGTERM)
        self.assertLess(r.dur, 10)

    def test_a_zombie_is_dying_and_a_sleeper_is_not(self):
        sleeper = subprocess.Popen(["sleep", "30"])
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        done = subprocess.Popen(["true"])
        self.addCleanup(done.wait)
        # Not reaped (no poll or wait): a zombie until the cleanup's wait.
        def state() -> str:
            with open("/proc/%d/stat" % done.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0]

        while state() != "Z":
            time.sleep(0.01)
        self.assertTrue(proc._dying(done.pid))
        self.assertFalse(proc._dying(sleeper.pid))
        self.assertFalse(proc._dying(2 ** 22 + 1))  # no such process

    def test_term_ignored_then_kill(self):
        r = proc.run(["sh", "-c", "trap '' TERM; echo ready >&2; while :; do sleep 1; done"],
                     self.log, marker="^ready$", hang_wait=10, hang_grace=0.2)
        self.assertTrue(r.hung)
        self.assertEqual(r.rc, 128 + signal.SIGKILL)

    def test_marker_then_grace(self):
        r = proc.run(["sh", "-c", "echo 'step: calling' >&2; sleep 30"], self.log,
                     marker="^step: calling", hang_wait=10, hang_grace=0.3)
        self.assertTrue(r.hung)
        self.assertEqual(r.err, ["step: calling"])

    def test_marker_but_program_returns(self):
        r = proc.run(["sh", "-c", "echo 'step: calling' >&2; echo done"], self.log,
                     marker="^step: calling", hang_wait=10, hang_grace=5)
        self.assertEqual((r.hung, r.rc, r.out), (False, 0, ["done"]))

    def test_old_logs_go_first(self):
        os.makedirs(os.path.dirname(self.log))
        with open(self.log + ".err", "w") as f:
            f.write("step: calling\n")
        r = proc.run(["sh", "-c", "sleep 0.5; echo fine"], self.log,
                     marker="^step: calling", hang_wait=10, hang_grace=0.1)
        self.assertFalse(r.hung)
        self.assertEqual((r.err, r.out), ([], ["fine"]))

    def test_missing_program_is_status_127(self):
        missing = os.path.join(self.dir, "target", "bench", "syscall_loop")
        r = proc.run([missing, "api"], self.log, timeout=10)
        self.assertEqual((r.rc, r.hung, r.err), (127, False,
                                                 [missing + ": No such file or directory"]))
        b = proc.Background([missing], self.log + "-bg")
        self.assertEqual(b.wait(10), 127)
        self.assertEqual(b.err(), [missing + ": No such file or directory"])

    def test_merged_is_one_log_in_the_order_written(self):
        r = proc.run(["sh", "-c", "echo out; echo err >&2; echo out2; exit 3"], self.log,
                     timeout=10, merged=True)
        self.assertEqual((r.rc, r.out, r.err), (3, ["out", "err", "out2"], []))
        self.assertEqual(proc.read_lines(self.log), ["out", "err", "out2"])
        self.assertFalse(os.path.exists(self.log + ".out") or os.path.exists(self.log + ".err"))
        r = proc.run(["sh", "-c", "echo 'step: calling' >&2; sleep 30"], self.log, merged=True,
                     marker="^step: calling", hang_wait=10, hang_grace=0.2)
        self.assertTrue(r.hung)
        self.assertEqual(r.out, ["step: calling"])
        missing = os.path.join(self.dir, "none")
        r = proc.run([missing], self.log, timeout=10, merged=True)
        self.assertEqual((r.rc, r.out), (127, [missing + ": No such file or directory"]))

    def test_merged_background(self):
        b = proc.Background(["sh", "-c", "echo listening >&2; echo served; exit 5"], self.log,
                            merged=True)
        self.assertTrue(b.wait_line("^listening$", 10))
        self.assertEqual(b.wait(10), 5)
        self.assertEqual((b.out(), b.err()), (["listening", "served"], []))
        self.assertEqual(proc.read_lines(self.log), ["listening", "served"])

    def test_secs_text_truncates(self):
        self.assertEqual((proc.secs_text(0.09), proc.secs_text(12.96)), ("0.0", "12.9"))

    def test_dur_text_truncates(self):
        r = proc.Run(["x"], "l", dur=2.99)
        self.assertEqual(r.dur_text, "2.9")

    def test_background_line_and_stop(self):
        b = proc.Background(["sh", "-c", "echo listening; exec sleep 30"], self.log)
        self.assertTrue(b.wait_line("^listening$", 10))
        self.assertFalse(b.wait_line("^never$", 0.2))
        self.assertTrue(b.alive())
        self.assertEqual(b.stop(signal.SIGINT), 128 + signal.SIGINT)
        self.assertFalse(b.alive())

    def test_started_as_a_background_job(self):
        # A suite run from a script in the background (`nohup make test >log &`) inherits
        # SIGINT, SIGQUIT and SIGHUP ignored. A harness started that way still stops its
        # programs with SIGINT (130, not killed after its grace: 137), its programs see each
        # signal at its default, and the harness itself still ignores a hangup.
        script = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from cmsafe_harness import proc
b = proc.Background(["sh", "-c", "echo listening; exec sleep 30"], sys.argv[2])
assert b.wait_line("^listening$", 10)
print(b.stop(signal.SIGINT))
for sig in (signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
    r = proc.run(["sh", "-c", "kill -%d $$; exit 9" % sig], sys.argv[2] + ".%d" % sig, timeout=10)
    print(r.rc)
os.kill(os.getpid(), signal.SIGHUP)
print("after hangup")
"""
        def ignored():
            for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)

        out = subprocess.run([sys.executable, "-c", script, HARNESS, self.log],
                             preexec_fn=ignored, stdout=subprocess.PIPE, timeout=60,
                             env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(out.stdout.decode().split("\n"),
                         [str(128 + signal.SIGINT), str(128 + signal.SIGQUIT),
                          str(128 + signal.SIGHUP), str(128 + signal.SIGTERM), "after hangup", ""])
        self.assertEqual(out.returncode, 0)

    def test_background_ends_by_itself(self):
        b = proc.Background(["sh", "-c", "echo bye >&2; exit 4"], self.log)
        self.assertEqual(b.wait(10), 4)
        self.assertFalse(b.wait_line("^listening$", 5))
        self.assertEqual(b.err(), ["bye"])


class TallyTest(unittest.TestCase):
    def test_lines_and_counts(self):
        s = io.StringIO()
        t = tally.Tally("h", s)
        t.verdict("raw/a [1.0s]")
        t.problem("exit status 1, want 0")
        t.verdict("audit/a [2.0s]", [("stderr (x.err, last lines)", ["l%d" % i for i in range(20)])])
        t.problem("dropped by the skip")
        t.skip("audit/b", "siw has no UD")
        t.check("wave 1", True, "20 connections")
        t.check("wave 2", False, "19 connections")
        self.assertEqual(t.finish(), 1)
        lines = s.getvalue().splitlines()
        self.assertEqual(lines[:4], ["ok   raw/a [1.0s]", "FAIL audit/a [2.0s]",
                                     "     - exit status 1, want 0",
                                     "     stderr (x.err, last lines):"])
        self.assertEqual(lines[4:16], ["     | l%d" % i for i in range(8, 20)])
        self.assertEqual(lines[16:], ["skip audit/b: siw has no UD", "ok   wave 1: 20 connections",
                                      "FAIL wave 2: 19 connections",
                                      "h: 2 passed, 2 failed, 1 apart"])

    def test_all_passed_exits_0(self):
        t = tally.Tally("h", io.StringIO())
        t.check("x", True)
        self.assertEqual(t.finish(), 0)


class AuditTest(unittest.TestCase):
    kinds = ["use-after-ack", "never-acked", "double-ack", "late-ack"]

    def test_use_after_ack_recorded(self):
        err, out, reports = recorded("audit", "use_after_ack")
        before = "^step: acking CONNECT_REQUEST, then reading"
        self.assertEqual(audit.check_finding(err, "use-after-ack", "3", "CONNECT_REQUEST", before,
                                             "^step: read done", self.kinds), [])
        self.assertEqual(audit.check_summary(err, "4", "1"), [])
        self.assertEqual(audit.check_no_token(err, TOKEN), [])
        r = audit.check_report(reports, "use-after-ack", "3", "CONNECT_REQUEST", "4", TOKEN)
        self.assertEqual(r.problems, [])
        self.assertEqual(r.types, ["ADDR_RESOLVED", "ROUTE_RESOLVED", "CONNECT_REQUEST", "REJECTED"])
        self.assertEqual(r.event(3)["private_data_len"], 56)
        self.assertEqual(audit.check_summary_details(err, r, "use-after-ack", "3"), [])

    def test_a_finding_after_the_summary_is_added_to_it(self):
        err, _, _ = recorded("audit", "use_after_ack")
        after = "==cmsafe== after the summary: pid 1, 2 more findings, 3 findings in all"
        self.assertEqual(audit.check_summary(err + [after], "4", "3"), [])
        self.assertEqual(audit.check_summary(err + [after], "4", "1"),
                         ["summary says 3 findings, want 1 (finding records in the JSON report): "
                          + audit.summary_lines(err)[0] + " / " + after])

    def test_wrong_expectations_are_named(self):
        err, _, reports = recorded("audit", "use_after_ack")
        p = audit.check_finding(err, "use-after-ack", "2", "ROUTE_RESOLVED", "^step: read done", "",
                                self.kinds)
        self.assertEqual(len(p), 3, p)
        self.assertIn("no use-after-ack line with seq=2", p[0])
        self.assertIn("no use-after-ack line with type=ROUTE_RESOLVED", p[1])
        self.assertIn("does not follow the marker '^step: read done' (line 3)", p[2])
        self.assertEqual(audit.check_finding(err, "never-acked", "*", "*", "", "", self.kinds),
                         ["no '==cmsafe== never-acked: ' line on stderr"])
        self.assertEqual(audit.check_no_findings(err, self.kinds)[0][:42],
                         "unexpected finding: ==cmsafe== use-after-a")
        self.assertEqual(audit.check_summary(err, "5", "0", 2),
                         ["1 summary lines, want 2",
                          "summary says 4 events, the program fetched 5: " + audit.summary_lines(err)[0],
                          "summary says 1 findings, want 0 (finding records in the JSON report): "
                          + audit.summary_lines(err)[0]])
        r = audit.check_report(reports, "-", "*", "*", "3", "")
        self.assertEqual(len(r.problems), 2, r.problems)
        self.assertTrue(r.problems[0].startswith("unexpected finding record: "))
        self.assertTrue(r.problems[1].startswith("JSON: 4 event records, want 3"))

    def test_record_fields_come_from_the_writers(self):
        need = audit.record_fields()
        self.assertEqual(sorted(need), ["address", "destroy", "event", "finding"])
        self.assertEqual(need["destroy"], ["id", "thread", "at_ns"])
        self.assertEqual(need["event"][:4], ["seq", "type", "status", "id"])
        _, problems = audit.report_record("r.jsonl", 3, '{"record":"flight","seq":1}')
        self.assertEqual(problems, ['r.jsonl:3: not an address or a destroy or an event or a '
                                    'finding record: {"record":"flight","seq":1}'])

    def test_token_in_a_report_is_named(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        p = os.path.join(d, "r.1.jsonl")
        with open(p, "w") as f:
            f.write('{"record":"event","seq":1,"type":"RDMA_CM_EVENT_X","status":0,"id":"0x1",'
                    '"listen_id":null,"thread":1,"get_ns":1,"ack_ns":2,"private_data_len":3,'
                    '"internal":false,"pd":"%s"}\nnot json\n{"record":"ev' % TOKEN)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            r = audit.check_report([p, os.path.join(d, "missing.jsonl")], token=TOKEN)
        self.assertEqual(r.problems, [
            "private data bytes (%s...) in the JSON report r.1.jsonl" % TOKEN,
            "JSON r.1.jsonl:1: type 'RDMA_CM_EVENT_X' keeps the RDMA_CM_EVENT_ prefix",
            "JSON r.1.jsonl:2 is not JSON (Expecting value: line 1 column 1 (char 0)): not json",
            "no JSON report missing.jsonl"])
        # The cut last line (a process killed mid-write) is skipped, and said.
        self.assertEqual(err.getvalue(), "r.1.jsonl: the last line is cut (13 bytes, no "
                                         "newline): skipped\n")

    def test_safe_mode_names_no_use_after_ack(self):
        err, out, reports = recorded("safe", "use_after_ack")
        self.assertEqual(audit.check_no_findings(err, self.kinds), [])
        self.assertEqual(audit.check_summary(err, "4", "0"), [])
        self.assertEqual(audit.check_report(reports, "-", "*", "*", "4", TOKEN).problems, [])

    def test_summary_details_count_mismatch(self):
        err, _, reports = recorded("audit", "use_after_ack")
        r = audit.check_report(reports)
        r.events = r.events[:3]
        r.findings = []
        p = audit.check_summary_details(err, r, "use-after-ack", "4")
        self.assertEqual(p, ["summary counts 1 REJECTED, the JSON report none",
                             "summary counts 1 use-after-ack, the JSON report 0 finding records",
                             "the summary's first use-after-ack example is not seq=4: "
                             + [x for x in err if x.startswith("==cmsafe==   use-after-ack")][0]])


if __name__ == "__main__":
    unittest.main()
