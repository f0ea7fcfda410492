"""scripts/preload-real-programs: real RDMA programs under the preload, against their raw runs.

  preload-real-programs [--set SET] [--only NAME,...] [--rounds N --bench DIR] [MODE...]

SET: basic (rdma-core's samples, perftest, qperf, libfabric; the default), services-short (the
services in a short form, for `make test`) or services (their full form, for `make bench`); the
programs are in real_programs. MODE: audit (the default), safe or off; several modes share one
reference run per program. On Soft-iWARP a program that cannot run there (UD:
real_programs.NOT_ON_IWARP) is counted apart in each mode with its reason.

For each program: a run without the preload (the reference: exit status, key output and time),
then a run with the preload in each mode (audit and safe through bin/cmsafe-audit, off through
LD_PRELOAD with CMSAFE_MODE=off), both sides preloaded, each with a JSON report (CMSAFE_REPORT,
%p). A program's client may be several commands run one after the other against one server (the
iSER initiator tools against one tgtd); each is a side of its own. Checks, per side:
  - the exit status the reference has and the table declares (0 unless said otherwise). A
    server that only stops when killed (qperf, and cmtime's server in rdmacm-utils 44) must
    still be running when it is killed after the client; a server stopped by a signal (stop:SIG)
    must then exit 0 by itself. qperf 0.4.11's per-test server child dies by SIGSEGV in its own
    cleanup (rdma_destroy_qp on the listen id, fixed upstream after 0.4.11) with or without the
    preload: not checked. A command that runs out of its time (timeout(1)) is reported as a hang,
    naming it;
  - the same key output as without the preload (rping's ping lines, "test complete", cmtime's
    step table, the result lines of ib_send_bw, qperf, fi_pingpong and rstream, io_demo's exit
    status, the iSCSI tools' answers, a copied file's bytes...), and the reference run shows what
    it should (real_programs.expected);
  - zero findings: no "==cmsafe== <kind>:" line on either side and every summary line
    ("==cmsafe== summary: ... <E> events, <F> findings") says 0 findings; in audit and safe mode
    every side that exits by itself prints one (a killed process cannot); nothing from the
    preload on stdout. The findings a program really earns (real_programs.Allow: its kind, event
    type and calling function, at most so many) are let through, and counted;
  - the JSON reports (audit, safe): present, valid JSON on every line, event records, no finding
    record, as many event records as the summaries count;
  - rstream -T s uses kernel TCP sockets and never touches librdmacm: no ==cmsafe== output and
    no report at all there (the preload's contract for such programs); rstream without -T s
    (rsockets: librdmacm's own internal CM calls) is checked like the others.
perftest's bandwidth tests measure the CPU clock after the test (get_clock.c: a regression of
cycles on gettimeofday) and exit 1 with "Can't produce a report" when its r^2 is under 0.9,
which an emulated CPU on a loaded host gives now and then, raw as preloaded; -F (--CPU-freq)
makes them print the report anyway (perftest_parameters.c, print_report_bw), with the byte and
iteration counts compared here intact. No run is repeated.
rping's CQ thread and ib_send_bw -e sleep on completion events (ibv_get_cq_event): their
summaries must count some on both sides, with no CQ finding either. Async events
(ibv_get_async_event): no program of the basic set reads them (none imports it); UCX's libuct_ib
does (the services sets), polling the async fd, which stays empty in these runs. Every program
destroys its QPs through the interposed ibv_destroy_qp (rping through rdma_destroy_qp), so those
wrappers run everywhere, and no async finding may appear either.

With --rounds N --bench DIR, the programs marked timed run N alternated rounds (raw, then each
mode, N times), every run checked as above; DIR gets services.md (medians, ratios to raw and
their spread) and field.md (what the audit saw in each service's first audit run).

Prints one ok/FAIL line per program and mode and the timings, and ends with
"preload-real-programs (<set>: <modes>): N passed, N failed[, N apart (...)]"; exits non-zero on
any failure. Logs stay in target/preload-real/<set>/ (target/preload-real/<mode> for the basic
set in one mode; DIR/logs with --bench): PREFIX.RUN.SIDE.{out,err,cmd,rc} and the reports
PREFIX.RUN.SIDE.<pid>.jsonl, PREFIX being the program's name (NAME.rN in rounds) and RUN base
(the reference), audit, safe or off.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

from . import audit, guest, proc, real_programs, reports
from .real_programs import Allow, Program, Step
from .tally import Tally

PROG = "preload-real-programs"
USAGE = ("usage: preload-real-programs [--set basic|services-short|services] [--only NAME,...] "
         "[--rounds N --bench DIR] [audit|safe|off]...")
SETS = ("basic", "services-short", "services")
MODES = ("audit", "safe", "off")

# Seconds. A client's timeout(1) (the services' commands take minutes under load in this guest:
# theirs is a hang guard, SERVICES_CLIENT_TIMEOUT); the server's is its own plus every client's.
CLIENT_TIMEOUT = 60
SERVICES_CLIENT_TIMEOUT = 300
SERVER_TIMEOUT = 90
LISTEN_WAIT = 20  # for the server to listen; for an earlier server's listener to go away
SERVER_GRACE = 20  # for a server that exits by itself to do so after its clients
STOP_WAIT = 600  # for a server sent its stop signal to exit (tgtd waits for its I_T nexuses)
DEAD_SERVER_GRACE = 5  # a client whose server died meanwhile gets this long, then SIGTERM
# late-ack is a time threshold (CMSAFE_LATE_ACK_MS, 1000 ms by default). In this emulated guest,
# loaded by other guests, the services hold events for seconds where hardware takes milliseconds
# (libiscsi's ESTABLISHED until its login thread runs, tgtd's CONNECT_REQUEST, UCX's
# CONNECT_REQUEST): their runs set it to 120 s, a hang guard that no run reaches, so that no
# result depends on the machine's speed; field.md reports the hold times and how many were over
# the default instead.
SERVICES_LATE_ACK_MS = 120000
TAIL = 8  # log lines shown under a FAIL
MAX_JSON_PROBLEMS = 8  # JSON problems said per side, then a count


# --- logs -----------------------------------------------------------------------------------


def lines(path: str) -> list[str]:
    """A log's lines as the checks read them: every line break Python knows (iscsi-perf's
    progress line is rewritten with \\r), undecodable bytes replaced; no file, no lines."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []


def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def table_rows(ls: Sequence[str], header: str, ncols: int) -> list[str]:
    """Rows after a header line: their first NCOLS columns, until a blank or dashed line."""
    got, on = [], False
    for line in ls:
        if re.match(header, line.strip()):
            on = True
            got.append(" ".join(line.split()[:ncols]))
            continue
        if on:
            if not line.strip() or line.strip().startswith("---"):
                on = False
                continue
            got.append(" ".join(line.split()[:ncols]))
    return got


def program_of(command: str) -> str:
    """The program a command runs: its first word after env, VAR=value words, stdbuf and
    timeout(1) with their options (and timeout's duration), scripts/stop-after with its two."""
    words = command.split()
    while words:
        w = words[0]
        if w == "env" or re.match(r"^[A-Za-z_]\w*=", w):
            words.pop(0)
        elif w.endswith("stop-after"):
            del words[:3]
        elif w == "stdbuf":
            words.pop(0)
            while words and words[0].startswith("-"):
                words.pop(0)
        elif w == "timeout":
            words.pop(0)
            while words and words[0].startswith("-"):
                opt = words.pop(0)
                if opt in ("-s", "-k") and words:
                    words.pop(0)
            if words:
                words.pop(0)  # the duration
        else:
            return w.rsplit("/", 1)[-1]
    return ""


def side_program(out_path: str) -> str:
    """The program a side ran, from its command (PATH.cmd beside PATH.out)."""
    return program_of(" ".join(lines(out_path[:-len(".out")] + ".cmd")))


# --- key output -----------------------------------------------------------------------------


def _demo(line: str) -> str:
    """An io_demo line without its timestamp and [DEMO] tag."""
    return re.sub(r"^\[[\d.]+\] (\[DEMO\] )?", "", line)


def program_key(prog: str, ls: Sequence[str]) -> list[str] | None:
    """Key output by program, for the services; None for a program not listed here."""
    if prog == "io_demo":
        # The client's final status and the connections that ran to its end; a connection attempt
        # that timed out under load and was retried (-c 3 retries) is the program's own business.
        got = [_demo(x) for x in ls if re.search(r"\[DEMO\] Client exit with status", x)]
        got += sorted(re.sub(r"^.*\[DEMO\] disconnecting \[UCX-connection \S+ #\d+ (\S+)\].*due to (.*)$",
                             r"disconnecting \1 due to \2", x)
                      for x in ls if re.search(r"\[DEMO\] disconnecting \[UCX-connection .* due to \"End of", x))
        got += [_demo(x) for x in ls if re.search(r"(?i)corrupt|mismatch|invalid", x)]
        conns = set(re.findall(r"\[UCX\] removed \[UCX-connection \S+ (#\d+) ", "\n".join(ls)))
        if not any("Client exit" in x for x in ls):
            got.append("connections: %d" % len(conns))
        return got
    if prog == "iser-target":
        return [x for x in ls if x.startswith("iser-target: ")]
    if prog in ("iscsi-inq", "iscsi-readcapacity16", "iscsi-swp"):
        return [x.rstrip() for x in ls if x.strip()]
    if prog == "iscsi-perf":
        parts = [p.strip() for x in ls for p in x.split("\r")]
        return [p for p in parts
                if re.match(r"^(connected to |capacity is |performing |FIXED transfer |finished\.$)", p)]
    if prog == "iscsi-test-cu":
        got = [norm(x) for x in ls if re.match(r"^\s*Test: .*\.\.\.\S+", x)]
        got += [" ".join(x.split()[:6]) for x in ls if re.match(r"^\s*(suites|tests|asserts)\s", x)]
        got += [x.strip() for x in ls if x.startswith("Tests completed with return value")]
        return got
    if prog == "riostream":
        return table_rows(ls, r"^name\s+bytes\s+xfers\s+iters", 4)
    if prog in ("rdma_xserver", "rdma_xclient"):
        return [x for x in ls if re.match(r"^%s: (start|end -?\d+)$" % prog, x)]
    if prog == "mckey":
        return [re.sub(r" mlid .*$", "", x) for x in ls
                if re.match(r"^(mckey: joined dgid|data transfers complete$|test complete$|return status)", x)]
    if prog == "rcopy":
        got = []
        for x in ls:
            x = re.sub(r"^waiting for connection\.\.\.", "", x)
            if re.match(r"^(client: |opening)", x):
                got.append(x)
            m = re.match(r"^(\d+) bytes in ", x)
            if m:
                got.append("%s bytes" % m.group(1))
        return got
    if prog in ("ib_write_bw", "ib_read_lat"):
        return table_rows(ls, r"^#bytes\s+#iterations", 2)[1:]
    return None


def key_of(name: str, side: str, prog: str, ls: Sequence[str]) -> list[str]:
    """The output of a side (program PROG of the table's NAME) that must be the same with and
    without the preload: times, rates, pids and QP numbers left out."""
    if side == "verify":
        return list(ls)
    got = program_key(prog, ls)
    if got is not None:
        return got
    if name == "rping":
        pat = r"^server ping data: rdma-ping-\d+: " if side == "server" else r"^ping data: rdma-ping-\d+: "
        return [x for x in ls if re.match(pat, x)]
    if name in ("ucmatose", "udaddy"):
        return [x for x in ls if x in ("test complete", "return status 0")]
    if name == "cmtime":
        return _cmtime_key(side, ls)
    if name.startswith("ib_send_bw"):
        return table_rows(ls, r"^#bytes\s+#iterations", 2)[1:]
    if name == "qperf":
        if side == "server":
            return []
        got = [x.strip() for x in ls if x.strip() == "rc_lat:"]
        got += [re.sub(r"[\d.]+ [mun]?s$", "<n> <unit>", norm(x)) for x in ls
                if re.match(r"^\s*latency\s+=\s+[\d.]+ [mun]?s$", x)]
        return got
    if name == "fi_pingpong":
        return table_rows(ls, r"^bytes\s+#sent\s+#ack", 3)
    if name == "rdma_server_client":
        p = "rdma_server" if side == "server" else "rdma_client"
        return [x for x in ls if re.match(r"^%s: (start|end -?\d+)$" % p, x)]
    if name.startswith("rstream"):
        return table_rows(ls, r"^name\s+bytes\s+xfers\s+iters", 4)
    return []


def _cmtime_key(side: str, ls: Sequence[str]) -> list[str]:
    bad = [norm(x) for x in ls if re.search(r"error|fail|event:", x, re.I)]
    if any(re.match(r"^(Connect|Accept) \(\d+\) ", x) for x in ls):
        # rdma-core 56 and 65: each test's title, connection count and step table (step names
        # only), on both sides.
        got = []
        for x in ls:
            row = re.match(r"^([a-z][a-z ]*[a-z])\s+\d+(\s+\d+){5}\s*$", x)
            if re.match(r"^(Connect|Accept) \(\d+\) ", x) or re.match(r"^(qp|cm)_conn\s+\d+\s*$", x):
                got.append(norm(x))
            elif x.startswith("step "):
                got.append("step")
            elif row:
                got.append(row.group(1))
        return got + bad
    if side == "server":
        return []
    got = [norm(re.sub(r"\s*:.*$", ":", x)) for x in ls if re.match(r"^[a-z ]+:\s", x)]
    got = [x for x in got if x]
    hdr = [x for x in ls if x.startswith("step ")]
    return ["step" if hdr else "(no step header)"] + got + bad


def key(name: str, side: str, out_path: str) -> list[str]:
    """key_of for a side's stdout log (its command beside it)."""
    return key_of(name, side, side_program(out_path), lines(out_path))


# --- the checks of a pair's logs --------------------------------------------------------------


def parse_sides(spec: str) -> list[tuple[str, str]]:
    """SIDE:END,... -> [(side, end)]; END says how the side ends (exit, kill, stop:SIG, signal
    for a command that dies of one raw, none for the verify command)."""
    return [tuple(x.split(":", 1)) for x in spec.split(",") if x]  # type: ignore[misc]


def check_base(name: str, prefix: str, sides: str, conns: int = 200) -> tuple[list[str], int]:
    """The reference run's key output shows what it should; the problems, and how many key
    lines the clients (and the verify command) have."""
    problems, nkey = [], 0
    for side, _ in parse_sides(sides):
        path = "%s.base.%s.out" % (prefix, side)
        got = key(name, side, path)
        if side != "server":
            nkey += len(got)
        want = real_programs.expected(name, side, side_program(path), conns)
        if not re.search(want, "|".join(got)):
            problems.append("without the preload, the %s's key output '%s' does not match /%s/"
                            % (side, "|".join(got), want))
    return problems, nkey


def allowed(rules: Sequence[Allow], side: str, kind: str | None, etype: str | None,
            where: str | None) -> Allow | None:
    """The rule that allows this finding, or None."""
    for r in rules:
        if (r.side == side and r.kind == kind and r.type == etype
                and re.match(re.escape(r.function) + r"\b", where or "")):
            return r
    return None


def check_reports(side: str, files: Sequence[str], want_events: int | None, run: str,
                  rules: Sequence[Allow] = (), want_allowed: int = 0) -> list[str]:
    """A side's JSON reports: every line a record of the preload's with its fields, no finding
    record but the allowed ones (as many as the allowed stderr lines), an event record when
    preloaded in audit or safe mode, WANT_EVENTS of them (None: not counted)."""
    nevents, problems, kinds, first, nallowed = 0, [], {}, None, 0
    for path in files:
        fname = os.path.basename(path)
        with open(path, "rb") as f:
            ls = reports.whole_lines(fname, f.read())
        for n, line in enumerate(ls, 1):
            o, bad = audit.report_record(fname, n, line)
            problems += bad
            if o is None:
                continue
            if o["record"] == "finding" and allowed(rules, side, o.get("finding"), o.get("type"), o.get("where")):
                nallowed += 1
            elif o["record"] == "finding":
                kinds[o.get("finding")] = kinds.get(o.get("finding"), 0) + 1
                first = first or "%s:%d: %.240s" % (fname, n, line)
            elif o["record"] == "event":
                nevents += 1
    if kinds:
        problems.append("finding records: %s; first: %s" % (
            ", ".join("%s %d" % kv for kv in sorted(kinds.items())), first))
    if run != "off" and files and nevents == 0:
        problems.append("no event record: the preload saw no event")
    if nallowed != want_allowed:
        problems.append("%d allowed finding records, %d allowed finding lines on stderr" % (nallowed, want_allowed))
    if want_events is not None and nevents != want_events:
        problems.append("%d event records, the summaries count %d events" % (nevents, want_events))
    out = ["%s: JSON %s" % (side, p) for p in problems[:MAX_JSON_PROBLEMS]]
    if len(problems) > MAX_JSON_PROBLEMS:
        out.append("%s: JSON ... %d more" % (side, len(problems) - MAX_JSON_PROBLEMS))
    return out


_SUMMARY = re.compile(r"^==cmsafe== summary: ")
_CQ_LINE = re.compile(r"^==cmsafe==   completion events: (\d+) got, (\d+) acked")
_FINDING_LINE = re.compile(r"^==cmsafe== ([a-z-]+): seq=\d+ type=(\S+) .* at (\S+)")


def finding_regex(kinds: Sequence[str]) -> re.Pattern[str]:
    return re.compile(r"^==cmsafe== (%s): " % "|".join(map(re.escape, kinds)))


def check_preloaded(name: str, prefix: str, run: str, touches: bool, sides: str,
                    rules: Sequence[Allow], kinds: Sequence[str]) -> tuple[list[str], list[str]]:
    """A preloaded run (RUN: audit, safe, off) against the reference: key output as in it,
    findings (none but those RULES let through), summaries, JSON reports. The problems, and
    what the verdict line says of each side (KEY=VALUE: its summaries' event counts, its
    completion events, its allowed findings)."""
    finding = finding_regex(kinds)
    out: list[str] = []
    info: list[str] = []
    for side, side_end in parse_sides(sides):
        base_key = key(name, side, "%s.base.%s.out" % (prefix, side))
        run_key = key(name, side, "%s.%s.%s.out" % (prefix, run, side))
        if base_key != run_key:
            out.append("%s: key output differs: without '%s', with '%s'"
                       % (side, "|".join(base_key), "|".join(run_key)))
        if side == "verify":
            continue
        p = "%s.%s.%s" % (prefix, run, side)
        so, se = lines(p + ".out"), lines(p + ".err")
        files = sorted(glob.glob(glob.escape(p) + ".*.jsonl"))
        for line in so:
            if "==cmsafe==" in line:
                out.append("%s: ==cmsafe== output on stdout: %.200s" % (side, line))
                break
        finds = [x for x in se if finding.match(x)]
        ok: dict[Allow, int] = {}
        rest = []
        for x in finds:
            m = _FINDING_LINE.match(x)
            r = allowed(rules, side, m.group(1), m.group(2), m.group(3)) if m else None
            if r:
                ok[r] = ok.get(r, 0) + 1
            else:
                rest.append(x)
        for r, n in ok.items():
            if n > r.most:
                out.append("%s: %d %s findings for %s at %s, at most %d allowed"
                           % (side, n, r.kind, r.type, r.function, r.most))
        nok = sum(ok.values())
        if nok:
            info.append("%s_allowed=%d" % (side, nok))
        if rest:
            out.append("%s: %d finding line(s), first: %.300s" % (side, len(rest), rest[0]))
        if not touches:
            mine = [x for x in se if "==cmsafe==" in x]
            if mine:
                out.append("%s: never touches librdmacm, yet: %.200s" % (side, mine[0]))
            if files:
                out.append("%s: never touches librdmacm, yet a report was written: %s"
                           % (side, " ".join(os.path.basename(f) for f in files)))
            info.append("%s=untouched" % side)
            continue
        sums = [x for x in se if _SUMMARY.match(x)]
        esum = fsum = 0
        counts = []
        for x in sums:
            m = re.search(r"(\d+) events, (\d+) findings", x)
            if not m:
                out.append("%s: summary line without '<E> events, <F> findings': %s" % (side, x))
                continue
            esum += int(m.group(1))
            fsum += int(m.group(2))
            if int(m.group(1)) == 0:
                out.append("%s: the summary counts no event: %s" % (side, x))
        for x in sums:
            m = re.search(r"(\d+) events", x)
            if m:
                counts.append(m.group(1))
        # A finding another thread counted while the summary was made has its own line.
        fsum += audit.findings_after_summary(se)
        if fsum != nok:
            out.append("%s: the summaries count %d findings (%d allowed): %s"
                       % (side, fsum, nok, " / ".join(sums + audit.after_lines(se))))
        exits = side_end == "exit" or side_end.startswith("stop")
        if run != "off" and exits and not sums:
            out.append("%s: no '==cmsafe== summary:' line at exit" % side)
        cq = [m.groups() for m in map(_CQ_LINE.match, se) if m]
        if cq:
            info.append("%s_cq=%s" % (side, "+".join("%s/%s" % g for g in cq)))
        if name in real_programs.CQ_EVENTS and run != "off" and exits and sum(int(g) for g, _ in cq) == 0:
            out.append("%s: sleeps on completion events, yet no summary counts one (%s)"
                       % (side, "; ".join(x for x in se if "completion events" in x) or "no such line"))
        info.append("%s=%s" % (side, "+".join(counts) or "no summary"))
        if not files:
            if run != "off":
                out.append("%s: no JSON report (%s.<pid>.jsonl)" % (side, os.path.basename(p)))
            continue
        want = esum if exits and sums else None
        out += check_reports(side, files, want, run, rules, nok)
    return out, info


def rping_race(name: str, run: str, err: Sequence[str]) -> bool:
    """A side's stderr shows rping's teardown race (real_programs): rping's own line, and
    preloaded, the audit's use-after-destroy-channel line too."""
    if name != "rping":
        return False
    text = "\n".join(err)
    if "rdma_get_cm_event: Bad file descriptor" not in text:
        return False
    return run == "base" or "==cmsafe== use-after-destroy-channel: " in text


_PERFTEST_FIRST = re.compile(r"^==cmsafe== (not-a-cm-id|use-after-destroy-id): .* at ib_[a-z_]+\+0x[0-9a-f]+ "
                             r".*: rdma_resolve_addr on ")


def perftest_retry_bug(clients: Sequence[Step], run: str, cli_rcs: Sequence[int], srv_rc: str,
                       client_err: Sequence[str], server_err: Sequence[str]) -> bool:
    """The pair shows perftest's retry after a REJECTED connect (real_programs): a perftest
    client that printed REJECTED with status 8 and then died by SIGSEGV (raw, audit) or exited 1
    (safe); preloaded, its first finding names rdma_resolve_addr in perftest's code and it has no
    finding of another kind (the clean-up's calls on the same slot and channel are named too);
    the server, waiting, was stopped (143) and has no finding."""
    if len(clients) != 1 or not clients[0].cmd.startswith("ib_"):
        return False
    want = 1 if run == "safe" else 139
    if not cli_rcs or cli_rcs[0] != want or srv_rc != "143":
        return False
    if not any("Event: RDMA_CM_EVENT_REJECTED; error: 8." in x for x in client_err):
        return False
    if run == "base":
        return True
    first = ""
    for x in client_err:
        m = re.match(r"^==cmsafe== ([a-z-]+):", x)
        if not m:
            continue
        if m.group(1) == "summary":
            continue
        if m.group(1) in ("not-a-cm-id", "use-after-destroy-id", "use-after-destroy-channel"):
            first = first or x
            continue
        return False
    if not _PERFTEST_FIRST.search(first):
        return False
    return not any(re.search(r"==cmsafe== [a-z-]+: seq=", x) for x in server_err)


def perftest_finding(client_err: Sequence[str]) -> str:
    """The audit's naming of perftest's retry, for its skip line: KIND at WHERE, CALL."""
    kl = next((x for x in client_err if re.match(r"^==cmsafe== [a-z-]*: seq=", x)), "")
    m = re.search(r"^==cmsafe== ([a-z-]+):.* at ([^ ]+) .*: (rdma_resolve_addr on [^ ,]+)", kl)
    return "%s at %s, %s" % m.groups() if m else kl


# --- what the audit saw, and the bench's pages ------------------------------------------------


def field_records(name: str, prefix: str, sides: str, kinds: Sequence[str]) -> list[dict]:
    """What the audit saw in PREFIX's audit run, one record per side: events by type, held
    before ack (get_ns to ack_ns of each event record), findings."""
    finding = finding_regex(kinds)
    recs = []
    for side, _ in parse_sides(sides):
        if side == "verify":
            continue
        p = "%s.audit.%s" % (prefix, side)
        by_type: dict[str, int] = {}
        held: list[int] = []
        finds: dict[str, int] = {}
        over: dict[str, int] = {}
        nproc = 0
        for rep in sorted(glob.glob(glob.escape(p) + ".*.jsonl")):
            nproc += 1
            for line in reports.report_lines(rep) or []:
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                if o.get("record") == "event":
                    by_type[o["type"]] = by_type.get(o["type"], 0) + 1
                    if isinstance(o.get("ack_ns"), int) and isinstance(o.get("get_ns"), int):
                        held.append(o["ack_ns"] - o["get_ns"])
                        if held[-1] > 1e9:
                            over[o["type"]] = over.get(o["type"], 0) + 1
                elif o.get("record") == "finding":
                    finds[o["finding"]] = finds.get(o["finding"], 0) + 1
        held.sort()
        sums = [x for x in lines(p + ".err") if x.startswith("==cmsafe==") and not finding.match(x)]
        recs.append({
            "name": name, "side": side, "command": " ".join(lines(p + ".cmd")),
            "processes": nproc, "events": sum(by_type.values()), "by_type": by_type,
            "acked": len(held),
            "held_median_ms": held[len(held) // 2] / 1e6 if held else None,
            "held_max_ms": held[-1] / 1e6 if held else None,
            "over_1s": over, "findings": finds, "summaries": sums})
    return recs


def median(xs: Sequence[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def iops(prefix: str, run: str) -> int | None:
    """iscsi-perf's last 'iops average N' in that run, or None."""
    # The client's output: PREFIX.RUN.client.out alone, or PREFIX.RUN.cN-iscsi-perf.out among others.
    for path in sorted(glob.glob(glob.escape("%s.%s." % (prefix, run)) + "*.out")):
        if path.endswith(".server.out") or path.endswith(".verify.out"):
            continue
        got = re.findall(r"iops average (\d+)", "\n".join(lines(path)))
        if got:
            return int(got[-1])
    return None


SERVICES_INTRO = (
    "Guest: `scripts/rxe-vm -- scripts/preload-real-programs --set services --rounds N "
    "--bench DIR audit safe` (`make bench`). The guest is software-emulated (qemu TCG, "
    "Soft-RoCE over a dummy netdev, 2 vCPUs on a 2-core host shared with other work): "
    "times are the emulator's, far slower than hardware and noisy; compare ratios, not "
    "absolute figures. Rounds alternate raw, audit, safe; every run is checked (exit "
    "statuses, key output as raw, no finding but UCX's documented late-ack) before it is "
    "counted. Ratio: median / raw "
    "median; spread: min-max of the per-round ratios (each run over the raw run of its "
    "round).")
FIELD_INTRO = (
    "Generated by `make bench` from the first audit-mode run of each program in "
    "`scripts/preload-real-programs --set services` (the preload's JSON reports and exit "
    "summaries; Soft-RoCE in a qemu TCG guest, so hold times are the emulator's). Held "
    "before ack: from `rdma_get_cm_event` returning to the program's `rdma_ack_cm_event`. "
    "A late-ack on io_demo's server is UCX holding each CONNECT_REQUEST until the "
    "application accepts the connection (by design: the event is UCX's connection-request "
    "handle; see tests/harness/cmsafe_harness/real_programs.py), the one finding the test allows there. "
    "These runs set the late-ack threshold to 120 s (a hang guard: the guest's hold times "
    "are the emulator's); 'held over 1 s' counts the events the default threshold "
    "(1000 ms) would have reported as late-ack.")


def services_md(rows: Sequence[Sequence[str]]) -> str:
    """services.md from timings.tsv's rows (name, round, run, side, secs, prefix, command)."""
    runs: list[str] = []
    for r in rows:
        if r[2] not in runs:
            runs.append(r[2])
    md = ["## Services under the preload: raw / audit / safe", "", SERVICES_INTRO, ""]
    names = [r[0] for r in rows]
    for name in sorted(set(names), key=names.index):
        mine = [r for r in rows if r[0] == name]
        msides = [r[3] for r in mine]
        for side in sorted(set(msides), key=msides.index):
            ss = [r for r in mine if r[3] == side]
            rounds = sorted(set(int(r[1]) for r in ss))
            md += ["### %s: %s wall time, %d rounds" % (name, side, len(rounds)), "",
                   "Command: `%s`" % ss[0][6], ""]
            md += ["| run | median s | ratio to raw | spread of ratios | per round s |",
                   "| --- | --- | --- | --- | --- |"]
            t = {(r[2], int(r[1])): float(r[4]) for r in ss}
            base_med = median([t[("base", k)] for k in rounds if ("base", k) in t])
            for run in runs:
                xs = [t[(run, k)] for k in rounds if (run, k) in t]
                if not xs:
                    continue
                ratios = [t[(run, k)] / t[("base", k)] for k in rounds
                          if (run, k) in t and ("base", k) in t and t[("base", k)] > 0]
                md.append("| %s | %.1f | %.2f | %.2f-%.2f | %s |" % (
                    "raw" if run == "base" else run, median(xs), median(xs) / base_med,
                    min(ratios), max(ratios), " ".join("%.1f" % x for x in xs)))
            md.append("")
        prefixes = {int(r[1]): r[5] for r in mine}
        perf = {(run, k): iops(prefixes[k], run) for run in runs for k in prefixes}
        if any(v is not None for v in perf.values()):
            md += ["### %s: iscsi-perf, sequential 4 KiB reads, 32 in flight, fixed duration" % name, "",
                   "| run | median IOPS | ratio to raw | spread of ratios | per round |",
                   "| --- | --- | --- | --- | --- |"]
            ks = sorted(prefixes)
            bm = median([perf[("base", k)] for k in ks if perf[("base", k)]])
            for run in runs:
                ys = [perf[(run, k)] for k in ks if perf[(run, k)] is not None]
                rs = [perf[(run, k)] / perf[("base", k)] for k in ks
                      if perf[(run, k)] is not None and perf[("base", k)]]
                if ys and rs:
                    md.append("| %s | %d | %.2f | %.2f-%.2f | %s |" % (
                        "raw" if run == "base" else run, median(ys), median(ys) / bm, min(rs), max(rs),
                        " ".join(str(y) for y in ys)))
            md.append("")
    return "\n".join(md)


def field_md(records: Sequence[dict]) -> str:
    """field.md from field.jsonl's records."""
    md = ["## What the audit saw in real services", "", FIELD_INTRO, "",
          "| service | side | command | processes | events | events by type | held before ack: median / max ms "
          "| held over 1 s | findings |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for o in records:
        bt = ", ".join("%s %d" % kv for kv in sorted(o["by_type"].items(), key=lambda kv: -kv[1]))
        held = ("%.3f / %.3f" % (o["held_median_ms"], o["held_max_ms"])
                if o["held_median_ms"] is not None else "-")
        fd = ", ".join("%s %d" % kv for kv in sorted(o["findings"].items())) or "0"
        cmd = o["command"].replace("|", "\\|")
        ov = ", ".join("%s %d" % kv for kv in sorted(o["over_1s"].items())) or "0"
        md.append("| %s | %s | `%s` | %d | %d | %s | %s | %s | %s |" % (
            o["name"], o["side"], cmd, o["processes"], o["events"], bt or "-", held, ov, fd))
    md.append("")
    return "\n".join(md)


def write_bench(d: str) -> None:
    """DIR/services.md and DIR/field.md from DIR/timings.tsv and DIR/field.jsonl."""
    rows = [x.split("\t") for x in lines(d + "/timings.tsv")[1:] if x.strip()]
    with open(d + "/services.md", "w") as f:
        f.write(services_md(rows))
    recs = [json.loads(x) for x in lines(d + "/field.jsonl") if x.strip()]
    with open(d + "/field.md", "w") as f:
        f.write(field_md(recs))


def guarded(problems: list[str], fn, *args) -> None:
    """Runs a check whose own bug must show as a problem, not end the harness."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - any bug of a check, said and counted
        problems.append("checker: %s: %s" % (type(e).__name__, e))


# --- running a pair ---------------------------------------------------------------------------


def client_sides(prog: Program) -> list[str]:
    """The clients' side names: "client" alone, else cN-PROGRAM."""
    if len(prog.clients) == 1:
        return ["client"]
    return ["c%d-%s" % (i, program_of(s.cmd)) for i, s in enumerate(prog.clients, 1)]


def sides_spec(prog: Program) -> str:
    """SIDE:END,... for the checks: the server's end, each client's (signal when its status
    says it dies of one raw), verify:none with a verify command."""
    spec = ["server:%s" % prog.end]
    for side, step in zip(client_sides(prog), prog.clients):
        spec.append("%s:%s" % (side, "signal" if step.rc >= 128 else "exit"))
    if prog.verify:
        spec.append("verify:none")
    return ",".join(spec)


def secs_text(t0: float) -> str:
    """Seconds since T0 with one decimal, truncated, as the lines print them."""
    tenths = int((time.monotonic() - t0) * 10)
    return "%d.%d" % (tenths // 10, tenths % 10)


def _output(argv: Sequence[str]) -> str:
    try:
        return subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, universal_newlines=True).stdout
    except OSError:
        return ""


def cm_listening(cm_ids: str, where: str, any_program: bool = False) -> bool:
    """`rdma res show cm_id` (CM_IDS) has a LISTEN id of WHERE's program (COMM:ADDR:PORT; ANY_PROGRAM:
    any program) at its address."""
    comm, _, addr = where.partition(":")
    if any_program:
        comm = "[^ ]+"
    return re.search("state LISTEN [^\n]*comm %s src-addr %s " % (comm, addr), cm_ids) is not None


def listening(spec: str, server_out: str, any_program: bool = False) -> bool:
    """Something listens as SPEC says: cm:COMM:ADDR:PORT (that program, at that address, in
    `rdma res show cm_id`; ANY_PROGRAM: any program), tcp:PORT, log:TEXT (the server's stdout
    says it; nothing to wait for before the server starts)."""
    kind, _, rest = spec.partition(":")
    if kind == "cm":
        return cm_listening(_output(["rdma", "res", "show", "cm_id"]), rest, any_program)
    if kind == "tcp":
        return _output(["ss", "-Hltn", "sport = :%s" % rest]) != ""
    if kind == "log":
        if any_program or not os.path.isfile(server_out):
            return False
        with open(server_out, "rb") as f:
            return rest in f.read().decode("utf-8", "replace")
    return False


@dataclass
class Pair:
    """One run of a pair: the server's status (a number, or what happened instead: killed,
    exited early with N, still running...), the clients' statuses and seconds, the whole."""

    srv_rc: str = ""
    cli_rcs: list[int] = field(default_factory=list)
    cli_secs: list[str] = field(default_factory=list)
    secs: str = ""
    listened: bool = False


class Harness:
    def __init__(self, g: guest.Guest, set_name: str, modes: Sequence[str], only: str,
                 rounds: int, bench: str, root: str, kinds: Sequence[str], tally: Tally):
        self.g = g
        self.set = set_name
        self.modes = list(modes)
        self.only = only
        self.rounds = rounds
        self.bench = bench
        self.kinds = list(kinds)
        self.t = tally
        self.lib = os.path.join(root, "target", "release", "libcmsafe_preload.so")
        self.audit = os.path.join(root, "bin", "cmsafe-audit")
        installed = guest.installed_preload()  # the packages' (scripts/deb-test)
        if installed:
            self.audit, self.lib = installed
        self.client_timeout = CLIENT_TIMEOUT if set_name == "basic" else SERVICES_CLIENT_TIMEOUT
        self.late_ack = "" if set_name == "basic" else str(SERVICES_LATE_ACK_MS)
        out = "target/preload-real/" + set_name
        if set_name == "basic" and len(self.modes) == 1:
            out = "target/preload-real/" + self.modes[0]
        self.out = os.path.join(bench, "logs") if bench else out
        self.conns = 200
        self.timings: list[str] = []
        # The programs' environment: none of the preload's settings from the caller.
        self.env = proc.environment({k: None for k in ("LD_PRELOAD", "CMSAFE_MODE", "CMSAFE_REPORT",
                                                       "CMSAFE_LOG", "CMSAFE_LATE_ACK_MS")})

    # -- the programs ---------------------------------------------------------------------------

    def programs(self) -> list[Program]:
        cm = None
        if self.set == "basic":
            m = re.search(r"^\s*max_ah:\s*(\d+)", _output(["ibv_devinfo", "-v", "-d", self.g.dev]), re.M)
            self.conns = real_programs.cmtime_conns(int(m.group(1)) if m else None, self.g.transport)
            usage = subprocess.run(["cmtime", "-h"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, universal_newlines=True,
                                   errors="replace").stdout if _have("cmtime") else ""
            cm = real_programs.cmtime(self.g.addr, usage, self.conns)
        return real_programs.table(self.set, self.g.addr, self.g.dev, cm)

    # -- one pair -------------------------------------------------------------------------------

    def preload_argv(self, run: str, report: str) -> list[str]:
        late = ["--late-ack-ms", self.late_ack] if self.late_ack else []
        if run == "audit":
            return [self.audit] + late + ["--report", report, "--"]
        if run == "safe":
            return [self.audit, "--safe"] + late + ["--report", report, "--"]
        return []

    def start(self, run: str, path: str, timeout: int, command: str) -> proc.Background:
        """One side, preloaded as RUN says, under timeout(1); its command in PATH.cmd."""
        with open(path + ".cmd", "w") as f:
            f.write(command + "\n")
        report = os.path.abspath(path) + ".%p.jsonl"
        env = self.env
        if run == "off":
            env = dict(env, LD_PRELOAD=self.lib, CMSAFE_MODE="off", CMSAFE_REPORT=report)
        argv = self.preload_argv(run, report) + ["timeout", str(timeout)] + command.split()
        return proc.Background(argv, path, env)

    def run_pair(self, run: str, prog: Program, pfx: str) -> Pair:
        """Runs the server and its clients; logs in PFX.RUN.SIDE.{out,err,cmd,rc}, reports in
        PFX.RUN.SIDE.<pid>.jsonl, the verify command's output (run without the preload after
        the pair) in PFX.RUN.verify.out."""
        p = "%s.%s" % (pfx, run)
        for f in glob.glob(glob.escape(p) + ".*"):
            os.unlink(f)
        srv_out = p + ".server.out"
        timeouts = [s.timeout if s.timeout is not None else self.client_timeout for s in prog.clients]
        stimeout = SERVER_TIMEOUT + sum(timeouts)
        # An earlier server's listener may take a moment to go away.
        for _ in range(LISTEN_WAIT * 5):
            if not listening(prog.listen, srv_out, True):
                break
            time.sleep(0.2)
        if listening(prog.listen, srv_out, True):
            self.t.problem("%s: something still listens at %s before the server starts"
                           % (run, prog.listen.partition(":")[2]))
        r = Pair()
        t0 = time.monotonic()
        srv = self.start(run, p + ".server", stimeout, prog.server)
        for _ in range(LISTEN_WAIT * 10):
            if not srv.alive():
                break
            if listening(prog.listen, srv_out):
                r.listened = True
                break
            time.sleep(0.1)
        for side, step, timeout in zip(client_sides(prog), prog.clients, timeouts):
            c = "%s.%s" % (p, side)
            t1 = time.monotonic()
            cli = self.start(run, c, timeout, step.cmd)
            # The client: until it exits; if the server died meanwhile, it gets a short grace only.
            dead_since = None
            while cli.alive():
                if prog.end != "kill" and not srv.alive():
                    if dead_since is None:
                        dead_since = time.monotonic()
                    if time.monotonic() - dead_since >= DEAD_SERVER_GRACE:
                        _signal(cli, signal.SIGTERM)
                        break
                time.sleep(0.1)
            rc = proc.shell_status(cli.proc.wait())
            r.cli_rcs.append(rc)
            _write(c + ".rc", "%d\n" % rc)
            r.cli_secs.append(secs_text(t1))
        r.srv_rc = self.stop_server(prog, srv)
        _write(p + ".server.rc", "%s\n" % r.srv_rc)
        if prog.verify:
            with open(p + ".verify.out", "wb") as f:
                subprocess.run(["bash", "-c", prog.verify], stdin=subprocess.DEVNULL, stdout=f,
                               stderr=subprocess.STDOUT)
        r.secs = secs_text(t0)
        return r

    def stop_server(self, prog: Program, srv: proc.Background) -> str:
        """The server's end as its table entry says; its status, or what happened instead."""
        if prog.end == "kill" or prog.end.startswith("stop:"):
            time.sleep(1)  # let it finish with the client's last events
            if not srv.alive():
                return "exited early with %d" % proc.shell_status(srv.proc.wait())
            if prog.end == "kill":
                _signal(srv, signal.SIGTERM)  # timeout(1) passes it on to the program
                rc = proc.shell_status(srv.proc.wait())
                return "killed" if rc in (124, 143) else str(rc)
            name = prog.end[len("stop:"):]
            _signal(srv, getattr(signal, "SIG" + name))  # timeout(1) passes it on
            rc = srv.wait(STOP_WAIT)
            if rc is None:
                srv.proc.kill()
                srv.proc.wait()
                return "still running %ds after SIG%s (killed)" % (STOP_WAIT, name)
            return str(rc)
        srv.wait(SERVER_GRACE)
        _signal(srv, signal.SIGTERM)
        return str(proc.shell_status(srv.proc.wait()))

    # -- a pair's verdicts ------------------------------------------------------------------------

    def pair_problems(self, run: str, prog: Program, pfx: str, r: Pair, want_srv: str) -> str:
        """The exit statuses against what they must be (a command killed by its timeout(1) is
        named as a hang); the note rping's teardown race adds to the verdict."""
        what = "without the preload: " if run == "base" else ""
        note = ""
        if r.srv_rc == "255" and rping_race(prog.name, run, lines("%s.%s.server.err" % (pfx, run))):
            note += "; %s: the server hit rping's teardown race (exit 255)" % run
        elif r.srv_rc != want_srv:
            if r.srv_rc == "124":
                self.t.problem("%sserver hung: '%s' killed by its timeout(1)" % (what, prog.server.split(" ")[0]))
            else:
                self.t.problem("%sserver: %s, want %s" % (what, r.srv_rc, want_srv))
        timeouts = [s.timeout if s.timeout is not None else self.client_timeout for s in prog.clients]
        for side, step, rc, timeout in zip(client_sides(prog), prog.clients, r.cli_rcs, timeouts):
            if rc == step.rc:
                continue
            if rc == 255 and rping_race(prog.name, run, lines("%s.%s.%s.err" % (pfx, run, side))):
                note += "; %s: the %s hit rping's teardown race (exit 255)" % (run, side)
                continue
            if rc == 124:
                self.t.problem("%s%s hung: '%s' killed by timeout(1) after %ds" % (what, side, step.cmd, timeout))
            else:
                self.t.problem("%s%s: exit status %d, want %d" % (what, side, rc, step.rc))
        return note

    def perftest_bug(self, prog: Program, p: str, run: str, r: Pair) -> bool:
        return perftest_retry_bug(prog.clients, run, r.cli_rcs, r.srv_rc, lines(p + ".client.err"),
                                  lines(p + ".server.err"))

    def record_times(self, prog: Program, rnd: int, run: str, pfx: str, r: Pair) -> None:
        """The timed clients' seconds, one line each in BENCH/timings.tsv."""
        if not self.bench:
            return
        with open(self.bench + "/timings.tsv", "a") as f:
            for side, step, secs in zip(client_sides(prog), prog.clients, r.cli_secs):
                if step.timed:
                    f.write("\t".join([prog.name, str(rnd), run, side, secs, pfx, step.cmd]) + "\n")

    def verdict(self, what: str, patterns: Sequence[str]) -> None:
        """One ok/FAIL line; on failure the problems and the last lines of each non-empty log
        the glob PATTERNS match (in their order, each sorted)."""
        paths = [f for pat in patterns for f in sorted(glob.glob(pat))]
        self.t.verdict(what, [(f, proc.read_lines(f)) for f in paths if os.path.getsize(f) > 0], TAIL)

    def bench_pages(self) -> None:
        problems: list[str] = []
        guarded(problems, write_bench, self.bench)
        for x in problems:
            self.t.problem(x)

    # -- one program ------------------------------------------------------------------------------

    def program(self, prog: Program) -> None:
        sides = sides_spec(prog)
        want_srv = "killed" if prog.end == "kill" else "0"
        nrounds = self.rounds if self.bench and prog.timed else 1
        for rnd in range(1, nrounds + 1):
            pfx = os.path.join(self.out, prog.name if nrounds == 1 else "%s.r%d" % (prog.name, rnd))
            what = prog.name if nrounds == 1 else "%s, round %d of %d" % (prog.name, rnd, nrounds)

            # The reference: the pair without the preload.
            r = self.run_pair("base", prog, pfx)
            base_secs = r.secs
            if self.perftest_bug(prog, pfx + ".base", "base", r):
                self.t.skip(what, "the reference run's client hit perftest's retry after a REJECTED connect "
                                  "(status 8, then SIGSEGV in librdmacm; see real_programs.py)")
                self.timings.append("%s: %ss without the preload (perftest's retry)" % (prog.name, base_secs))
                continue
            note = self.pair_problems("base", prog, pfx, r, want_srv)
            problems: list[str] = []
            nkey = [0]

            def base_check():
                got, nkey[0] = check_base(prog.name, pfx, sides, self.conns)
                problems.extend(got)
            guarded(problems, base_check)
            for x in problems:
                self.t.problem(x)
            if self.t.problems:
                self.verdict("%s: the pair does not work even without the preload (%s s)" % (what, base_secs),
                             [glob.escape(pfx) + ".base.*.out", glob.escape(pfx) + ".base.*.err"])
                self.timings.append("%s: %ss without the preload (failed)" % (prog.name, base_secs))
                break
            self.record_times(prog, rnd, "base", pfx, r)
            timing = "%s: %ss without the preload" % (prog.name, base_secs)

            # The same pair, both sides preloaded, in each mode.
            for mode in self.modes:
                r = self.run_pair(mode, prog, pfx)
                p = "%s.%s" % (pfx, mode)
                if self.perftest_bug(prog, p, mode, r):
                    self.t.skip("%s (%s)" % (what, mode),
                                "the client hit perftest's retry after a REJECTED connect (status 8), named by "
                                "the audit: %s; client exit %d, server stopped; %ss"
                                % (perftest_finding(lines(p + ".client.err")), r.cli_rcs[0], r.secs))
                    timing += ", %ss with (%s, perftest's retry)" % (r.secs, mode)
                    continue
                if not r.listened:
                    self.t.problem("the preloaded server was never seen listening")
                note += self.pair_problems(mode, prog, pfx, r, want_srv)
                problems, info = [], []

                def preloaded_check():
                    got, inf = check_preloaded(prog.name, pfx, mode, prog.touches, sides, prog.allow, self.kinds)
                    problems.extend(got)
                    info.extend(inf)
                guarded(problems, preloaded_check)
                for x in problems:
                    self.t.problem(x)
                fw = "no finding but the allowed" if prog.allow else "0 findings"
                evs = ", ".join(i.replace("=", " ", 1) for i in info)
                if len(prog.clients) > 1:
                    evs += "; clients' times:"
                    for side, secs in zip(client_sides(prog), r.cli_secs):
                        evs += " %s %ss" % (re.sub(r"^c[0-9]-", "", side), secs)
                self.verdict("%s (%s): exit statuses as without, same key output (%d client lines), %s; "
                             "events: %s; %ss without, %ss with%s"
                             % (what, mode, nkey[0], fw, evs, base_secs, r.secs, note),
                             [glob.escape(p) + ".*.err"])
                self.record_times(prog, rnd, mode, pfx, r)
                timing += ", %ss with (%s)" % (r.secs, mode)
                if self.bench and rnd == 1 and mode == "audit":
                    problems = []

                    def field_check():
                        with open(self.bench + "/field.jsonl", "a") as f:
                            for rec in field_records(prog.name, pfx, sides, self.kinds):
                                f.write(json.dumps(rec) + "\n")
                    guarded(problems, field_check)
                    for x in problems:
                        self.t.problem(x)
                    if self.t.problems:
                        self.t.verdict("%s: field record" % what)
            self.timings.append(timing)
        # The bench's pages so far (they grow as programs finish).
        if self.bench:
            self.bench_pages()

    def run(self) -> None:
        mode_list = ",".join(self.modes)
        if self.bench:
            os.makedirs(self.bench, exist_ok=True)
            _write(self.bench + "/timings.tsv", "name\tround\trun\tside\tsecs\tprefix\tcommand\n")
            _write(self.bench + "/field.jsonl", "")
        table = self.programs()
        if self.set != "basic":
            _write_bytes(real_programs.RCOPY_SRC, os.urandom(real_programs.RCOPY_BYTES))
        stack = "Soft-iWARP" if self.g.transport == "iwarp" else "Soft-RoCE"
        self.t.say("%s (%s: %s): %s %s at %s" % (PROG, self.set, mode_list, stack, self.g.dev, self.g.addr))
        only = self.only.split(",") if self.only else None
        for prog in table:
            if only is not None and prog.name not in only:
                continue
            if self.g.transport == "iwarp" and prog.name in real_programs.NOT_ON_IWARP:
                for mode in self.modes:
                    self.t.skip("%s (%s)" % (prog.name, mode), real_programs.NOT_ON_IWARP[prog.name])
                continue
            self.program(prog)
        self.t.say("timings:")
        for x in self.timings or [""]:
            self.t.say("  %s" % x)
        if self.bench:
            self.bench_pages()
            if self.t.problems:
                self.t.verdict("bench results in %s" % self.bench)
        apart = ", %d apart (the skip lines say why)" % self.t.apart if self.t.apart else ""
        self.t.say("%s (%s: %s): %d passed, %d failed%s"
                   % (PROG, self.set, mode_list, self.t.passed, self.t.failed, apart))


def _signal(b: proc.Background, sig: int) -> None:
    try:
        b.proc.send_signal(sig)
    except ProcessLookupError:
        pass


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _have(cmd: str) -> bool:
    return any(os.access(os.path.join(d, cmd), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d)


@dataclass
class Options:
    set: str = "basic"
    only: str = ""
    rounds: int = 1
    bench: str = ""
    modes: list[str] = field(default_factory=list)


def parse_args(argv: Sequence[str]) -> Options:
    """The command line, or exit 2 with the usage."""
    o = Options()
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("--set", "--only", "--rounds", "--bench"):
            if not args or not args[0]:
                guest.die(PROG, "%s needs a value" % a)
            v = args.pop(0)
            if a == "--set":
                o.set = v
            elif a == "--only":
                o.only = v
            elif a == "--rounds":
                if not v.isdigit():
                    guest.die(PROG, "--rounds needs a number")
                o.rounds = int(v)
            else:
                o.bench = v
        elif a in MODES:
            o.modes.append(a)
        else:
            print(USAGE, file=sys.stderr)
            sys.exit(2)
    if not o.modes:
        o.modes = ["audit"]
    if o.set not in SETS:
        guest.die(PROG, "unknown set %s" % o.set)
    return o


def main(argv: Sequence[str]) -> int:
    root = guest.project_root()
    os.chdir(root)
    g = guest.from_env(PROG)
    o = parse_args(argv)
    try:
        kinds = audit.finding_kinds(root)
    except (OSError, subprocess.CalledProcessError) as e:
        guest.die(PROG, "no finding kinds (c-tests/lists/finding-kinds): %s" % e)
    if not kinds:
        guest.die(PROG, "no finding kinds (c-tests/lists/finding-kinds)")
    h = Harness(g, o.set, o.modes, o.only, o.rounds, o.bench, root, kinds, Tally(PROG))
    os.makedirs(h.out, exist_ok=True)
    for f in glob.glob(glob.escape(h.out) + "/*"):
        if not os.path.isdir(f):
            os.unlink(f)
    if not os.path.isfile(h.lib):
        guest.die(PROG, "%s not found (make preload)" % h.lib)
    if not os.access(h.audit, os.X_OK):
        guest.die(PROG, "%s not found" % h.audit)
    h.run()
    return 1 if h.t.failed else 0
