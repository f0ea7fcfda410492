"""The network faults' checks and tables (cmsafe_harness.faults) on the host.

Held to a run recorded on two Soft-RoCE guests (tests/harness/data/faults: 8 connections per
server, the servers' ASan builds, loss, partition and death): the servers' lines and event logs,
the clients' logs, faults.tsv, client-ends.tsv and the faults.md its tables came to. The times
from a fault are compared with what the bash driver's awk computed from the same logs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import faults, proc, storm  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "faults")


def log(name: str) -> list[str]:
    return proc.read_lines(os.path.join(DATA, name))


class LinesTest(unittest.TestCase):
    def test_wave_fields_and_events(self):
        out = log("partition-raw.out")
        self.assertEqual(faults.wave_field(out, 1, "beats_failed"), "8")
        self.assertEqual(faults.wave_field(out, 2, "destroy_max_us"), "11149")
        self.assertEqual(faults.wave_field(out, 3, "beats_failed"), "")
        self.assertEqual(faults.wave_events(out, 1),
                         "CONNECT_REQUEST:0=8 ESTABLISHED:0=8 DISCONNECTED:-110=8")
        self.assertEqual(faults.wave_events(out, 2),
                         "CONNECT_REQUEST:0=8 ESTABLISHED:0=8 DISCONNECTED:0=8")

    def test_client_events(self):
        self.assertEqual(faults.client_events(log("partition-raw.client1.log")),
                         "ADDR_ERROR:-110=8 ADDR_RESOLVED:0=16 DISCONNECTED:-110=8 "
                         "ESTABLISHED:0=16 ROUTE_RESOLVED:0=16 "
                         "WC:transport_retry_counter_exceeded=8 ")
        self.assertEqual(faults.client_events(["CE 17 rdma_connect -104 3", "noise"]),
                         "rdma_connect:-104=1 ")

    def test_end_times(self):
        # The bash driver's awk on the same event logs and fault times.
        self.assertEqual(faults.end_times(log("partition-raw.ev"), 1796409660.5),
                         "82753\t82863\t82909\t13979")
        self.assertEqual(faults.end_times(log("death-legacy.ev"), 1796409700.25),
                         "203777\t203966\t203982\t134317")
        self.assertEqual(faults.end_times(log("loss-raw.ev"), 1796409600),
                         "24758\t24826\t24853\t-1")
        self.assertEqual(faults.end_times([], 1.0), "-1\t-1\t-1\t-1")

    def test_client_ends(self):
        self.assertEqual(faults.client_ends(log("partition-raw.client1.log"), 1796409660.5),
                         "115892\t115911\t115930\t8")
        self.assertEqual(faults.client_ends(log("partition-raw.client1.log"), 2e9), "-\t-\t-\t0")

    def test_rows_as_recorded(self):
        recorded = {(r[0], r[1]): r for r in storm.read_tsv(os.path.join(DATA, "faults.tsv"))}
        for fault, server, wave_after in (("partition", "raw", 2), ("partition", "cmsafe", 2),
                                          ("death", "legacy", 2), ("loss", "raw", 1),
                                          ("loss", "legacy", 1)):
            name = "%s-%s" % (fault, server)
            out, ev = log(name + ".out"), log(name + ".ev")
            clients = [x for p in sorted(os.listdir(DATA))
                       if p.startswith(name + ".client") for x in log(p)]
            r = recorded[fault, server]
            row = faults.fault_row(fault, server, 8, out, ev, clients, 0.0, 0.0, wave_after)
            # The columns that do not count from the fault or the restore.
            for i in (0, 1, 2, 5, 6, 7, 8):
                self.assertEqual(row[i], r[i], (name, faults.TSV_COLUMNS[i]))
            self.assertEqual(sorted(row[9].split()), sorted(r[9].split()), name)
            self.assertEqual(len(row), len(faults.TSV_COLUMNS))

    def test_times_from_the_fault_and_the_restore(self):
        out, ev = log("partition-raw.out"), log("partition-raw.ev")
        row = faults.fault_row("partition", "raw", 8, out, ev, [], 1796409660.5, 1796409783.0, 2)
        self.assertEqual(row[3:5], ["82910", "845"])
        self.assertEqual(row[10:], ["82753", "82863", "82909", "13979"])
        # Reconnected before the restore: "-"; no restore: "-".
        self.assertEqual(faults.fault_row("partition", "raw", 8, out, ev, [], 0, 1796409790.0,
                                          2)[4], "-")
        self.assertEqual(faults.fault_row("partition", "raw", 8, out, ev, [], 0, 0, 2)[4], "-")
        # No destroy in wave 1: "-".
        out = [x for x in out if not x.startswith("STORM wave=1 ")]
        self.assertEqual(faults.fault_row("partition", "raw", 8, out, ev, [], 1796409660.5, 0,
                                          2)[3], "-")
        # The lossy setup's last destroy: the last terminal event before the restore.
        ev = log("loss-raw.ev")
        last = [x.split()[1] for x in ev if x.split()[3].endswith("DISCONNECTED")][-1]
        self.assertEqual(faults.last_end_before(ev, int(last) / 1e6 + 1), last)
        self.assertEqual(faults.last_end_before(ev, 1.0), "0")

    def test_ctl_clocks(self):
        answer = "ok cut server=1796409660.123456 client=1796409661.5"
        self.assertEqual(faults.ctl_clock(answer, "server"), 1796409660.123456)
        self.assertEqual(faults.ctl_clock(answer, "client"), 1796409661.5)
        self.assertEqual(faults.ctl_clock("ok", "server"), 0.0)


class ChecksTest(unittest.TestCase):
    def test_server_end(self):
        self.assertEqual(faults.server_end_verdict(0, log("partition-raw.out"),
                                                   log("partition-raw.err")),
                         (True, "the server saw every wave through and exited 0"))
        ok, text = faults.server_end_verdict(1, log("partition-raw.out"), ["a", "b"])
        self.assertFalse(ok)
        self.assertEqual(text, "the server saw every wave through and exited 1; last lines:\n"
                               "       | a\n       | b")
        out = [x for x in log("partition-raw.out") if not x.startswith("STORM done")]
        self.assertFalse(faults.server_end_verdict(0, out, [])[0])

    def test_loss_client(self):
        lines = log("loss-raw.client1.log")
        self.assertEqual(faults.loss_client_verdict(lines, 8),
                         (True, "under loss 8 up, 0 failed (0 error events), 0 lost ()"))
        self.assertFalse(faults.loss_client_verdict(lines, 9)[0])
        self.assertEqual(faults.loss_client_verdict([], 8),
                         (False, "under loss ? up, ? failed (0 error events), ? lost ()"))
        # 5 up, 2 that never came up (each with its error event), 1 lost after it was up.
        lossy = [x.replace("established=8 failed=0 lost=0", "established=5 failed=2 lost=1")
                 for x in lines] + [
            "EV 1796409600000001 RDMA_CM_EVENT_UNREACHABLE -110 5",
            "CE 1796409600000002 rdma_connect -111 6",
            "STORM-CLIENT lost index=7 event=RDMA_CM_EVENT_DISCONNECTED:-110"]
        self.assertEqual(faults.loss_client_verdict(lossy, 8),
                         (True, "under loss 5 up, 2 failed (2 error events), 1 lost "
                                "(DISCONNECTED:-110 x1)"))
        # A failed attempt without its error event, a loss without its line.
        self.assertFalse(faults.loss_client_verdict(lossy[:-3] + lossy[-2:], 8)[0])
        self.assertFalse(faults.loss_client_verdict(lossy[:-1], 8)[0])

    def test_partition_texts(self):
        clogs = [log("partition-%s.client1.log" % s) for s in ("cmsafe", "raw")]
        self.assertEqual(faults.clients_lost_text(clogs),
                         "RDMA_CM_EVENT_DISCONNECTED:-110 x8 ; "
                         "RDMA_CM_EVENT_DISCONNECTED:-110 x8 ; ")
        self.assertEqual(len(faults.lost_lines(clogs[1])), 8)
        self.assertEqual(faults.settled_text(log("loss-raw.client1.log") +
                                             log("loss-legacy.client1.log")),
                         "established=8 failed=0 lost=0; established=8 failed=0 lost=0")

    def test_server_checks_shared_with_the_storm(self):
        ok, text = storm.legacy_preload(log("death-legacy.out"), log("death-legacy.err"))
        self.assertEqual((ok, text), (True, "48 got=48 acked=48 maxrss_kb=18416; preload: pid "
                                            "959, mode safe, 48 events, 0 findings"))
        self.assertEqual(storm.cmsafe_counters(log("partition-cmsafe.out"))[0], True)
        self.assertEqual(storm.raw_acks(log("partition-raw.out")),
                         (True, "48 got=48 acked=48 maxrss_kb=16892"))
        self.assertFalse(storm.sanitizer_reported(log("partition-raw.err")))


class TablesTest(unittest.TestCase):
    def test_the_recorded_tables(self):
        md = "\n".join(log("faults.md")) + "\n"
        tables = faults.fault_tables(storm.read_tsv(os.path.join(DATA, "faults.tsv")))
        tables += faults.client_ends_table([x.split("\t") for x in log("client-ends.tsv")])
        body = md.split("\n\n", 1)[1]
        self.assertEqual(tables, body[:body.index("Checks:\n")])

    def test_tcp_summary(self):
        ss = ["State Recv-Q Send-Q Local Address:Port Peer Address:Port",
              "ESTAB 0 0 192.0.2.1:7701 192.0.2.2:40000",
              "\t cubic wscale:7,7 rto:1.6 backoff:3 retrans:1/4 rtt:0.5/0.25",
              "\t cubic wscale:7,7 rto:1.6 backoff:3 retrans:1/4",
              "\t cubic rto:0.2"]
        self.assertEqual(faults.tcp_summary(ss), ["    1 rto:0.2 retrans:0",
                                                  "    2 rto:1.6 retrans:1/4"])


class OptionsTest(unittest.TestCase):
    def test_fault_sizes(self):
        o = faults.parse_args(["--conns", "8", "--faults", "loss:200 partition death:500",
                               "--checked", "--wave-timeout", "3600"])
        self.assertEqual(faults.fault_specs(o), [("loss", 200), ("partition", 8),
                                                 ("death", 500)])
        self.assertEqual((o.checked, o.wave_timeout, o.timeout_given), (True, 3600, True))
        self.assertFalse(faults.parse_args([]).timeout_given)


class AgentTest(unittest.TestCase):
    """The client node's agent: each command once, answered with its sequence number."""

    def test_protocol(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        cmd = os.path.join(d, "agent.cmd")
        result: list[int] = []
        th = threading.Thread(target=lambda: result.append(faults.agent(d, cmd)), daemon=True)
        old = sys.stdout
        sys.stdout = open(os.devnull, "w")
        self.addCleanup(setattr, sys, "stdout", old)
        self.addCleanup(sys.stdout.close)
        th.start()

        def ask(text: str) -> str:
            with open(cmd + ".tmp", "w") as f:
                f.write(text + "\n")
            os.rename(cmd + ".tmp", cmd)
            seq = text.split()[0]
            for _ in range(100):
                got = proc.read_lines(cmd + ".done")
                if got and got[0].split()[0] == seq:
                    return got[0]
                threading.Event().wait(0.05)
            return ""

        self.assertEqual(ask("1 dance"), "1 2")
        self.assertEqual(ask("2 signal USR1"), "2 0")  # no client: nothing to signal
        self.assertEqual(ask("3 kill"), "3 0")
        self.assertEqual(ask("4 exit"), "4 0")
        th.join(5)
        self.assertEqual(result, [0])


if __name__ == "__main__":
    unittest.main()
