"""new-events: the event types of rdma-core 60 in the four ways a program meets them (make
preload-test, and the stacks' new-events part).

  scripts/rxe-vm -- c-tests/new-events

USER with its arg, ADDRINFO_RESOLVED, rdma_resolve_addrinfo asynchronous and synchronous:
through the API (`test_new_events api`), raw (`test_new_events_plain raw`, built without
sanitizers: AddressSanitizer must come first in the library list, and LD_PRELOAD would come
before it), and the same raw program under the preload (bin/cmsafe-audit) in audit and in safe
mode, where each run must also leave no finding record in its JSON report. A run passes when it
exits 0 with its own "N passed, N failed" line; each has 90 seconds (as timeout(1) gave it: a
run killed at that limit says exit 124).

On a librdmacm without RDMACM_1.4 (rdma-core before 60: Debian 11, 12 and 13) the program
exits 77 and the four runs are counted apart with its reason (its "skip:" line), not passed.
Logs and reports in target/c-tests/logs/new-events/. The last line is "new-events: N passed,
N failed, N counted apart"; the exit status is 1 when one failed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Sequence

from . import guest
from . import proc, reports
from .tally import Tally

PROG = "new-events"
BIN = os.path.join("target", "c-tests")
LOGS = os.path.join(BIN, "logs", "new-events")
AUDIT = os.path.join("bin", "cmsafe-audit")
RUN_TIMEOUT = 90  # seconds a run
TIMEOUT_STATUS = 124  # timeout(1)'s status for a run it killed
SKIP_STATUS = 77  # the program's "cannot run here"
TAIL = 20  # log lines shown under a failure
FINDINGS_SHOWN = 5

# (name, mode: none for the program alone, audit or safe under cmsafe-audit, argv under BIN)
RUNS = (
    ("new_events_api", "none", ("test_new_events", "api")),
    ("new_events_raw", "none", ("test_new_events_plain", "raw")),
    ("new_events_audit", "audit", ("test_new_events_plain", "raw")),
    ("new_events_safe", "safe", ("test_new_events_plain", "raw")),
)

_COUNTS = re.compile(r"[0-9]* passed, [0-9]* failed")
FINDING = '"record":"finding"'


@dataclass
class Verdict:
    kind: str  # ok, FAIL or skip
    text: str  # ok: the line after the name; FAIL and skip: the reason
    details: list[str] = field(default_factory=list)  # shown under a FAIL line


def finding_lines(report: Sequence[str] | None) -> list[str]:
    return [x for x in report or () if FINDING in x]


def check_run(mode: str, rc: int, log: Sequence[str], report: Sequence[str] | None) -> Verdict:
    """One run: its status, its log's lines and its JSON report's (None when it wrote none; a
    run without preload has none)."""
    if rc == SKIP_STATUS:
        why = next((x[len("skip: "):] for x in log if x.startswith("skip: ")), "")
        return Verdict("skip", why)
    # A preloaded run must write its report: without one, its findings are unknown (None),
    # and the run fails.
    findings: int | None = 0
    if mode != "none":
        findings = None if report is None else len(finding_lines(report))
    counts = ""
    for line in log:
        for m in _COUNTS.finditer(line):
            counts = m.group(0)
    if rc == 0 and findings == 0 and counts:
        return Verdict("ok", "(%s%s)" % (counts, "" if mode == "none" else ", 0 findings"))
    details = ["     | " + x for x in list(log)[-TAIL:]]
    details += ["     | " + x for x in finding_lines(report)[:FINDINGS_SHOWN]]
    return Verdict("FAIL", "exit %d, %s findings" % (rc, "?" if findings is None else findings),
                   details)


def say_verdict(t: Tally, name: str, v: Verdict) -> None:
    if v.kind == "skip":
        t.skip(name, v.text)
    elif v.kind == "ok":
        t.check("%s %s" % (name, v.text), True)
    else:
        t.check(name, False, v.text)
        for line in v.details:
            t.say(line)


def summary(t: Tally) -> str:
    return "new-events: %d passed, %d failed, %d counted apart" % (t.passed, t.failed, t.apart)


def main(argv: list[str]) -> int:
    root = guest.project_root()
    os.chdir(root)
    os.makedirs(LOGS, exist_ok=True)
    if not os.environ.get("RXE_ADDR"):
        guest.die(PROG, "RXE_ADDR: run in the guest (scripts/rxe-vm)", 1)
    t = Tally("new-events")
    for name, mode, args in RUNS:
        log = os.path.join(LOGS, name + ".log")
        report = os.path.join(LOGS, name + ".jsonl")
        try:
            os.unlink(report)
        except FileNotFoundError:
            pass
        program = [os.path.join(BIN, args[0])] + list(args[1:])
        if mode != "none":
            program = [AUDIT, "--" + mode, "--report", report, "--"] + program
        r = proc.run(program, log, timeout=RUN_TIMEOUT, merged=True, env=None)
        rc = TIMEOUT_STATUS if r.hung else r.rc
        v = check_run(mode, rc, r.out, None if mode == "none" else reports.report_lines(report))
        say_verdict(t, name, v)
    t.say(summary(t))
    return 1 if t.failed else 0
