"""preload-misuse-tests: the misuse programs on the real RDMA stack, raw and preloaded.

Runs the misuse programs (target/preload-tests, built by `make preload-tests`) on the real RDMA
stack, raw and under libcmsafe_preload.so, and checks what the preload reports. Inside the
guest, on Soft-RoCE or Soft-iWARP:

  scripts/rxe-vm [--transport iwarp] -- scripts/preload-misuse-tests [raw] [audit] [safe]
                                                                 (default: all three modes)

  raw    no preload: each program really provokes its misuse on this stack (the destroy and
         migrate programs block for good, the double ack aborts in glibc, the others run to the
         end), and the programs for fork, no RDMA and SIGSEGV work.
  audit  CMSAFE_MODE=audit (environment, CMSAFE_REPORT to a file under target/): exactly the
         expected finding kind on stderr (no line of another kind), with the misused event's
         seq and type, an id and a thread, printed while the misuse happens (after the
         program's "step:" marker before it, before the marker after it); the JSON report
         holds the matching finding record, only valid JSON and one event record per event;
         no private data byte in any report; the summary counts the program's events and
         findings; the blocking cases (destroy-with-unacked, destroy-in-own-handler,
         migrate-with-unacked) still block, after the finding line; CMSAFE_LATE_ACK_MS is
         obeyed.
  safe   CMSAFE_MODE=safe: the same findings, no crash and no hang (the blocking calls return),
         and the use-after-ack program reads the right bytes (safe mode's copy is valid after
         the ack by design, so that read is not a finding).

Both preloaded modes also run preload_fork (after and before its first event: one report and
summary per process that used librdmacm), preload_no_rdma (no output at all, no report, the same
stdout) and preload_sigsegv (the program's own SIGSEGV handler still works).

Every mode runs misuse_use_after_ack_threads: two threads read two acked events at once; audit
names both (seq 2 and 4, one finding each, each with its thread) in each of 10 runs, safe none.
Audit also runs misuse_use_after_ack with CMSAFE_MODE=bogus and stderr a pipe whose reader is
gone: audit mode is chosen and the program runs to its end (no panic into it). Both are in
PRELOAD_MISUSE_ONLY=cm's set.

Every mode runs preload_dlopen (librdmacm reached only through a plugin loaded RTLD_LOCAL, after
a first call made before it was loaded: ENOSYS then, 21 events tracked after), preload_cancel (a
thread cancelled at each call the preload wraps, cancel pending or while blocked, with and
without a report: the same lines as raw, no abort) and preload_lost_event (rdma_destroy_id
waiting for an event that never reached the program: it blocks in every mode; the audit names it
while it blocks, and names a cancelled reader when there was one) and preload_read_without_ids
(rping's teardown race on demand: a reader polls the channel, the only id is destroyed, the
reader's rdma_get_cm_event blocks in every mode until a new id's event; the hang watcher names
the blocked read while it lasts).

The completion-queue programs (misuse_cq_*): raw, ibv_destroy_cq blocks for good (or the program
runs to its end with an event never acked); audit names each misuse with the CQ, the count, the
thread and the place (the blocking ones before they block, and they still block); safe mode's
ibv_destroy_cq returns, and the acks libibverbs must not see are kept from it.
PRELOAD_MISUSE_ONLY=cq runs only those (and =cm only the CM event programs of MISUSE).

The async-event programs (misuse_async_*, preload_async_survey): raw, the destroy of a QP or CQ
with an async event unacked (or acked twice) blocks for good; audit names each misuse with the
object, the event type, the getter thread and the place (the blocking ones before they block,
and they still block); safe mode's destroys return and the acks libibverbs must not see are kept
from it. The survey provokes every async event the device (rxe, siw) raises on demand: the same
events in every mode, no finding. PRELOAD_MISUSE_ONLY=async runs only those.

The transport is the device's ($RXE_DEV's node type: an RNIC is iWARP), and the expectations
follow it as the programs' own do (c-tests/transport.h, c-tests/preload/raw_util.h): the
CONNECT_REQUEST carries 56 bytes on IB/RoCE and the 35 bytes sent on iWARP; the REJECTED of a connect no RDMA
peer answers (raw_connect_unanswered) has status 8 on IB/RoCE, -104 (-ECONNRESET) on iWARP,
where a TCP socket that is no iWARP peer resets it (rdma_connect to a port nothing listens on
fails there without an event); the QP's async event of the async programs (raw_qp_event) is
SQ_DRAINED on IB/RoCE, QP_FATAL on iWARP (siw raises SQ_DRAINED for no move to SQD); the JSON
report's event records say those lengths and statuses. What cannot be checked on a transport is
printed "skip WHAT: WHY" and counted apart: on iWARP, the survey's SQ_DRAINED in each mode.

Logs and reports stay in target/preload-misuse/<mode>/. Ends with
"preload-misuse-tests: N passed, N failed, N apart"; exits non-zero on any failure.

Each check_* function below takes a finished run (proc.Run: status, logs' lines, pid) and
returns its problems and the verdict's text; tests/harness/test_misuse.py holds them to
recorded logs.
"""

from __future__ import annotations

import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from . import audit, guest, proc, record, tally
from . import misuse_cases as cases
from .audit import any_matches, kind_lines, line_of
from .misuse_cases import Misuse, Transport

NAME = "preload-misuse-tests"
Problems = List[str]
Checked = Tuple[Problems, str]  # the problems and the verdict's text


@dataclass(frozen=True)
class Ctx:
    """What the checks know of the stack: the finding kinds, the transport, glibc's version
    ("glibc 2.31", as confstr says it; "" when unknown)."""

    kinds: Tuple[str, ...]
    tx: Transport
    glibc: str = ""


# --- the small checks, shared by the cases --------------------------------------------------
def report_of(r: proc.Run, pid: int | None = None) -> str:
    """The preload's report of the process PID (the started one by default)."""
    return "%s.%d.jsonl" % (r.log, r.pid if pid is None else pid)


def check_json(p: Problems, paths: Sequence[str], kind: str, seq: str, typ: str,
               nevents: object) -> audit.ReportCheck:
    """audit.check_report with the programs' token; its problems into P."""
    rep = audit.check_report(list(paths), kind, seq, typ, str(nevents), cases.TOKEN_TAG,
                             foreign_seq_ok=kind == "foreign-ack")
    p.extend(rep.problems)
    return rep


def check_exit0(r: proc.Run) -> Problems:
    """The program ran to its end: exit 0 and its own "N passed, 0 failed" line."""
    if r.hung:
        return ["hung (killed after the timeout)"]
    p = []
    if r.rc != 0:
        p.append("exit status %d, want 0" % r.rc)
    if not any_matches(r": [0-9]+ passed, 0 failed$", r.out):
        p.append("the program's own checks did not all pass (no ': N passed, 0 failed' line)")
    return p


def check_no_preload_output(r: proc.Run) -> Problems:
    return ["==cmsafe== output without the preload"] if any_matches("^==cmsafe==", r.err) else []


def check_only(err: Sequence[str], allowed: Sequence[str], kinds: Sequence[str]) -> Problems:
    """No finding line of a kind not in ALLOWED."""
    p = []
    for k in kinds:
        if k in allowed:
            continue
        kl = kind_lines(err, k)
        if kl:
            p.append("unexpected finding: %s" % kl[0])
    return p


def _last_after(lines: Sequence[str], prefix: str) -> str:
    got = ""
    for line in lines:
        if line.startswith(prefix):
            got = line[len(prefix):]
    return got


def _strip_step(marker: str) -> str:
    return marker[len("^step: "):] if marker.startswith("^step: ") else marker


def check_child_destroy(name: str, err: Sequence[str]) -> Problems:
    """The listener variant: rdma_destroy_id(child) returns although the CONNECT_REQUEST is
    unacked (it counts against the listener), before the listener's destroy is attempted."""
    if name != "destroy_listener_with_unacked":
        return []
    if line_of(err, r"^step: rdma_destroy_id\(child\) returned") == 0:
        return ["rdma_destroy_id(child) did not return (a CONNECT_REQUEST counts against the listener)"]
    return []


def check_before_ack(out: Sequence[str], tx: Transport) -> Problems:
    """The use-after-ack program's view of its CONNECT_REQUEST before the ack: the same event
    contents with and without the preload (the transport's length, the sent token first)."""
    p = []
    if not any_matches("^CONNECT_REQUEST private_data_len=%d$" % tx.req_len, out):
        p.append("the program did not see private_data_len=%d (as without the preload): %s"
                 % (tx.req_len, out[0] if out else ""))
    if not any_matches("^before the ack: %s$" % re.escape(cases.TOKEN), out):
        p.append("the program did not read '%s' before the ack: %s"
                 % (cases.TOKEN, out[1] if len(out) > 1 else ""))
    return p


def check_event_record(rep: audit.ReportCheck, seq: int, typ: str, status: object, pdlen: object,
                       killed: bool, tx: Transport) -> Problems:
    """The report's event record SEQ has this type, status and private data length, as the
    transport gives them ("*": any). Absent only from the report of a run killed before the
    event was acked."""
    rec = rep.event(seq)
    if rec is None:
        if killed:
            return []
        details = ",".join("%s:%s:%s:%s" % (e.get("seq"), e.get("type"), e.get("status"),
                                            e.get("private_data_len")) for e in rep.events)
        return ["no event record seq=%d in the JSON report (%s)" % (seq, details)]
    p = []
    t, s, n = str(rec.get("type")), str(rec.get("status")), str(rec.get("private_data_len"))
    if t != typ:
        p.append("the JSON event record seq=%d is %s, want %s" % (seq, t, typ))
    if status != "*" and s != str(status):
        p.append("the JSON event record seq=%d (%s) has status %s, want %s (%s)"
                 % (seq, t, s, status, tx.name))
    if pdlen != "*" and n != str(pdlen):
        p.append("the JSON event record seq=%d (%s) has private_data_len %s, want %s (%s)"
                 % (seq, t, n, pdlen, tx.name))
    return p


def check_transport_records(name: str, rep: audit.ReportCheck, killed: bool, tx: Transport) -> Problems:
    """The event records whose contents the transport decides."""
    if name in cases.CONNECT_REQUEST_RECORD:
        return check_event_record(rep, 3, "CONNECT_REQUEST", 0, tx.req_len, killed, tx)
    if name in cases.UNANSWERED_RECORD:
        return check_event_record(rep, 3, "REJECTED", tx.unanswered_status, tx.unanswered_pdlen,
                                  killed, tx)
    return []


def check_object_harm(mode: str, name: str, r: proc.Run, tx: Transport) -> Problems:
    """The lifecycle programs' own lines: the harm raw (66 kernel cm_ids kept by 65 rejected
    ids; a reject of a freed id crashes, and so does a retried connect's rdma_resolve_addr), the
    REJECTED that started the retry, safe mode's refusal (-1 with EBADF for a channel, EINVAL
    for an id), and the exit summary's count of ids never destroyed."""
    p = []
    if name in ("rejected_not_destroyed", "rejected_sync"):
        if not any_matches("^kernel cm_ids of this process: 66$", r.out):
            p.append("want 'kernel cm_ids of this process: 66' (the listen id and 65 rejected ids): %s"
                     % (r.out[-1] if r.out else ""))
        # The synchronous listen id stays too (its destroy would wait for the requests' events).
        ids = 66 if name == "rejected_sync" else 65
        if mode != "raw" and not any_matches(
                r"^==cmsafe==   never destroyed: %d cm_ids \(65 of rejected requests\), 0 event channels$"
                % ids, r.err):
            p.append("the summary does not count %d ids never destroyed, 65 of rejected requests" % ids)
    elif name == "destroyed_channel":
        if mode == "safe" and not any_matches(r"destroyed channel returned -1 \(errno EBADF\)$", r.err):
            p.append("safe mode did not refuse rdma_get_cm_event on the destroyed channel with EBADF")
    elif name == "destroyed_id":
        if mode == "safe" and not any_matches(r"destroyed id returned -1 \(errno EINVAL\)$", r.err):
            p.append("safe mode did not refuse rdma_reject on the destroyed id with EINVAL")
    elif name in ("retry_destroyed_id", "retry_reused_slot"):
        if not any_matches("^connect: RDMA_CM_EVENT_REJECTED status %d$" % tx.unanswered_status, r.out):
            p.append("the first connect did not get REJECTED with status %d (no RDMA peer listening)"
                     % tx.unanswered_status)
        if mode == "safe" and not any_matches(r"(destroyed id|reused slot) returned -1 \(errno EINVAL\)$",
                                              r.err):
            p.append("safe mode did not refuse the retry's rdma_resolve_addr with EINVAL")
    return p


# --- the misuse table ------------------------------------------------------------------------
# A destroyed id used again (destroyed_id: rdma_reject; retry_destroyed_id: rdma_resolve_addr)
# reads the freed id, whose first two words are, once glibc's tcache holds the chunk, the
# tcache_entry's next and key: the id's verbs and channel pointers. librdmacm's call writes its
# command to id->channel->fd. glibc 2.29 to 2.33 store the thread's tcache_perthread_struct
# pointer as the key (malloc/malloc.c, tcache_put: e->key = tcache), a valid heap address whose
# first bytes, read as the channel's fd, name no open file: the call returns -1 with EBADF and the
# program goes on. From 2.34 the key is a random value (glibc commit fc859c304898, "Harden
# tcache double-free check"), and the same read dies by SIGSEGV. On a glibc before 2.34 (Debian
# 11's 2.31) that outcome is what this stack's allocator gives, accepted only when the audit,
# run on the same program here, names the misuse at that call: check_freed_id_proof.
def tcache_key_is_pointer(glibc: str) -> bool:
    m = re.match(r"^2\.([0-9]+)", glibc[len("glibc "):] if glibc.startswith("glibc ") else glibc)
    return bool(m) and 29 <= int(m.group(1)) < 34


def needs_freed_id_proof(case: Misuse, r: proc.Run, ctx: Ctx) -> bool:
    """A raw abort case that ran to its end only because of the allocator (above)."""
    return (not r.hung and r.rc == 0 and case.klass == "abort" and tcache_key_is_pointer(ctx.glibc)
            and any_matches(r" on the destroyed id returned -1 \(errno EBADF\)$", r.err))


def check_freed_id_proof(case: Misuse, proof: proc.Run, ctx: Ctx) -> Checked:
    """The audit run of a raw abort case that returned EBADF: it must name use-after-destroy-id
    at the call. The problems, and the raw verdict's text."""
    call = "rdma_reject" if case.name == "destroyed_id" else "rdma_resolve_addr"
    kl = kind_lines(proof.err, "use-after-destroy-id")
    p = []
    if not kl or not any_matches(": %s on " % call, kl):
        p.append("no signal and %s returned -1 (EBADF) on %s, but the audit run did not name "
                 "use-after-destroy-id at %s: %s" % (call, ctx.glibc, call, kl[0] if kl else "no finding"))
    how = ("exit 0, %s returned -1 (EBADF), no signal: %s's tcache key is a heap pointer (before "
           "2.34); the audit here names it: %s" % (call, ctx.glibc, kl[0] if kl else "none"))
    return p, how[:400]


def check_misuse_raw(case: Misuse, r: proc.Run, ctx: Ctx, proof: Checked | None = None) -> Checked:
    """A misuse program without the preload: it provokes its misuse (blocks, dies or runs to its
    end as its class says). PROOF: check_freed_id_proof's answer when needs_freed_id_proof."""
    p: Problems = []
    if case.klass == "hang":
        if not r.hung:
            p.append("did not block without the preload (exit %d): the misuse is not provoked" % r.rc)
        how = "blocked in the call after '%s'" % _strip_step(case.before)
    elif case.klass in ("abort", "kept"):
        if proof is not None:
            p.extend(proof[0])
            how = proof[1]
        else:
            if not (not r.hung and r.rc > 128):
                p.append("exit status %d (hung=%d), want death by a signal (the misuse's harm)"
                         % (r.rc, int(r.hung)))
            how = "died with status %d at the misuse" % r.rc
    else:
        p.extend(check_exit0(r))
        how = "ran to the end, exit 0"
    if line_of(r.err, case.before) == 0:
        p.append("never reached the misuse ('%s')" % case.before)
    p.extend(check_no_preload_output(r))
    p.extend(check_child_destroy(case.name, r.err))
    if case.name.startswith("use_after_ack"):
        if not any_matches("^use-after-ack read: ", r.out):
            p.append("no 'use-after-ack read:' line")
        p.extend(check_before_ack(r.out, ctx.tx))
    p.extend(check_object_harm("raw", case.name, r, ctx.tx))
    return p, "raw/%s: %s" % (case.name, how.replace("\\", ""))


def misuse_marker(mode: str, case: Misuse) -> str | None:
    """A hang case blocks in audit mode too: run with its marker there."""
    return case.before if case.klass == "hang" and mode == "audit" else None


def check_misuse_preloaded(mode: str, case: Misuse, r: proc.Run, ctx: Ctx) -> Checked:
    """A misuse program under audit or safe mode (its run with misuse_marker's marker)."""
    p: Problems = []
    killed = False
    if case.klass == "hang" and mode == "audit":
        killed = r.hung
        if not r.hung:
            p.append("did not block in audit mode (exit %d); without the preload it blocks" % r.rc)
        if line_of(r.err, case.after) != 0:
            p.append("the blocking call returned in audit mode")
        how = "blocked after the finding line, as without the preload"
    elif case.klass == "abort" and mode == "audit" and not r.hung and r.rc > 128:
        killed = True
        how = ("died with status %d after the finding line (the call passed on to librdmacm, as "
               "without the preload)" % r.rc)
    else:
        p.extend(check_exit0(r))
        how = "the call returned, exit 0" if case.klass == "hang" else "exit 0"
        if case.after and line_of(r.err, case.after) == 0:
            p.append("never printed '%s'" % case.after)
    read = _last_after(r.out, "use-after-ack read: ")
    if case.name.startswith("use_after_ack") and mode == "safe":
        # Safe mode keeps the copy valid after the ack: the read is of good memory, on purpose
        # unguarded, so it is not a finding (README: safe mode reports all but use-after-ack).
        p.extend(audit.check_no_findings(r.err, ctx.kinds))
        rep = check_json(p, [report_of(r)], "-", "*", "*", case.events)
        p.extend(check_transport_records(case.name, rep, False, ctx.tx))
        p.extend(audit.check_summary(r.err, str(case.events), "0"))
        p.extend(audit.check_no_token(r.err, cases.TOKEN_TAG))
        if read != cases.TOKEN:
            p.append("safe mode read '%s' after the ack, want '%s'" % (read, cases.TOKEN))
        p.extend(check_before_ack(r.out, ctx.tx))
        return p, ("%s/%s: %s, read the right bytes after the ack, no finding (the read is safe)"
                   % (mode, case.name, how))
    p.extend(audit.check_finding(r.err, case.kind, case.seq, case.type, case.before, case.after,
                                 ctx.kinds))
    if case.kind == "destroy-with-unacked" and mode == "audit":
        if not any_matches("rdma_destroy_id will wait forever for these 1 event",
                           kind_lines(r.err, case.kind)):
            p.append("the %s line does not say 'rdma_destroy_id will wait forever for these 1 events'"
                     % case.kind)
    nrec = "*" if killed else case.events  # killed: its report may stop short
    rep = check_json(p, [report_of(r)], case.kind, case.seq, case.type, nrec)
    p.extend(check_transport_records(case.name, rep, killed, ctx.tx))
    if not killed:
        p.extend(audit.check_summary(r.err, str(case.events), str(len(rep.findings))))
        p.extend(audit.check_summary_details(r.err, rep, case.kind, case.seq))
    p.extend(audit.check_no_token(r.err, cases.TOKEN_TAG))
    p.extend(check_child_destroy(case.name, r.err))
    if not killed:
        p.extend(check_object_harm(mode, case.name, r, ctx.tx))
    if case.name == "use_after_ack_syscall" and mode == "audit":
        # The kernel's read: the call succeeded (exit 0, above) and the finding names it.
        if not any_matches("system call write", kind_lines(r.err, case.kind)):
            p.append("the use-after-ack line does not name the system call write: %s"
                     % (kind_lines(r.err, case.kind) or ["none"])[0])
        if read != cases.TOKEN:
            p.append("audit's write(2) after the ack carried '%s', want '%s'" % (read, cases.TOKEN))
    if case.name.startswith("use_after_ack"):
        if mode == "safe":
            if read != cases.TOKEN:
                p.append("safe mode read '%s' after the ack, want '%s'" % (read, cases.TOKEN))
            how += ", read the right bytes after the ack"
        p.extend(check_before_ack(r.out, ctx.tx))
    kl = kind_lines(r.err, case.kind)
    first = kl[0] if kl else "no finding line"
    return p, "%s/%s: %s; %s" % (mode, case.name, how, first[:150])


# --- two threads, a broken stderr ------------------------------------------------------------
_THREAD_LINE = re.compile(r"seq=([0-9]+) type=ROUTE_RESOLVED id=0x[0-9a-f]+ thread=([0-9]+)")


def check_threads(mode: str, r: proc.Run, ctx: Ctx) -> Tuple[Problems, List[str]]:
    """One run of misuse_use_after_ack_threads. Audit: exactly two use-after-ack findings, seq=2
    and seq=4, both ROUTE_RESOLVED, by two threads, between the markers, in the JSON report too;
    safe: no finding (its copies outlive the ack); under both, each thread read the intact copy
    (type 2, ROUTE_RESOLVED). Raw: runs to its end. The problems and the findings' threads."""
    p = check_exit0(r)
    if line_of(r.err, cases.THREADS_BEFORE) == 0:
        p.append("never reached the reads ('%s')" % cases.THREADS_BEFORE)
    if mode == "raw":
        return p + check_no_preload_output(r), []
    for n in (1, 2):
        if not any_matches("^reader %d read: type 2$" % n, r.out):
            p.append("reader %d did not read the intact copy (type 2, ROUTE_RESOLVED): %s"
                     % (n, " ".join(r.out)))
    if mode == "safe":
        p.extend(audit.check_no_findings(r.err, ctx.kinds))
        check_json(p, [report_of(r)], "-", "*", "*", 4)
        p.extend(audit.check_summary(r.err, "4", "0"))
        return p, []
    p.extend(audit.check_finding(r.err, "use-after-ack", "2", "ROUTE_RESOLVED", cases.THREADS_BEFORE,
                                 cases.THREADS_AFTER, ctx.kinds))
    kl = kind_lines(r.err, "use-after-ack")
    if len(kl) != 2:
        p.append("%d use-after-ack lines, want 2 (one per thread)" % len(kl))
    seen: List[str] = []
    threads: List[str] = []
    for line in kl:
        m = _THREAD_LINE.search(line)
        if m:
            seen.append(m.group(1))
            threads.append(m.group(2))
        else:
            p.append("a use-after-ack line without seq, type=ROUTE_RESOLVED, id and thread: %s" % line)
    if sorted(int(s) for s in seen) != [2, 4]:
        p.append("use-after-ack lines for seq %s, want 2 and 4, once each" % " ".join(seen))
    if not (len(threads) == 2 and threads[0] != threads[1]):
        p.append("the two findings do not name two threads: %s" % " ".join(threads))
    rep = None
    for seq in ("2", "4"):
        rep = check_json(p, [report_of(r)], "use-after-ack", seq, "ROUTE_RESOLVED", 4)
    if len(rep.findings) != 2:
        p.append("%d finding records in the JSON report, want 2" % len(rep.findings))
    p.extend(audit.check_summary(r.err, "4", "2"))
    p.extend(audit.check_summary_details(r.err, rep, "use-after-ack", "*"))
    return p, threads


def threads_text(mode: str, runs: int, threads: Sequence[str]) -> str:
    if mode == "raw":
        return "raw/use_after_ack_threads: two threads read their acked events, exit 0"
    if mode == "safe":
        return ("safe/use_after_ack_threads: both threads read the right bytes after the acks, no "
                "finding (the reads are safe)")
    return ("%s/use_after_ack_threads: %d runs, each with two use-after-ack findings, seq=2 and "
            "seq=4, by two threads (last: %s); both reads got the intact copy"
            % (mode, runs, " ".join(threads)))


def check_stderr_fails(r: proc.Run, ctx: Ctx) -> Checked:
    """CMSAFE_MODE=bogus while stderr fails (cases.BREAK_STDERR): the config is forced by the
    first wrapped call, outside the preload's panic shield, and says the bad value on stderr:
    that write must not panic (an unwind into the program). The documented result: audit mode
    (the JSON report holds misuse_use_after_ack's use-after-ack finding, which safe mode would
    not make and off would not report), and the program runs to its end, exit 0."""
    p = check_exit0(r)
    rep = check_json(p, [report_of(r)], "use-after-ack", "3", "CONNECT_REQUEST", 4)
    if len(rep.findings) != 1:
        p.append("%d finding records in the JSON report, want 1" % len(rep.findings))
    if r.err:
        p.append("something reached the harness's stderr: %s" % r.err[0])
    return p, ("audit/stderr_fails: CMSAFE_MODE=bogus with stderr a pipe without reader: audit "
               "mode (use-after-ack seq=3 in the report), exit 0")


# --- fork, no RDMA, SIGSEGV, the late-ack threshold ------------------------------------------
_FORK = re.compile(r"^preload_fork: parent ([0-9]+) child ([0-9]+)$")
_FORK_SUMMARY = re.compile(r"^==cmsafe== summary: .*[^0-9]([0-9]+) events, 0 findings")


def check_fork(mode: str, variant: str, r: proc.Run, ctx: Ctx) -> Checked:
    """preload_fork. after: the process forks after its first event, both do CM work: one
    report per process, each with its own events, a summary from each. before: it forks before
    touching librdmacm and only the child does CM work: the child's report and summary, nothing
    from the parent."""
    p = check_exit0(r)
    parent = child = ""
    for line in r.out:
        m = _FORK.match(line)
        if m:
            parent, child = m.group(1), m.group(2)
    if not parent:
        p.append("no 'preload_fork: parent <pid> child <pid>' line")
    elif mode == "raw":
        p.extend(check_no_preload_output(r))
    elif variant == "after":
        if parent != str(r.pid):
            p.append("parent pid %s is not the started pid %d" % (parent, r.pid))
        types = check_json(p, [report_of(r, int(parent))], "-", "*", "*", "*").types
        if "REJECTED" not in types:
            p.append("the parent's report has no REJECTED event record")
        if "CONNECT_REQUEST" in types:
            p.append("the parent's report has the child's CONNECT_REQUEST")
        types = check_json(p, [report_of(r, int(child))], "-", "*", "*", "*").types
        if "CONNECT_REQUEST" not in types:
            p.append("the child's report has no CONNECT_REQUEST event record")
        if "REJECTED" in types:
            p.append("the child's report has the parent's REJECTED")
    else:
        check_json(p, [report_of(r, int(child))], "-", "*", "*", 2)
        if os.path.exists(report_of(r, int(parent))):
            p.append("the parent never touched librdmacm, yet wrote %s" % report_of(r, int(parent)))
    if mode != "raw":
        p.extend(audit.check_no_findings(r.err, ctx.kinds))
        want = 1 if variant == "before" else 2
        sums = [m.group(1) for m in map(_FORK_SUMMARY.search, r.err) if m]
        if len(sums) != want:
            p.append("%d summary lines with 0 findings, want %d (%s)"
                     % (len(sums), want, "parent and child" if want == 2 else "the child only"))
        if variant == "before" and (sums[0] if sums else "") != "2":
            p.append("no summary line counting the child's 2 events")
        p.extend(audit.check_no_token(r.err, cases.TOKEN_TAG))
    if mode == "raw":
        text = "raw/fork_%s: exit 0 in parent %s and child %s" % (variant, parent or "?", child or "?")
    elif variant == "after":
        text = ("%s/fork_after: exit 0, one report and one summary per process (%s, %s), no finding"
                % (mode, parent or "?", child or "?"))
    else:
        text = "%s/fork_before: exit 0, the child's report and summary only (%s), no finding" % (
            mode, child or "?")
    return p, text


def check_no_rdma(mode: str, r: proc.Run, ref: Sequence[str]) -> Checked:
    """preload_no_rdma: exit 0 and stdout; preloaded, the raw run's stdout (REF), nothing on
    stderr, no report file."""
    p = []
    if not (not r.hung and r.rc == 0):
        p.append("exit status %d (hung=%d), want 0" % (r.rc, int(r.hung)))
    if not r.out:
        p.append("no output on stdout")
    if mode == "raw":
        return p, "raw/no_rdma: exit 0, stdout kept as the reference"
    if list(r.out) != list(ref):
        p.append("stdout differs from the run without the preload: '%s'" % " ".join(r.out))
    if r.err:
        p.append("stderr is not empty: %s" % (r.err[0] or "(no newline)"))
    reports = sorted(glob.glob(r.log + ".*.jsonl"))
    if reports:
        p.append("a report file was written: %s" % " ".join(reports))
    return p, "%s/no_rdma: exit 0, same stdout, nothing on stderr, no report file" % mode


def check_sigsegv(mode: str, variant: str, r: proc.Run, ctx: Ctx) -> Checked:
    """preload_sigsegv: the program's own SIGSEGV handler still works."""
    p = check_exit0(r)
    if not any_matches("^preload_sigsegv: handler ran 2 times, both at the program's own page$", r.out):
        p.append("the program's SIGSEGV handler did not run as expected: %s" % " ".join(r.out[:3]))
    if mode != "raw":
        p.extend(audit.check_no_findings(r.err, ctx.kinds))
        p.extend(audit.check_summary(r.err, "7", "0"))
        rep = check_json(p, [report_of(r)], "-", "*", "*", 7)
        p.extend(audit.check_summary_details(r.err, rep, "-", "*"))
    return p, "%s/sigsegv_%s: the program's handler ran for both faults (%s), exit 0" % (
        mode, variant, variant)


# (name, CMSAFE_LATE_ACK_MS, the program's hold in ms, a finding)
LATE_ACK_THRESHOLDS = (("late_ack_under_threshold", "5000", "1500", False),
                       ("late_ack_low_threshold", "500", "2500", True))


def check_late_ack_threshold(mode: str, name: str, limit: str, hold: str, finding: bool,
                             r: proc.Run, ctx: Ctx) -> Checked:
    """misuse_late_ack HOLD under CMSAFE_LATE_ACK_MS=LIMIT: a late-ack finding or none."""
    p = check_exit0(r)
    if not finding:
        p.extend(audit.check_no_findings(r.err, ctx.kinds))
        p.extend(audit.check_summary(r.err, "2", "0"))
        rep = check_json(p, [report_of(r)], "-", "*", "*", 2)
        p.extend(audit.check_summary_details(r.err, rep, "-", "*"))
        return p, "%s/%s: held %s ms with CMSAFE_LATE_ACK_MS=%s, no finding" % (mode, name, hold, limit)
    p.extend(audit.check_finding(r.err, "late-ack", "2", "ROUTE_RESOLVED", r"^step: holding ROUTE_RESOLVED",
                                 r"^step: acked", ctx.kinds))
    rep = check_json(p, [report_of(r)], "late-ack", "2", "ROUTE_RESOLVED", 2)
    p.extend(audit.check_summary(r.err, "2", str(len(rep.findings))))
    p.extend(audit.check_summary_details(r.err, rep, "late-ack", "2"))
    return p, "%s/%s: held %s ms with CMSAFE_LATE_ACK_MS=%s, late-ack seq=2" % (mode, name, hold, limit)


def check_qp_then_destroy(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    """Two misuses of one event, each named at its own call (a finding never hides a later one).
    Raw and audit block in rdma_destroy_id (run with cases.QP_THEN_DESTROY_MARKER); safe returns."""
    marker = cases.QP_THEN_DESTROY_MARKER
    p: Problems = []
    if mode == "safe":
        p.extend(check_exit0(r))
    elif not r.hung:
        p.append("rdma_destroy_id(child) did not block (exit %d), as it does raw" % r.rc)
    if line_of(r.err, r"^step: calling rdma_destroy_qp\(child\)") == 0:
        p.append("never reached rdma_destroy_qp(child)")
    if mode == "raw":
        p.extend(check_no_preload_output(r))
        return p, "raw/qp_then_destroy: blocked in rdma_destroy_id(child), its own DISCONNECTED unacked"
    both = ("qp-destroy-before-ack", "destroy-in-own-handler")
    p.extend(check_only(r.err, both, ctx.kinds))
    for k in both:
        kl = kind_lines(r.err, k)
        if len(kl) != 1:
            p.append("%d '%s' lines, want 1" % (len(kl), k))
            continue
        if not re.search(r"seq=6 type=DISCONNECTED id=0x[0-9a-f]+ thread=[0-9]+", kl[0]):
            p.append("the %s line is not about seq=6 DISCONNECTED: %s" % (k, kl[0]))
    at_qp = line_of(r.err, "^==cmsafe== qp-destroy-before-ack: ")
    at_destroy = line_of(r.err, "^==cmsafe== destroy-in-own-handler: ")
    at = line_of(r.err, marker)
    if not (0 < at_qp < at < at_destroy):
        p.append("each line must come at its own call: qp-destroy-before-ack (line %d) before the "
                 "rdma_destroy_id marker (line %d), destroy-in-own-handler (line %d) after it"
                 % (at_qp, at, at_destroy))
    rep = check_json(p, [report_of(r)], ",".join(both), "6", "DISCONNECTED",
                     7 if mode == "safe" else "*")
    if len(rep.findings) != 2:
        p.append("%d finding records, want 2" % len(rep.findings))
    how = ("rdma_destroy_id returned (safe mode acked), exit 0" if mode == "safe"
           else "blocked in rdma_destroy_id after both lines, as without the preload")
    return p, ("%s/qp_then_destroy: qp-destroy-before-ack at rdma_destroy_qp, then "
               "destroy-in-own-handler at rdma_destroy_id, both seq=6 DISCONNECTED; %s" % (mode, how))


# --- plugins, cancellation, lost events -------------------------------------------------------
def check_dlopen(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    p = check_exit0(r)
    first = r.out[0] if r.out else ""
    if mode == "raw":
        if not any_matches("^before the plugin: no rdma_get_cm_event in the process$", r.out):
            p.append("raw, rdma_get_cm_event was found before the plugin was loaded: %s" % first)
    elif not any_matches("^before the plugin: rdma_get_cm_event returned -1, errno ENOSYS$", r.out):
        p.append("before librdmacm is loaded the preload's rdma_get_cm_event must fail with ENOSYS: %s"
                 % first)
    if not any_matches("^plugin loaded RTLD_LOCAL: rdma_getaddrinfo in the global scope: no$", r.out):
        p.append("librdmacm reached the global scope: the test proves nothing")
    for line in cases.DLOPEN_ROUNDS:
        if line not in r.out:
            p.append("no line '%s'" % line)
    if mode == "raw":
        return p, "raw/dlopen: 3 rounds of 7 events through a plugin loaded RTLD_LOCAL"
    p.extend(audit.check_no_findings(r.err, ctx.kinds))
    p.extend(audit.check_summary(r.err, "21", "0"))
    rep = check_json(p, [report_of(r)], "-", "*", "*", 21)
    p.extend(audit.check_summary_details(r.err, rep, "-", "*"))
    return p, ("%s/dlopen: librdmacm only in a plugin loaded RTLD_LOCAL: ENOSYS before it, 3 rounds "
               "after, 21 events tracked, no finding" % mode)


def normal_diff(a: Sequence[str], b: Sequence[str]) -> List[str]:
    """diff(1)'s default output of A against B (the lines a failure shows)."""
    out: List[str] = []

    def rng(i: int, j: int) -> str:
        return str(i + 1) if j - i == 1 else "%d,%d" % (i + 1, j)

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "delete":
            out.append("%sd%d" % (rng(i1, i2), j1))
        elif tag == "insert":
            out.append("%da%s" % (i1, rng(j1, j2)))
        else:
            out.append("%sc%s" % (rng(i1, i2), rng(j1, j2)))
        out.extend("< " + x for x in a[i1:i2])
        if tag == "replace":
            out.append("---")
        out.extend("> " + x for x in b[j1:j2])
    return out


def cancel_env(report: str) -> dict:
    env = {"CMSAFE_LATE_ACK_MS": "500"}
    if report != "report":
        env["CMSAFE_REPORT"] = ""
    return env


def check_cancel(mode: str, report: str, r: proc.Run, ref: Sequence[str], ctx: Ctx) -> Checked:
    """preload_cancel (REPORT "report" or "noreport": CMSAFE_REPORT empty). Raw: its 11 lines,
    kept as REF; preloaded: the same lines, no abort, the held event named, 2 cancelled reads."""
    p = check_exit0(r)
    for line in r.err:
        if any(bad in line for bad in cases.CANCEL_BAD):
            p.append("stderr: %s" % line)
    if mode == "raw":
        if len(r.out) != cases.CANCEL_LINES:
            p.append("%d lines on stdout, want %d" % (len(r.out), cases.CANCEL_LINES))
        return p, ("raw/cancel: each wrapped call cancelled where librdmacm has its cancellation "
                   "point (stdout kept as the reference)")
    if list(r.out) != list(ref):
        p.append("stdout differs from the run without the preload: %s"
                 % "".join(x + " " for x in normal_diff(ref, r.out)[:4]))
    # The last case really holds the id's event while rdma_destroy_id waits: named, as it must be.
    p.extend(audit.check_finding(r.err, "destroy-with-unacked", "5", "ADDR_RESOLVED", "", "", ctx.kinds))
    p.extend(audit.check_summary(r.err, "5", "1"))
    if not any_matches("^==cmsafe==   threads cancelled inside rdma_get_cm_event: 2$", r.err):
        p.append("the summary does not count the 2 threads cancelled inside rdma_get_cm_event")
    if report == "report":
        check_json(p, [report_of(r)], "destroy-with-unacked", "5", "ADDR_RESOLVED", 5)
    else:
        reports = sorted(glob.glob(r.log + ".*.jsonl"))
        if reports:
            p.append("CMSAFE_REPORT is empty, yet a report was written: %s" % " ".join(reports))
    return p, ("%s/cancel (%s): the same %d lines as raw (cancelled inside each call with a "
               "cancellation point, after rdma_ack_cm_event), no abort, 2 cancelled reads counted"
               % (mode, report, len(r.out) - 1))


def check_lost_event(mode: str, variant: str, r: proc.Run, ctx: Ctx) -> Checked:
    """preload_lost_event VARIANT (direct, cancelled), run with cases.LOST_EVENT_MARKER:
    rdma_destroy_id blocks in every mode; the audit names the lost event while it does."""
    p: Problems = []
    if not r.hung:
        p.append("rdma_destroy_id did not block (exit status %d): the event was not lost" % r.rc)
    if line_of(r.err, "^step: rdma_destroy_id returned") != 0:
        p.append("rdma_destroy_id returned")
    if mode == "raw":
        return p, ("raw/lost_event_%s: rdma_destroy_id blocks for good on the event read past librdmacm"
                   % variant)
    kind = "destroy-waits-for-lost-event"
    p.extend(audit.check_finding(r.err, kind, "0", "-", "^step: read the ADDR_RESOLVED past librdmacm",
                                 "", ctx.kinds))
    kl = kind_lines(r.err, kind)
    first = kl[0] if kl else ""
    if not any_matches("rdma_destroy_id has waited [0-9]+ ms although every event the program got "
                       "for this id was acked", kl):
        p.append("the finding does not say what waits: %s" % first)
    if variant == "cancelled" and not any_matches(
            "thread [0-9]+ was cancelled inside rdma_get_cm_event on this id's event channel", kl):
        p.append("the finding does not name the cancelled reader: %s" % first)
    check_json(p, [report_of(r)], kind, "0", "-", "*")
    named = "" if variant == "direct" else ", naming the cancelled reader"
    return p, ("%s/lost_event_%s: rdma_destroy_id still blocks (as raw), and the audit names the "
               "lost event while it does%s" % (mode, variant, named))


READ_BLOCKED = r"^step: the reader is still blocked in rdma_get_cm_event after 3 s"


def check_read_without_ids(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    """rping's teardown hang, on demand (c-tests/preload/preload_read_without_ids.c): a reader
    polls the channel, the main thread destroys its only id (dropping the queued event), the reader's
    rdma_get_cm_event blocks for good, raw as preloaded, until a new id's event ends it.
    Preloaded, the hang watcher names the blocked read while it lasts (CMSAFE_HANG_MS, 1 s, of
    the 3 s)."""
    p = check_exit0(r)
    if line_of(r.err, READ_BLOCKED) == 0:
        p.append("the read did not block: the destroyed id's event was not dropped")
    if mode == "raw":
        return p, ("raw/read_without_ids: rdma_get_cm_event after the poll blocks once the id is "
                   "destroyed, until a new id's event")
    kind = "get-event-without-ids"
    p.extend(audit.check_finding(r.err, kind, "0", "-", r"^step: rdma_destroy_id returned",
                                 READ_BLOCKED, ctx.kinds))
    kl = kind_lines(r.err, kind)
    if len(kl) != 1:
        p.append("%d get-event-without-ids lines, want 1" % len(kl))
    if not any_matches("rdma_get_cm_event on event channel 0x[0-9a-f]+ has blocked at least [0-9]+ ms "
                       "since thread %d destroyed the channel's last cm_id" % r.pid, kl):
        p.append("the finding does not say what blocks and who destroyed the id: %s"
                 % (kl[0] if kl else ""))
    p.extend(audit.check_summary(r.err, "1", "1"))
    check_json(p, [report_of(r)], kind, "0", "-", "*")
    return p, ("%s/read_without_ids: the read still blocks (as raw), and the hang watcher names it "
               "while it does" % mode)


# --- completion-queue and async events --------------------------------------------------------
@dataclass
class Objects:
    """What a CQ or async program prints of itself: its object ("cq 0x...", "qp 0x...", ...),
    the other CQ, and the thread that gets the event ("cq thread <tid>", "async thread <tid>",
    "main thread <tid>"); the destroying thread is the main one (tid = pid)."""

    obj: str = ""
    id: str = ""
    other: str = ""
    getter: str = ""


def cq_values(out: Sequence[str], p: Problems) -> Objects:
    v = Objects(obj="cq")
    for line in out:
        if line.startswith("cq 0x"):
            v.id = line[len("cq "):]
        elif line.startswith("other cq 0x"):
            v.other = line[len("other cq "):]
        elif line.startswith("cq thread ") or line.startswith("main thread "):
            v.getter = line.rsplit(" ", 1)[-1]
    if not v.id or not v.getter:
        p.append("the program did not print its CQ and getter thread: %s" % " ".join(out[:3]))
    return v


def async_values(out: Sequence[str], p: Problems) -> Objects:
    v = Objects()
    for line in out:
        if line.startswith(("qp 0x", "cq 0x", "srq 0x")):
            v.obj, v.id = line.split(" ", 1)
        elif line.startswith("async thread ") or line.startswith("main thread "):
            v.getter = line.rsplit(" ", 1)[-1]
    if not v.id or not v.getter:
        p.append("the program did not print its object and getter thread: %s" % " ".join(out[:3]))
    return v


def check_obj_line(err: Sequence[str], kind: str, count: int, typ: str, oid: str, thread: int,
                   marker: str, msg: str) -> Problems:
    """COUNT lines of KIND, the first after the stderr line MARKER, about the object OID (seq 0,
    type TYP) in THREAD, one saying MSG (a regex)."""
    kl = kind_lines(err, kind)
    p = []
    if len(kl) != count:
        p.append("%d '%s' lines, want %d" % (len(kl), kind, count))
    if not kl:
        return p
    if not kl[0].startswith("==cmsafe== %s: seq=0 type=%s id=%s thread=%d at " % (kind, typ, oid, thread)):
        p.append("the %s line is not about %s of %s in thread %d: %s" % (kind, typ, oid, thread, kl[0]))
    if not any_matches(msg, kl):
        p.append("no %s line says /%s/: %s" % (kind, msg, kl[0]))
    f = line_of(err, "^==cmsafe== %s: " % re.escape(kind))
    at = line_of(err, marker)
    if not (at > 0 and f > at):
        p.append("the %s line (stderr line %d) does not follow '%s' (line %d)" % (kind, f, marker, at))
    return p


def check_events_done(r: proc.Run, kinds: str, findings: int, typ: str, summary: str) -> Problems:
    """After a run to the end: exit 0, the report's finding records (KINDS, comma-separated, of
    type TYP) and 5 CM event records, the summary's counts and its line SUMMARY (a regex)."""
    p = check_exit0(r)
    rep = check_json(p, [report_of(r)], kinds, "0", typ, 5)
    p.extend(audit.check_summary(r.err, "5", str(findings)))
    if len(rep.findings) != findings:
        p.append("%d finding records, want %d" % (len(rep.findings), findings))
    if not any_matches("^==cmsafe==   %s$" % summary, r.err):
        p.append("no summary line '%s'" % summary)
    return p


def check_blocked(r: proc.Run, call: str, kinds: str, typ: str, returned: str) -> Problems:
    """Audit of a program that blocks in CALL as it does raw (RETURNED: the line it would print
    had CALL returned)."""
    p = []
    if not r.hung:
        p.append("%s did not block (exit %d), as it does raw" % (call, r.rc))
    if line_of(r.err, returned) != 0:
        p.append("%s returned in audit mode" % call)
    check_json(p, [report_of(r)], kinds, "0", typ, "*")
    return p


def _count_after(err: Sequence[str], marker: str, prefix: str) -> int:
    """Lines starting with PREFIX from the line MARKER matches on (all when none does)."""
    d = line_of(err, marker)
    return sum(1 for line in err[d:] if line.startswith(prefix))


@dataclass(frozen=True)
class ExtraAck:
    """An ack of more events than were got (cq_over_ack, async_double_ack): what its lines say."""

    kind: str
    type: str
    id: str
    ack_marker: str  # the program's line before the extra ack
    ack_msg: str  # the finding at the ack says this (a regex)
    destroy_msg: str  # audit: the second finding, at the destroy, says this
    destroy_marker: str  # the program's line before the destroy
    destroy_said: str  # how a failure names that marker
    call: str  # the destroy
    returned: str  # audit: the destroy never gets there
    safe_returned: str  # safe: it does
    kept: str  # safe: the finding says the extra ack was kept (a regex)
    summary: str  # safe: the summary's count line (a regex)


def check_extra_ack(mode: str, r: proc.Run, ctx: Ctx, x: ExtraAck) -> Problems:
    """Audit: a finding at the extra ack and one at the destroy, said before it blocks, and it
    blocks as raw; safe: one finding, the extra ack kept from libibverbs, the destroy returns."""
    p = check_obj_line(r.err, x.kind, 2 if mode == "audit" else 1, x.type, x.id, r.pid, x.ack_marker,
                       x.ack_msg)
    p.extend(check_only(r.err, [x.kind], ctx.kinds))
    kl = kind_lines(r.err, x.kind)
    if mode == "audit":
        second = kl[1] if len(kl) > 1 else ""
        if x.destroy_msg not in second:
            p.append("the second %s line does not name the destroy's wait: %s" % (x.kind, second))
        n = _count_after(r.err, x.destroy_marker, "==cmsafe== %s: " % x.kind)
        if n != 1:
            p.append("%d %s lines after %s, want 1 (said before it blocks)" % (n, x.kind, x.destroy_said))
        p.extend(check_blocked(r, x.call, x.kind, x.type, x.returned))
        return p
    if not any_matches(x.kept, kl):
        p.append("the extra ack is not said kept: %s" % (kl[0] if kl else ""))
    if line_of(r.err, x.safe_returned) == 0:
        p.append("%s did not return 0" % x.call)
    p.extend(check_events_done(r, x.kind, 1, x.type, x.summary))
    return p


def check_never_acked(r: proc.Run, ctx: Ctx, kind: str, typ: str, oid: str, marker: str, msg: str,
                      summary: str) -> Problems:
    """An event never acked (cq_never_acked, async_never_acked): the finding at exit, after
    MARKER, saying MSG, no other kind, the run to its end and the summary's line SUMMARY."""
    p = check_obj_line(r.err, kind, 1, typ, oid, r.pid, marker, msg)
    p.extend(check_only(r.err, [kind], ctx.kinds))
    p.extend(check_events_done(r, kind, 1, typ, summary))
    return p


def check_cq_raw(prog: cases.Blocking, r: proc.Run) -> Checked:
    p: Problems = []
    if prog.marker is not None:
        if not r.hung:
            p.append("ibv_destroy_cq did not block without the preload (exit %d)" % r.rc)
    else:
        p.extend(check_exit0(r))
    cq_values(r.out, p)
    p.extend(check_no_preload_output(r))
    if prog.marker is not None:
        return p, "raw/%s: blocked in ibv_destroy_cq for good" % prog.name
    return p, "raw/%s: ran to the end, exit 0" % prog.name


def check_cq_destroy_with_unacked(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    name = "cq_destroy_with_unacked"
    p: Problems = []
    v = cq_values(r.out, p)
    held = ("1 unacked completion events of cq %s \\(got 1, acked 0; got by thread %s, the last at "
            % (v.id, v.getter))
    if mode == "audit":
        p.extend(check_obj_line(r.err, "cq-destroy-with-unacked", 1, "COMPLETION", v.id, r.pid,
                                cases.CQ_DESTROY, "ibv_destroy_cq will wait forever for these " + held))
        p.extend(check_only(r.err, ["cq-destroy-with-unacked"], ctx.kinds))
        p.extend(check_blocked(r, "ibv_destroy_cq", "cq-destroy-with-unacked", "COMPLETION",
                               cases.CQ_RETURNED))
        return p, ("audit/%s: cq-destroy-with-unacked (1 event, got by the CQ thread %s), then "
                   "blocked as raw" % (name, v.getter))
    p.extend(check_obj_line(
        r.err, "cq-destroy-with-unacked", 1, "COMPLETION", v.id, r.pid, cases.CQ_DESTROY,
        "without cmsafe, ibv_destroy_cq would wait forever for these " + held
        + r".*; safe mode acked them \(ibv_ack_cq_events\(cq, 1\)\)"))
    p.extend(check_obj_line(
        r.err, "cq-ack-after-destroy", 1, "COMPLETION", v.id, r.pid,
        "^step: acking the event after ibv_destroy_cq",
        r"ibv_ack_cq_events\(cq %s, 1\) after ibv_destroy_cq\(cq\) returned \(safe mode had acked 1 "
        r"for the program there\): kept from libibverbs" % v.id))
    p.extend(check_only(r.err, ["cq-destroy-with-unacked", "cq-ack-after-destroy"], ctx.kinds))
    if line_of(r.err, cases.CQ_RETURNED) == 0:
        p.append("ibv_destroy_cq did not return 0")
    p.extend(check_events_done(
        r, "cq-destroy-with-unacked,cq-ack-after-destroy", 2, "COMPLETION",
        r"completion events: 1 got, 1 acked \(safe mode acked 1 for the program, kept 1 of its "
        r"acks from libibverbs\)"))
    return p, ("safe/%s: cq-destroy-with-unacked (got by thread %s), safe mode acked 1, "
               "ibv_destroy_cq returned 0; the late ack is a cq-ack-after-destroy, kept from the "
               "freed CQ" % (name, v.getter))


def check_cq_wrong_ack(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    name = "cq_wrong_ack"
    p: Problems = []
    v = cq_values(r.out, p)
    if not v.other:
        p.append("the program did not print the other CQ")
    p.extend(check_obj_line(
        r.err, "cq-ack-wrong-cq", 1, "COMPLETION", v.other, r.pid,
        "^step: acking the event against the other CQ",
        r"ibv_ack_cq_events\(cq %s, 1\) but this CQ has 0 unacked events \(got 0, acked 0\), while "
        r"cq %s on the same completion channel has 1 unacked" % (v.other, v.id)))
    f = line_of(r.err, "^==cmsafe== cq-ack-wrong-cq: ")
    at = line_of(r.err, r"^step: ibv_ack_cq_events\(other\) returned")
    if not f < at:
        p.append("the cq-ack-wrong-cq line does not come at the ack (line %d, the ack returned at %d)"
                 % (f, at))
    p.extend(check_obj_line(
        r.err, "cq-destroy-with-unacked", 1, "COMPLETION", v.id, r.pid, cases.CQ_DESTROY,
        r"1 unacked completion events of cq %s \(got 1, acked 0; got by thread %s," % (v.id, v.getter)))
    both = "cq-ack-wrong-cq,cq-destroy-with-unacked"
    p.extend(check_only(r.err, both.split(","), ctx.kinds))
    if mode == "audit":
        p.extend(check_blocked(r, "ibv_destroy_cq", both, "COMPLETION", cases.CQ_RETURNED))
        return p, ("audit/%s: cq-ack-wrong-cq at the ack (cq %s for %s), cq-destroy-with-unacked at "
                   "ibv_destroy_cq(cq), then blocked as raw" % (name, v.other, v.id))
    if not any_matches("safe mode kept the ack from libibverbs$", kind_lines(r.err, "cq-ack-wrong-cq")):
        p.append("the wrong ack is not said kept from libibverbs")
    if line_of(r.err, r"^step: ibv_destroy_cq\(other\) returned 0") == 0:
        p.append("ibv_destroy_cq(other) did not return 0")
    p.extend(check_events_done(
        r, both, 2, "COMPLETION",
        r"completion events: 1 got, 1 acked \(safe mode acked 1 for the program, kept 1 of its "
        r"acks from libibverbs\)"))
    return p, ("safe/%s: cq-ack-wrong-cq (kept from libibverbs), cq-destroy-with-unacked (safe mode "
               "acked 1), both destroys returned 0" % name)


def check_cq_over_ack(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    name = "cq_over_ack"
    p: Problems = []
    v = cq_values(r.out, p)
    p.extend(check_extra_ack(
        mode, r, ctx, ExtraAck(
            "cq-over-ack", "COMPLETION", v.id, "^step: acking 2 events of 1",
            r"ibv_ack_cq_events\(cq %s, 2\) acks more than was got: 1 got from this CQ, 0 acked before"
            % v.id,
            "ibv_destroy_cq(cq %s) will wait forever: 2 acked for 1 got from this CQ" % v.id,
            cases.CQ_DESTROY, "'%s'" % cases.CQ_DESTROY, "ibv_destroy_cq", cases.CQ_RETURNED,
            cases.CQ_RETURNED, "safe mode passed on 1 and kept 1 from libibverbs$",
            r"completion events: 1 got, 2 acked \(safe mode acked 0 for the program, kept 1 of its "
            r"acks from libibverbs\)")))
    if mode == "audit":
        return p, ("audit/%s: cq-over-ack at the ack (2 for 1) and at ibv_destroy_cq (2 acked for 1 "
                   "got), then blocked as raw" % name)
    return p, "safe/%s: cq-over-ack at the ack, 1 passed on and 1 kept, ibv_destroy_cq returned 0" % name


def check_never_acked_row(mode: str, x: cases.NeverAcked, r: proc.Run, ctx: Ctx) -> Checked:
    """A row of NEVER_ACKED under the preload: exit 0, the finding at exit about the object the
    program printed, got by its main thread."""
    p: Problems = []
    v = (cq_values if x.obj == "cq" else async_values)(r.out, p)
    p.extend(check_never_acked(r, ctx, x.kind, x.type, v.id, x.marker,
                               x.message.format(id=v.id, pid=r.pid), x.summary))
    return p, ("%s/%s: exit 0, %s at exit (%s %s, %s, thread %d)"
               % (mode, x.name, x.kind, x.obj, v.id, x.type, r.pid))


CQ_CHECKS = {
    "cq_destroy_with_unacked": check_cq_destroy_with_unacked,
    "cq_wrong_ack": check_cq_wrong_ack,
    "cq_over_ack": check_cq_over_ack,
    "cq_never_acked": lambda mode, r, ctx: check_never_acked_row(
        mode, cases.NEVER_ACKED["cq_never_acked"], r, ctx),
}


def check_cq_loop(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    """Completion events used correctly, 40 rounds: no finding, every event counted got and
    acked."""
    p = check_exit0(r)
    if "events 40" not in r.out:
        p.append("no 'events 40' line: %s" % " ".join(r.out[:2]))
    if mode == "raw":
        return p, "raw/cq_loop: 42 completion events got and acked, exit 0"
    p.extend(audit.check_no_findings(r.err, ctx.kinds))
    check_json(p, [report_of(r)], "-", "*", "*", 5)
    p.extend(audit.check_summary(r.err, "5", "0"))
    if "==cmsafe==   completion events: 42 got, 42 acked" not in r.err:
        p.append("no summary line 'completion events: 42 got, 42 acked'")
    return p, "%s/cq_loop: 42 completion events got and acked, counted so, no finding, exit 0" % mode


def async_type(variant: cases.AsyncVariant, tx: Transport) -> str:
    return variant.type if variant.type is not None else tx.qp_event


def check_async_raw_destroy(variant: cases.AsyncVariant, r: proc.Run, ctx: Ctx) -> Checked:
    p: Problems = []
    if not r.hung:
        p.append("%s did not block without the preload (exit %d)" % (variant.call, r.rc))
    v = async_values(r.out, p)
    return p, ("raw/async_destroy_with_unacked_%s: blocked in %s for good (%s of %s %s unacked)"
               % (variant.name, variant.call, async_type(variant, ctx.tx), v.obj, v.id))


def check_async_raw_double_ack(r: proc.Run) -> Checked:
    p = [] if r.hung else ["ibv_destroy_qp did not block without the preload (exit %d)" % r.rc]
    return p, "raw/async_double_ack: blocked in ibv_destroy_qp for good (2 acks for 1 event)"


def check_async_raw_never_acked(r: proc.Run) -> Checked:
    return check_exit0(r), "raw/async_never_acked: ran to the end, exit 0"


def check_async_destroy_with_unacked(mode: str, variant: cases.AsyncVariant, r: proc.Run,
                                     ctx: Ctx) -> Checked:
    name = "async_destroy_with_unacked_" + variant.name
    typ, call = async_type(variant, ctx.tx), variant.call
    p: Problems = []
    v = async_values(r.out, p)
    if v.getter == str(r.pid):
        p.append("the event was got by the main thread, not the async thread")
    held = ("1 unacked async events of %s %s \\(got 1, acked 0, the last %s; got by thread %s, the "
            "last at " % (v.obj, v.id, typ, v.getter))
    kind = "async-destroy-with-unacked"
    if mode == "audit":
        p.extend(check_obj_line(r.err, kind, 1, typ, v.id, r.pid, variant.destroy_at,
                                "%s will wait forever for these %s" % (call, held)))
        kl = kind_lines(r.err, kind)
        if not any_matches(r" at misuse_async_destroy_with_unacked\+0x[0-9a-f]+ ", kl[:1] or [""]):
            p.append("the finding does not place the destroy in the program: %s" % (kl[0] if kl else ""))
        p.extend(check_only(r.err, [kind], ctx.kinds))
        p.extend(check_blocked(r, call, kind, typ, variant.returned_at))
        return p, ("audit/%s: async-destroy-with-unacked (%s of %s %s, got by the async thread %s, "
                   "destroyed in the program by thread %d), then blocked as raw"
                   % (name, typ, v.obj, v.id, v.getter, r.pid))
    p.extend(check_obj_line(
        r.err, kind, 1, typ, v.id, r.pid, variant.destroy_at,
        r"without cmsafe, %s would wait forever for these %s.*; safe mode acked them \(1 "
        r"ibv_ack_async_event for the program\)" % (call, held)))
    p.extend(check_obj_line(
        r.err, "async-ack-after-destroy", 1, typ, v.id, r.pid, "^step: acking the event after the destroy",
        r"ibv_ack_async_event\(%s of %s %s\) after %s\(%s\) returned \(safe mode had acked 1 for the "
        r"program there\): kept from libibverbs, never passed on to the freed %s"
        % (typ, v.obj, v.id, call, v.obj, v.obj)))
    p.extend(check_only(r.err, [kind, "async-ack-after-destroy"], ctx.kinds))
    if line_of(r.err, variant.returned_at) == 0:
        p.append("%s did not return" % call)
    p.extend(check_events_done(
        r, kind + ",async-ack-after-destroy", 2, typ,
        r"async events: 1 got, 1 acked \(safe mode acked 1 for the program, kept 1 of its acks from "
        r"libibverbs\)"))
    return p, ("safe/%s: async-destroy-with-unacked (%s of %s, got by thread %s), safe mode acked 1, "
               "%s returned; the late ack is an async-ack-after-destroy, kept from the freed %s"
               % (name, typ, v.obj, v.getter, call, v.obj))


def check_async_double_ack(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    name, qp_event = "async_double_ack", ctx.tx.qp_event
    p: Problems = []
    v = async_values(r.out, p)
    p.extend(check_extra_ack(
        mode, r, ctx, ExtraAck(
            "async-double-ack", qp_event, v.id, "^step: acking the event a second time",
            r"ibv_ack_async_event\(%s of qp %s\) acks more than was got: 1 got for this qp, 1 acked "
            r"before" % (qp_event, v.id),
            "ibv_destroy_qp(qp %s) will wait forever: 2 acked for 1 async events got of this qp" % v.id,
            cases.ASYNC_QP_DESTROY, "the destroy's marker", "ibv_destroy_qp", cases.ASYNC_QP_RETURNED,
            r"^step: ibv_destroy_qp\(qp\) returned 0", "safe mode kept the ack from libibverbs$",
            r"async events: 1 got, 2 acked \(safe mode acked 0 for the program, kept 1 of its acks "
            r"from libibverbs\)")))
    if mode == "audit":
        return p, ("audit/%s: async-double-ack at the second ack and at ibv_destroy_qp (2 acked for 1 "
                   "got), then blocked as raw" % name)
    return p, "safe/%s: async-double-ack at the second ack, kept from libibverbs, ibv_destroy_qp returned 0" % name


def check_async_survey(mode: str, r: proc.Run, ctx: Ctx) -> Checked:
    """The events the device raises on demand (preload_async_survey), each got and acked at
    once: the same events in every mode, no finding, each counted got and acked. siw raises no
    SQ_DRAINED for the survey's move to SQD (cases.SQD_REASON): on iWARP its line must say none
    (the caller counts that apart)."""
    wants, types = [], []
    for want, typ in cases.SURVEY:
        if typ == "SQ_DRAINED" and not ctx.tx.sq_drain:
            wants.append(cases.SURVEY_NO_SQ_DRAIN)
            continue
        wants.append(want)
        types.append(typ)
    p = check_exit0(r)
    for want in wants:
        if not any_matches("^async " + want, r.out):
            p.append("no line 'async %s...'" % (want[:-1] if want.endswith("$") else want))
    n = sum(1 for line in r.out if line.startswith("async ") and not line.endswith(": none"))
    if mode == "raw":
        return p, "raw/async_survey: %d async events (%s), exit 0" % (n, ", ".join(types))
    p.extend(audit.check_no_findings(r.err, ctx.kinds))
    check_json(p, [report_of(r)], "-", "*", "*", 5)
    p.extend(audit.check_summary(r.err, "5", "0"))
    if not any_matches("^==cmsafe==   async events: %d got, %d acked$" % (n, n), r.err):
        p.append("no summary line 'async events: %d got, %d acked'" % (n, n))
    return p, "%s/async_survey: the same %d async events, counted got and acked, no finding, exit 0" % (mode, n)


# --- running ----------------------------------------------------------------------------------
class Harness:
    """One harness run: the programs of each mode, one verdict each."""

    def __init__(self, root: str, g: guest.Guest, ctx: Ctx, t: tally.Tally):
        self.root = root
        self.g = g
        self.ctx = ctx
        self.t = t
        self.lib = os.path.join(root, cases.LIB)
        # The installed packages' (scripts/deb-test): audit and safe through cmsafe-audit, as a
        # user runs them; a run that sets its own CMSAFE_MODE keeps LD_PRELOAD.
        self.audit: str | None = None
        installed = guest.installed_preload()
        if installed:
            self.audit, self.lib = installed
        self.hang_wait = cases.HANG_WAIT * g.time_scale
        self.run_timeout = cases.RUN_TIMEOUT * g.time_scale
        self.base = proc.environment({k: None for k in (
            "LD_PRELOAD", "CMSAFE_MODE", "CMSAFE_REPORT", "CMSAFE_LOG", "CMSAFE_LATE_ACK_MS")})
        # The stdout of a raw run, by case, that a preloaded run of it is compared with.
        self.raw_out: dict = {}
        self.stdin: int | None = None
        # The reports are written where the program runs (the guest's /tmp, a tmpfs), and moved
        # beside the logs once it has ended: the preload writes each record as it happens, and
        # on the guest's share of target/ every write (and the check that the descriptor is
        # still the file made) is a round trip to the host, a millisecond under emulation. The
        # late double-ack's 4,200 events would then spend most of their time limit writing.
        self.reports = tempfile.mkdtemp(prefix="cmsafe-misuse.")

    def run(self, mode: str, name: str, argv: Sequence[str], marker: str | None = None,
            env: dict | None = None, grace: float = cases.HANG_GRACE, program: bool = True) -> proc.Run:
        """Runs ARGV (ARGV[0] a program of target/preload-tests when PROGRAM) in MODE, its
        logs target/preload-misuse/MODE/NAME.*, the report NAME.<pid>.jsonl beside them."""
        log = os.path.join(cases.OUT, mode, name)
        # The last run's files go (proc.run removes .out and .err): an old report would count.
        for old in glob.glob(log + ".*"):
            os.unlink(old)
        argv = list(argv)
        if program:
            argv[0] = os.path.join(cases.BIN, argv[0])
        changes: dict = {}
        stem = os.path.join(self.reports, "%s.%s" % (mode, name))
        report = stem + ".%p.jsonl"
        if mode != "raw" and self.audit and "CMSAFE_MODE" not in (env or {}):
            # A run that sets CMSAFE_REPORT itself (empty: no report) gets no --report, which
            # would override it.
            keep = "CMSAFE_REPORT" in (env or {})
            argv = [self.audit] + (["--safe"] if mode == "safe" else []) + \
                ([] if keep else ["--report", report]) + ["--"] + argv
        elif mode != "raw":
            changes = {"LD_PRELOAD": self.lib, "CMSAFE_MODE": mode, "CMSAFE_REPORT": report}
        changes.update(env or {})
        e = dict(self.base)
        e.update(changes)
        # stdin is /dev/null open for reading only, as bash gives a background job: a program that
        # uses a stale fd can write to fd 0. misuse_destroyed_channel raw on glibc 2.31 does (the
        # freed channel's fd reads as 0, and rdma_get_cm_event writes its command to it): a
        # read-only fd 0 fails the write with EBADF and the program goes on; a writable one takes
        # the command and leaves the reply empty, an event of no id, which librdmacm discards
        # and asks again, for ever.
        if self.stdin is None:
            self.stdin = os.open(os.devnull, os.O_RDONLY)
        r = proc.run(argv, log, env=e, timeout=self.run_timeout, marker=marker,
                     hang_wait=self.hang_wait, hang_grace=grace, stdin=self.stdin)
        for made in glob.glob(stem + ".*.jsonl"):
            shutil.move(made, log + made[len(stem):])  # NAME.<pid>.jsonl beside the logs
        # What the logs do not hold, for make harness-record (record.py).
        with open(log + record.RUN, "w") as f:
            json.dump({"pid": r.pid, "rc": r.rc, "hung": r.hung}, f, sort_keys=True)
            f.write("\n")
        return r

    def beside_raw(self, mode: str, case: str, name: str, argv: Sequence[str],
                   env: dict | None = None) -> Tuple[proc.Run, List[str]]:
        """Runs NAME in MODE, and gives the stdout of CASE's raw run to compare it with: raw's
        own run when raw ran first, else one made now (the packages' suite runs audit and safe
        only)."""
        if mode != "raw" and case not in self.raw_out:
            self.raw_out[case] = self.run("raw", name, argv, env=env).out
        r = self.run(mode, name, argv, env=env)
        if mode == "raw":
            self.raw_out[case] = r.out
        return r, self.raw_out[case]

    def verdict(self, r: proc.Run, checked: Checked) -> None:
        problems, text = checked
        for x in problems:
            self.t.problem(x)
        if r.teardown_stack:
            text += " (dying at its deadline, not hung: its end took %.1f s more, in %s)" % (
                r.teardown, " < ".join(r.teardown_stack[:6]))
        self.t.verdict("%s [%ss]" % (text, r.dur_text), [("stderr (%s.err, last lines)" % r.log, r.err)])

    # The CM event programs.
    def misuse(self, mode: str, case: Misuse) -> None:
        if mode == "raw":
            r = self.run(mode, case.name, case.argv, case.before if case.klass == "hang" else None)
            proof = None
            if needs_freed_id_proof(case, r, self.ctx):
                pr = self.run("audit", case.name + ".raw-proof", case.argv)
                proof = check_freed_id_proof(case, pr, self.ctx)
            self.verdict(r, check_misuse_raw(case, r, self.ctx, proof))
            return
        r = self.run(mode, case.name, case.argv, misuse_marker(mode, case))
        self.verdict(r, check_misuse_preloaded(mode, case, r, self.ctx))

    def threads(self, mode: str) -> None:
        runs = cases.THREADS_RUNS if mode == "audit" else 1
        threads: List[str] = []
        r = None
        problems: Problems = []
        for n in range(1, runs + 1):
            r = self.run(mode, "use_after_ack_threads", ["misuse_use_after_ack_threads"])
            problems, threads = check_threads(mode, r, self.ctx)
            if mode != "audit":
                break
            if problems:
                problems.append("(run %d of %d)" % (n, runs))
                break
        self.verdict(r, (problems, threads_text(mode, runs, threads)))

    def stderr_fails(self) -> None:
        r = self.run("audit", "stderr_fails",
                     ["/usr/bin/python3", "-c", cases.BREAK_STDERR,
                      os.path.join(cases.BIN, "misuse_use_after_ack")],
                     env={"CMSAFE_MODE": "bogus"}, program=False)
        self.verdict(r, check_stderr_fails(r, self.ctx))

    # The process, the library, signals, thresholds.
    def late_ack_thresholds(self, mode: str) -> None:
        for name, limit, hold, finding in LATE_ACK_THRESHOLDS:
            r = self.run(mode, name, ["misuse_late_ack", hold], env={"CMSAFE_LATE_ACK_MS": limit})
            self.verdict(r, check_late_ack_threshold(mode, name, limit, hold, finding, r, self.ctx))

    def fork(self, mode: str, variant: str) -> None:
        r = self.run(mode, "fork_" + variant, ["preload_fork", variant])
        self.verdict(r, check_fork(mode, variant, r, self.ctx))

    def no_rdma(self, mode: str) -> None:
        r, ref = self.beside_raw(mode, "no_rdma", "no_rdma", ["preload_no_rdma"])
        self.verdict(r, check_no_rdma(mode, r, ref))

    def sigsegv(self, mode: str, variant: str) -> None:
        r = self.run(mode, "sigsegv_" + variant, ["preload_sigsegv", variant])
        self.verdict(r, check_sigsegv(mode, variant, r, self.ctx))

    def qp_then_destroy(self, mode: str) -> None:
        marker = None if mode == "safe" else cases.QP_THEN_DESTROY_MARKER
        r = self.run(mode, "qp_then_destroy", ["misuse_qp_then_destroy"], marker)
        self.verdict(r, check_qp_then_destroy(mode, r, self.ctx))

    def dlopen(self, mode: str) -> None:
        r = self.run(mode, "dlopen", ["preload_dlopen", os.path.join(self.root, cases.BIN, "preload_plugin.so")])
        self.verdict(r, check_dlopen(mode, r, self.ctx))

    def cancel(self, mode: str, report: str) -> None:
        r, ref = self.beside_raw(mode, "cancel", "cancel_" + report, ["preload_cancel"],
                                 env=cancel_env(report))
        self.verdict(r, check_cancel(mode, report, r, ref, self.ctx))

    def lost_event(self, mode: str, variant: str) -> None:
        r = self.run(mode, "lost_event_" + variant, ["preload_lost_event", variant],
                     cases.LOST_EVENT_MARKER, env={"CMSAFE_HANG_MS": "1000"},
                     grace=cases.LOST_EVENT_GRACE)
        self.verdict(r, check_lost_event(mode, variant, r, self.ctx))

    def read_without_ids(self, mode: str) -> None:
        r = self.run(mode, "read_without_ids", ["preload_read_without_ids"], env={"CMSAFE_HANG_MS": "1000"})
        self.verdict(r, check_read_without_ids(mode, r, self.ctx))

    # Completion-queue and async events.
    def cq(self, mode: str) -> None:
        r = self.run(mode, "cq_loop", ["preload_cq_loop", "40", "2"])
        self.verdict(r, check_cq_loop(mode, r, self.ctx))
        for prog in cases.CQ_PROGRAMS:
            if mode == "raw":
                r = self.run(mode, prog.name, prog.argv, prog.marker)
                self.verdict(r, check_cq_raw(prog, r))
                continue
            r = self.run(mode, prog.name, prog.argv, prog.marker if mode == "audit" else None)
            self.verdict(r, CQ_CHECKS[prog.name](mode, r, self.ctx))

    def async_events(self, mode: str) -> None:
        r = self.run(mode, "async_survey", ["preload_async_survey"])
        self.verdict(r, check_async_survey(mode, r, self.ctx))
        if not self.ctx.tx.sq_drain:
            self.t.skip("%s/async_survey: SQ_DRAINED (sq-drain: none)" % mode, cases.SQD_REASON)
        for v in cases.ASYNC_VARIANTS:
            name = "async_destroy_with_unacked_" + v.name
            argv = ["misuse_async_destroy_with_unacked", v.name]
            if mode == "raw":
                r = self.run(mode, name, argv, v.destroy_at)
                self.verdict(r, check_async_raw_destroy(v, r, self.ctx))
            else:
                r = self.run(mode, name, argv, v.destroy_at if mode == "audit" else None)
                self.verdict(r, check_async_destroy_with_unacked(mode, v, r, self.ctx))
        if mode == "raw":
            r = self.run(mode, "async_double_ack", ["misuse_async_double_ack"], cases.ASYNC_QP_DESTROY)
            self.verdict(r, check_async_raw_double_ack(r))
            r = self.run(mode, "async_never_acked", ["misuse_async_never_acked"])
            self.verdict(r, check_async_raw_never_acked(r))
            return
        r = self.run(mode, "async_double_ack", ["misuse_async_double_ack"],
                     cases.ASYNC_QP_DESTROY if mode == "audit" else None)
        self.verdict(r, check_async_double_ack(mode, r, self.ctx))
        r = self.run(mode, "async_never_acked", ["misuse_async_never_acked"])
        self.verdict(r, check_never_acked_row(mode, cases.NEVER_ACKED["async_never_acked"], r,
                                              self.ctx))

    def mode(self, mode: str, only: str) -> None:
        """One mode's programs, in the order the harness has always run them."""
        self.t.say("--- %s (%s, %s)" % (mode, self.g.dev, self.g.transport_name))
        if only == "cq":
            self.cq(mode)
            return
        if only == "async":
            self.async_events(mode)
            return
        picked = [c for c in os.environ.get("PRELOAD_MISUSE_CASES", "").split(",") if c]
        if picked:
            # A case alone, as its author runs it (then make harness-record).
            for case in cases.MISUSE:
                if case.name in picked:
                    self.misuse(mode, case)
            return
        for case in cases.MISUSE:
            self.misuse(mode, case)
        self.threads(mode)
        if mode == "audit":
            self.stderr_fails()
        if only == "cm":
            return
        if mode != "raw":
            self.late_ack_thresholds(mode)
        self.fork(mode, "after")
        self.fork(mode, "before")
        self.no_rdma(mode)
        self.sigsegv(mode, "mprotect")
        self.sigsegv(mode, "longjmp")
        self.qp_then_destroy(mode)
        self.dlopen(mode)
        self.cancel(mode, "report")
        if mode != "raw":
            self.cancel(mode, "noreport")
        self.lost_event(mode, "direct")
        self.lost_event(mode, "cancelled")
        self.read_without_ids(mode)
        self.cq(mode)
        self.async_events(mode)


def glibc_version() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ""


def main(argv: Sequence[str]) -> int:
    root = guest.project_root()
    os.chdir(root)
    g = guest.from_env(NAME)
    # The programs of another build than make preload-tests' (scripts/deb-test's, built in the
    # suite's root on this machine); the same sources.
    cases.BIN = os.environ.get("PRELOAD_MISUSE_BIN") or cases.BIN
    try:
        kinds = tuple(audit.finding_kinds(root))
    except (OSError, subprocess.SubprocessError) as e:
        kinds = ()
        print("%s: c-tests/lists/finding-kinds: %s" % (NAME, e), file=sys.stderr)
    if not kinds:
        guest.die(NAME, "no finding kinds (c-tests/lists/finding-kinds)")
    modes = list(argv) or list(cases.MODES)
    for mode in modes:
        if mode not in cases.MODES:
            print("usage: preload-misuse-tests [raw] [audit] [safe]", file=sys.stderr)
            return 2
    for prog in cases.PROGRAMS:
        path = os.path.join(cases.BIN, prog)
        if not os.access(path, os.X_OK):
            guest.die(NAME, "%s missing: run 'make preload-tests'" % path)
    only = os.environ.get("PRELOAD_MISUSE_ONLY", "")
    ctx = Ctx(kinds, cases.TRANSPORTS[g.transport], glibc_version())
    t = tally.Tally(NAME)
    h = Harness(root, g, ctx, t)
    for mode in modes:
        if mode != "raw" and not os.path.isfile(h.lib):
            t.check(mode, False, "%s not found (make preload)" % h.lib)
            continue
        os.makedirs(os.path.join(cases.OUT, mode), exist_ok=True)
        h.mode(mode, only)
    shutil.rmtree(h.reports, ignore_errors=True)
    return t.finish()
