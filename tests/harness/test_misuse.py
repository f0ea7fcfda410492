"""The misuse harness's checks (cmsafe_harness/misuse.py) on logs recorded in the Soft-RoCE
guest (tests/harness/data/misuse/<mode>/): each check passes on its recorded run with the verdict
text the harness has always printed, and names the problem of a run edited to go wrong.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import audit, guest, misuse, proc, record, tally  # noqa: E402
from cmsafe_harness import misuse_cases as cases  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "misuse")
ROOT = os.path.dirname(os.path.dirname(HERE))
KINDS = tuple(audit.finding_kinds(ROOT))
IB = misuse.Ctx(KINDS, cases.TRANSPORTS["ib"], "glibc 2.36")
IWARP = misuse.Ctx(KINDS, cases.TRANSPORTS["iwarp"], "glibc 2.36")
KILLED = 143  # a hung program's status: SIGTERM


# Where the recorded reports get their pids back (record.materialize), once per test process.
REPORTS = tempfile.mkdtemp(prefix="cmsafe-misuse-fixtures.")


def recorded(mode: str, name: str, rc: int | None = None, hung: bool | None = None) -> proc.Run:
    """A recorded run (make harness-record): its logs, its reports under their pids again, its
    pid and status from NAME.run (RC and HUNG, when given, instead)."""
    d = os.path.join(DATA, mode)
    log, meta = record.materialize(d, name, os.path.join(REPORTS, mode))
    return proc.Run([name], log, rc=meta.get("rc", 0) if rc is None else rc,
                    hung=meta.get("hung", False) if hung is None else hung,
                    pid=meta.get("pid", 0),
                    out=proc.read_lines(os.path.join(d, name + ".out")),
                    err=proc.read_lines(os.path.join(d, name + ".err")))


def case(name: str) -> cases.Misuse:
    return [c for c in cases.MISUSE if c.name == name][0]


def edited(r: proc.Run, err=None, out=None, rc=None, hung=None) -> proc.Run:
    """A copy of R with other logs or another status (its report files stay R's)."""
    return proc.Run(r.argv, r.log, rc=r.rc if rc is None else rc, hung=r.hung if hung is None else hung,
                    pid=r.pid, out=list(r.out if out is None else out),
                    err=list(r.err if err is None else err))


def without(lines, prefix):
    return [x for x in lines if not x.startswith(prefix)]


class Scratch(unittest.TestCase):
    """A test that edits a recorded run's report: copies of its files in a scratch directory."""

    def copy(self, mode: str, name: str, **status) -> proc.Run:
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        r = recorded(mode, name, **status)
        for f in os.listdir(os.path.dirname(r.log)):
            if f.startswith(name + "."):
                shutil.copy(os.path.join(os.path.dirname(r.log), f), d)
        r.log = os.path.join(d, name)
        return r


class InstalledLauncherTest(unittest.TestCase):
    """The packages' suite runs audit and safe through the installed cmsafe-audit."""

    def setUp(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        old = os.getcwd()
        os.chdir(d)
        self.addCleanup(os.chdir, old)
        self.launcher = os.path.join(d, "cmsafe-audit")
        with open(self.launcher, "w") as f:
            f.write('#!/bin/sh\necho "args: $*"\necho "report: ${CMSAFE_REPORT-unset}"\n')
        os.chmod(self.launcher, 0o755)
        g = guest.Guest("192.0.2.1", "rxe0", "ib", 1)
        self.h = misuse.Harness(d, g, IB, tally.Tally("test"))
        self.addCleanup(shutil.rmtree, self.h.reports, True)
        self.h.audit, self.h.lib = self.launcher, os.path.join(d, "libcmsafe_preload.so")

    def test_a_report_is_asked_for_unless_the_run_sets_its_own(self):
        r = self.h.run("audit", "cancel_report", ["true"], env=misuse.cancel_env("report"),
                       program=False)
        self.assertEqual(r.out[0], "args: --report %s -- true"
                         % os.path.join(self.h.reports, "audit.cancel_report.%p.jsonl"))
        self.assertEqual(r.out[1], "report: unset")
        r = self.h.run("safe", "cancel_noreport", ["true"], env=misuse.cancel_env("noreport"),
                       program=False)
        self.assertEqual(r.out, ["args: --safe -- true", "report: "])


class CasesTest(unittest.TestCase):
    def test_tables(self):
        self.assertEqual(len({c.name for c in cases.MISUSE}), len(cases.MISUSE))
        self.assertEqual({c.klass for c in cases.MISUSE}, {"exit", "hang", "abort", "kept"})
        self.assertTrue(all(c.kind in KINDS for c in cases.MISUSE))
        # Every program the harness runs is a C file of c-tests/preload/, and every misuse
        # program there is run: a new case is its file and its row.
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "c-tests",
                           "preload")
        files = {f[:-2] for f in os.listdir(src) if f.endswith(".c")}
        self.assertEqual(sorted(p for p in cases.PROGRAMS if p not in files), [])
        self.assertEqual(sorted(f for f in files if f.startswith("misuse_")
                                and f not in cases.PROGRAMS), [])

    def test_transports(self):
        self.assertEqual(cases.TRANSPORTS["iwarp"].req_len, 35)
        ib, iw = cases.TRANSPORTS["ib"], cases.TRANSPORTS["iwarp"]
        self.assertEqual((ib.unanswered_status, ib.unanswered_pdlen, ib.qp_event), (8, 148, "SQ_DRAINED"))
        self.assertEqual((iw.unanswered_status, iw.unanswered_pdlen, iw.qp_event), (-104, 0, "QP_FATAL"))

    def test_tcache_key(self):
        self.assertTrue(misuse.tcache_key_is_pointer("glibc 2.31"))
        self.assertTrue(misuse.tcache_key_is_pointer("glibc 2.29"))
        for v in ("glibc 2.28", "glibc 2.34", "glibc 2.36", "", "musl"):
            self.assertFalse(misuse.tcache_key_is_pointer(v), v)

    def test_stdin_is_read_only(self):
        # As bash gives a background job: a write to fd 0 fails (misuse_destroyed_channel's).
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        fd = os.open(os.devnull, os.O_RDONLY)
        self.addCleanup(os.close, fd)
        script = "echo x >&0 2>/dev/null && echo took it || echo refused"
        self.assertEqual(proc.run(["sh", "-c", script], os.path.join(d, "l"), stdin=fd).out, ["refused"])
        self.assertEqual(proc.run(["sh", "-c", script], os.path.join(d, "l")).out, ["took it"])

    def test_normal_diff(self):
        self.assertEqual(misuse.normal_diff(["a", "b", "c"], ["a", "x", "c", "d"]),
                         ["2c2", "< b", "---", "> x", "3a4", "> d"])
        self.assertEqual(misuse.normal_diff(["a", "b"], ["b"]), ["1d0", "< a"])


class EveryRecordedRowTest(unittest.TestCase):
    """Each CM event misuse recorded by make harness-record (its NAME.run holds the status)
    passes its row's checks in each mode recorded: a new case's fixtures are checked with no
    test written for them."""

    def test_recorded_runs_pass_their_rows(self):
        seen = 0
        for c in cases.MISUSE:
            for mode in cases.MODES:
                run = os.path.join(DATA, mode, c.name + record.RUN)
                if not os.path.exists(run):
                    continue
                with open(run) as f:
                    if "rc" not in json.load(f):
                        continue  # recorded before the harness wrote the status
                r = recorded(mode, c.name)
                if mode == "raw":
                    p, _ = misuse.check_misuse_raw(c, r, IB)
                else:
                    p, _ = misuse.check_misuse_preloaded(mode, c, r, IB)
                self.assertEqual(p, [], "%s/%s" % (mode, c.name))
                seen += 1
        self.assertGreaterEqual(seen, 6)


class MisuseRawTest(unittest.TestCase):
    def test_exit(self):
        r = recorded("raw", "use_after_ack")
        self.assertEqual(misuse.check_misuse_raw(case("use_after_ack"), r, IB),
                         ([], "raw/use_after_ack: ran to the end, exit 0"))

    def test_hang(self):
        r = recorded("raw", "destroy_with_unacked", KILLED, True)
        self.assertEqual(misuse.check_misuse_raw(case("destroy_with_unacked"), r, IB), (
            [], "raw/destroy_with_unacked: blocked in the call after 'calling rdma_destroy_id(client)'"))

    def test_kept_and_abort(self):
        self.assertEqual(misuse.check_misuse_raw(case("double_ack"), recorded("raw", "double_ack", 134), IB),
                         ([], "raw/double_ack: died with status 134 at the misuse"))
        r = recorded("raw", "retry_reused_slot", 139)
        self.assertEqual(misuse.check_misuse_raw(case("retry_reused_slot"), r, IB),
                         ([], "raw/retry_reused_slot: died with status 139 at the misuse"))

    def test_not_provoked(self):
        r = recorded("raw", "destroy_with_unacked", 0, False)
        p, _ = misuse.check_misuse_raw(case("destroy_with_unacked"), r, IB)
        self.assertEqual(p, ["did not block without the preload (exit 0): the misuse is not provoked"])
        r = recorded("raw", "double_ack", 0)
        p, text = misuse.check_misuse_raw(case("double_ack"), r, IB)
        self.assertEqual(p, ["exit status 0 (hung=0), want death by a signal (the misuse's harm)"])
        r = edited(recorded("raw", "use_after_ack"), err=["==cmsafe== summary: x"])
        p, _ = misuse.check_misuse_raw(case("use_after_ack"), r, IB)
        self.assertEqual(p, ["never reached the misuse ('^step: acking CONNECT_REQUEST, then reading')",
                             "==cmsafe== output without the preload"])

    def test_destroyed_channel_on_bullseye(self):
        # The freed channel's fd read as 0 there: the write to a read-only stdin failed.
        r = recorded("bullseye/raw", "destroyed_channel")
        self.assertEqual(r.err[-1], "step: rdma_get_cm_event on the destroyed channel returned -1 (errno EBADF)")
        self.assertEqual(misuse.check_misuse_raw(case("destroyed_channel"), r, IB),
                         ([], "raw/destroyed_channel: ran to the end, exit 0"))
        hung = edited(r, err=r.err[:-1], out=[], rc=KILLED, hung=True)
        self.assertEqual(misuse.check_misuse_raw(case("destroyed_channel"), hung, IB)[0],
                         ["hung (killed after the timeout)"])

    def test_transport_decides_the_request(self):
        p, _ = misuse.check_misuse_raw(case("use_after_ack"), recorded("raw", "use_after_ack"), IWARP)
        self.assertEqual(p, ["the program did not see private_data_len=35 (as without the preload): "
                             "CONNECT_REQUEST private_data_len=56"])
        p, _ = misuse.check_misuse_raw(case("retry_reused_slot"), recorded("raw", "retry_reused_slot", 139),
                                       IWARP)
        self.assertEqual(p, ["the first connect did not get REJECTED with status -104 (no RDMA peer listening)"])

    def test_freed_id_proof(self):
        # Recorded on bullseye (glibc 2.31): raw, rdma_reject on the freed id returned EBADF; the
        # audit run of the same program names it (the proof's run is that one again).
        c = case("destroyed_id")
        raw = recorded("bullseye/raw", "destroyed_id", 0)
        bullseye = misuse.Ctx(KINDS, IB.tx, "glibc 2.31")
        self.assertEqual(misuse.check_misuse_raw(c, raw, bullseye)[0],
                         ["exit status 0 (hung=0), want death by a signal (the misuse's harm)"])
        self.assertTrue(misuse.needs_freed_id_proof(c, raw, bullseye))
        self.assertFalse(misuse.needs_freed_id_proof(c, raw, IB))
        self.assertFalse(misuse.needs_freed_id_proof(case("double_ack"), raw, bullseye))
        proof = recorded("bullseye/audit", "destroyed_id", 0)
        checked = misuse.check_freed_id_proof(c, proof, bullseye)
        self.assertEqual(checked[0], [])
        self.assertTrue(checked[1].startswith(
            "exit 0, rdma_reject returned -1 (EBADF), no signal: glibc 2.31's tcache key is a heap "
            "pointer (before 2.34); the audit here names it: ==cmsafe== use-after-destroy-id: seq=0"))
        self.assertLessEqual(len(checked[1]), 400)
        p, text = misuse.check_misuse_raw(c, raw, bullseye, checked)
        self.assertEqual((p, text), ([], "raw/destroyed_id: " + checked[1]))
        # The audit must name it at rdma_reject, not elsewhere.
        wrong = edited(proof, err=[x.replace(": rdma_reject on ", ": rdma_accept on ") for x in proof.err])
        p, _ = misuse.check_freed_id_proof(c, wrong, bullseye)
        self.assertEqual(len(p), 1)
        self.assertTrue(p[0].startswith(
            "no signal and rdma_reject returned -1 (EBADF) on glibc 2.31, but the audit run did not "
            "name use-after-destroy-id at rdma_reject: ==cmsafe== use-after-destroy-id: "), p[0])
        p, _ = misuse.check_freed_id_proof(c, edited(proof, err=[]), bullseye)
        self.assertTrue(p[0].endswith("at rdma_reject: no finding"), p)


class MisusePreloadedTest(Scratch):
    def check(self, mode, name, rc=0, hung=False, ctx=IB):
        r = recorded(mode, name, rc, hung)
        return misuse.check_misuse_preloaded(mode, case(name), r, ctx)

    def test_exit(self):
        p, text = self.check("audit", "never_acked")
        self.assertEqual(p, [])
        self.assertEqual(text, "audit/never_acked: exit 0; ==cmsafe== never-acked: seq=3 type=CONNECT_REQUEST "
                               "id=0x556bca504370 thread=302 at exit: never acked: held 33.3 ms until exit")
        p, text = self.check("audit", "foreign_ack")
        self.assertEqual(p, [])
        self.assertEqual(len(text), len("audit/foreign_ack: exit 0; ") + 150)

    def test_hang(self):
        p, text = self.check("audit", "destroy_with_unacked", KILLED, True)
        self.assertEqual(p, [])
        self.assertTrue(text.startswith("audit/destroy_with_unacked: blocked after the finding line, as "
                                        "without the preload; ==cmsafe== destroy-with-unacked: seq=3 "
                                        "type=REJECTED"), text)
        self.assertEqual(self.check("audit", "destroy_listener_with_unacked", KILLED, True)[0], [])
        p, text = self.check("safe", "destroy_with_unacked")
        self.assertEqual(p, [])
        self.assertTrue(text.startswith("safe/destroy_with_unacked: the call returned, exit 0; "), text)

    def test_abort(self):
        p, text = self.check("audit", "destroyed_id", 139)
        self.assertEqual(p, [])
        self.assertTrue(text.startswith(
            "audit/destroyed_id: died with status 139 after the finding line (the call passed on to "
            "librdmacm, as without the preload); ==cmsafe== use-after-destroy-id: seq=0"), text)
        self.assertEqual(self.check("audit", "retry_destroyed_id", 139)[0], [])
        self.assertEqual(self.check("safe", "destroyed_id")[0], [])
        self.assertEqual(self.check("safe", "retry_destroyed_id")[0], [])
        self.assertEqual(self.check("safe", "destroyed_channel")[0], [])

    def test_kept(self):
        p, text = self.check("audit", "double_ack")
        self.assertEqual(p, [])
        p, text = self.check("safe", "double_ack")
        self.assertEqual(p, [])
        self.assertTrue(text.startswith("safe/double_ack: exit 0; ==cmsafe== double-ack: seq=2 "
                                        "type=ROUTE_RESOLVED id=0x55af286601a0 thread=561"), text)

    def test_safe_use_after_ack_reads_the_copy(self):
        self.assertEqual(self.check("safe", "use_after_ack"), (
            [], "safe/use_after_ack: exit 0, read the right bytes after the ack, no finding (the read is safe)"))
        r = recorded("safe", "use_after_ack")
        r.out = [x.replace("use-after-ack read: PDTOKEN", "use-after-ack read: XXTOKEN") for x in r.out]
        p, _ = misuse.check_misuse_preloaded("safe", case("use_after_ack"), r, IB)
        self.assertEqual(p, ["safe mode read 'XXTOKEN-5e7d1c-cmsafe-misuse-probe' after the ack, want "
                             "'PDTOKEN-5e7d1c-cmsafe-misuse-probe'"])

    def test_audit_use_after_ack(self):
        p, text = self.check("audit", "use_after_ack")
        self.assertEqual(p, [])
        self.assertTrue(text.startswith("audit/use_after_ack: exit 0; ==cmsafe== use-after-ack: seq=3"))

    def test_hang_that_returns(self):
        # The audit run's logs as if the destroy had returned: not blocked, so every check of a
        # run to its end applies, and the killed run's short report fails them.
        r = recorded("audit", "destroy_with_unacked", 0, False)
        r.err.insert(1, "step: rdma_destroy_id(client) returned")
        p, text = misuse.check_misuse_preloaded("audit", case("destroy_with_unacked"), r, IB)
        self.assertEqual(p, [
            "did not block in audit mode (exit 0); without the preload it blocks",
            "the blocking call returned in audit mode",
            "the destroy-with-unacked line (stderr line 3) comes after the marker "
            "'^step: rdma_destroy_id\\(client\\) returned' (line 2)",
            "JSON: 2 event records, want 3 (types: ADDR_RESOLVED ROUTE_RESOLVED)",
            "no event record seq=3 in the JSON report (1:ADDR_RESOLVED:0:0,2:ROUTE_RESOLVED:0:0)",
            "no '==cmsafe== summary:' line on stderr at exit",
            "no '==cmsafe==   events by type: ...' summary line",
            "no summary line with the held time's median and max",
            "no summary line '==cmsafe==   destroy-with-unacked: <count> (first: ...)'"])

    def test_finding_before_its_marker(self):
        r = recorded("audit", "destroy_with_unacked", KILLED, True)
        finding = [x for x in r.err if x.startswith("==cmsafe== destroy-with-unacked: ")]
        r.err = finding + without(r.err, "==cmsafe== destroy-with-unacked: ")
        p, _ = misuse.check_misuse_preloaded("audit", case("destroy_with_unacked"), r, IB)
        self.assertEqual(p, ["the destroy-with-unacked line (stderr line 1) does not follow the marker "
                             "'^step: calling rdma_destroy_id\\(client\\)' (line %d)"
                             % 2])

    def test_destroy_says_it_waits(self):
        r = recorded("audit", "destroy_with_unacked", KILLED, True)
        r.err = [x.replace("will wait forever", "waits") for x in r.err]
        p, _ = misuse.check_misuse_preloaded("audit", case("destroy_with_unacked"), r, IB)
        self.assertEqual(p, ["the destroy-with-unacked line does not say 'rdma_destroy_id will wait "
                             "forever for these 1 events'"])

    def test_transport_decides_the_records(self):
        p, _ = self.check("audit", "never_acked", ctx=IWARP)
        self.assertEqual(p, ["the JSON event record seq=3 (CONNECT_REQUEST) has private_data_len 56, "
                             "want 35 (iWARP)"])
        # Killed before its ack, the audit's report may lack the event: safe mode's has it.
        self.assertEqual(self.check("audit", "destroy_with_unacked", KILLED, True, ctx=IWARP)[0], [])
        p, _ = self.check("safe", "destroy_with_unacked", ctx=IWARP)
        self.assertEqual(p, ["the JSON event record seq=3 (REJECTED) has status 8, want -104 (iWARP)",
                             "the JSON event record seq=3 (REJECTED) has private_data_len 148, want 0 (iWARP)"])

    def test_report_and_summary_disagree(self):
        r = self.copy("safe", "double_ack")
        with open(misuse.report_of(r)) as f:
            lines = f.readlines()
        with open(misuse.report_of(r), "w") as f:
            f.writelines(x for x in lines if '"record":"finding"' not in x.replace(" ", ""))
        p, _ = misuse.check_misuse_preloaded("safe", case("double_ack"), r, IB)
        self.assertEqual(len(p), 3, p)
        self.assertTrue(p[0].startswith("no finding record double-ack seq=2 type=ROUTE_RESOLVED in the JSON "
                                        "report (finding records: [])"), p)
        self.assertTrue(p[1].startswith("summary says 1 findings, want 0"), p)
        self.assertEqual(p[2], "summary counts 1 double-ack, the JSON report 0 finding records")

    def test_killed_run_keeps_no_summary_check(self):
        r = recorded("audit", "destroyed_id", 139)
        r.err = without(r.err, "==cmsafe==  ")
        self.assertEqual(misuse.check_misuse_preloaded("audit", case("destroyed_id"), r, IB)[0], [])


class ThreadsTest(Scratch):
    def test_recorded(self):
        for mode in ("raw", "audit", "safe"):
            p, threads = misuse.check_threads(mode, recorded(mode, "use_after_ack_threads"), IB)
            self.assertEqual(p, [], mode)
        self.assertEqual(threads, [])
        p, threads = misuse.check_threads("audit", recorded("audit", "use_after_ack_threads"), IB)
        self.assertEqual(threads, ["450", "451"])
        self.assertEqual(misuse.threads_text("audit", 10, threads),
                         "audit/use_after_ack_threads: 10 runs, each with two use-after-ack findings, "
                         "seq=2 and seq=4, by two threads (last: 450 451); both reads got the intact copy")

    def test_a_lost_finding(self):
        r = recorded("audit", "use_after_ack_threads")
        r.err = [x for x in r.err if "seq=4 type=ROUTE_RESOLVED id=0x55cde809ffa0 thread=451:" not in x]
        p, threads = misuse.check_threads("audit", r, IB)
        self.assertEqual(p, ["1 use-after-ack lines, want 2 (one per thread)",
                             "use-after-ack lines for seq 2, want 2 and 4, once each",
                             "the two findings do not name two threads: 450"])

    def test_one_thread(self):
        r = recorded("audit", "use_after_ack_threads")
        r.err = [x.replace("thread=451:", "thread=450:") for x in r.err]
        p, _ = misuse.check_threads("audit", r, IB)
        self.assertEqual(p, ["the two findings do not name two threads: 450 450"])

    def test_a_reader_saw_junk(self):
        r = recorded("safe", "use_after_ack_threads")
        r.out = [x.replace("reader 2 read: type 2", "reader 2 read: type 0") for x in r.out]
        p, _ = misuse.check_threads("safe", r, IB)
        self.assertEqual(p, ["reader 2 did not read the intact copy (type 2, ROUTE_RESOLVED): " + " ".join(r.out)])


class FakeHarness(misuse.Harness):
    """The runner with recorded runs in place of programs: RUNS[(mode, name)] is a list, one
    recorded run per call (the last one again when it runs out)."""

    def __init__(self, runs):
        self.out = io.StringIO()
        super().__init__(ROOT, guest.Guest("192.0.2.1", "rxe0", "ib", 1), IB, tally.Tally("t", self.out))
        self.runs = runs
        self.calls = []

    def run(self, mode, name, argv, marker=None, env=None, grace=cases.HANG_GRACE, program=True):
        self.calls.append((mode, name, tuple(argv), marker, tuple(sorted((env or {}).items())), grace))
        queue = self.runs[(mode, name)]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def lines(self):
        return self.out.getvalue().splitlines()


class AnyRun(FakeHarness):
    """Every program "runs" with no output: each check fails, and is counted."""

    def __init__(self, ctx=IB):
        super().__init__({})
        self.ctx = ctx

    def run(self, mode, name, argv, marker=None, env=None, grace=cases.HANG_GRACE, program=True):
        self.calls.append((mode, name))
        return proc.Run(list(argv), os.path.join(DATA, "none", mode, name))


class RunnerTest(unittest.TestCase):
    def test_the_count_of_checks(self):
        # One verdict per mode for each row of the CM event misuses, and the other programs' own:
        # those fixed counts; 3 apart on iWARP. The completion-queue and async programs 15 each.
        n = len(cases.MISUSE)
        for ctx, only, want in ((IB, "", {"raw": 22 + n, "audit": 26 + n, "safe": 25 + n}),
                                (IWARP, "", {"raw": 22 + n, "audit": 26 + n, "safe": 25 + n}),
                                (IB, "cm", {"raw": 1 + n, "audit": 2 + n, "safe": 1 + n}),
                                (IB, "cq", {"raw": 5, "audit": 5, "safe": 5}),
                                (IWARP, "async", {"raw": 5, "audit": 5, "safe": 5})):
            h = AnyRun(ctx)
            for mode in cases.MODES:
                h.mode(mode, only)
            verdicts = [x.split("/")[0].split()[-1] for x in h.lines() if x.startswith(("ok", "FAIL"))]
            self.assertEqual({m: verdicts.count(m) for m in cases.MODES}, want, (ctx.tx.name, only))
            self.assertEqual(h.t.failed, sum(want.values()))
            self.assertEqual(h.t.apart, 3 if ctx is IWARP and only != "cm" else 0)
        # The runs: audit's two-thread program 10 times, its freed-id proofs never on glibc 2.36.
        h = AnyRun()
        h.mode("audit", "cm")
        self.assertEqual(h.calls.count(("audit", "use_after_ack_threads")), 1)  # stops at the failure
        self.assertFalse([c for c in h.calls if c[1].endswith(".raw-proof")])

    def test_threads_runs_ten_times_in_audit(self):
        h = FakeHarness({("audit", "use_after_ack_threads"): [recorded("audit", "use_after_ack_threads")]})
        h.threads("audit")
        self.assertEqual(len(h.calls), 10)
        self.assertEqual(h.lines(), [
            "ok   audit/use_after_ack_threads: 10 runs, each with two use-after-ack findings, seq=2 and "
            "seq=4, by two threads (last: 450 451); both reads got the intact copy [0.0s]"])

    def test_threads_stops_at_the_first_failure(self):
        good = recorded("audit", "use_after_ack_threads")
        bad = edited(good, err=without(good.err, "==cmsafe== summary: "))
        h = FakeHarness({("audit", "use_after_ack_threads"): [good, good, bad, good]})
        h.threads("audit")
        self.assertEqual(len(h.calls), 3)
        lines = h.lines()
        self.assertTrue(lines[0].startswith("FAIL audit/use_after_ack_threads: 10 runs"), lines)
        self.assertEqual(lines[1:3], ["     - no '==cmsafe== summary:' line on stderr at exit",
                                      "     - (run 3 of 10)"])
        self.assertEqual(lines[3], "     stderr (%s.err, last lines):" % bad.log)
        self.assertEqual(h.t.failed, 1)

    def test_no_rdma_takes_a_raw_reference(self):
        raw = recorded("raw", "no_rdma")
        h = FakeHarness({("raw", "no_rdma"): [raw], ("audit", "no_rdma"): [recorded("audit", "no_rdma")]})
        h.no_rdma("audit")
        self.assertEqual([c[:2] for c in h.calls], [("raw", "no_rdma"), ("audit", "no_rdma")])
        self.assertEqual(h.lines(), ["ok   audit/no_rdma: exit 0, same stdout, nothing on stderr, no report file [0.0s]"])

    def test_cancel_takes_a_raw_reference_when_raw_did_not_run(self):
        # The packages' suite runs audit and safe only: the reference stdout is made first.
        raw = recorded("raw", "cancel_report")
        h = FakeHarness({("raw", "cancel_report"): [raw],
                         ("audit", "cancel_report"): [recorded("audit", "cancel_report")]})
        h.cancel("audit", "report")
        h.cancel("audit", "report")
        self.assertEqual([c[:2] for c in h.calls],
                         [("raw", "cancel_report"), ("audit", "cancel_report"), ("audit", "cancel_report")])
        self.assertEqual(h.t.failed, 0, h.lines())

    def test_timeouts_and_environments(self):
        runs = {("audit", "lost_event_direct"): [recorded("audit", "lost_event_cancelled", KILLED, True)],
                ("raw", "cancel_noreport"): [recorded("raw", "cancel_report")],
                ("safe", "cancel_noreport"): [recorded("raw", "cancel_report")]}
        h = FakeHarness(runs)
        h.lost_event("audit", "direct")
        h.cancel("safe", "noreport")
        self.assertEqual(h.calls[0], ("audit", "lost_event_direct", ("preload_lost_event", "direct"),
                                      cases.LOST_EVENT_MARKER, (("CMSAFE_HANG_MS", "1000"),), 10))
        self.assertEqual([c[:2] for c in h.calls[1:]],
                         [("raw", "cancel_noreport"), ("safe", "cancel_noreport")])
        self.assertEqual(h.calls[2][4], (("CMSAFE_LATE_ACK_MS", "500"), ("CMSAFE_REPORT", "")))
        self.assertEqual(h.hang_wait, 40)
        g = guest.Guest("192.0.2.1", "rxe0", "ib", 8)
        self.assertEqual(misuse.Harness(ROOT, g, IB, tally.Tally("t", io.StringIO())).run_timeout, 320)

    def test_survey_on_iwarp_counts_sq_drained_apart(self):
        runs = {(mode, name): [recorded("audit", name, KILLED, True)]
                for mode in ("audit",) for name in ("async_destroy_with_unacked_qp",
                                                    "async_destroy_with_unacked_cq", "async_double_ack")}
        survey = recorded("audit", "async_survey")
        survey.out = [x if not x.startswith("async sq-drain:") else "async sq-drain: none" for x in survey.out]
        runs[("audit", "async_survey")] = [survey]
        runs[("audit", "async_never_acked")] = [recorded("audit", "async_never_acked")]
        h = FakeHarness(runs)
        h.ctx = IWARP
        h.async_events("audit")
        lines = h.lines()
        self.assertEqual(lines[:3], [
            "FAIL audit/async_survey: the same 6 async events, counted got and acked, no finding, exit 0 [0.0s]",
            "     - no summary line 'async events: 6 got, 6 acked'",
            "     stderr (%s.err, last lines):" % survey.log])
        self.assertEqual([x for x in lines if x.startswith("skip ")],
                         ["skip audit/async_survey: SQ_DRAINED (sq-drain: none): " + cases.SQD_REASON])
        self.assertEqual([c[1:4] for c in h.calls], [
            ("async_survey", ("preload_async_survey",), None),
            ("async_destroy_with_unacked_qp", ("misuse_async_destroy_with_unacked", "qp"),
             r"^step: calling rdma_destroy_qp\(client\)"),
            ("async_destroy_with_unacked_cq", ("misuse_async_destroy_with_unacked", "cq"), cases.CQ_DESTROY),
            ("async_double_ack", ("misuse_async_double_ack",), cases.ASYNC_QP_DESTROY),
            ("async_never_acked", ("misuse_async_never_acked",), None)])
        # The QP's event on iWARP is QP_FATAL: RoCE's logs fail there, not with the CQ's CQ_ERR.
        self.assertEqual([x.split(":")[0] for x in lines if x.startswith(("ok", "FAIL"))], [
            "FAIL audit/async_survey", "FAIL audit/async_destroy_with_unacked_qp", "ok   audit/async_destroy_with_unacked_cq",
            "FAIL audit/async_double_ack", "ok   audit/async_never_acked"])
        self.assertEqual((h.t.passed, h.t.failed, h.t.apart), (2, 3, 1))


class OtherProgramsTest(Scratch):
    def test_stderr_fails(self):
        r = recorded("audit", "stderr_fails")
        self.assertEqual(misuse.check_stderr_fails(r, IB), ([], (
            "audit/stderr_fails: CMSAFE_MODE=bogus with stderr a pipe without reader: audit mode "
            "(use-after-ack seq=3 in the report), exit 0")))
        p, _ = misuse.check_stderr_fails(edited(r, err=["thread panicked"]), IB)
        self.assertEqual(p, ["something reached the harness's stderr: thread panicked"])

    def test_fork(self):
        self.assertEqual(misuse.check_fork("audit", "after", recorded("audit", "fork_after"), IB), (
            [], "audit/fork_after: exit 0, one report and one summary per process (467, 468), no finding"))
        self.assertEqual(misuse.check_fork("safe", "before", recorded("safe", "fork_before"), IB), (
            [], "safe/fork_before: exit 0, the child's report and summary only (633), no finding"))
        self.assertEqual(misuse.check_fork("audit", "before", recorded("audit", "fork_before"), IB)[0], [])
        self.assertEqual(misuse.check_fork("raw", "after", recorded("raw", "fork_after"), IB),
                         ([], "raw/fork_after: exit 0 in parent 236 and child 237"))

    def test_fork_wrong(self):
        r = recorded("audit", "fork_after")
        r.pid = 466
        r.err = without(r.err, "==cmsafe== summary: pid 468")
        p, _ = misuse.check_fork("audit", "after", r, IB)
        self.assertEqual(p, ["parent pid 467 is not the started pid 466",
                             "1 summary lines with 0 findings, want 2 (parent and child)"])
        r = self.copy("audit", "fork_before")
        with open(r.log + ".472.jsonl", "w") as f:
            f.write("")
        p, _ = misuse.check_fork("audit", "before", r, IB)
        self.assertEqual(p, ["the parent never touched librdmacm, yet wrote %s.472.jsonl" % r.log])

    def test_no_rdma(self):
        ref = recorded("raw", "no_rdma").out
        self.assertEqual(misuse.check_no_rdma("raw", recorded("raw", "no_rdma"), []),
                         ([], "raw/no_rdma: exit 0, stdout kept as the reference"))
        self.assertEqual(misuse.check_no_rdma("safe", recorded("safe", "no_rdma"), ref)[0], [])
        r = edited(recorded("audit", "no_rdma"), err=["", "x"], out=ref + ["x"])
        p, _ = misuse.check_no_rdma("audit", r, ref)
        self.assertEqual(p, ["stdout differs from the run without the preload: '%s x'" % " ".join(ref),
                             "stderr is not empty: (no newline)"])

    def test_sigsegv_and_thresholds(self):
        self.assertEqual(misuse.check_sigsegv("audit", "mprotect", recorded("audit", "sigsegv_mprotect"), IB), (
            [], "audit/sigsegv_mprotect: the program's handler ran for both faults (mprotect), exit 0"))
        for name, limit, hold, finding in misuse.LATE_ACK_THRESHOLDS:
            r = recorded("audit", name)
            self.assertEqual(misuse.check_late_ack_threshold("audit", name, limit, hold, finding, r, IB)[0], [])
        # The under-threshold run's logs with the low threshold's expectation: no late-ack.
        r = recorded("audit", "late_ack_under_threshold")
        p, text = misuse.check_late_ack_threshold("audit", "late_ack_low_threshold", "500", "2500", True, r, IB)
        self.assertEqual(text, "audit/late_ack_low_threshold: held 2500 ms with CMSAFE_LATE_ACK_MS=500, late-ack seq=2")
        self.assertEqual(p[0], "no '==cmsafe== late-ack: ' line on stderr")

    def test_qp_then_destroy(self):
        r = recorded("audit", "qp_then_destroy", KILLED, True)
        self.assertEqual(misuse.check_qp_then_destroy("audit", r, IB)[0], [])
        self.assertEqual(misuse.check_qp_then_destroy("safe", recorded("safe", "qp_then_destroy"), IB)[0], [])
        # Both lines at the destroy: the first finding came late.
        qp = [x for x in r.err if x.startswith("==cmsafe== qp-destroy-before-ack: ")]
        err = without(r.err, "==cmsafe== qp-destroy-before-ack: ")
        err.insert(len(err) - 1, qp[0])
        p, _ = misuse.check_qp_then_destroy("audit", edited(r, err=err), IB)
        self.assertEqual(len(p), 1, p)
        self.assertTrue(p[0].startswith("each line must come at its own call: qp-destroy-before-ack (line "), p)

    def test_dlopen_and_cancel(self):
        self.assertEqual(misuse.check_dlopen("audit", recorded("audit", "dlopen"), IB)[0], [])
        ref = recorded("raw", "cancel_report").out
        self.assertEqual(misuse.check_cancel("raw", "report", recorded("raw", "cancel_report"), [], IB)[0], [])
        for mode, rep in (("audit", "report"), ("audit", "noreport"), ("safe", "report")):
            p, text = misuse.check_cancel(mode, rep, recorded(mode, "cancel_" + rep), ref, IB)
            self.assertEqual(p, [], (mode, rep))
        self.assertEqual(text, "safe/cancel (report): the same 10 lines as raw (cancelled inside each call "
                               "with a cancellation point, after rdma_ack_cm_event), no abort, 2 cancelled "
                               "reads counted")
        r = recorded("audit", "cancel_noreport")
        r.err.append("fatal runtime error: Rust cannot catch foreign exceptions, FATAL")
        p, _ = misuse.check_cancel("audit", "noreport", edited(r, out=r.out[:3] + ["x"] + r.out[4:]), ref, IB)
        self.assertEqual(p, ["stderr: fatal runtime error: Rust cannot catch foreign exceptions, FATAL",
                             "stdout differs from the run without the preload: 4c4 < %s --- > x " % ref[3]])

    def test_lost_event_and_read_without_ids(self):
        r = recorded("audit", "lost_event_cancelled", KILLED, True)
        self.assertEqual(misuse.check_lost_event("audit", "cancelled", r, IB)[0], [])
        r.err = [x.replace("was cancelled inside", "was inside") for x in r.err]
        p, _ = misuse.check_lost_event("audit", "cancelled", r, IB)
        self.assertEqual(len(p), 1)
        self.assertTrue(p[0].startswith("the finding does not name the cancelled reader: "), p)
        self.assertEqual(misuse.check_lost_event("raw", "direct", recorded("raw", "lost_event_direct", KILLED, True),
                                                 IB)[0], [])
        self.assertEqual(misuse.check_lost_event("raw", "direct", recorded("raw", "lost_event_direct"), IB)[0],
                         ["rdma_destroy_id did not block (exit status 0): the event was not lost"])
        r = recorded("audit", "read_without_ids")
        self.assertEqual(misuse.check_read_without_ids("audit", r, IB)[0], [])
        r.pid += 1  # the destroying thread is the started process's main thread
        p, _ = misuse.check_read_without_ids("audit", r, IB)
        self.assertEqual(len(p), 3, p)
        self.assertTrue(p[0].startswith("the finding does not say what blocks and who destroyed the id: "), p)
        self.assertEqual(p[1], "no JSON report read_without_ids.521.jsonl")


class CompletionTest(unittest.TestCase):
    def test_raw(self):
        prog = cases.CQ_PROGRAMS[0]
        r = recorded("raw", "cq_destroy_with_unacked", KILLED, True)
        self.assertEqual(misuse.check_cq_raw(prog, r), ([], "raw/cq_destroy_with_unacked: blocked in ibv_destroy_cq for good"))
        r = recorded("raw", "cq_destroy_with_unacked", 0, False)
        self.assertEqual(misuse.check_cq_raw(prog, r)[0], ["ibv_destroy_cq did not block without the preload (exit 0)"])

    def test_recorded(self):
        for mode, name, hung in (("audit", "cq_destroy_with_unacked", True), ("safe", "cq_destroy_with_unacked", False),
                                 ("audit", "cq_wrong_ack", True), ("safe", "cq_wrong_ack", False),
                                 ("audit", "cq_over_ack", True), ("safe", "cq_over_ack", False),
                                 ("audit", "cq_never_acked", False)):
            r = recorded(mode, name, KILLED if hung else 0, hung)
            self.assertEqual(misuse.CQ_CHECKS[name](mode, r, IB)[0], [], (mode, name))
        r = recorded("audit", "cq_loop")
        self.assertEqual(misuse.check_cq_loop("audit", r, IB), (
            [], "audit/cq_loop: 42 completion events got and acked, counted so, no finding, exit 0"))
        r = recorded("audit", "cq_wrong_ack", KILLED, True)
        self.assertEqual(misuse.check_cq_wrong_ack("audit", r, IB)[1],
                         "audit/cq_wrong_ack: cq-ack-wrong-cq at the ack (cq 0x55aac0b674e0 for 0x55aac0b67380), "
                         "cq-destroy-with-unacked at ibv_destroy_cq(cq), then blocked as raw")

    def test_over_ack_said_after_it_blocks(self):
        r = recorded("audit", "cq_over_ack", KILLED, True)
        lines = [x for x in r.err if x.startswith("==cmsafe== cq-over-ack: ")]
        err = without(r.err, "==cmsafe== cq-over-ack: ") + lines  # both after the destroy's marker
        p, _ = misuse.check_cq_over_ack("audit", edited(r, err=err), IB)
        self.assertEqual(p, ["2 cq-over-ack lines after '^step: calling ibv_destroy_cq\\(cq\\)', want 1 (said before it blocks)"])

    def test_wrong_thread_and_destroy_returned(self):
        r = recorded("audit", "cq_destroy_with_unacked", KILLED, True)
        r.pid += 1
        r.err.append("step: ibv_destroy_cq(cq) returned 0")
        p, _ = misuse.check_cq_destroy_with_unacked("audit", edited(r, hung=False, rc=0), IB)
        self.assertEqual(len(p), 5, p)
        self.assertTrue(p[0].startswith("the cq-destroy-with-unacked line is not about COMPLETION of "), p)
        self.assertEqual(p[1:3], ["ibv_destroy_cq did not block (exit 0), as it does raw",
                                  "ibv_destroy_cq returned in audit mode"])
        self.assertTrue(p[3].startswith("no JSON report cq_destroy_with_unacked."), p)

    def test_never_acked_counts(self):
        r = recorded("audit", "cq_never_acked")
        r.err = [x.replace("completion events: 1 got, 0 acked", "completion events: 1 got, 1 acked") for x in r.err]
        self.assertEqual(misuse.CQ_CHECKS["cq_never_acked"]("audit", r, IB)[0],
                         ["no summary line 'completion events: 1 got, 0 acked'"])


class AsyncTest(unittest.TestCase):
    def test_recorded(self):
        qp, cq = cases.ASYNC_VARIANTS
        r = recorded("raw", "async_destroy_with_unacked_qp", KILLED, True)
        self.assertEqual(misuse.check_async_raw_destroy(qp, r, IB), (
            [], "raw/async_destroy_with_unacked_qp: blocked in ibv_destroy_qp for good (SQ_DRAINED of qp "
                "0x561f918ba350 unacked)"))
        r = recorded("audit", "async_destroy_with_unacked_qp", KILLED, True)
        self.assertEqual(misuse.check_async_destroy_with_unacked("audit", qp, r, IB), (
            [], "audit/async_destroy_with_unacked_qp: async-destroy-with-unacked (SQ_DRAINED of qp "
                "0x564a9a0d0670, got by the async thread 545, destroyed in the program by thread 544), "
                "then blocked as raw"))
        r = recorded("safe", "async_destroy_with_unacked_cq")
        self.assertEqual(misuse.check_async_destroy_with_unacked("safe", cq, r, IB)[0], [])
        for mode, hung in (("audit", True), ("safe", False)):
            r = recorded(mode, "async_double_ack", KILLED if hung else 0, hung)
            self.assertEqual(misuse.check_async_double_ack(mode, r, IB)[0], [], mode)
            self.assertEqual(misuse.check_never_acked_row(mode, cases.NEVER_ACKED["async_never_acked"],
                                                          recorded(mode, "async_never_acked"), IB)[0], [])
        for mode in ("raw", "audit"):
            self.assertEqual(misuse.check_async_survey(mode, recorded(mode, "async_survey"), IB)[0], [])

    def test_qp_event_follows_the_transport(self):
        qp = cases.ASYNC_VARIANTS[0]
        r = recorded("audit", "async_destroy_with_unacked_qp", KILLED, True)
        p, text = misuse.check_async_destroy_with_unacked("audit", qp, r, IWARP)
        self.assertIn("(QP_FATAL of qp 0x564a9a0d0670,", text)
        self.assertEqual(len(p), 3, p)
        self.assertTrue(p[0].startswith("the async-destroy-with-unacked line is not about QP_FATAL of "), p)
        self.assertTrue(p[1].startswith("no async-destroy-with-unacked line says /ibv_destroy_qp will wait "
                                        "forever for these 1 unacked async events of qp 0x564a9a0d0670 \\(got "
                                        "1, acked 0, the last QP_FATAL;"), p)
        self.assertTrue(p[2].startswith("no finding record async-destroy-with-unacked seq=0 type=QP_FATAL"), p)

    def test_getter_is_the_async_thread(self):
        qp = cases.ASYNC_VARIANTS[0]
        r = recorded("audit", "async_destroy_with_unacked_qp", KILLED, True)
        r.out = [x.replace("async thread 545", "async thread 544") for x in r.out]
        p, _ = misuse.check_async_destroy_with_unacked("audit", qp, r, IB)
        self.assertEqual(p[0], "the event was got by the main thread, not the async thread")

    def test_survey_misses_an_event(self):
        r = recorded("raw", "async_survey")
        r.out = without(r.out, "async port-up:")
        p, text = misuse.check_async_survey("raw", r, IB)
        self.assertEqual(p, ["no line 'async port-up: port active port 1...'"])
        self.assertEqual(text, "raw/async_survey: 6 async events (SRQ_LIMIT_REACHED, SQ_DRAINED, CQ_ERR, "
                               "PORT_ERR, PORT_ACTIVE), exit 0")
        p, _ = misuse.check_async_survey("raw", recorded("raw", "async_survey"), IWARP)
        self.assertEqual(p, ["no line 'async sq-drain: none...'"])


class IwarpTest(unittest.TestCase):
    """Logs recorded on Soft-iWARP (data/misuse/iwarp): the transport's own expectations."""

    def test_recorded(self):
        r = recorded("iwarp/raw", "retry_destroyed_id", 139)
        self.assertEqual(misuse.check_misuse_raw(case("retry_destroyed_id"), r, IWARP),
                         ([], "raw/retry_destroyed_id: died with status 139 at the misuse"))
        self.assertIn("connect: RDMA_CM_EVENT_REJECTED status -104", r.out)
        p, text = misuse.check_misuse_preloaded("audit", case("use_after_ack"),
                                                recorded("iwarp/audit", "use_after_ack"), IWARP)
        self.assertEqual(p, [])
        self.assertEqual(misuse.check_misuse_preloaded("safe", case("destroy_with_unacked"),
                                                       recorded("iwarp/safe", "destroy_with_unacked"), IWARP)[0], [])
        r = recorded("iwarp/audit", "async_destroy_with_unacked_qp", KILLED, True)
        self.assertEqual(misuse.check_async_destroy_with_unacked("audit", cases.ASYNC_VARIANTS[0], r, IWARP)[1],
                         "audit/async_destroy_with_unacked_qp: async-destroy-with-unacked (QP_FATAL of qp "
                         "0x56040818e4c0, got by the async thread 549, destroyed in the program by thread 548), "
                         "then blocked as raw")
        self.assertEqual(misuse.check_async_double_ack("safe", recorded("iwarp/safe", "async_double_ack"), IWARP)[0], [])
        self.assertEqual(misuse.check_async_survey("raw", recorded("iwarp/raw", "async_survey"), IWARP), (
            [], "raw/async_survey: 4 async events (SRQ_LIMIT_REACHED, CQ_ERR, PORT_ERR, PORT_ACTIVE), exit 0"))
        self.assertEqual(misuse.check_async_survey("audit", recorded("iwarp/audit", "async_survey"), IWARP), (
            [], "audit/async_survey: the same 4 async events, counted got and acked, no finding, exit 0"))

    def test_roce_expectations_fail_on_iwarp_logs(self):
        p, _ = misuse.check_misuse_preloaded("audit", case("use_after_ack"), recorded("iwarp/audit", "use_after_ack"), IB)
        self.assertEqual(p, ["the JSON event record seq=3 (CONNECT_REQUEST) has private_data_len 35, want 56 (IB/RoCE)",
                             "the program did not see private_data_len=56 (as without the preload): "
                             "CONNECT_REQUEST private_data_len=35"])
        p, _ = misuse.check_misuse_preloaded("safe", case("destroy_with_unacked"),
                                             recorded("iwarp/safe", "destroy_with_unacked"), IB)
        self.assertEqual(p, ["the JSON event record seq=3 (REJECTED) has status -104, want 8 (IB/RoCE)",
                             "the JSON event record seq=3 (REJECTED) has private_data_len 0, want 148 (IB/RoCE)"])
        p, _ = misuse.check_async_survey("raw", recorded("iwarp/raw", "async_survey"), IB)
        self.assertEqual(p, ["no line 'async sq-drain: send queue drained qp 0x...'"])


if __name__ == "__main__":
    unittest.main()
