"""scripts/preload-real-programs' checks (cmsafe_harness.real) on the host, no guest, no RDMA.

The logs in tests/harness/data/real were recorded by a run in the Soft-RoCE guest
(`preload-real-programs audit safe`, and `--set services-short audit safe`): the reference run
and the preloaded ones of a few programs, each side's stdout, stderr, command and JSON reports.
The failing variants are edited copies of them.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import guest, real, real_programs  # noqa: E402
from cmsafe_harness.real_programs import Program, Step  # noqa: E402
from cmsafe_harness.tally import Tally  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "real")
ADDR = "192.0.2.1"
# The finding kinds, as c-tests/lists/finding-kinds lists them (preload/src/audit/findings.rs); the
# checks only need those the logs and the variants use to be among them.
KINDS = ["late-ack", "double-ack", "use-after-destroy-channel", "use-after-destroy-id", "not-a-cm-id",
         "qp-destroy-before-ack", "destroy-with-unacked"]
PING = "ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"


def basic(name: str) -> Program:
    return next(p for p in real_programs.table("basic", ADDR, "rxe0", real_programs.cmtime(ADDR, "", 200))
                if p.name == name)


def service(name: str) -> Program:
    return next(p for p in real_programs.table("services-short", ADDR, "rxe0") if p.name == name)


class Recorded(unittest.TestCase):
    """A copy of a recorded set's logs, to check and to edit."""

    SET = "basic"

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        src = os.path.join(DATA, self.SET)
        for f in os.listdir(src):
            shutil.copy(os.path.join(src, f), self.dir)

    def pfx(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def report(self, stem: str) -> str:
        got = glob.glob(glob.escape(self.path(stem)) + ".*.jsonl")
        self.assertEqual(len(got), 1, stem)
        return got[0]

    def edit(self, name: str, old: str, new: str) -> None:
        p = self.path(name)
        with open(p) as f:
            text = f.read()
        self.assertIn(old, text, name)
        with open(p, "w") as f:
            f.write(text.replace(old, new, 1))

    def append(self, path: str, text: str) -> None:
        with open(path, "a") as f:
            f.write(text)

    def preloaded(self, name: str, run: str = "audit", prog: Program | None = None):
        prog = prog or basic(name)
        return real.check_preloaded(name, self.pfx(name), run, prog.touches, real.sides_spec(prog),
                                    prog.allow, KINDS)


class KeyOutputTest(Recorded):
    def test_rping_ping_lines(self):
        self.assertEqual(real.key("rping", "client", self.path("rping.base.client.out")),
                         ["ping data: rdma-ping-0: " + PING, "ping data: rdma-ping-1: " + PING[1:] + "s",
                          "ping data: rdma-ping-2: " + PING[2:] + "st"])
        self.assertEqual(real.key("rping", "server", self.path("rping.base.server.out"))[0],
                         "server ping data: rdma-ping-0: " + PING)

    def test_cmtime_step_names(self):
        self.assertEqual(real.key("cmtime", "client", self.path("cmtime.base.client.out")),
                         ["step", "create id:", "resolve addr:", "resolve route:", "create qp:",
                          "connect:", "disconnect:", "destroy:"])
        self.assertEqual(real.key("cmtime", "server", self.path("cmtime.base.server.out")), [])

    def test_qperf_latency_without_its_value(self):
        self.assertEqual(real.key("qperf", "client", self.path("qperf.audit.client.out")),
                         ["rc_lat:", "latency = <n> <unit>"])

    def test_perftest_table(self):
        self.assertEqual(real.key("ib_send_bw_events", "server", self.path("ib_send_bw_events.base.server.out")),
                         ["65536 500"])

    def test_rstream_table(self):
        self.assertEqual(real.key("rstream_sockets", "client", self.path("rstream_sockets.safe.client.out")),
                         ["name bytes xfers iters", "custom 4k 2k 1"])

    def test_the_program_from_the_command(self):
        self.assertEqual(real.side_program(self.path("rping.base.client.out")), "rping")
        for cmd, want in (("env A=1 B=2 /usr/bin/io_demo -p 1", "io_demo"),
                          ("stdbuf -oL mckey -m x", "mckey"),
                          ("timeout -s KILL 5 rping -c", "rping"),
                          ("env X=1 scripts/stop-after 3 CTRL-C iscsi-perf -i q", "iscsi-perf"),
                          ("", "")):
            self.assertEqual(real.program_of(cmd), want, cmd)

    def test_cmtime_65_tables(self):
        out = ["Connect (30) QPs test", "step total ms max ms min us us / conn",
               "full connect 1 2 3 4 5 6", "qp_conn 30", "Connect (30) test - no QPs",
               "cm_conn 30", "establish 1 2 3 4 5 6"]
        self.assertEqual(real.key_of("cmtime", "client", "cmtime", out),
                         ["Connect (30) QPs test", "step", "full connect", "qp_conn 30",
                          "Connect (30) test - no QPs", "cm_conn 30", "establish"])
        self.assertRegex("Connect (30) QPs test|qp_conn 30|" + real_programs.CMTIME_STEPS.replace("\\", "")
                         + "|Connect (30) test - no QPs|cm_conn 30|" + real_programs.CMTIME_STEPS.replace("\\", ""),
                         real_programs.expected("cmtime", "client", "cmtime", 30))


class BaseTest(Recorded):
    def test_recorded_references_pass(self):
        for name, nkey in (("rping", 3), ("qperf", 2), ("rstream_sockets", 2), ("ib_send_bw_events", 1),
                           ("cmtime", 8)):
            self.assertEqual(real.check_base(name, self.pfx(name), real.sides_spec(basic(name))), ([], nkey))

    def test_a_reference_without_its_output_fails(self):
        with open(self.path("rping.base.client.out"), "w"):
            pass
        self.assertEqual(real.check_base("rping", self.pfx("rping"), "server:exit,client:exit"),
                         (["without the preload, the client's key output '' does not match "
                           "/rdma-ping-0: .*\\|.*rdma-ping-1: .*\\|.*rdma-ping-2: [^|]*$/"], 0))


class PreloadedTest(Recorded):
    def test_recorded_runs_pass(self):
        self.assertEqual(self.preloaded("rping"), ([], ["server_cq=13/13", "server=3", "client_cq=13/13",
                                                        "client=4"]))
        self.assertEqual(self.preloaded("rping", "safe"), ([], ["server_cq=19/19", "server=3", "client_cq=8/8",
                                                                "client=4"]))
        self.assertEqual(self.preloaded("qperf"), ([], ["server=no summary", "client_cq=1018/1018", "client=4"]))
        self.assertEqual(self.preloaded("ib_send_bw_events", "safe"),
                         ([], ["server_cq=320/320", "server=2", "client_cq=5/5", "client=7"]))
        self.assertEqual(self.preloaded("rstream_sockets"), ([], ["server=untouched", "client=untouched"]))

    def test_key_output_differs(self):
        self.edit("rping.audit.client.out", "rdma-ping-2: ", "rdma-ping-7: ")
        problems, _ = self.preloaded("rping")
        self.assertEqual(len(problems), 1)
        self.assertTrue(problems[0].startswith("client: key output differs: without 'ping data: rdma-ping-0: "))
        self.assertIn("|ping data: rdma-ping-7: ", problems[0])

    def test_a_finding_line(self):
        line = ("==cmsafe== late-ack: seq=1 type=CONNECT_REQUEST id=0x1 thread=2 at rping+0x10 (0x1): "
                "held 1200 ms")
        self.append(self.path("rping.audit.server.err"), line + "\n")
        self.assertEqual(self.preloaded("rping")[0], ["server: 1 finding line(s), first: " + line])

    def test_the_summary_counts_a_finding(self):
        self.edit("rping.audit.server.err", "3 events, 0 findings", "3 events, 1 findings")
        self.assertEqual(self.preloaded("rping")[0],
                         ["server: the summaries count 1 findings (0 allowed): "
                          "==cmsafe== summary: pid 225, mode audit, 3 events, 1 findings"])

    def test_no_summary_at_exit(self):
        self.edit("rping.audit.client.err", "==cmsafe== summary: pid 236, mode audit, 4 events, 0 findings\n", "")
        problems, info = self.preloaded("rping")
        self.assertEqual(problems, ["client: no '==cmsafe== summary:' line at exit"])
        self.assertEqual(info[-1], "client=no summary")

    def test_a_summary_of_no_event(self):
        self.edit("rping.audit.client.err", "4 events, 0 findings", "0 events, 0 findings")
        problems, _ = self.preloaded("rping")
        self.assertEqual(problems, ["client: the summary counts no event: "
                                    "==cmsafe== summary: pid 236, mode audit, 0 events, 0 findings",
                                    "client: JSON 4 event records, the summaries count 0 events"])

    def test_no_completion_event(self):
        self.edit("ib_send_bw_events.audit.server.err", "==cmsafe==   completion events: 273 got, 273 acked\n", "")
        self.assertEqual(self.preloaded("ib_send_bw_events")[0],
                         ["server: sleeps on completion events, yet no summary counts one (no such line)"])

    def test_preload_output_on_stdout(self):
        self.append(self.path("qperf.audit.client.out"), "==cmsafe== summary: stray\n")
        self.assertEqual(self.preloaded("qperf")[0], ["client: ==cmsafe== output on stdout: ==cmsafe== summary: stray"])

    def test_reports(self):
        rep = self.report("rping.audit.server")
        name = os.path.basename(rep)
        rec = {"record": "finding", "finding": "late-ack", "seq": 1, "type": "CONNECT_REQUEST", "id": "0x1",
               "thread": 2, "where": "rping+0x10", "message": "m"}
        self.append(rep, json.dumps(rec) + "\nnot json\n" + json.dumps({"record": "event", "seq": 9}) + "\n")
        problems, _ = self.preloaded("rping")
        self.assertEqual(problems[:2], [
            "server: JSON %s:8 is not JSON (Expecting value: line 1 column 1 (char 0)): not json" % name,
            "server: JSON %s:9: event record without type, status, id, listen_id, thread, get_ns, ack_ns, "
            "private_data_len, internal"
            % name])
        self.assertTrue(problems[2].startswith("server: JSON finding records: late-ack 1; first: %s:7: " % name))
        self.assertEqual(problems[3:], ["server: JSON 4 event records, the summaries count 3 events"])

    def test_report_last_line_and_missing(self):
        # A last line cut short (the server killed as it wrote) is skipped, and said on stderr;
        # one whole but for its newline is a record.
        rep = self.report("rping.audit.server")
        self.append(rep, '{"record":"destroy","id":"0x1","thr')
        os.unlink(self.report("rping.audit.client"))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            problems = self.preloaded("rping")[0]
        self.assertEqual(problems, ["client: no JSON report (rping.audit.client.<pid>.jsonl)"])
        self.assertEqual(err.getvalue(), "%s: the last line is cut (35 bytes, no newline): "
                                         "skipped\n" % os.path.basename(rep))
        self.append(rep, 'ead":1,"at_ns":1,"extra":[]}')
        self.assertEqual(self.preloaded("rping")[0],
                         ["client: no JSON report (rping.audit.client.<pid>.jsonl)"])

    def test_many_report_problems_are_counted(self):
        self.append(self.report("rping.audit.server"), "x\n" * 10)
        problems, _ = self.preloaded("rping")
        self.assertEqual(len(problems), 9)
        self.assertEqual(problems[-1], "server: JSON ... 2 more")

    def test_rpings_race_is_allowed_once(self):
        line = ("==cmsafe== use-after-destroy-channel: seq=0 type=- id=0x0 thread=236 at rping+0x2a1c "
                "(0x55d0)): rdma_get_cm_event on a destroyed event channel")
        rec = {"record": "finding", "finding": "use-after-destroy-channel", "seq": None, "type": "-",
               "id": "0x0", "thread": 236, "where": "rping+0x2a1c (0x55d0)", "message": "m"}
        self.edit("rping.audit.client.err", "4 events, 0 findings", "4 events, 1 findings")
        self.append(self.path("rping.audit.client.err"), line + "\n")
        self.append(self.report("rping.audit.client"), json.dumps(rec) + "\n")
        problems, info = self.preloaded("rping")
        self.assertEqual(problems, [])
        self.assertEqual(info[2:], ["client_allowed=1", "client_cq=13/13", "client=4"])
        # Twice is once too many; and the report must hold as many as stderr says.
        self.append(self.path("rping.audit.client.err"), line + "\n")
        self.assertEqual(self.preloaded("rping")[0], [
            "client: 2 use-after-destroy-channel findings for - at rping, at most 1 allowed",
            "client: the summaries count 1 findings (2 allowed): "
            "==cmsafe== summary: pid 236, mode audit, 4 events, 1 findings",
            "client: JSON 1 allowed finding records, 2 allowed finding lines on stderr"])
        # Elsewhere than rping's code it is no allowed finding.
        self.assertIsNone(real.allowed(real_programs.RPING_RACE, "client", "use-after-destroy-channel", "-",
                                       "rpingx+0x1"))

    def test_rpings_race_said_after_the_summary(self):
        # The client's CM thread finds the destroyed channel while the main thread writes the
        # exit summary: the summary says 0, the line after the finding's says 1 more.
        line = ("==cmsafe== use-after-destroy-channel: seq=0 type=- id=0x0 thread=236 at rping+0x2a1c "
                "(0x55d0)): rdma_get_cm_event on a destroyed event channel")
        after = "==cmsafe== after the summary: pid 236, 1 more findings, 1 findings in all"
        rec = {"record": "finding", "finding": "use-after-destroy-channel", "seq": None, "type": "-",
               "id": "0x0", "thread": 236, "where": "rping+0x2a1c (0x55d0)", "message": "m"}
        self.append(self.path("rping.audit.client.err"), line + "\n")
        self.append(self.report("rping.audit.client"), json.dumps(rec) + "\n")
        self.assertEqual(self.preloaded("rping")[0], [
            "client: the summaries count 0 findings (1 allowed): "
            "==cmsafe== summary: pid 236, mode audit, 4 events, 0 findings"])
        self.append(self.path("rping.audit.client.err"), after + "\n")
        problems, info = self.preloaded("rping")
        self.assertEqual(problems, [])
        self.assertEqual(info[2:], ["client_allowed=1", "client_cq=13/13", "client=4"])

    def test_a_program_that_never_touches_librdmacm(self):
        self.append(self.path("rstream_sockets.audit.client.err"), "==cmsafe== summary: x\n")
        self.append(self.path("rstream_sockets.audit.server.7.jsonl"), "{}\n")
        self.assertEqual(self.preloaded("rstream_sockets")[0], [
            "server: never touches librdmacm, yet a report was written: rstream_sockets.audit.server.7.jsonl",
            "client: never touches librdmacm, yet: ==cmsafe== summary: x"])

    def test_off_mode_wants_no_summary_nor_report(self):
        for f in glob.glob(self.path("qperf.audit.*")):
            with open(f) as src, open(f.replace(".audit.", ".off."), "w") as dst:
                dst.write("".join(x for x in src if not x.startswith("==cmsafe==")))
        for f in glob.glob(self.path("qperf.off.*.jsonl")):
            os.unlink(f)
        self.assertEqual(self.preloaded("qperf", "off"), ([], ["server=no summary", "client=no summary"]))


class ServicesTest(Recorded):
    """The services-short set's recorded logs: UCX's io_demo, tgt and libiscsi's tools over
    iSER (one server, five clients), rcopy with its verify command, mckey."""

    SET = "services-short"

    def test_io_demo(self):
        self.assertEqual(real.key("io_demo_tag", "client", self.path("io_demo_tag.base.client.out")),
                         ["Client exit with status 'OK'",
                          'disconnecting 192.0.2.1:20000 due to "End of the Client run"'])
        self.assertEqual(real.key("io_demo_tag", "server", self.path("io_demo_tag.base.server.out")),
                         ["connections: 1"])
        self.assertEqual(self.preloaded("io_demo_tag", prog=service("io_demo_tag")),
                         ([], ["server_cq=1/1", "server=3", "client_cq=1/1", "client=3"]))

    def test_ucx_late_ack_is_allowed_on_the_server_only(self):
        line = ("==cmsafe== late-ack: seq=1 type=CONNECT_REQUEST id=0x1 thread=2 at "
                "uct_rdmacm_cm_ack_event+0x3c (0x7f): held 1421 ms")
        rec = {"record": "finding", "finding": "late-ack", "seq": 1, "type": "CONNECT_REQUEST", "id": "0x1",
               "thread": 2, "where": "uct_rdmacm_cm_ack_event+0x3c (0x7f)", "message": "m"}
        for side, events in (("server", 3), ("client", 3)):
            self.edit("io_demo_tag.audit.%s.err" % side, "%d events, 0 findings" % events,
                      "%d events, 1 findings" % events)
            self.append(self.path("io_demo_tag.audit.%s.err" % side), line + "\n")
            self.append(self.report("io_demo_tag.audit.%s" % side), json.dumps(rec) + "\n")
        problems, info = self.preloaded("io_demo_tag", prog=service("io_demo_tag"))
        self.assertEqual(info[:3], ["server_allowed=1", "server_cq=1/1", "server=3"])
        self.assertEqual(problems[:2], ["client: 1 finding line(s), first: " + line,
                                        "client: the summaries count 1 findings (0 allowed): ==cmsafe== summary: "
                                        "pid 239, mode audit, 3 events, 1 findings"])
        self.assertTrue(problems[2].startswith("client: JSON finding records: late-ack 1; first: "))
        self.assertEqual(len(problems), 3)

    def test_iser_one_server_five_clients(self):
        prog = service("iser")
        base, nkey = real.check_base("iser", self.pfx("iser"), real.sides_spec(prog))
        self.assertEqual((base, nkey), ([], 42))
        self.assertEqual(real.key("iser", "c3-iscsi-swp", self.path("iser.base.c3-iscsi-swp.out")), ["SWP:0"])
        self.assertEqual(real.key("iser", "c5-iscsi-test-cu", self.path("iser.audit.c5-iscsi-test-cu.out"))[-4:],
                         ["suites 3 3 n/a 0 0", "tests 3 3 3 0 0", "asserts 1791 1791 1791 0 n/a",
                          "Tests completed with return value: 0"])
        self.assertEqual(real.key("iser", "c4-iscsi-perf", self.path("iser.base.c4-iscsi-perf.out"))[-1], "finished.")
        problems, info = self.preloaded("iser", prog=prog)
        self.assertEqual(problems, [])
        self.assertEqual(info[:4], ["server_cq=1787/1787", "server=32", "c1-iscsi-inq_cq=12/12", "c1-iscsi-inq=3"])

    def test_a_failed_iscsi_test(self):
        self.edit("iser.safe.c5-iscsi-test-cu.out", "ZeroBlocks ...passed", "ZeroBlocks ...FAILED")
        self.assertEqual(self.preloaded("iser", "safe", service("iser"))[0],
                         ["c5-iscsi-test-cu: key output differs: without 'Test: BeyondEol ...passed|"
                          "Test: ZeroBlocks ...passed|Test: BeyondEol ...passed|suites 3 3 n/a 0 0|tests 3 3 3 0 0|"
                          "asserts 1791 1791 1791 0 n/a|Tests completed with return value: 0', with "
                          "'Test: BeyondEol ...passed|Test: ZeroBlocks ...FAILED|Test: BeyondEol ...passed|"
                          "suites 3 3 n/a 0 0|tests 3 3 3 0 0|asserts 1791 1791 1791 0 n/a|"
                          "Tests completed with return value: 0'"])

    def test_rcopy_and_its_copy(self):
        prog = service("rcopy")
        self.assertEqual(real.check_base("rcopy", self.pfx("rcopy"), real.sides_spec(prog)), ([], 3))
        self.assertEqual(self.preloaded("rcopy", prog=prog), ([], ["server=no summary", "client_cq=8/8", "client=3"]))
        with open(self.path("rcopy.safe.verify.out"), "w") as f:
            f.write("the copy differs or is missing\n")
        self.assertEqual(self.preloaded("rcopy", "safe", prog)[0],
                         ["verify: key output differs: without 'identical 4194304 bytes', "
                          "with 'the copy differs or is missing'"])
        with open(self.path("rcopy.base.verify.out"), "w") as f:
            f.write("the copy differs or is missing\n")
        self.assertEqual(real.check_base("rcopy", self.pfx("rcopy"), real.sides_spec(prog))[0],
                         ["without the preload, the verify's key output 'the copy differs or is missing' does not "
                          "match /^identical \\d+ bytes$/"])

    def test_mckey(self):
        self.assertEqual(real.check_base("mckey", self.pfx("mckey"), real.sides_spec(service("mckey"))), ([], 4))
        self.assertEqual(real.key("mckey", "server", self.path("mckey.base.server.out"))[0],
                         "mckey: joined dgid: ::ffff:239.1.1.1")


class KnownBugsTest(unittest.TestCase):
    REJECTED = "Event: RDMA_CM_EVENT_REJECTED; error: 8."
    FINDING = ("==cmsafe== not-a-cm-id: seq=0 type=- id=0x5600 thread=9 at ib_send_bw+0x1f2c (0x55): "
               "rdma_resolve_addr on 0x5600, not an id")

    def bug(self, run, rc, err, server_err=(), srv="143"):
        return real.perftest_retry_bug(basic("ib_send_bw").clients, run, [rc], srv, err, server_err)

    def test_perftest_retry(self):
        self.assertTrue(self.bug("base", 139, [self.REJECTED]))
        self.assertTrue(self.bug("audit", 139, [self.REJECTED, self.FINDING, "==cmsafe== summary: 1"]))
        self.assertTrue(self.bug("safe", 1, [self.REJECTED, self.FINDING]))
        self.assertEqual(real.perftest_finding([self.REJECTED, self.FINDING]),
                         "not-a-cm-id at ib_send_bw+0x1f2c, rdma_resolve_addr on 0x5600")

    def test_not_perftest_retry(self):
        self.assertFalse(self.bug("base", 139, []))  # no REJECTED
        self.assertFalse(self.bug("base", 139, [self.REJECTED], srv="0"))
        self.assertFalse(self.bug("safe", 139, [self.REJECTED, self.FINDING]))
        self.assertFalse(self.bug("audit", 139, [self.REJECTED]))  # not named
        self.assertFalse(self.bug("audit", 139, [self.REJECTED, self.FINDING, "==cmsafe== late-ack: seq=1"]))
        self.assertFalse(self.bug("audit", 139, [self.REJECTED, self.FINDING.replace("ib_send_bw+", "librdmacm+")]))
        self.assertFalse(self.bug("audit", 139, [self.REJECTED, self.FINDING], ["==cmsafe== late-ack: seq=1 x"]))
        self.assertFalse(real.perftest_retry_bug(basic("rping").clients, "base", [139], "143", [self.REJECTED], []))

    def test_rpings_teardown_race(self):
        own = "rdma_get_cm_event: Bad file descriptor"
        self.assertTrue(real.rping_race("rping", "base", [own]))
        self.assertFalse(real.rping_race("rping", "audit", [own]))
        self.assertTrue(real.rping_race("rping", "safe", [own, "==cmsafe== use-after-destroy-channel: seq=0"]))
        self.assertFalse(real.rping_race("ucmatose", "base", [own]))


class TablesTest(unittest.TestCase):
    def test_the_sets(self):
        self.assertEqual([p.name for p in real_programs.table("basic", ADDR, "rxe0", real_programs.cmtime(ADDR, "", 9))],
                         ["rping", "ucmatose", "udaddy", "cmtime", "ib_send_bw", "ib_send_bw_events", "qperf",
                          "fi_pingpong", "rdma_server_client", "rstream_sockets", "rstream_rsocket"])
        short = [p.name for p in real_programs.table("services-short", ADDR, "rxe0")]
        self.assertEqual(short, ["io_demo_tag", "io_demo_am", "io_demo_2conn", "iser", "riostream",
                                 "riostream_verify", "rdma_xserver_xclient", "mckey", "rcopy", "ib_write_bw",
                                 "ib_read_lat"])
        full = [p.name for p in real_programs.table("services", ADDR, "rxe0")]
        self.assertEqual(full, short[:4] + ["iser_perf", "iser_test_cu"] + short[4:])
        self.assertEqual(len(real_programs.CU_FULL), 37)
        self.assertEqual(list(real_programs.NOT_ON_IWARP), ["udaddy"])

    def test_sides(self):
        self.assertEqual(real.sides_spec(service("iser")),
                         "server:stop:TERM,c1-iscsi-inq:exit,c2-iscsi-readcapacity16:exit,c3-iscsi-swp:exit,"
                         "c4-iscsi-perf:exit,c5-iscsi-test-cu:exit")
        self.assertEqual(real.sides_spec(service("rcopy")), "server:kill,client:exit,verify:none")
        self.assertEqual(real.sides_spec(Program("x", "s", (Step("c", rc=139),), "exit", "tcp:1")),
                         "server:exit,client:signal")
        cu = [p for p in real_programs.table("services", ADDR, "rxe0") if p.name == "iser_test_cu"][0]
        self.assertEqual([(s.timeout, s.timed, s.cmd.count("SCSI.")) for s in cu.clients],
                         [(900, True, 10)] * 3 + [(900, True, 7)])

    def test_cmtime_variants(self):
        self.assertEqual(real_programs.cmtime_conns(100, "ib"), 50)
        self.assertEqual(real_programs.cmtime_conns(32767, "ib"), 200)
        self.assertEqual(real_programs.cmtime_conns(None, "ib"), 200)
        self.assertEqual(real_programs.cmtime_conns(32767, "iwarp"), 30)
        new = real_programs.cmtime(ADDR, "usage: -C controller_address", 30)
        self.assertEqual((new.server, new.clients[0].cmd, new.end, new.listen),
                         ("cmtime -b %s -C %s -L -c 30" % (ADDR, ADDR), "cmtime -b %s -C %s -c 30 -q 100000"
                          % (ADDR, ADDR), "exit", "tcp:7471"))
        mid = real_programs.cmtime(ADDR, "-q base_qpn", 50)
        self.assertEqual((mid.clients[0].cmd, mid.end), ("cmtime -s %s -c 50 -q 100000" % ADDR, "exit"))
        self.assertEqual(real_programs.cmtime(ADDR, "", 200).end, "kill")


class ArgsTest(unittest.TestCase):
    def quiet(self):
        old, sys.stderr = sys.stderr, io.StringIO()
        self.addCleanup(setattr, sys, "stderr", old)

    def test_defaults_and_options(self):
        o = real.parse_args([])
        self.assertEqual((o.set, o.modes, o.only, o.rounds, o.bench), ("basic", ["audit"], "", 1, ""))
        o = real.parse_args(["--set", "services", "--rounds", "3", "--bench", "d", "audit", "safe"])
        self.assertEqual((o.set, o.modes, o.rounds, o.bench), ("services", ["audit", "safe"], 3, "d"))

    def test_usage_errors_exit_2(self):
        self.quiet()
        for argv in (["--set", "nope"], ["bogus"], ["--only"]):
            with self.assertRaises(SystemExit) as e:
                real.parse_args(argv)
            self.assertEqual(e.exception.code, 2, argv)


class PairTest(unittest.TestCase):
    """A pair of shell scripts run as the harness runs a real one (the reference run: no
    preload, no RDMA); its logs, statuses and verdicts."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.out = io.StringIO()
        g = guest.Guest(ADDR, "rxe0", "ib", 1)
        self.h = real.Harness(g, "basic", ["audit"], "", 1, "", self.dir, KINDS, Tally("t", self.out))
        self.h.out = self.dir

    def script(self, name: str, text: str) -> str:
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(text)
        return "sh " + p

    def pair(self, server: str, client: str, end: str) -> tuple[Program, real.Pair]:
        go = os.path.join(self.dir, "go")
        srv = self.script("srv", "echo ready; i=0; while [ ! -f %s ] && [ $i -lt 50 ]; do sleep 0.1; "
                                 "i=$((i+1)); done; %s\n" % (go, server))
        cli = self.script("cli", "touch %s; echo test complete; %s\n" % (go, client))
        prog = Program("fake", srv, (Step(cli),), end, "log:ready")
        return prog, self.h.run_pair("base", prog, os.path.join(self.dir, "fake"))

    def read(self, name: str) -> list[str]:
        return real.lines(os.path.join(self.dir, name))

    def test_a_pair_that_works(self):
        prog, r = self.pair("exit 0", "exit 0", "exit")
        self.assertEqual((r.srv_rc, r.cli_rcs, r.listened), ("0", [0], True))
        self.assertEqual(self.read("fake.base.client.out"), ["test complete"])
        self.assertEqual(self.read("fake.base.server.rc"), ["0"])
        self.assertEqual(self.read("fake.base.client.cmd"), [prog.clients[0].cmd])
        self.assertEqual(self.h.pair_problems("base", prog, os.path.join(self.dir, "fake"), r, "0"), "")
        self.assertEqual(self.h.t.problems, [])

    def test_a_server_killed_after_its_client(self):
        prog, r = self.pair("sleep 30", "exit 3", "kill")
        self.assertEqual((r.srv_rc, r.cli_rcs), ("killed", [3]))
        self.h.pair_problems("audit", prog, os.path.join(self.dir, "fake"), r, "killed")
        self.assertEqual(self.h.t.problems, ["client: exit status 3, want 0"])

    def test_a_server_stopped_by_its_signal(self):
        prog, r = self.pair("trap 'exit 0' INT; sleep 30 & wait", "exit 0", "stop:INT")
        self.assertEqual(r.srv_rc, "0")
        prog, r = self.pair("exit 4", "sleep 2", "stop:INT")
        self.assertEqual(r.srv_rc, "exited early with 4")
        self.h.pair_problems("base", prog, os.path.join(self.dir, "fake"), r, "0")
        self.assertEqual(self.h.t.problems, ["without the preload: server: exited early with 4, want 0"])

    def test_listening(self):
        ids = ("link rxe0/1 cm-idn 3 state LISTEN ps TCP pid 812 comm rping src-addr 192.0.2.1:7174 "
               "dst-addr 0.0.0.0:0\nlink rxe0/1 cm-idn 4 state CONNECT ps TCP pid 813 comm ucmatose "
               "src-addr 192.0.2.1:7471 dst-addr 192.0.2.1:40000\n")
        self.assertTrue(real.cm_listening(ids, "rping:192.0.2.1:7174"))
        self.assertFalse(real.cm_listening(ids, "rping:192.0.2.1:7175"))
        self.assertFalse(real.cm_listening(ids, "udaddy:192.0.2.1:7174"))
        self.assertTrue(real.cm_listening(ids, "udaddy:192.0.2.1:7174", True))
        self.assertFalse(real.cm_listening(ids, "ucmatose:192.0.2.1:7471", True))
        out = os.path.join(self.dir, "s.out")
        with open(out, "w") as f:
            f.write("iser-target: ready\n")
        self.assertTrue(real.listening("log:iser-target: ready", out))
        self.assertFalse(real.listening("log:iser-target: ready", out, True))
        self.assertFalse(real.listening("log:iser-target: ready", out + "x"))

    def test_verdict_shows_the_logs(self):
        self.h.t.problem("p")
        with open(os.path.join(self.dir, "x.audit.client.err"), "w") as f:
            f.write("".join("%d\n" % i for i in range(20)))
        open(os.path.join(self.dir, "x.audit.server.err"), "w").close()
        self.h.verdict("x (audit)", [glob.escape(os.path.join(self.dir, "x.audit")) + ".*.err"])
        lines = self.out.getvalue().splitlines()
        self.assertEqual(lines[:3], ["FAIL x (audit)", "     - p",
                                     "     %s:" % os.path.join(self.dir, "x.audit.client.err")])
        self.assertEqual(lines[3:], ["     | %d" % i for i in range(12, 20)])


class BenchTest(unittest.TestCase):
    def test_services_md(self):
        rows = [["io_demo_tag", str(k), run, "client", secs, "p.r%d" % k, "io_demo x"]
                for k, (b, a) in enumerate(((10.0, 12.0), (20.0, 22.0), (30.0, 36.0)), 1)
                for run, secs in (("base", str(b)), ("audit", str(a)))]
        md = real.services_md(rows).splitlines()
        self.assertIn("### io_demo_tag: client wall time, 3 rounds", md)
        self.assertIn("| raw | 20.0 | 1.00 | 1.00-1.00 | 10.0 20.0 30.0 |", md)
        self.assertIn("| audit | 22.0 | 1.10 | 1.10-1.20 | 12.0 22.0 36.0 |", md)

    def test_field_md(self):
        rec = {"name": "n", "side": "server", "command": "a|b", "processes": 1, "events": 3,
               "by_type": {"ESTABLISHED": 1, "CONNECT_REQUEST": 2}, "acked": 3, "held_median_ms": 1.5,
               "held_max_ms": 2.0, "over_1s": {}, "findings": {"late-ack": 1}, "summaries": []}
        self.assertEqual(real.field_md([rec]).splitlines()[-1],
                         "| n | server | `a\\|b` | 1 | 3 | CONNECT_REQUEST 2, ESTABLISHED 1 | 1.500 / 2.000 | 0 "
                         "| late-ack 1 |")

    def test_field_records_of_a_recorded_run(self):
        d = os.path.join(DATA, "basic")
        recs = real.field_records("rping", os.path.join(d, "rping"), "server:exit,client:exit", KINDS)
        self.assertEqual([(r["side"], r["processes"], r["events"], r["findings"]) for r in recs],
                         [("server", 1, 3, {}), ("client", 1, 4, {})])
        self.assertEqual(recs[1]["by_type"], {"ADDR_RESOLVED": 1, "ROUTE_RESOLVED": 1, "ESTABLISHED": 1,
                                              "DISCONNECTED": 1})
        self.assertEqual(recs[1]["command"], "rping -c -a %s -C 3 -v" % ADDR)


if __name__ == "__main__":
    unittest.main()
