"""The real programs scripts/preload-real-programs runs, as data: the basic set, the services.

A program is a server and one or more client commands run against it; each command is one
string, split on blanks when it runs (none quotes), and written as it is in the side's .cmd log.
What their key output must show without the preload is here too (EXPECT_*), beside the program.

Known bugs of the programs themselves, each accepted only as named here:

- cmtime's server (rdmacm-utils 44) queues each DISCONNECTED to a worker thread that calls
  rdma_disconnect, rdma_destroy_qp and rdma_destroy_id, while the event thread acks the event
  only after queueing it. When the worker wins that race, rdma_destroy_qp and rdma_destroy_id run
  with the DISCONNECTED unacked (librdmacm's destroy then waits for the event thread's ack), and
  the preload reports it (qp-destroy-before-ack, destroy-with-unacked): a real race in cmtime, a
  few of its 200 connections per run here. The check stays strict: any finding fails.
- rping's teardown race (rdmacm-utils' rping.c): its main thread destroys the event channel
  while its CM thread is between two rdma_get_cm_event calls; the CM thread's next call reads the
  freed channel, fails with EBADF, and the thread calls exit(-1), so that side exits 255 after
  its work is done. A race of the program's own, seen raw and preloaded alike (a few runs in a
  hundred). Preloaded, the audit names it (use-after-destroy-channel, at most once per side, at
  rping's code, and no other finding: RPING_RACE) and that side's exit status 255 is accepted
  with it; raw, nothing can name it but rping's own line ("rdma_get_cm_event: Bad file
  descriptor"), and the reference run is accepted with that. Any other outcome fails as always;
  the summary is still asked for: the CM thread's exit(-1) meets the main thread's exit, and
  the preload's last exit handler makes it wait for the summary (tests/host/test_exit.py).
  rping from rdma-core 59 on (sid's 65) has another race instead (commit f3ae6534a): its CM
  thread polls the channel's fd and an eventfd and calls rdma_get_cm_event when the channel is
  readable, and its main thread destroys the id before it stops that thread. An event queued
  just before the destroy (the client's DISCONNECTED) is dropped by the kernel with the id, and
  the CM thread's rdma_get_cm_event blocks for good, so does the main thread's pthread_join of
  it: about one client run in a hundred, raw and preloaded alike. Preloaded, the hang watcher
  names it (get-event-without-ids, CMSAFE_HANG_MS after the destroy); the run still fails as a
  hang: the client is killed by its timeout(1), with no summary and no stdout to compare.
- perftest 4.5-0.17's RDMA CM retry (perftest_communication.c, fixed upstream in perftest
  3d9d8d0). With -R, after the handshake over its first connection the server makes a second
  listen id on the same port while the client resolves and connects at once; a client that gets
  there first is REJECTED (status 8, nothing listening yet). Shown on the stack with the
  server's second rdma_listen delayed: 1 ms lost 1 run in 5, 2 ms 3 in 5, 4 ms all, so a loaded
  guest loses it now and then, raw as preloaded. The client's retry then destroys its ids and
  channel, frees the array holding them, and calls rdma_resolve_addr with a slot of that array,
  by then malloc's for rdma_getaddrinfo's sockaddr_in (bytes 02 00 48 53 c0 00 02 01: not an
  address): raw, a general protection fault in librdmacm. The audit names it (not-a-cm-id at
  rdma_resolve_addr, from perftest's code; use-after-destroy-id when the slot still held the
  destroyed id) and the process dies as raw; safe mode refuses the call (and the clean-up's
  calls on the same slot and channel, each named) and perftest exits 1. That run's outcome is
  counted apart with the finding and said in its line (real.perftest_retry_bug); raw, only
  perftest's REJECTED line and the fault can name it. The server, still waiting for the
  connect, is stopped after its grace. Any other outcome fails as always.
- UCX (1.13) holds each CONNECT_REQUEST unacked until the application accepts the connection,
  and that is right: uct/ib/rdmacm/rdmacm_cm.c hands the event itself up as the connection
  request (conn_req_args.conn_request = event; listener->conn_request_cb(...)) and acks it only
  in uct_rdamcm_cm_ep_server_init() (rdmacm_cm_ep.c: uct_rdmacm_cm_ack_event(event)) once UCP
  creates the server endpoint, or in uct_rdmacm_listener_reject(). io_demo creates it from its
  main loop, so the event is held for as long as that takes: 1.4 to 4.5 s in this guest, past
  the audit's late-ack threshold (CMSAFE_LATE_ACK_MS, 1000 ms), while the id's state machine
  waits. The server may therefore have one late-ack per connection, for a CONNECT_REQUEST, acked
  from uct_rdmacm_cm_ack_event, and nothing else. How many cross the threshold is a matter of
  time (on fast hardware none would; with the services' 120 s threshold none does), so the test
  holds the kind, the event and the place, and at most that count.
- tgt + libiscsi over iSER: scripts/iser-target runs tgtd and stops it only once no I_T nexus is
  left. libiscsi 1.19's iSER transport never clears its connection state: the initiator tools
  run with MALLOC_PERTURB_=255 in their environment (the programs stay unmodified). Its
  ALL.*.Async and logout/reconnect tests crash raw: not run. iscsi-perf's -t runtime can wrap
  around under TCG (a progress tick that skips the last second never ends it): it is stopped by
  SIGTERM instead (scripts/stop-after, once it says it has started), and then finishes, logs out
  and exits 0. Left out: iscsi-ls 1.19 over iSER. Its discovery logout callback calls
  iscsi_disconnect(), which frees the iSER connection, and its event loop then services the
  freed context: SIGSEGV after it printed the target, raw, every time. And when its CM thread is
  cancelled inside the kernel's event read (below), its rdma_destroy_id waits forever: a run
  here under audit hung so, and the audit named it (destroy-waits-for-lost-event, naming the
  cancelled thread). A program that crashes raw every time and may hang has no result to
  compare. libiscsi 1.19 also cancels its CM thread at every disconnect, so a thread cancelled
  inside the kernel's event read can lose an event and make rdma_destroy_id wait forever (fixed
  in 1.20): every command is bounded by timeout(1), and such a hang fails the run, naming the
  command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence


@dataclass(frozen=True)
class Step:
    """One client command. RC: the exit status it must have, raw and preloaded; TIMEOUT: its
    timeout(1) in seconds (None: the set's client timeout); TIMED: its time is the figure
    --bench reports."""

    cmd: str
    rc: int = 0
    timeout: int | None = None
    timed: bool = False


@dataclass(frozen=True)
class Allow:
    """A finding a program really earns: of KIND, for event TYPE, made at a call from FUNCTION,
    at most MOST of them on SIDE; any other finding fails the run as always."""

    side: str
    kind: str
    type: str
    function: str
    most: int


@dataclass(frozen=True)
class Program:
    """NAME: the server command, the client commands run one after the other against it (each a
    side of its own when there are several), and:
    END      how the server ends: "exit" (by itself), "kill" (runs until killed after the
             clients) or "stop:SIG" (runs until sent SIG, then exits 0 by itself);
    LISTEN   how to see it listen: "cm:COMM:ADDR:PORT" (a LISTEN id of that program at that
             address in `rdma res show cm_id`), "tcp:PORT" or "log:TEXT" (its stdout says TEXT);
    TOUCHES  whether it uses librdmacm at all (the preload must stay silent when not);
    VERIFY   a shell command run without the preload after the pair, its output compared like
             key output ("": none);
    TIMED    --rounds applies to it."""

    name: str
    server: str
    clients: Sequence[Step]
    end: str
    listen: str
    touches: bool = True
    verify: str = ""
    timed: bool = False
    allow: Sequence[Allow] = field(default_factory=tuple)


# What cannot run on iWARP, by program name: counted apart in each mode with the reason.
NOT_ON_IWARP = {
    "udaddy": "UD (RDMA_PS_UDP): iWARP is RC only, siw's rdma_create_qp of a UD QP fails with EOPNOTSUPP",
}

# rping's teardown race (above): one use-after-destroy-channel per side, at rping's code.
RPING_RACE = (
    Allow("client", "use-after-destroy-channel", "-", "rping", 1),
    Allow("server", "use-after-destroy-channel", "-", "rping", 1),
)


def cmtime_conns(max_ah: int | None, transport: str) -> int:
    """cmtime's connections (-c): 200, or half the device's max_ah where that is less. Each CM
    message in flight holds an address handle of the device (ib_cm's cm_alloc_msg:
    rdma_create_ah), and here client and server share one device, so a connection may hold two
    at once. rxe in Linux 5.10 (bullseye) has 100 (ibv_devinfo's max_ah; 32767 in 6.1), and a
    create past them fails with EINVAL (rxe_pool.c, rxe_add_to_pool), which rdma_connect and
    rdma_accept then return: with 200, bullseye's cmtime lost 49 to 97 of its connections, raw,
    and its client waited for good.
    On Soft-iWARP a process holds at most 144 queue mappings (siw_mmap_entry_insert's key
    0x90000, the 145th, is SIW_INVAL_UOBJ_KEY: libsiw then fails rdma_create_qp), and each of
    cmtime's connections maps four (rdma_create_qp without CQs makes a send and a receive CQ):
    30 fit."""
    if transport == "iwarp":
        return 30
    if max_ah is not None and max_ah < 400:
        return max_ah // 2
    return 200


def cmtime(addr: str, usage: str, conns: int) -> Program:
    """cmtime's command line is its rdma-core's (read from its own usage text):
    - to rdma-core 44: server `cmtime -b A`, client `cmtime -s A`; the server runs until killed.
    - rdma-core 56 adds -q base_qpn (and -m, -n, -S) to that line, and both sides run a warm-up,
      the QP test and a "no QPs" test, each printing its step table as rdma-core 65's do below,
      and exit 0: the server no longer runs until killed. The no-QPs test connects ids without
      QPs, announcing QP numbers counted up from base_qpn (1000 by default) on both sides; on one
      node two sides with the same base collide, so the client counts from 100000.
    - rdma-core 65 (librdmacm/examples/cmtime.c rewritten on a mesh of peers joined by a TCP
      channel): -s is gone; every peer names the controller (-C A, the TCP root on port 7471,
      the first peer to bind it) and its own address (-b A); the server says -L (listener). Both
      sides run a warm-up, the QP test and the no-QPs test, each printing its step table, and
      exit 0. The RDMA listener has a port of its own choosing; the server's TCP root on 7471
      listens after it. The same QP number collision: the client counts from 100000."""
    a, c = addr, conns
    if "-C controller_address" in usage:
        return Program("cmtime", "cmtime -b %s -C %s -L -c %d" % (a, a, c),
                       (Step("cmtime -b %s -C %s -c %d -q 100000" % (a, a, c)),), "exit", "tcp:7471")
    if "-q base_qpn" in usage:
        return Program("cmtime", "cmtime -b %s -c %d" % (a, c),
                       (Step("cmtime -s %s -c %d -q 100000" % (a, c)),), "exit", "cm:cmtime:%s:7471" % a)
    return Program("cmtime", "cmtime -b %s -c %d" % (a, c), (Step("cmtime -s %s -c %d" % (a, c)),),
                   "kill", "cm:cmtime:%s:7471" % a)


def basic(addr: str, dev: str, cmtime_entry: Program) -> list[Program]:
    """The basic set: rdma-core's samples, perftest, qperf, libfabric, rsockets."""
    a = addr

    def pair(name, server, client, end, listen, **kw):
        return Program(name, server, (Step(client),), end, listen, **kw)

    return [
        pair("rping", "rping -s -a %s -C 3 -v" % a, "rping -c -a %s -C 3 -v" % a, "exit",
             "cm:rping:%s:7174" % a, allow=RPING_RACE),
        pair("ucmatose", "ucmatose -b %s" % a, "ucmatose -s %s" % a, "exit", "cm:ucmatose:%s:7471" % a),
        pair("udaddy", "udaddy -b %s" % a, "udaddy -s %s" % a, "exit", "cm:udaddy:%s:7174" % a),
        cmtime_entry,
        pair("ib_send_bw", "ib_send_bw -R -F -d %s -n 500" % dev, "ib_send_bw -R -F -d %s -n 500 %s" % (dev, a),
             "exit", "cm:ib_send_bw:0.0.0.0:18515"),
        pair("ib_send_bw_events", "ib_send_bw -R -F -e -d %s -n 500" % dev,
             "ib_send_bw -R -F -e -d %s -n 500 %s" % (dev, a), "exit", "cm:ib_send_bw:0.0.0.0:18515"),
        pair("qperf", "qperf", "qperf -cm1 %s rc_lat" % a, "kill", "tcp:19765"),
        pair("fi_pingpong", "fi_pingpong -p verbs -e msg -I 10", "fi_pingpong -p verbs -e msg -I 10 %s" % a,
             "exit", "tcp:47592"),
        pair("rdma_server_client", "rdma_server -s %s" % a, "rdma_client -s %s" % a, "exit",
             "cm:rdma_server:%s:7471" % a),
        # -T s: kernel TCP sockets, never librdmacm.
        pair("rstream_sockets", "rstream -T s -b %s -S 4096 -C 2000" % a, "rstream -T s -s %s -S 4096 -C 2000" % a,
             "exit", "tcp:7471", touches=False),
        pair("rstream_rsocket", "rstream -b %s -S 4096 -C 2000" % a, "rstream -s %s -S 4096 -C 2000" % a,
             "exit", "cm:rstream:%s:7471" % a),
    ]


# iscsi-test-cu: 37 read, write and verify tests that tgt 1.0.85 passes raw (Simple: every length
# from 1 to 256 blocks at both ends of the LUN, the heavy ones: once per command size). Each
# test logs in anew, and libiscsi 1.19's iscsi_destroy_context() never disconnects an iSER
# connection (it disconnects only when iscsi->fd is set, which the iSER transport never does;
# fixed upstream in 1.20): each login keeps its 64 MiB of registered buffers and its CM thread
# until the process exits. All 37 in one process filled the guest's 2 GB and the kernel's OOM
# killer ended iscsi-test-cu after about 23 tests, without the preload as with it; so the list
# runs in processes of at most CU_PER_PROCESS tests (about 700 MB pinned each).
CU_PER_PROCESS = 10
CU_FULL = (["SCSI.TestUnitReady.Simple", "SCSI.ReadCapacity10.Simple", "SCSI.ReadCapacity16.Simple",
            "SCSI.ReadCapacity16.Alloclen", "SCSI.Read6.BeyondEol", "SCSI.Read10.Simple",
            "SCSI.Write10.Simple", "SCSI.Verify10.Simple"]
           + ["SCSI.%s.%s" % (c, t) for c in ("Read10", "Read12", "Read16", "Write10", "Write12", "Write16",
                                                "Verify10", "Verify12", "Verify16")
              for t in ("BeyondEol", "ZeroBlocks")]
           + ["SCSI.%s.DpoFua" % c for c in ("Read10", "Read12", "Read16", "Write10", "Write12", "Write16")]
           + ["SCSI.Read6.Simple", "SCSI.Verify16.Simple", "SCSI.Verify10.Dpo", "SCSI.Verify12.Dpo",
              "SCSI.Verify16.Dpo"])
# The short list (each test logs in anew): one read, one write, one verify.
CU_SHORT = ["SCSI.Read6.BeyondEol", "SCSI.Write10.ZeroBlocks", "SCSI.Verify10.BeyondEol"]

MCAST = "239.1.1.1"
TQN = "iqn.2026-01.org.cmsafe:disk1"
IQN = "iqn.2026-01.org.cmsafe:initiator"
RCOPY_SRC = "/tmp/preload-real-programs.rcopy.src"
RCOPY_DST = "/tmp/preload-real-programs.rcopy.dst"
RCOPY_BYTES = 4194304
RCOPY_VERIFY = ("if cmp -s %s %s; then echo identical $(stat -c %%s %s) bytes; else echo the copy differs "
                "or is missing; fi; rm -f %s" % (RCOPY_SRC, RCOPY_DST, RCOPY_DST, RCOPY_DST))


def services(addr: str, dev: str, iters: int, perf_secs: int, tests: Sequence[str],
             full: Sequence[str] = ()) -> list[Program]:
    """The services: UCX io_demo (tag and active messages, one and two connections), tgt's iSER
    target with libiscsi's iSER initiator tools, riostream, rdma_xserver/rdma_xclient, mckey,
    rcopy, ib_write_bw, ib_read_lat. ITERATIONS of io_demo, PERF_SECS of iscsi-perf, TESTS of
    iscsi-test-cu; FULL (the full form): iscsi-perf alone against tgtd, its IOPS over the rounds,
    and iscsi-test-cu with that list against tgtd, its time for its one round. Timed over the
    rounds: io_demo with tag messages and iscsi-perf (rounds of the others would take the guest
    an hour).

    UCX reaches librdmacm through its rdmacm transport, dlopen()ed RTLD_LOCAL; io_demo's server
    needs the client's -d range. -q checks every byte read and written."""
    a = addr
    iser_url = "iscsi://%s:3260/%s/1?iser" % (a, TQN)
    ucx_env = "env UCX_TLS=rc_verbs,self UCX_NET_DEVICES=%s:1 UCX_SOCKADDR_TLS_PRIORITY=rdmacm" % dev
    ios = "%s io_demo -p 20000 -q -d 1024:65536" % ucx_env
    ioc = "%s io_demo -p 20000 -c 3 -q -i %d -o read,write -d 1024:65536 -w 8" % (ucx_env, iters)
    i = "env MALLOC_PERTURB_=255"
    tgt = "scripts/iser-target %s %s 64" % (TQN, IQN)
    ucx1 = (Allow("server", "late-ack", "CONNECT_REQUEST", "uct_rdmacm_cm_ack_event", 1),)
    ucx2 = (Allow("server", "late-ack", "CONNECT_REQUEST", "uct_rdmacm_cm_ack_event", 2),)
    io_listen = "cm:io_demo:0.0.0.0:20000"
    iser_listen = "log:iser-target: ready"
    perf = "%s scripts/stop-after %d CTRL-C iscsi-perf -i %s %s" % (i, perf_secs, IQN, iser_url)
    tools = (Step("%s iscsi-inq -i %s %s" % (i, IQN, iser_url)),
             Step("%s iscsi-readcapacity16 -i %s %s" % (i, IQN, iser_url)),
             Step("%s iscsi-swp -i %s %s" % (i, IQN, iser_url)),
             Step(perf))
    cu = Step("%s iscsi-test-cu -i %s --dataloss -t %s %s" % (i, IQN, ",".join(tests), iser_url), timeout=600)
    table = [
        Program("io_demo_tag", ios, (Step("%s %s" % (ioc, a), timed=True),), "stop:INT", io_listen,
                timed=True, allow=ucx1),
        Program("io_demo_am", ios + " -A", (Step("%s -A %s" % (ioc, a), timed=True),), "stop:INT", io_listen,
                allow=ucx1),
        Program("io_demo_2conn", ios, (Step("%s %s:20000 %s:20000" % (ioc, a, a)),), "stop:INT", io_listen,
                allow=ucx2),
        Program("iser", tgt, tools + (cu,), "stop:TERM", iser_listen),
    ]
    if full:
        chunks = [full[j:j + CU_PER_PROCESS] for j in range(0, len(full), CU_PER_PROCESS)]
        table += [
            Program("iser_perf", tgt, (Step(perf, timed=True),), "stop:TERM", iser_listen, timed=True),
            Program("iser_test_cu", tgt,
                    tuple(Step("%s iscsi-test-cu -i %s --dataloss -t %s %s" % (i, IQN, ",".join(c), iser_url),
                               timeout=900, timed=True) for c in chunks),
                    "stop:TERM", iser_listen),
        ]

    def pair(name, server, client, end, listen, verify=""):
        return Program(name, server, (Step(client),), end, listen, verify=verify)

    table += [
        pair("riostream", "riostream -b %s -S 4096 -C 2000" % a, "riostream -s %s -S 4096 -C 2000" % a,
             "exit", "cm:riostream:%s:7471" % a),
        pair("riostream_verify", "riostream -b %s -S 4096 -C 2000 -T v" % a,
             "riostream -s %s -S 4096 -C 2000 -T v" % a, "exit", "cm:riostream:%s:7471" % a),
        pair("rdma_xserver_xclient", "rdma_xserver", "rdma_xclient -s %s" % a, "exit",
             "cm:rdma_xserver:0.0.0.0:7471"),
        # stdbuf -oL: the server's line as soon as it is printed, for its log: listen.
        pair("mckey", "stdbuf -oL mckey -m %s -b %s" % (MCAST, a), "mckey -m %s -b %s -s" % (MCAST, a),
             "exit", "log:receiving data transfers"),
        pair("rcopy", "rcopy", "rcopy %s %s:%s" % (RCOPY_SRC, a, RCOPY_DST), "kill", "cm:rcopy:0.0.0.0:7427",
             verify=RCOPY_VERIFY),
        pair("ib_write_bw", "ib_write_bw -R -F -d %s -n 500" % dev, "ib_write_bw -R -F -d %s -n 500 %s" % (dev, a),
             "exit", "cm:ib_write_bw:0.0.0.0:18515"),
        pair("ib_read_lat", "ib_read_lat -R -d %s -n 500" % dev, "ib_read_lat -R -d %s -n 500 %s" % (dev, a),
             "exit", "cm:ib_read_lat:0.0.0.0:18515"),
    ]
    return table


def table(set_name: str, addr: str, dev: str, cmtime_entry: Program | None = None) -> list[Program]:
    """The programs of SET_NAME (basic, services-short, services)."""
    if set_name == "basic":
        assert cmtime_entry is not None
        return basic(addr, dev, cmtime_entry)
    if set_name == "services-short":
        return services(addr, dev, 200, 3, CU_SHORT)
    return services(addr, dev, 2000, 10, CU_SHORT, CU_FULL)


# --- what the reference run's key output (its lines joined by "|") must match -----------------

# By the program a side runs (the first word of its command) and its role.
EXPECT_BY_PROGRAM = {
    ("io_demo", "server"): r"^connections: [1-9]\d*$",
    ("io_demo", "client"): r"^Client exit with status 'OK'\|disconnecting \S+ due to \"End of the Client run\"",
    ("iser-target", "server"): r"^iser-target: ready\|iser-target: stopped, tgtd exit status 0$",
    ("iscsi-inq", "client"): r"Peripheral Device Type:DIRECT_ACCESS\|.*Product:VIRTUAL-DISK",
    ("iscsi-readcapacity16", "client"): r"^RETURNED LOGICAL BLOCK ADDRESS:\d+\|LOGICAL BLOCK LENGTH IN BYTES:512\|",
    ("iscsi-swp", "client"): r"^SWP:0$",
    ("iscsi-perf", "client"): (r"^connected to \S+\|capacity is \d+ blocks.*\|performing SEQUENTIAL READ .*\|"
                               r"FIXED transfer .*\|finished\.$"),
    ("iscsi-test-cu", "client"): r"tests (\d+) \1 \1 0 0\|asserts .*\|Tests completed with return value: 0$",
    ("riostream", "server"): r"^name bytes xfers iters\|custom \S+ \S+ 1$",
    ("riostream", "client"): r"^name bytes xfers iters\|custom \S+ \S+ 1$",
    ("rdma_xserver", "server"): r"^rdma_xserver: start\|rdma_xserver: end 0$",
    ("rdma_xclient", "client"): r"^rdma_xclient: start\|rdma_xclient: end 0$",
    ("mckey", "server"): r"^mckey: joined dgid: \S+\|data transfers complete\|test complete\|return status 0$",
    ("mckey", "client"): r"^mckey: joined dgid: \S+\|data transfers complete\|test complete\|return status 0$",
    ("rcopy", "server"): r"^client: \S+\|opening: \S+, transferring\.\.\.\d+ bytes\.\.\.closing\.\.\.done$",
    ("rcopy", "client"): r"^opening\.\.\.transferring\.\.\.closing\.\.\.done\|\d+ bytes$",
    ("ib_write_bw", "server"): r"^65536 500$",
    ("ib_write_bw", "client"): r"^65536 500$",
    ("ib_read_lat", "client"): r"^2 500$",
    ("verify", "verify"): r"^identical \d+ bytes$",
}

# By the table's name and the side.
EXPECT_BY_NAME = {
    ("rping", "server"): r"rdma-ping-0: .*\|.*rdma-ping-1: .*\|.*rdma-ping-2: [^|]*$",
    ("rping", "client"): r"rdma-ping-0: .*\|.*rdma-ping-1: .*\|.*rdma-ping-2: [^|]*$",
    ("ucmatose", "server"): r"^test complete\|return status 0$",
    ("ucmatose", "client"): r"^test complete\|return status 0$",
    ("udaddy", "server"): r"^test complete\|return status 0$",
    ("udaddy", "client"): r"^test complete\|return status 0$",
    ("cmtime", "client"): r"^step\|create id:\|resolve addr:\|resolve route:\|create qp:\|connect:\|disconnect:\|destroy:$",
    ("ib_send_bw", "server"): r"^65536 500$",
    ("ib_send_bw", "client"): r"^65536 500$",
    ("ib_send_bw_events", "server"): r"^65536 500$",
    ("ib_send_bw_events", "client"): r"^65536 500$",
    ("qperf", "client"): r"^rc_lat:\|latency = <n> <unit>$",
    ("fi_pingpong", "server"): r"^bytes #sent #ack\|64 10 =10\|.*\|1m 10 =10$",
    ("fi_pingpong", "client"): r"^bytes #sent #ack\|64 10 =10\|.*\|1m 10 =10$",
    ("rdma_server_client", "server"): r"^rdma_server: start\|rdma_server: end 0$",
    ("rdma_server_client", "client"): r"^rdma_client: start\|rdma_client: end 0$",
    ("rstream_sockets", "server"): r"^name bytes xfers iters\|custom 4k 2k 1$",
    ("rstream_sockets", "client"): r"^name bytes xfers iters\|custom 4k 2k 1$",
    ("rstream_rsocket", "server"): r"^name bytes xfers iters\|custom 4k 2k 1$",
    ("rstream_rsocket", "client"): r"^name bytes xfers iters\|custom 4k 2k 1$",
}

# cmtime to rdma-core 44: the client's step names; 56 and 65: each test's title, connection count
# and step table (step names only), on both sides (the QP test, then the no-QPs test).
CMTIME_OLD_CLIENT = EXPECT_BY_NAME[("cmtime", "client")]
CMTIME_STEPS = (r"step\|full connect\|create id\|bind addr\|resolve addr\|resolve route\|create qp\|"
                r"init qp attr\|init qp\|rtr qp attr\|rtr qp\|rts qp attr\|rts qp\|cm connect\|"
                r"establish\|disconnect\|destroy id\|destroy qp")


def cmtime_expect(side: str, conns: int) -> str | None:
    verb = {"client": "Connect", "server": "Accept"}.get(side)
    if verb is None:
        return None
    new = (r"^%s \(CONNS\) QPs test\|qp_conn CONNS\|%s\|%s \(CONNS\) test - no QPs\|cm_conn CONNS\|%s$"
           .replace("CONNS", str(conns)) % (verb, CMTIME_STEPS, verb, CMTIME_STEPS))
    return "%s|%s" % (CMTIME_OLD_CLIENT if side == "client" else r"^$", new)


def expected(name: str, side: str, prog: str = "", conns: int = 200) -> str:
    """The regex a side's key output in the reference run must match (its lines joined by
    "|"); PROG: the program the side ran."""
    role = "server" if side == "server" else "verify" if side == "verify" else "client"
    if (prog or side, role) in EXPECT_BY_PROGRAM:
        return EXPECT_BY_PROGRAM[(prog or side, role)]
    if name == "cmtime":
        new = cmtime_expect(side, conns)
        if new is not None:
            return new
    return EXPECT_BY_NAME.get((name, side), r"^$")


# Programs whose both sides sleep on completion events (ibv_get_cq_event): each side's summary
# must count some, so the CQ wrappers are really exercised.
CQ_EVENTS = ("rping", "ib_send_bw_events")

