"""api-under-preload: a program linked against libcmsafe, run under the preload in both modes
(make preload-test).

  scripts/rxe-vm -- c-tests/api-under-preload

A service half migrated to the API and audited for the rest: the examples' token_server and
token_client (cmsafe_get_event, private data read after cmsafe's ack) run under cmsafe-audit,
audit and then safe, 20 clients each, with a random seed for the tokens. Each mode must load
both libraries (no "symbol lookup error" in either log: the preload has a SONAME of its own),
verify every token ("verified 20/20 tokens" on the server), see each CONNECT_REQUEST through the
preload once (one event record of that type per client in the server's JSON report), leave no
finding record in either report, and both sides exit 0. Each side has 90 seconds (as timeout(1)
gave it: a side killed at that limit says exit 124); a failed client's server gets 2 seconds
more, then SIGTERM.

Logs (stdout and stderr together) and reports in target/c-tests/logs/api-under-preload/. The
last line is "api-under-preload: N passed, N failed"; the exit status is 1 when one failed.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Sequence

from . import guest
from . import proc, reports
from .tally import Tally

PROG = "api-under-preload"
BIN = os.path.join("target", "c-tests")
LOGS = os.path.join(BIN, "logs", "api-under-preload")
AUDIT = os.path.join("bin", "cmsafe-audit")
MODES = ("audit", "safe")
CLIENTS = 20
PORT = 7481  # audit listens on PORT + 1, safe on PORT + 2
RUN_TIMEOUT = 90  # seconds a side
TIMEOUT_STATUS = 124  # timeout(1)'s status for a side it killed
LISTEN_WAIT = 10  # seconds for the server to listen
CLIENT_FAILED_GRACE = 2  # seconds a failed client's server gets before SIGTERM
TAIL = 15  # lines of each log shown under a failure
FINDINGS_SHOWN = 5

_REQUEST = re.compile(r'"record":"event".*"type":"CONNECT_REQUEST"')
FINDING = '"record":"finding"'


@dataclass
class Verdict:
    ok: bool
    text: str  # the line after "ok   " or "FAIL "
    details: list[str] = field(default_factory=list)  # shown under a FAIL line


def tail_files(logs: Sequence[tuple[str, Sequence[str]]], n: int) -> list[str]:
    """The last N lines of each (name, lines), headed as tail(1) heads several files."""
    out: list[str] = []
    for i, (name, lines) in enumerate(logs):
        if i:
            out.append("")
        out.append("==> %s <==" % name)
        out += list(lines)[-n:]
    return out


def check_mode(mode: str, clients: int, src: int, crc: int, slog: Sequence[str],
               clog: Sequence[str], srep: Sequence[str], crep: Sequence[str],
               slog_name: str = "server.log", clog_name: str = "client.log") -> Verdict:
    """One mode's run: the server's and the client's status, logs and JSON reports' lines (a
    report not written: no lines)."""
    requests = sum(1 for x in srep if _REQUEST.search(x))
    findings = [x for x in list(srep) + list(crep) if FINDING in x]
    verified = "verified %d/%d tokens" % (clients, clients)
    if (src == 0 and crc == 0 and any(verified in x for x in slog)
            and not any("symbol lookup error" in x for x in list(slog) + list(clog))
            and requests == clients and not findings):
        return Verdict(True, "token_server and token_client under %s: %d/%d tokens verified, %d "
                             "CONNECT_REQUEST through the preload, 0 findings"
                       % (mode, clients, clients, requests))
    details = ["     | " + x for x in tail_files([(slog_name, slog), (clog_name, clog)], TAIL)]
    details += ["     | " + x for x in findings[:FINDINGS_SHOWN]]
    return Verdict(False, "under %s: server exit %d, client exit %d, %d CONNECT_REQUEST, %d findings"
                   % (mode, src, crc, requests, len(findings)), details)


def say_verdict(t: Tally, v: Verdict) -> None:
    t.check(v.text, v.ok)
    for line in v.details:
        t.say(line)


def run_mode(mode: str, port: int, addr: str) -> Verdict:
    flag = "--" + mode
    seed = "0x%016x" % int.from_bytes(os.urandom(8), "little")
    slog = os.path.join(LOGS, "server-%s.log" % mode)
    clog = os.path.join(LOGS, "client-%s.log" % mode)
    srep = os.path.join(LOGS, "server-%s.jsonl" % mode)
    crep = os.path.join(LOGS, "client-%s.jsonl" % mode)
    for p in (srep, crep):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    side = [addr, str(port), seed, str(CLIENTS)]
    server = proc.Background([AUDIT, flag, "--report", srep, "--",
                              os.path.join(BIN, "token_server")] + side, slog, merged=True)
    server.wait_line("listening", LISTEN_WAIT)
    client = proc.run([AUDIT, flag, "--report", crep, "--", os.path.join(BIN, "token_client")]
                      + side, clog, timeout=RUN_TIMEOUT, merged=True)
    crc = TIMEOUT_STATUS if client.hung else client.rc
    if crc != 0:
        time.sleep(CLIENT_FAILED_GRACE)
        src = server.stop()
    else:
        src = server.wait(max(0.0, RUN_TIMEOUT - (time.monotonic() - server.t0)))
        if src is None:
            server.stop()
            src = TIMEOUT_STATUS
    return check_mode(mode, CLIENTS, src, crc, server.out(), client.out,
                      reports.report_lines(srep) or [], reports.report_lines(crep) or [], slog,
                      clog)


def main(argv: list[str]) -> int:
    root = guest.project_root()
    os.chdir(root)
    os.makedirs(LOGS, exist_ok=True)
    addr = os.environ.get("RXE_ADDR")
    if not addr:
        guest.die(PROG, "RXE_ADDR: run in the guest (scripts/rxe-vm)", 1)
    t = Tally(PROG)
    for i, mode in enumerate(MODES, 1):
        say_verdict(t, run_mode(mode, PORT + i, addr))
    t.say("api-under-preload: %d passed, %d failed" % (t.passed, t.failed))
    return 1 if t.failed else 0
