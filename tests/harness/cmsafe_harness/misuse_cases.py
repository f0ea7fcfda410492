"""The misuse harness's cases and programs, as data (the running and the checks: misuse.py).

The markers are regexes on the program's stderr: its "step:" lines, printed right before and
right after the misuse (c-tests/preload/misuse_*.c, preload_*.c).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

BIN = "target/preload-tests"  # the programs (make preload-tests)
OUT = "target/preload-misuse"  # logs and reports: OUT/<mode>/<name>.{out,err,<pid>.jsonl}
LIB = "target/release/libcmsafe_preload.so"  # make preload
MODES = ("raw", "audit", "safe")
ONLY = ("cm", "cq", "async")  # PRELOAD_MISUSE_ONLY

TOKEN_TAG = "PDTOKEN-5e7d1c"  # c-tests/preload/raw_util.h: RAW_TOKEN_TAG
TOKEN = TOKEN_TAG + "-cmsafe-misuse-probe"  # RAW_TOKEN

# The time limits, in the x86_64 guest's seconds. RXE_TIME_SCALE (scripts/rxe-vm sets it: 1 on
# x86_64, 8 on the arm64 guest, whose emulation is slower; its --help says why) stretches the
# two upper bounds, which cost nothing when a program is on time: HANG_WAIT and RUN_TIMEOUT.
# HANG_GRACE is a lower bound (a program must stay blocked that long to count as hung) that
# every hang test waits out, so it is not stretched: these programs run at about the x86_64
# guest's speed on the arm64 one, where each of them still says what it must within it. No run
# is repeated.
HANG_WAIT = 40  # seconds for a program to reach its blocking call (times the scale)
HANG_GRACE = 3  # seconds it must then stay blocked to count as a hang
RUN_TIMEOUT = 40  # seconds for a program that must finish (times the scale)
# The lost-event watcher names the hang CMSAFE_HANG_MS (1 s) after the call blocks: a longer
# grace than the other blocking programs get, so a loaded machine cannot hide the line.
LOST_EVENT_GRACE = 10


@dataclass(frozen=True)
class Transport:
    """What the transport decides (c-tests/transport.h, c-tests/preload/raw_util.h)."""

    name: str  # as the "--- MODE (DEV, NAME)" line says it
    req_len: int  # the CONNECT_REQUEST's private data length
    unanswered_status: int  # raw_connect_unanswered's REJECTED status
    unanswered_pdlen: int  # and its private data length
    qp_event: str  # raw_qp_event's async event
    sq_drain: bool  # the device raises SQ_DRAINED for a move to SQD (the survey)


TRANSPORTS: Dict[str, Transport] = {
    # The REQ's room; IB_CM_REJ_INVALID_SERVICE_ID in the REJ's room.
    "ib": Transport("IB/RoCE", 56, 8, 148, "SQ_DRAINED", True),
    # MPA carries the bytes sent (RAW_TOKEN and its NUL); a TCP socket that is no iWARP peer
    # resets the connect (-ECONNRESET, no MPA reply: no private data); siw's QP_FATAL.
    "iwarp": Transport("iWARP", len(TOKEN) + 1, -104, 0, "QP_FATAL", False),
}

# Why siw gives no SQ_DRAINED for a move to SQD (the survey's sq-drain on iWARP).
SQD_REASON = (
    "siw raises SQ_DRAINED only when a flush finds work requests left on the send queue "
    "(drivers/infiniband/sw/siw/siw_qp.c, siw_sq_flush), never for a move to SQD, which it takes "
    "as CLOSING (siw_verbs.c, ib_qp_state_to_siw_qp_state: the connection is closed with the "
    "send queue empty); the async programs use siw's QP_FATAL instead")


@dataclass(frozen=True)
class Misuse:
    """One CM event misuse program and what each mode must see of it.

    klass: "exit" (runs to the end), "hang" (blocks after the marker without the preload and in
    audit mode), "abort" (raw: dies by a signal, glibc's abort or a SIGSEGV in librdmacm; audit:
    may die after the finding line; safe: runs to the end), "kept" (raw: dies by a signal; audit
    and safe keep the call from librdmacm and run to the end). seq and type "*": any (the event
    is not the program's); events: the events it fetches (the summary's and the report's count).
    """

    name: str
    argv: Tuple[str, ...]
    kind: str
    seq: str
    type: str
    events: int
    klass: str
    before: str
    after: str


MISUSE: Tuple[Misuse, ...] = (
    Misuse("use_after_ack", ("misuse_use_after_ack",), "use-after-ack", "3", "CONNECT_REQUEST", 4,
           "exit", r"^step: acking CONNECT_REQUEST, then reading", r"^step: read done"),
    # No marker after: a system call's read is said once the preload's fault thread answered it,
    # so its line may come after the program's next one (docs/preload.md).
    Misuse("use_after_ack_syscall", ("misuse_use_after_ack", "syscall"), "use-after-ack", "3",
           "CONNECT_REQUEST", 4, "exit", r"^step: acking CONNECT_REQUEST, then reading", ""),
    Misuse("never_acked", ("misuse_never_acked",), "never-acked", "3", "CONNECT_REQUEST", 4, "exit",
           r"^step: exiting with the CONNECT_REQUEST unacked", ""),
    Misuse("double_ack", ("misuse_double_ack",), "double-ack", "2", "ROUTE_RESOLVED", 2, "kept",
           r"^step: acking ROUTE_RESOLVED a second time",
           r"^step: second rdma_ack_cm_event returned"),
    Misuse("late_double_ack", ("misuse_double_ack", "late"), "double-ack", "*", "*", 4202, "kept",
           r"^step: acking ROUTE_RESOLVED a second time",
           r"^step: second rdma_ack_cm_event returned"),
    Misuse("double_ack_after_accept", ("misuse_double_ack_after_accept",), "double-ack", "3",
           "CONNECT_REQUEST", 3, "kept", r"^step: acking CONNECT_REQUEST a second time",
           r"^step: second rdma_ack_cm_event returned"),
    Misuse("foreign_ack", ("misuse_foreign_ack",), "foreign-ack", "*", "*", 1, "exit",
           r"^step: acking a pointer rdma_get_cm_event never returned",
           r"^step: rdma_ack_cm_event\(foreign\) returned"),
    Misuse("destroy_with_unacked", ("misuse_destroy_with_unacked", "client"), "destroy-with-unacked",
           "3", "REJECTED", 3, "hang", r"^step: calling rdma_destroy_id\(client\)",
           r"^step: rdma_destroy_id\(client\) returned"),
    Misuse("destroy_listener_with_unacked", ("misuse_destroy_with_unacked", "listener"),
           "destroy-with-unacked", "3", "CONNECT_REQUEST", 4, "hang",
           r"^step: calling rdma_destroy_id\(listener\)",
           r"^step: rdma_destroy_id\(listener\) returned"),
    Misuse("destroy_in_own_handler", ("misuse_destroy_in_own_handler",), "destroy-in-own-handler",
           "3", "REJECTED", 3, "hang",
           r"^step: calling rdma_destroy_id\(client\) from the REJECTED handler",
           r"^step: rdma_destroy_id\(client\) returned"),
    Misuse("destroy_on_disconnect", ("misuse_destroy_on_disconnect",), "destroy-in-own-handler",
           "6", "DISCONNECTED", 6, "hang",
           r"^step: calling rdma_destroy_id\(client\) from the DISCONNECTED handler",
           r"^step: rdma_destroy_id\(client\) returned"),
    Misuse("migrate_with_unacked", ("misuse_migrate_with_unacked",), "migrate-with-unacked", "5",
           "ESTABLISHED", 7, "hang", r"^step: calling rdma_migrate_id\(child\)",
           r"^step: rdma_migrate_id\(child\) returned"),
    Misuse("channel_destroy_with_unacked", ("misuse_channel_destroy_with_unacked",),
           "channel-destroy-with-unacked", "2", "ROUTE_RESOLVED", 2, "exit",
           r"^step: calling rdma_destroy_event_channel",
           r"^step: rdma_destroy_event_channel returned"),
    Misuse("late_ack", ("misuse_late_ack",), "late-ack", "2", "ROUTE_RESOLVED", 2, "exit",
           r"^step: holding ROUTE_RESOLVED", r"^step: acked"),
    Misuse("qp_destroy_before_ack", ("misuse_qp_destroy_before_ack",), "qp-destroy-before-ack", "6",
           "DISCONNECTED", 7, "exit", r"^step: calling rdma_destroy_qp\(child\)",
           r"^step: rdma_destroy_qp\(child\) returned"),
    Misuse("destroyed_channel", ("misuse_destroyed_channel",), "use-after-destroy-channel", "0", "-",
           1, "exit", r"^step: calling rdma_get_cm_event on the destroyed channel",
           r"^step: rdma_get_cm_event on the destroyed channel returned"),
    Misuse("destroyed_id", ("misuse_destroyed_id",), "use-after-destroy-id", "0", "-", 4, "abort",
           r"^step: calling rdma_reject on the destroyed id",
           r"^step: rdma_reject on the destroyed id returned"),
    Misuse("retry_destroyed_id", ("misuse_retry_after_reject",), "use-after-destroy-id", "0", "-", 3,
           "abort", r"^step: calling rdma_resolve_addr on the destroyed id",
           r"^step: rdma_resolve_addr on the destroyed id returned"),
    Misuse("retry_reused_slot", ("misuse_retry_after_reject", "reused"), "not-a-cm-id", "0", "-", 3,
           "abort", r"^step: calling rdma_resolve_addr on the reused slot",
           r"^step: rdma_resolve_addr on the reused slot returned"),
    Misuse("rejected_not_destroyed", ("misuse_rejected_not_destroyed",),
           "rejected-id-never-destroyed", "0", "-", 260, "exit",
           r"^step: rejecting 65 connection requests", r"^step: done"),
    Misuse("rejected_sync", ("misuse_rejected_not_destroyed", "sync"), "rejected-id-never-destroyed",
           "0", "-", 260, "exit", r"^step: rejecting 65 connection requests", r"^step: done"),
)

# The event records whose contents the transport decides (misuse name: seq, type, and which of
# the transport's values): the CONNECT_REQUEST's private data length, the unanswered connect's
# REJECTED status and length.
CONNECT_REQUEST_RECORD = ("use_after_ack", "never_acked")
UNANSWERED_RECORD = ("destroy_with_unacked", "destroy_in_own_handler", "retry_destroyed_id",
                     "retry_reused_slot")

# Two threads read two acked events at once: audit must name both in each of THREADS_RUNS runs
# (a fault queue that two handlers can write at once loses a record in about one run of three).
THREADS_RUNS = 10
THREADS_BEFORE = r"^step: acking both ROUTE_RESOLVED events, then two threads read them at once"
THREADS_AFTER = r"^step: reads done"

# CMSAFE_MODE=bogus while stderr fails: fd 2 a pipe whose reader is gone, SIGPIPE ignored (as a
# service that writes to sockets has it), then the program.
BREAK_STDERR = """import os, signal, sys
r, w = os.pipe()
os.close(r)
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
os.dup2(w, 2)
os.execv(sys.argv[1], sys.argv[1:])"""

QP_THEN_DESTROY_MARKER = r"^step: calling rdma_destroy_id\(child\) in the DISCONNECTED handler"
LOST_EVENT_MARKER = r"^step: read the ADDR_RESOLVED past librdmacm; calling rdma_destroy_id"
DLOPEN_ROUNDS = ("round 1: 7 events", "round 2: 7 events",
                 "round 3, after dlclose and a new dlopen: 7 events")
CANCEL_LINES = 11  # preload_cancel's stdout lines
CANCEL_BAD = ("FATAL", "exception not rethrown", "internal error")  # never on its stderr

CQ_DESTROY = r"^step: calling ibv_destroy_cq\(cq\)"
CQ_RETURNED = r"^step: ibv_destroy_cq\(cq\) returned 0"
ASYNC_QP_DESTROY = r"^step: calling ibv_destroy_qp\(qp\)"
ASYNC_QP_RETURNED = r"^step: ibv_destroy_qp\(qp\) returned"


@dataclass(frozen=True)
class Blocking:
    """A completion-queue or async program: raw, it blocks in MARKER's call (None: it runs to
    its end); audit runs it with that marker, as it still blocks there."""

    name: str
    argv: Tuple[str, ...]
    marker: str | None


CQ_PROGRAMS: Tuple[Blocking, ...] = (
    Blocking("cq_destroy_with_unacked", ("misuse_cq_destroy_with_unacked",), CQ_DESTROY),
    Blocking("cq_wrong_ack", ("misuse_cq_wrong_ack",), CQ_DESTROY),
    Blocking("cq_over_ack", ("misuse_cq_over_ack",), CQ_DESTROY),
    Blocking("cq_never_acked", ("misuse_cq_never_acked",), None),
)


@dataclass(frozen=True)
class NeverAcked:
    """A completion or async event got and never acked: the program runs to its end and the
    finding comes at exit. What its lines say: MESSAGE (a regex) with the object's id ({id}) and
    the getter, the main thread ({pid}), filled in from the run."""

    name: str
    kind: str
    type: str
    obj: str  # the object the program prints its id of: "cq" (cq_values) or another (async_values)
    marker: str  # the program's last line before it exits
    message: str
    summary: str  # the summary's count line (a regex)


NEVER_ACKED: Dict[str, NeverAcked] = {x.name: x for x in (
    NeverAcked("cq_never_acked", "cq-never-acked", "COMPLETION", "cq",
               "^step: exiting with the completion event unacked",
               r"at exit: 1 completion events of this CQ never acked \(got 1, acked 0; got by "
               r"thread {pid}\)", "completion events: 1 got, 0 acked"),
    NeverAcked("async_never_acked", "async-never-acked", "SRQ_LIMIT_REACHED", "srq",
               "^step: exiting with the async event unacked",
               r"at exit: 1 async events of srq {id} never acked \(got 1, acked 0, the last "
               r"SRQ_LIMIT_REACHED; got by thread {pid}\): ibv_destroy_srq\(srq\) would wait for "
               r"them forever", "async events: 1 got, 0 acked"),
)}


@dataclass(frozen=True)
class AsyncVariant:
    """misuse_async_destroy_with_unacked's two variants: the QP (the transport's qp_event,
    destroyed by rdma_destroy_qp, which calls ibv_destroy_qp) and the CQ (CQ_ERR)."""

    name: str  # the program's argument
    type: str | None  # None: the transport's qp_event
    call: str
    destroy_at: str
    returned_at: str


ASYNC_VARIANTS: Tuple[AsyncVariant, ...] = (
    AsyncVariant("qp", None, "ibv_destroy_qp", r"^step: calling rdma_destroy_qp\(client\)",
                 r"^step: rdma_destroy_qp\(client\) returned"),
    AsyncVariant("cq", "CQ_ERR", "ibv_destroy_cq", CQ_DESTROY, CQ_RETURNED),
)

# preload_async_survey's lines (after "async "), in its order: (regex, event type); the
# sq-drain line only where the device raises SQ_DRAINED (Transport.sq_drain).
SURVEY = (
    ("srq-limit: SRQ limit reached srq 0x", "SRQ_LIMIT_REACHED"),
    ("sq-drain: send queue drained qp 0x", "SQ_DRAINED"),
    ("cq-overflow: CQ error cq 0x", "CQ_ERR"),
    ("port-down: port error port 1", "PORT_ERR"),
    ("port-up: port active port 1", "PORT_ACTIVE"),
)
SURVEY_NO_SQ_DRAIN = "sq-drain: none$"

# Every program the harness runs (the first word of each argv): all must be built.
PROGRAMS: Tuple[str, ...] = tuple(dict.fromkeys(
    [m.argv[0] for m in MISUSE]
    + ["misuse_use_after_ack_threads", "preload_fork", "preload_no_rdma", "preload_sigsegv",
       "preload_dlopen", "preload_cancel", "preload_lost_event", "preload_read_without_ids",
       "misuse_qp_then_destroy"]
    + [p.argv[0] for p in CQ_PROGRAMS]
    + ["preload_cq_loop", "preload_async_survey", "misuse_async_destroy_with_unacked",
       "misuse_async_double_ack", "misuse_async_never_acked"]))
