"""Network faults on two RDMA nodes, inside scripts/rxe-pair: both nodes' command (scripts/faults).

faults-in-guest server [--conns N] [--faults "loss partition death"] [--checked]
                       [--heartbeat MS] [--loss PCT] [--wave-timeout S] [--tcp-retries2 N]
                       [--results DIR]
faults-in-guest client --results DIR [--tcp-retries2 N]

The server node runs the three storm servers side by side (storm_server_cmsafe, the legacy
server under the safe-mode preload, storm_server_raw; ports 7701-7703), each with heartbeats
(storm.h), and drives every fault; the client node runs an agent that starts, signals and kills
storm_client processes (one per server, N connections each) on the driver's word
(RXE_PAIR_DIR/agent.cmd: "SEQ WHAT ARGS", answered in agent.cmd.done: "SEQ STATUS"). A fault
may name its own N: --faults "loss:200 death:500". The link and the client node are faulted
with `rxe-pair ctl`.
  loss       N connections set up under PCT% loss each way (netem), no retries: each must
             end ESTABLISHED or in an error event, none may hang ("settled"); the link is
             restored, the clients retry what failed (SIGUSR1) until all N are up.
  partition  N established, the link cut until every id on both sides has ended (the
             heartbeats fail, each side disconnects, the DREQs time out), restored: the
             clients reconnect all N.
  death      N established, the client node killed outright (qemu SIGKILLed: no DREQ, no
             RST); the servers find out by their heartbeats and the DREQs' timeouts; a fresh
             client node boots and reconnects all N at once.
The hang bound: a server wave that has not ended S seconds (default 600) after its first event
fails the run. The DREQ retries of many ids at once are slow (at 200 connections per server,
600 DREQs ended 450-500 s after the cut): give large runs more.

On Soft-iWARP (RXE_TRANSPORT=iwarp, scripts/faults --transport iwarp) each connection is a TCP
connection of the guests' kernels (siw): a heartbeat's SEND completes once TCP has it, and a
silent peer is noticed when TCP gives up retransmitting (net.ipv4.tcp_retries2), which closes
the socket: siw moves the QP to error (the posted receives flush) and the id gets DISCONNECTED.
Debian's tcp_retries2=15 takes about 925 s; --tcp-retries2 N (both nodes set it; default 6 on
iWARP: about 25 s, `default` keeps the guest's own) makes a run short. The server node records
its TCP sockets' RTO and retransmissions (ss -ti) a few seconds into a cut or a death, and the
tables give each side's times from the fault to its ids' terminal events (docs/faults.md).

Every fault ends with the clients SIGKILLed (the storm's way) and the servers' last wave
drained. Checks: every server exits 0 having seen each wave through (no hang: a wave bound of
WAVE_TIMEOUT_S, every rdma_destroy_id returned), fetched == acked, cmsafe's counters balance
with nothing live, the preload reports 0 findings, and with --checked the servers are the
ASan+UBSan+LSan builds (the legacy one under the preload) and report nothing; the clients'
events say what each fault did to them. Results in DIR: faults.tsv, faults.md, checks.txt, and
per fault and server the logs (NAME.out, NAME.err, NAME.ev: every event).
"""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

from . import guest, proc, storm, tally
from . import storm_cases as cases

PROG = "faults-in-guest"
SERVERS = ("cmsafe", "legacy", "raw")
FIRST_PORT = 7700  # the servers listen on 7701, 7702, 7703
TERMINAL = re.compile(r"DISCONNECTED|UNREACHABLE|CONNECT_ERROR|REJECTED")
AGENT_ANSWER = 120.0  # seconds the client node's agent has to do what it is told
AGENT_UP = 300.0  # seconds for the client node's first boot
SERVERS_READY = 60.0  # seconds for the servers' first "ready"
IWARP_MAX_CONNS = 35  # a fault run's server may hold 2N QPs: siw's 144 mappings, 2 per QP, 1 CQ
IWARP_RETRIES2 = "6"  # about 25 s before TCP gives up on a silent peer (Debian's 15: 925 s)
IWARP_DEBIAN_WAVE_TIMEOUT = 1500  # with Debian's 15 retries: about 925 s before ids end
TCP_SAMPLE_AFTER = 5.0  # seconds into a fault the server node's TCP sockets are recorded

FAULT_TITLE = {"loss": "lossy setup", "partition": "partition", "death": "node death"}
FAULT_FROM = {"loss": "loss on -> last failed id destroyed",
              "partition": "cut -> last server id destroyed",
              "death": "client node killed -> last server id destroyed"}
FAULT_TO = {"loss": "loss off -> all established (-: all were up under loss)",
            "partition": "restore -> all reconnected",
            "death": "fresh client started -> all reconnected"}

TSV_COLUMNS = ("fault", "server", "conns", "fault_to_last_destroy_ms", "restore_to_all_ms",
               "events_fault", "events_after", "beats_failed", "destroy_max_ms",
               "client_events", "end_ms_min", "end_ms_median", "end_ms_max", "detect_ms_median")


# ---- what the logs say --------------------------------------------------------------------

def wave_field(out: Sequence[str], wave: int, name: str) -> str:
    """A field of the server's "STORM wave=W" line ("" when it has none)."""
    values = []
    for line in storm.grep("STORM wave=%d " % wave, out):
        values += [w[len(name) + 1:] for w in line.split(" ") if w.startswith(name + "=")]
    return "\n".join(values)


def wave_events(out: Sequence[str], wave: int) -> str:
    """The server's "STORM events wave=W" line's TYPE:STATUS=COUNT words, without the prefix
    RDMA_CM_EVENT_."""
    return "\n".join(" ".join(line.split(" ")[3:]).replace("RDMA_CM_EVENT_", "")
                     for line in storm.grep("STORM events wave=%d" % wave, out))


def client_events(lines: Sequence[str]) -> str:
    """The events a client saw (over all its boots), by type and status: "TYPE:STATUS=COUNT "
    each, in the order of their names; WC: a failed heartbeat, rdma_connect: a failed connect."""
    n: dict[str, int] = {}
    for line in lines:
        f = line.split()
        key = None
        if f[:1] == ["EV"] and len(f) >= 4:
            key = "%s:%s" % (f[2], f[3])
        elif f[:1] == ["WC"] and len(f) >= 3:
            key = "WC:%s" % f[2]
        elif f[:1] == ["CE"] and len(f) >= 4:
            key = "rdma_connect:%s" % f[3]
        if key is not None:
            n[key] = n.get(key, 0) + 1
    return "".join("%s=%d " % (k.replace("RDMA_CM_EVENT_", "", 1), n[k]) for k in sorted(n))


def _med(values: list[float]) -> float:
    return storm.median(values) if values else -1


def end_times(ev: Sequence[str], t_fault: float) -> str:
    """When each connection of wave 1 ended on the server, from the fault (server clock): "min
    median max detect_median" in ms, tab-separated, detect = the failed heartbeat (WC line);
    -1 for none."""
    e: list[float] = []
    d: list[float] = []
    for line in ev:
        f = line.split()
        if len(f) < 4 or storm.num(f[2]) != 1:
            continue
        t = (storm.num(f[1]) / 1e6 - t_fault) * 1000
        if f[0] == "EV" and TERMINAL.search(f[3]):
            e.append(t)
        elif f[0] == "WC":
            d.append(t)
    e.sort()
    lo, hi = (e[0], e[-1]) if e else (-1, -1)
    return "%.0f\t%.0f\t%.0f\t%.0f" % (lo, _med(e), hi, _med(d))


def last_end_before(ev: Sequence[str], t: float) -> str:
    """The time (us) of the last terminal event before T (seconds), in file order; "0": none."""
    last = "0"
    for line in ev:
        f = line.split()
        if len(f) >= 4 and f[0] == "EV" and TERMINAL.search(f[3]) and storm.num(f[1]) / 1e6 < t:
            last = f[1]
    return last


def ms_from(t: float, us: str) -> str:
    b = storm.num(us)
    return "%.0f" % ((b / 1e6 - t) * 1000) if b > 0 else "-"


def restore_ms(t_restore: float, est_us: str) -> str:
    """From the restore to the reconnection wave's "established"; "-" when all were up before."""
    b = storm.num(est_us)
    if b > 0 and t_restore > 0 and b / 1e6 >= t_restore:
        return "%.0f" % ((b / 1e6 - t_restore) * 1000)
    return "-"


def fault_row(fault: str, server: str, conns: int, out: Sequence[str], ev: Sequence[str],
              client_logs: Sequence[str], t_fault: float, t_restore: float,
              wave_after: int) -> list[str]:
    """One row of faults.tsv. The fault's last destroy: wave 1's (partition, death), or for the
    lossy setup the last id that ended before the restore ("-": none did)."""
    last = wave_field(out, 1, "last_destroy_us")
    if fault == "loss":
        last = last_end_before(ev, t_restore)
    est = "\n".join(line.rsplit(" us=", 1)[1] for line in
                    storm.grep("STORM established wave=%d " % wave_after, out) if " us=" in line)
    return [fault, server, str(conns), ms_from(t_fault, last), restore_ms(t_restore, est),
            wave_events(out, 1), wave_events(out, 2), wave_field(out, 1, "beats_failed"),
            "%.1f" % (storm.num(wave_field(out, 1, "destroy_max_us")) / 1000),
            client_events(client_logs)] + end_times(ev, t_fault).split("\t")


def client_ends(lines: Sequence[str], t: float) -> str:
    """How the client's ids ended after T (the client node's clock): "min median max count" of
    its terminal events in ms from T, tab-separated."""
    e = sorted((storm.num(f[1]) / 1e6 - t) * 1000 for f in (x.split() for x in lines)
               if len(f) >= 3 and f[0] == "EV" and TERMINAL.search(f[2])
               and storm.num(f[1]) / 1e6 >= t)
    if not e:
        return "-\t-\t-\t0"
    return "%.0f\t%.0f\t%.0f\t%d" % (e[0], storm.median(e), e[-1], len(e))


def settled_counts(lines: Sequence[str]) -> tuple[str, str, str]:
    """The client's "STORM-CLIENT settled" line: established, failed, lost ("" each without)."""
    for line in lines:
        m = re.match(r"STORM-CLIENT settled established=([0-9]*) failed=([0-9]*) lost=([0-9]*)",
                     line)
        if m:
            return m.group(1), m.group(2), m.group(3)
    return "", "", ""


def error_events(lines: Sequence[str]) -> int:
    """Failed attempts: error events, and rdma_connect calls that failed themselves (CE: siw's
    blocking TCP connect, storm_client.c)."""
    n = 0
    for line in lines:
        f = line.split()
        if (f[:1] == ["EV"] and len(f) >= 3 and re.search(r"ERROR|UNREACHABLE|REJECTED", f[2])) \
                or f[:1] == ["CE"]:
            n += 1
    return n


def lost_lines(lines: Sequence[str]) -> list[str]:
    return storm.grep("STORM-CLIENT lost ", lines)


def lost_by_event(lines: Sequence[str], strip: bool) -> list[tuple[str, int]]:
    """The lost connections' events (what follows "event=", without RDMA_CM_EVENT_ when STRIP),
    counted, in the order of their text."""
    n: dict[str, int] = {}
    for line in lost_lines(lines):
        e = line.rsplit("event=", 1)[-1]
        if strip:
            e = e.replace("RDMA_CM_EVENT_", "", 1)
        n[e] = n.get(e, 0) + 1
    return [((k.split() or [""])[0], n[k]) for k in sorted(n)]


def loss_client_verdict(lines: Sequence[str], conns: int) -> tuple[bool, str]:
    """Under loss: E up, F never set up (each ended in an error event), L set up and then lost
    (a heartbeat ran out of retries: each ended in its DISCONNECTED); E + F + L = N."""
    ne, nf, nl = settled_counts(lines)
    nerr = error_events(lines)
    nlost = len(lost_lines(lines))

    def n(x: str) -> int:
        return int(x) if x else 0

    ok = nl != "" and n(ne) + n(nf) + n(nl) == conns and nf != "" and nerr >= n(nf) \
        and nlost >= n(nl)
    lost = ", ".join("%s x%d" % kv for kv in lost_by_event(lines, True))
    return ok, "under loss %s up, %s failed (%d error events), %s lost (%s)" % (
        ne or "?", nf or "?", nerr, nl or "?", lost)


def settled_text(lines: Sequence[str]) -> str:
    """The clients' settled lines, without their prefix and pid, "; "-separated."""
    parts = []
    for line in storm.grep("STORM-CLIENT settled", lines):
        parts.append(re.sub(r" pid=.*", "", line[len("STORM-CLIENT settled "):], count=1))
    return "; ".join(parts)


def clients_lost_text(logs: Sequence[Sequence[str]]) -> str:
    return "".join("".join("%s x%d " % kv for kv in lost_by_event(lines, False)) + "; "
                   for lines in logs)


def server_end_verdict(rc: int, out: Sequence[str], err: Sequence[str]) -> tuple[bool, str]:
    ok = rc == 0 and bool(storm.grep("STORM done ", out))
    detail = "the server saw every wave through and exited %d" % rc
    if not ok:
        detail += "; last lines:" + "".join("\n       | " + x for x in err[-5:])
    return ok, detail


def ctl_clock(answer: str, side: str) -> float:
    """A node's clock in `rxe-pair ctl`'s answer ("... server=T client=T ..."); 0 without."""
    m = re.search(r"%s=(\S*)" % side, answer)
    return storm.num(m.group(1)) if m else 0.0


# ---- the tables ---------------------------------------------------------------------------

def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def fault_tables(rows: Sequence[Sequence[str]]) -> str:
    """faults.md's tables, one section per fault in the order of the rows."""
    order: list[str] = []
    by: dict[tuple[str, str], Sequence[str]] = {}
    nconn: dict[str, str] = {}
    for r in rows:
        r = list(r) + [""] * (14 - len(r))
        if r[0] not in order:
            order.append(r[0])
        nconn[r[0]] = r[2]
        by[r[0], r[1]] = r

    def ratio(f: str, v: str, col: int) -> str:
        x = _number(v)
        raw = by.get((f, "raw"))
        base = _number(raw[col]) if raw else None
        return "%.2f" % (x / base) if x is not None and x > 0 and base and base > 0 else "-"

    o: list[str] = []
    for f in order:
        o.append("### %s, %s connections per server\n\n" % (FAULT_TITLE.get(f, ""), nconn[f]))
        o.append("| server | %s, ms | ratio to raw | %s, ms | ratio to raw | slowest "
                 "rdma_destroy_id, ms | heartbeats failed |\n" % (FAULT_FROM.get(f, ""),
                                                                  FAULT_TO.get(f, "")))
        o.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
        present = [s for s in SERVERS if (f, s) in by]
        for s in present:
            r = by[f, s]
            o.append("| %s | %s | %s | %s | %s | %s | %s |\n" % (
                cases.title(s), r[3], ratio(f, r[3], 3), r[4], ratio(f, r[4], 4), r[8], r[7]))
        if f != "loss":
            o.append("\nHow each connection of the first wave ended on the server, ms from the "
                     "fault (server clock): the failed heartbeat (median), then the id's terminal "
                     "event (min / median / max):\n\n")
            o.append("| server | heartbeat failed (median) | terminal event: min | median | max |"
                     "\n| --- | ---: | ---: | ---: | ---: |\n")
            for s in present:
                r = by[f, s]
                o.append("| %s | %s | %s | %s | %s |\n" % (cases.title(s), r[13], r[10], r[11],
                                                           r[12]))
        o.append("\nEvents by type:status (status: 0, a negative errno, or for REJECTED the IB CM "
                 "reason), server side, wave 1 (the fault) and wave 2 (the reconnection); client "
                 "side, all its events (WC: a failed heartbeat, by ibv_wc_status):\n\n")
        o.append("| server | server, wave 1 | server, wave 2 | its clients |\n"
                 "| --- | --- | --- | --- |\n")
        for s in present:
            r = by[f, s]
            o.append("| %s | %s | %s | %s |\n" % (cases.title(s), r[5], r[6] or "-", r[9]))
        o.append("\n")
    return "".join(o)


def client_ends_table(rows: Sequence[Sequence[str]]) -> str:
    o = ["How each client id ended on the client node after the cut, ms from the cut (the client "
         "node's clock):\n\n| server | terminal events | min | median | max |\n"
         "| --- | ---: | ---: | ---: | ---: |\n"]
    for r in rows:
        r = list(r) + [""] * (6 - len(r))
        o.append("| %s | %s | %s | %s | %s |\n" % (r[1], r[5], r[2], r[3], r[4]))
    return "".join(o) + "\n"


def tcp_summary(lines: Sequence[str]) -> list[str]:
    """ss -ti's sockets by "rto:R retrans:T", counted (uniq -c's lines, indented)."""
    n: dict[str, int] = {}
    for line in lines:
        if "rto:" not in line:
            continue
        r, t = "-", "0"
        for w in line.split():
            if w.startswith("rto:"):
                r = w[4:]
            if w.startswith("retrans:"):
                t = w[8:]
        key = "rto:%s retrans:%s" % (r, t)
        n[key] = n.get(key, 0) + 1
    return ["    %d %s" % (n[k], k) for k in sorted(n)]


# ---- the client node: the agent -----------------------------------------------------------

def agent(results: str, cmd_path: str) -> int:
    """Runs what the driver writes in CMD_PATH ("SEQ WHAT ARGS"), each once, and answers
    "SEQ STATUS" in CMD_PATH.done: start (NAME PORT SEED WAVE N WINDOW RETRY HEARTBEAT_MS)...,
    all at once; signal SIG; kill (SIGKILL, reaped); exit."""
    clients: dict[str, subprocess.Popen] = {}
    seq = "0"
    boot = os.environ.get("RXE_BOOT", "")
    peer = os.environ.get("RXE_PEER_ADDR", "")
    print("faults: client node %s (boot %s) waiting for the driver"
          % (os.environ.get("RXE_ADDR", ""), boot), flush=True)
    while True:
        time.sleep(0.1)
        lines = proc.read_lines(cmd_path)
        if not lines:
            continue
        words = lines[0].split()
        if len(words) < 2 or words[0] == seq:
            continue
        seq, what, args = words[0], words[1], words[2:]
        rc = 0
        if what == "start":
            for i in range(0, len(args) - 7, 8):
                name, port, s, wave, n, window, retry, beat = args[i:i + 8]
                argv = ["%s/storm_client" % cases.BIN, "-H", beat]
                if retry == "1":
                    argv.append("-r")
                argv += [peer, port, s, wave, "0", n, window]
                with open(os.path.join(results, "%s.client%s.log" % (name, boot)), "wb") as log:
                    clients[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                     stderr=subprocess.STDOUT)
        elif what == "signal":
            for p in clients.values():
                try:
                    if p.poll() is not None:
                        raise ProcessLookupError
                    p.send_signal(getattr(signal, "SIG" + " ".join(args)))
                except (ProcessLookupError, AttributeError):
                    rc = 1
        elif what == "kill":
            storm.kill_all(list(clients.values()))
            clients = {}
        elif what == "exit":
            with open(cmd_path + ".done", "w") as f:
                f.write("%s 0\n" % seq)
            return 0
        else:
            rc = 2
        with open(cmd_path + ".done.tmp", "w") as f:
            f.write("%s %d\n" % (seq, rc))
        os.rename(cmd_path + ".done.tmp", cmd_path + ".done")


# ---- the server node: the driver ----------------------------------------------------------

@dataclass
class Options:
    conns: int = 20
    faults: str = "loss partition death"
    checked: bool = False
    heartbeat: int = 1000
    loss: int = 20
    wave_timeout: int = 600
    timeout_given: bool = False
    results: str = "target/faults/results"
    retries2: str = ""
    transport: str = field(default_factory=lambda: os.environ.get("RXE_TRANSPORT", "roce"))


def parse_args(argv: Sequence[str]) -> Options:
    o = Options()
    given = storm.parse_options(
        PROG, argv, o, {"--checked": "checked"},
        {"--conns": "conns", "--heartbeat": "heartbeat", "--loss": "loss",
         "--wave-timeout": "wave_timeout"},
        {"--faults": "faults", "--results": "results", "--tcp-retries2": "retries2"})
    o.timeout_given = "wave_timeout" in given
    return o


def fault_specs(o: Options) -> list[tuple[str, int]]:
    """The faults, each with its N: "death:500" or the default --conns."""
    specs = []
    for spec in o.faults.split():
        name, _, n = spec.partition(":")
        specs.append((name, int(n) if n.isdigit() else o.conns))
    return specs


def tcp_setup(o: Options, role: str) -> str:
    """iWARP: this node's TCP decides when a silent peer's connections end. Debian's default (15:
    about 925 s) outlasts the wave bound, so the run sets a shorter one unless told `default`,
    and says both values. The note for the tables."""
    for spec in o.faults.split():
        n = spec.partition(":")[2] or str(o.conns)
        if not n.isdigit() or int(n) > IWARP_MAX_CONNS:
            guest.die(PROG, "on iWARP at most 35 connections per server (siw: 144 queue mappings "
                      "per process; a server may hold 2N QPs): %s" % spec)
    o.retries2 = o.retries2 or IWARP_RETRIES2
    sysctl = "/proc/sys/net/ipv4/tcp_retries2"
    was = proc.read_lines(sysctl)[0]
    if o.retries2 != "default":
        try:
            with open(sysctl, "w") as f:
                f.write(o.retries2 + "\n")
        except OSError:
            guest.die(PROG, "cannot set tcp_retries2")
    elif not o.timeout_given:
        o.wave_timeout = IWARP_DEBIAN_WAVE_TIMEOUT
    note = ("tcp_retries2 %s (the guest's default: %s), tcp_rto_min 200 ms, keepalive %s s (siw "
            "sets no SO_KEEPALIVE)" % (proc.read_lines(sysctl)[0], was,
                                      proc.read_lines("/proc/sys/net/ipv4/tcp_keepalive_time")[0]))
    print("faults: %s node: %s" % (role, note), flush=True)
    return note


class Driver:
    def __init__(self, o: Options, record, tcp_note: str):
        self.o = o
        self.t = tally.Tally("faults", record=record)
        self.r = o.results
        self.pair = os.environ["RXE_PAIR_DIR"]
        self.cmd = os.path.join(self.pair, "agent.cmd")
        self.addr = os.environ.get("RXE_ADDR", "")
        self.peer = os.environ.get("RXE_PEER_ADDR", "")
        self.tcp_note = tcp_note
        self.aseq = 0
        self.conns = o.conns
        self.root = os.getcwd()
        self.servers: dict[str, proc.Background] = {}
        self.seeds: dict[str, str] = {}
        self.ports: dict[str, int] = {}
        self.outs: list[str] = []
        self.samplers: list[threading.Thread] = []

    def say(self, text: str) -> None:
        self.t.say("faults: " + text)

    def path(self, *parts: str) -> str:
        return os.path.join(self.r, "-".join(parts))

    def agent(self, *words: str) -> bool:
        """The client node's agent does WORDS; waits for its answer (True: it did)."""
        self.aseq += 1
        with open(self.cmd + ".tmp", "w") as f:
            f.write("%d %s\n" % (self.aseq, " ".join(words)))
        os.rename(self.cmd + ".tmp", self.cmd)
        deadline = time.monotonic() + AGENT_ANSWER
        while True:
            lines = proc.read_lines(self.cmd + ".done")
            line = lines[0] if lines else ""
            if line.split(" ", 1)[0] == str(self.aseq):
                return line.split(" ", 1)[1:] == ["0"]
            if time.monotonic() >= deadline:
                self.say('the client node\'s agent did not answer "%s"' % " ".join(words))
                return False
            time.sleep(0.1)

    def wait_agent_up(self, boot: int) -> bool:
        deadline = time.monotonic() + AGENT_UP
        while proc.read_lines(os.path.join(self.pair, "up.client"))[:1] != [str(boot)]:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    def ctl(self, *action: str) -> str | None:
        """The link or the client node, through rxe-pair: its answer, None when it failed."""
        r = subprocess.run(["scripts/rxe-pair", "ctl"] + list(action), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE)
        answer = r.stdout.decode("utf-8", "replace").rstrip("\n")
        if r.returncode != 0:
            self.say("ctl %s: %s" % (" ".join(action), answer))
            return None
        return answer

    def ctl_time(self, *action: str) -> float:
        """ctl ACTION; the server node's clock when it took effect (0 when it failed)."""
        answer = self.ctl(*action)
        return ctl_clock(answer, "server") if answer is not None else 0.0

    def wait_for(self, pattern: str, paths: Sequence[str], limit: float | None = None) -> bool:
        """Until every file has a line matching PATTERN, or a server died, or LIMIT seconds
        (the wave bound by default) passed."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + (self.o.wave_timeout if limit is None else limit)
        while True:
            if all(any(regex.search(x) for x in proc.read_lines(p)) for p in paths):
                return True
            for s in SERVERS:
                if s in self.servers and not self.servers[s].alive():
                    self.say("%s's server ended waiting for /%s/" % (s, pattern))
                    return False
            if time.monotonic() >= deadline:
                self.say("timed out waiting for /%s/ in %s" % (pattern, " ".join(paths)))
                return False
            time.sleep(0.5)

    def start_servers(self, fault: str, waves: int) -> bool:
        self.servers = {}
        for k, s in enumerate(SERVERS, 1):
            self.seeds[s] = storm.seed()
            self.ports[s] = FIRST_PORT + k
            exe = "%s/%sstorm_server_%s" % (cases.BIN, "asan/" if self.o.checked else "", s)
            cmd = ["env", "STORM_EVENT_LOG=%s.ev" % self.path(fault, s)]
            if s == "legacy":
                cmd += ["LD_PRELOAD=%s/%s" % (self.root, cases.PRELOAD), "CMSAFE_MODE=safe"]
                if self.o.checked:
                    cmd.append("ASAN_OPTIONS=%s:verify_asan_link_order=0" % cases.ASAN_OPTIONS)
            cmd += [exe, self.addr, str(self.ports[s]), self.seeds[s], str(self.conns),
                    str(waves), str(self.o.wave_timeout), str(self.o.heartbeat)]
            with open(self.path(fault, s) + ".cmd", "w") as f:
                f.write(" ".join(cmd).replace(self.root + "/", "") + "\n")
            self.servers[s] = proc.Background(cmd, self.path(fault, s))
        return self.wait_for("^STORM ready wave=1 ", self.outs, SERVERS_READY)

    def start_clients(self, fault: str, wave: int, window: int, retry: int) -> bool:
        spec: list[str] = []
        for s in SERVERS:
            spec += ["%s-%s" % (fault, s), str(self.ports[s]), self.seeds[s], str(wave),
                     str(self.conns), str(window), str(retry), str(self.o.heartbeat)]
        return self.agent("start", *spec)

    def stop_servers(self) -> None:
        for bg in self.servers.values():
            bg.stop(signal.SIGKILL)

    def finish(self, fault: str) -> None:
        """The servers' end: each must exit 0; then what each must show."""
        for s in SERVERS:
            bg = self.servers[s]
            # Each server's own alarm bounds a wave (WAVE_TIMEOUT_S from its first event).
            rc = bg.wait(self.o.wave_timeout + storm.SERVER_EXIT_GRACE)
            if rc is None:
                rc = bg.stop(signal.SIGKILL)
            out, err = bg.out(), bg.err()
            ok, detail = server_end_verdict(rc, out, err)
            self.t.check("%s %s" % (fault, s), ok, detail)
            if s == "cmsafe":
                ok, text = storm.cmsafe_counters(out)
                self.t.check("%s %s counters" % (fault, s), ok, "cmsafe_stats_get: " + text)
            elif s == "raw":
                ok, text = storm.raw_acks(out)
                self.t.check("%s %s acks" % (fault, s), ok, "fetched and acked: " + text)
            elif s == "legacy":
                ok, text = storm.legacy_preload(out, err)
                self.t.check("%s %s preload" % (fault, s), ok, text)
            if self.o.checked:
                reported = storm.sanitizer_reported(err)
                self.t.check("%s %s sanitizers" % (fault, s), not reported,
                             "ASan, UBSan, LSan: %s"
                             % ("REPORTED (see the log)" if reported else "no report"))

    def client_logs(self, fault: str, s: str) -> list[str]:
        lines: list[str] = []
        for p in sorted(glob.glob(glob.escape(self.path(fault, s)) + ".client*.log")):
            lines += proc.read_lines(p)
        return lines

    def row(self, fault: str, s: str, t_fault: float, t_restore: float, wave_after: int) -> None:
        out = proc.read_lines(self.path(fault, s) + ".out")
        ev = proc.read_lines(self.path(fault, s) + ".ev")
        r = fault_row(fault, s, self.conns, out, ev, self.client_logs(fault, s), t_fault,
                      t_restore, wave_after)
        with open(os.path.join(self.r, "faults.tsv"), "a") as f:
            f.write("\t".join(r) + "\n")

    def tcp_sample(self, fault: str) -> None:
        """iWARP: the server node's TCP sockets a few seconds into a fault (their RTO,
        retransmissions, backoff: what tcp_retries2's bound runs on), in the background."""
        if self.o.transport != "iwarp":
            return

        def sample() -> None:
            time.sleep(TCP_SAMPLE_AFTER)
            with open(os.path.join(self.r, fault + "-tcp.txt"), "wb") as f:
                subprocess.run(["ss", "-tin", "state", "established"], stdin=subprocess.DEVNULL,
                               stdout=f, stderr=subprocess.STDOUT)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        self.samplers.append(th)

    # ---- the faults ---------------------------------------------------------------------

    def loss(self, boot: int) -> None:
        o = self.o
        self.say("loss: %d connections per server under %d%% loss each way, no retries"
                 % (self.conns, o.loss))
        if not self.start_servers("loss", 1):
            self.not_started("loss")
            return
        t_fault = self.ctl_time("loss", str(o.loss))
        self.start_clients("loss", 1, 16, 0)
        clogs = ["%s.client%d.log" % (self.path("loss", s), boot) for s in SERVERS]
        ok = self.wait_for("^STORM-CLIENT settled ", clogs)
        settled = settled_text([x for p in clogs for x in proc.read_lines(p)])
        self.t.check("loss settle", ok, "under %d%% loss every connection was set up or ended in "
                     "an event, none hung: %s" % (o.loss, settled))
        t_restore = self.ctl_time("restore")
        self.agent("signal", "USR1")
        ok = self.wait_for("^STORM established wave=1 ", self.outs)
        self.t.check("loss retries", ok, "once the loss stopped, the retries brought every server "
                     "all %d at once" % self.conns)
        self.end("loss")
        for s in SERVERS:
            self.row("loss", s, t_fault, t_restore, 1)
            # Each failed attempt ended in an error event with its status, and nothing else
            # failed.
            ok, text = loss_client_verdict(
                proc.read_lines("%s.client%d.log" % (self.path("loss", s), boot)), self.conns)
            self.t.check("loss %s client" % s, ok, "%s; all its events: %s"
                         % (text, client_events(self.client_logs("loss", s))))

    def end(self, fault: str) -> None:
        """The clients SIGKILLed (the storm's way), the servers' last wave drained, their
        checks."""
        self.agent("kill")
        self.wait_for("^STORM done ", self.outs)
        self.finish(fault)

    def not_started(self, fault: str) -> None:
        self.t.check(fault, False, "the servers did not start")
        self.stop_servers()

    def established(self, fault: str, retry: int) -> bool:
        """The servers up for two waves (the fault's and the reconnection), the clients started,
        all N established; a failed check otherwise."""
        if not self.start_servers(fault, 2):
            self.not_started(fault)
            return False
        self.start_clients(fault, 1, 16, retry)
        if not self.wait_for("^STORM established wave=1 ", self.outs):
            self.t.check(fault, False, "not established")
            self.agent("kill")
            self.finish(fault)
            return False
        return True

    def partition(self, boot: int) -> None:
        self.say("partition: %d connections per server established, the link cut until every "
                 "id has ended, restored" % self.conns)
        clogs = ["%s.client%d.log" % (self.path("partition", s), boot) for s in SERVERS]
        if not self.established("partition", 1):
            return
        answer = self.ctl("cut")
        t_fault = ctl_clock(answer, "server") if answer is not None else 0.0
        t_fault_client = ctl_clock(answer or "", "client")
        self.tcp_sample("partition")
        ok = self.wait_for("^STORM wave=1 ", self.outs)
        self.t.check("partition servers", ok, "every server id ended and was destroyed while the "
                     "link was cut")
        # The clients' side: every established connection lost, each with its terminal event.
        ok = False
        deadline = time.monotonic() + self.o.wave_timeout
        while time.monotonic() < deadline:
            if all(len(lost_lines(proc.read_lines(p))) >= self.conns for p in clogs):
                ok = True
                break
            time.sleep(1)
        self.t.check("partition clients", ok, "every client id ended while the link was cut: %s"
                     % clients_lost_text([proc.read_lines(p) for p in clogs]))
        t_restore = self.ctl_time("restore")
        ok = self.wait_for("^STORM established wave=2 ", self.outs)
        self.t.check("partition reconnect", ok, "after the restore every client reconnected all %d"
                     % self.conns)
        self.end("partition")
        for s in SERVERS:
            self.row("partition", s, t_fault, t_restore, 2)
            with open(os.path.join(self.r, "client-ends.tsv"), "a") as f:
                f.write("partition\t%s\t%s\n" % (s, client_ends(self.client_logs("partition", s),
                                                                t_fault_client)))

    def death(self, boot: int) -> int:
        """The client node's death; the boot number of the fresh node."""
        self.say("death: %d connections per server established, the client node killed, a fresh "
                 "one reconnects" % self.conns)
        if not self.established("death", 0):
            return boot
        t0 = time.time()
        self.ctl("kill", "client")
        t_fault = time.time()
        self.tcp_sample("death")
        self.say("client node killed between %.6f and %.6f (server clock): times below count "
                 "from the later" % (t0, t_fault))
        ok = self.wait_for("^STORM wave=1 ", self.outs)
        self.t.check("death servers", ok, "every server found every connection of the dead node "
                     "gone, by its own heartbeats and timers, and destroyed it")
        # The dead node's last command is not the fresh node's: its agent starts at sequence 0
        # and would run that "start" again (a second set of clients no "kill" names, whose
        # connections keep the reconnection wave open until its time bound).
        for p in (self.cmd, self.cmd + ".done"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self.ctl("boot", "client")
        boot += 1
        t_restore = time.time()
        self.start_clients("death", 2, self.conns, 1)
        ok = self.wait_for("^STORM established wave=2 ", self.outs)
        self.t.check("death reconnect", ok, "the fresh client node reconnected all %d to every "
                     "server at once" % self.conns)
        self.end("death")
        for s in SERVERS:
            self.row("death", s, t_fault, t_restore, 2)
        return boot

    def run(self) -> int:
        o = self.o
        self.say("server node %s, client node %s; kernel %s, %d vCPUs; %d connections per server;"
                 " heartbeat %d ms; %s" % (self.addr, self.peer, platform.release(), storm.vcpus(),
                                           o.conns, o.heartbeat,
                                           "checked (ASan) builds" if o.checked
                                           else "plain -O2 builds"))
        if not self.wait_agent_up(1):
            self.say("the client node never came up")
            return 1
        boot = 1
        for fault, n in fault_specs(o):
            self.conns = n
            self.outs = [self.path(fault, s) + ".out" for s in SERVERS]
            if fault == "loss":
                self.loss(boot)
            elif fault == "partition":
                self.partition(boot)
            elif fault == "death":
                boot = self.death(boot)
            else:
                self.t.check(fault, False, "unknown fault")
        self.agent("exit")
        for th in self.samplers:
            th.join()
        md = self.tables()
        with open(os.path.join(self.r, "faults.md"), "w") as f:
            f.write(md)
        self.t.say("")
        sys.stdout.write(md)
        self.t.say("")
        self.t.say("faults: %d checks passed, %d failed" % (self.t.passed, self.t.failed))
        return 1 if self.t.failed else 0

    def tables(self) -> str:
        o = self.o
        stack = "Soft-RoCE (rxe)"
        if o.transport == "iwarp":
            stack = "Soft-iWARP (siw, %s)" % self.tcp_note
        parts = ["Two guests (qemu TCG, %d vCPUs each, kernel %s), %s on virtio-net, joined by a "
                 "socket on the host loopback; faults by tc netem in the guests and by killing the "
                 "client guest's qemu. The three servers side by side under the same fault, each "
                 "with its own client process; heartbeat every %d ms each way; %s.\n\n"
                 % (storm.vcpus(), platform.release(), stack, o.heartbeat,
                    "ASan+UBSan+LSan builds of the servers" if o.checked
                    else "plain -O2 builds")]
        parts.append(fault_tables(storm.read_tsv(os.path.join(self.r, "faults.tsv"))))
        ends = [x.split("\t") for x in proc.read_lines(os.path.join(self.r, "client-ends.tsv"))]
        if ends:
            parts.append(client_ends_table(ends))
        for p in sorted(glob.glob(os.path.join(self.r, "*-tcp.txt"))):
            lines = proc.read_lines(p)
            if not lines:
                continue
            parts.append("The server node's TCP sockets 5 s into the %s (ss -ti: each socket's "
                         "rto, in seconds as the guests' ss prints it, and retrans fields, "
                         "counted):\n\n" % os.path.basename(p)[:-len("-tcp.txt")])
            parts.append("".join(x + "\n" for x in tcp_summary(lines)) + "\n")
        parts.append("Checks:\n\n")
        parts.append("".join("    %s\n" % x
                             for x in proc.read_lines(os.path.join(self.r, "checks.txt"))))
        parts.append("\nServer commands (ADDR PORT SEED CONNS WAVES WAVE_TIMEOUT_S HEARTBEAT_MS):"
                     "\n\n")
        for p in sorted(glob.glob(os.path.join(self.r, "*.cmd"))):
            parts.append("    %s\n" % "\n".join(proc.read_lines(p)))
        return "".join(parts)


def main(argv: list[str]) -> int:
    os.chdir(guest.project_root())
    if not os.environ.get("RXE_PAIR_DIR"):
        guest.die(PROG, "run this under scripts/rxe-pair (scripts/faults does)")
    if not argv:
        guest.die(PROG, "server or client")
    role, o = argv[0], parse_args(argv[1:])
    tcp_note = tcp_setup(o, role) if o.transport == "iwarp" else ""
    cmd = os.path.join(os.environ["RXE_PAIR_DIR"], "agent.cmd")
    if role == "client":
        return agent(o.results, cmd)
    if role != "server":
        guest.die(PROG, "server or client")
    storm.missing_programs(PROG)
    shutil.rmtree(o.results, ignore_errors=True)
    try:
        os.makedirs(o.results)
    except OSError:
        return 2
    with open(os.path.join(o.results, "faults.tsv"), "w") as f:
        f.write("\t".join(TSV_COLUMNS) + "\n")
    storm.sanitizer_env(os.getcwd())
    with open(os.path.join(o.results, "checks.txt"), "w") as record:
        return Driver(o, record, tcp_note).run()
