"""The cancelled-read race (c-tests/preload/race_cancelled_read.c), raw and under the preload (make
preload-test, make race-bench).

The program models libiscsi 1.19's iSER initiator: its CM thread is cancelled at every
disconnect, and a cancel that lands as the kernel hands that thread the DISCONNECTED loses the
event, so rdma_destroy_id waits forever. Each repeat runs target and initiator for ROUNDS
connect/disconnect rounds raw, then under audit, then under safe mode (alternated, so a slow
spell hits all three alike). The race is timing: its counts are figures, not held. What is held:
every round ends (connected, disconnected, destroyed or counted as a hang), the target serves
every round, and under the preload every hang is named by exactly one
destroy-waits-for-lost-event finding and the target reports none. Prints the counts per mode
and "race-cancelled-read: N passed, N failed".
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Sequence

from . import guest as guest_mod
from . import proc
from .tally import Tally

PROG = "race-cancelled-read"
MODES = ["raw", "audit", "safe"]
RUN_TIMEOUT = 600  # seconds for one side's run, as the bash version's timeout(1)
LISTEN_TIMEOUT = 10  # seconds for the target to listen
TARGET_EXIT = 10  # seconds for the target to end by itself once the initiator is done

_RESULT = re.compile(r"hangs ([0-9]+), cancelled inside rdma_get_cm_event ([0-9]+)")
_FINDING = re.compile(r"^==cmsafe== [a-z-]+: ")


def check_mode(mode: str, rounds: int, rc: int, initiator_out: Sequence[str],
               initiator_err: Sequence[str], target_out: Sequence[str],
               target_err: Sequence[str]) -> tuple[list[str], int, int]:
    """One mode's run: its problems, its hangs and its cancels inside rdma_get_cm_event."""
    problems = []
    line = next((l for l in initiator_out if l.startswith("initiator: rounds")), "")
    if rc != 0 or not line:
        problems.append("initiator: exit %d, no result line" % rc)
    m = _RESULT.search(line)
    hangs, cancels = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if not any(l.startswith("target: %d connections served" % rounds) for l in target_out):
        problems.append("target: did not serve %d connections: %s"
                        % (rounds, target_out[-1] if target_out else ""))
    if mode != "raw":
        named = sum(1 for l in initiator_err
                    if l.startswith("==cmsafe== destroy-waits-for-lost-event: "))
        if named != hangs:
            problems.append("%d hangs, %d destroy-waits-for-lost-event lines" % (hangs, named))
        other = [l for l in initiator_err if _FINDING.match(l) and not re.match(
            r"^==cmsafe== (summary|destroy-waits-for-lost-event): ", l)]
        if other:
            problems.append("initiator: another finding: %s" % other[0])
        found = [l for l in target_err if _FINDING.match(l) and not l.startswith("==cmsafe== summary: ")]
        if found:
            problems.append("target: a finding: %s" % found[0])
        if not any(re.match(r"^==cmsafe== summary: .* 0 findings", l) for l in target_err):
            problems.append("target: no summary with 0 findings")
    return problems, hangs, cancels


def table(totals: dict[str, list[int]]) -> list[str]:
    lines = ["| mode | rounds | hangs in rdma_destroy_id | cancels inside rdma_get_cm_event |",
             "| --- | ---: | ---: | ---: |"]
    for mode in MODES:
        rounds, hangs, cancels = totals[mode]
        lines.append("| %s | %d | %d | %d |" % (mode, rounds, hangs, cancels))
    return lines


def run_mode(t: Tally, root: str, out: str, mode: str, r: int, rounds: int, scale: int,
             totals: dict[str, list[int]]) -> None:
    prog = os.path.join(root, "target", "preload-tests", "race_cancelled_read")
    lib = os.path.join(root, "target", "release", "libcmsafe_preload.so")
    base = {"LD_PRELOAD": None, "CMSAFE_MODE": None, "CMSAFE_REPORT": None, "CMSAFE_LOG": None,
            "CMSAFE_LATE_ACK_MS": None, "CMSAFE_HANG_MS": None}
    if mode != "raw":
        # The hold before an ack is not what this run is about: the initiator's handler
        # connects before it acks, which a loaded emulated guest can stretch past the default
        # 1 s.
        base.update(LD_PRELOAD=lib, CMSAFE_MODE=mode, CMSAFE_HANG_MS="1000",
                    CMSAFE_LATE_ACK_MS="60000")
    env = proc.environment(base)
    p = os.path.join(out, "%s.%d" % (mode, r))
    target = proc.Background([prog, "target", str(rounds)], p + ".target", env)
    target.wait_line(r"^target: listening", LISTEN_TIMEOUT * scale)
    ini = proc.run([prog, "initiator", str(rounds)], p + ".initiator", env=env,
                   timeout=RUN_TIMEOUT * scale)
    # The target serves every round whose initiator reached the disconnect.
    if target.wait(TARGET_EXIT * scale) is None:
        target.stop()
    problems, hangs, cancels = check_mode(mode, rounds, ini.rc, ini.out, ini.err, target.out(),
                                          target.err())
    totals[mode][0] += rounds
    totals[mode][1] += hangs
    totals[mode][2] += cancels
    for x in problems:
        t.problem(x)
    if problems:
        t.verdict("%s #%d" % (mode, r))
    else:
        t.verdict("%s #%d: %d rounds, %d hang(s) in rdma_destroy_id, %d cancel(s) inside "
                  "rdma_get_cm_event%s" % (mode, r, rounds, hangs, cancels,
                                          "" if mode == "raw" else ", every hang named"))


def main(argv: list[str]) -> int:
    if len(argv) > 2 or not all(a.isdigit() for a in argv):
        guest_mod.die(PROG, "usage: race-cancelled-read [ROUNDS] [REPEATS]")
    rounds = int(argv[0]) if argv else 20
    repeats = int(argv[1]) if len(argv) > 1 else 1
    g = guest_mod.from_env(PROG)
    root = guest_mod.project_root()
    os.chdir(root)
    out = os.path.join("target", "race-cancelled-read")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    t = Tally(PROG)
    t.say("race-cancelled-read: %d rounds x %d, raw / audit / safe alternated" % (rounds, repeats))
    totals = {mode: [0, 0, 0] for mode in MODES}
    for r in range(1, repeats + 1):
        for mode in MODES:
            run_mode(t, root, out, mode, r, rounds, g.time_scale, totals)
    for line in table(totals):
        t.say(line)
    t.say("race-cancelled-read: %d passed, %d failed" % (t.passed, t.failed))
    return 1 if t.failed else 0
