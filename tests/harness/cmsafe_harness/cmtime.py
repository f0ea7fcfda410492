"""The preload's instructions in a real program, per event read (scripts/cmtime-insns; make
insn-test, make insn-bench).

rdma-core's cmtime, server and client, each whole process under valgrind's callgrind in the
guest (run inside scripts/rxe-vm; needs target/release/libcmsafe_preload.so), CONNECTIONS
connections, in safe and audit mode. The preload-insns reader (callgrind.py) takes from each
profile what the preload executed: its own code and the libc and loader code it called (first
use included: symbol look-ups, the state's creation, maps growing), not the real librdmacm and
libibverbs work behind its wrappers. insn-count counts the steady state of one loop; this counts
everything a program pays, in the calls and the order a real program makes them (QPs, connects,
accepts, disconnects, destroys). The preload's work is set by the calls, and the calls by the
events: per event read, the same build gives the same count to within about 2% however busy the
guest (cmtime's own main thread spins on sched_yield while it waits, so its own count moves with
time: it is printed for scale only).

    scripts/cmtime-insns [--n CONNECTIONS] [--preload PATH] [--out DIR] [--check]

--check: exit 1 unless each row's instructions per event read are within its budget (`make
insn-test`, part of `make test`). Per event, not per connection: how many events a connection
gets moves with timing (a client run beside another guest got 870 events for 200 connections,
70 of them TIMEWAIT_EXIT, where a quiet one gets 800), and its count per connection with it,
while per event the two were within 2%. The events are the reads: the preload's calls to
librdmacm's rdma_get_cm_event (preload-insns.py --reads), which a process killed at the end (the
server) also has. The budgets are per architecture, in bench/budgets.tsv (bench/README.md,
"Instruction budgets": how they were set and which regressions they catch). None for aarch64:
callgrind's call tracking there books librdmacm's and the program's own code as the preload's
callees (callgrind.py says why), so the per-event counts are wrong by orders of magnitude.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Sequence

from . import budgets as budgets_mod
from . import callgrind
from . import guest as guest_mod
from . import proc

PROG = "cmtime-insns"
USAGE = "usage: scripts/cmtime-insns [--n CONNECTIONS] [--preload PATH] [--out DIR] [--check]"
PORT = 7700  # the first run's port is the next one
LISTEN_POLLS = 240  # looks at the server's descriptors, LISTEN_POLL seconds apart
LISTEN_POLL = 0.25
LISTEN_SETTLE = 2  # seconds for rdma_bind_addr and rdma_listen after the channel opens
CLIENT_TIMEOUT = 900  # seconds
SERVER_STOP = 600  # seconds for the server to write its profile once stopped
MODES = ["safe", "audit"]
SIDES = ["client", "server"]


def row(side: str, mode: str, total: int, reads: int, n: int,
        budget: int | None) -> tuple[str, str | None]:
    """One table row, and the message of a budget not met."""
    per = (total + reads // 2) // reads
    verdict, missed = "met", None
    if budget is None:
        verdict = "no budget"
    elif per > budget:
        verdict = "NOT met"
        missed = "%s %s: %d per event, budget %d" % (side, mode, per, budget)
    return ("| cmtime %s, CMSAFE_MODE=%s | %d | %d | %d | %s | %s | %d |" % (
        side, mode, total, reads, per, "-" if budget is None else budget, verdict,
        (total + n // 2) // n), missed)


def header(n: int) -> list[str]:
    return ["Instructions the preload executed in cmtime, %d connections (valgrind --tool=callgrind, "
            "each whole process; scripts/preload-insns.py: the preload's own code and the libc and "
            "loader code it called, not the real librdmacm and libibverbs work behind its wrappers; "
            "first use included):" % n,
            "",
            "| process, mode | preload instructions | events read | per event | budget per event | verdict | per connection |",
            "|---|---:|---:|---:|---:|---|---:|"]


def footer(raw_client: str, raw_server: str, out: str, preload_shown: str) -> list[str]:
    return ["",
            "For scale, cmtime raw (CMSAFE_MODE=off, no preload), all its user-space instructions: "
            "client %s, server %s (the client's main thread spins on sched_yield while it waits, so "
            "this one moves with time)." % (raw_client, raw_server),
            "",
            "Where it goes: `scripts/preload-insns.py %s/MODE.SIDE.cg %s 20`." % (out, preload_shown)]


def listening(pid: int) -> bool:
    """Whether the process has its event channel open (rdma_cm): cmtime prints nothing when it
    listens, and opens the channel just before rdma_bind_addr and rdma_listen."""
    fd_dir = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            if "infiniband/rdma_cm" in os.readlink(os.path.join(fd_dir, fd)):
                return True
        except OSError:
            pass
    return False


class Failed(Exception):
    """A run that gave no profile: the harness stops with its log on stderr."""


def run(out: str, mode: str, env: dict[str, str], addr: str, port: int, n: int) -> None:
    """cmtime's server and client, both under callgrind: OUT/MODE.SIDE.cg and .log."""
    cg = ["valgrind", "--tool=callgrind"]
    server_log = os.path.join(out, mode + ".server.log")
    client_log = os.path.join(out, mode + ".client.log")
    full_env = proc.environment(env)
    with open(server_log, "wb") as f:
        server = subprocess.Popen(
            cg + ["--callgrind-out-file=%s/%s.server.cg" % (out, mode), "cmtime", "-b", addr,
                  "-p", str(port), "-c", str(n)],
            stdin=subprocess.DEVNULL, stdout=f, stderr=f, env=full_env)
    for _ in range(LISTEN_POLLS):
        if listening(server.pid):
            break
        time.sleep(LISTEN_POLL)
    time.sleep(LISTEN_SETTLE)
    rc = proc.run_to(cg + ["--callgrind-out-file=%s/%s.client.cg" % (out, mode), "cmtime", "-s",
                           addr, "-p", str(port), "-c", str(n)], client_log, env=full_env,
                     timeout=CLIENT_TIMEOUT)
    if rc != 0:
        server.kill()
        server.wait()
        raise Failed("cmtime client (%s) failed:" % mode, proc.read_lines(client_log))
    # cmtime's server runs until it is stopped; callgrind writes its profile at the SIGTERM.
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(SERVER_STOP)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    lines = proc.read_lines(server_log)
    if not any("Collected" in line for line in lines):
        raise Failed("the server (%s) wrote no profile:" % mode, lines)


def main(argv: Sequence[str]) -> int:
    os.environ["LC_ALL"] = "C"
    root = guest_mod.project_root()
    os.chdir(root)
    n_text, preload, out, check = "200", os.path.join(root, "target/release/libcmsafe_preload.so"), \
        "target/bench/cmtime-insns", False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("--n", "--preload", "--out"):
            if not args:
                guest_mod.die(PROG, "%s needs a value" % a)
            v = args.pop(0)
            if a == "--n":
                n_text = v
            elif a == "--preload":
                preload = os.path.realpath(v)
            else:
                out = v
        elif a == "--check":
            check = True
        else:
            print(USAGE, file=sys.stderr)
            return 2
    budget = budgets_mod.load(PROG, check)
    addr = os.environ.get("RXE_ADDR")
    if not addr:
        guest_mod.die(PROG, "run inside scripts/rxe-vm", 1)
    if not re.fullmatch(r"[1-9][0-9]*", n_text):
        guest_mod.die(PROG, "--n takes a whole number of connections, not %s" % n_text)
    n = int(n_text)
    for tool in ("valgrind", "nm", "cmtime"):
        if not shutil.which(tool):
            guest_mod.die(PROG, "%s is missing" % tool, 1)
    if not os.path.isfile(preload):
        guest_mod.die(PROG, "%s is missing (make preload)" % preload, 1)
    os.makedirs(out, exist_ok=True)
    runs = [("raw", {"CMSAFE_MODE": "off"}),
            ("safe", {"LD_PRELOAD": preload, "CMSAFE_MODE": "safe"}),
            ("audit", {"LD_PRELOAD": preload, "CMSAFE_MODE": "audit"})]
    try:
        for i, (mode, env) in enumerate(runs):
            run(out, mode, env, addr, PORT + 1 + i, n)
    except Failed as e:
        print("%s: %s" % (PROG, e.args[0]), file=sys.stderr)
        for line in e.args[1]:
            print(line, file=sys.stderr)
        return 1
    missed = []
    for line in header(n):
        print(line, flush=True)
    wrapped = callgrind.exported(preload)
    for mode in MODES:
        for side in SIDES:
            s = callgrind.read_share(os.path.join(out, "%s.%s.cg" % (mode, side)), preload, wrapped)
            if s.total < 1 or s.reads < 1:
                guest_mod.die(PROG, "no count or no reads for %s %s" % (side, mode), 1)
            line, miss = row(side, mode, s.total, s.reads, n, budget.get("%s.%s" % (side, mode)))
            print(line, flush=True)
            if miss:
                missed.append(miss)
    raw = []
    for side in SIDES:
        log = os.path.join(out, "raw.%s.log" % side)
        count = callgrind.collected(proc.read_lines(log))
        if count is None:
            print("%s: no count in %s" % (PROG, log), file=sys.stderr)
        raw.append("" if count is None else str(count))
    shown = preload[len(root) + 1:] if preload.startswith(root + "/") else preload
    for line in footer(raw[0], raw[1], out, shown):
        print(line, flush=True)
    return finish(missed, check)


def finish(missed: Sequence[str], check: bool) -> int:
    """The rows over budget, on stderr; the exit status: 1 under CHECK when there are any."""
    for m in missed:
        print("%s: over budget: %s" % (PROG, m), file=sys.stderr)
    return 1 if missed and check else 0
