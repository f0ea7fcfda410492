"""cmsafe-migrate's ports against their originals on the real stack (make migrate-test;
tools/lint/migrate/migrate-test builds them, both with AddressSanitizer and
UndefinedBehaviorSanitizer, the ports against the installed libcmsafe).

Each of rdma-core's examples runs as a pair, server and client, once as the original and once
as the port, on $RXE_ADDR. Held: both sides of both builds end with status 0, say what the
program says when it works (real_programs.EXPECT_BY_NAME, the same lines the preload's real
programs are held to), the port's lines are the original's, and no sanitizer speaks. rping's
own teardown race is accepted as the original has it: its main thread destroys the event
channel while its CM thread is between two gets, whose next get then reads the freed channel;
under AddressSanitizer's quarantine the freed channel still holds its closed fd, so that get
fails with EBADF every time, and a side ends with status 255 after "rdma_get_cm_event: Bad file
descriptor" (librdmacm is not instrumented: the read is not reported). Either build may end so,
once its work is done; any other end fails.

ack_then_read acks a CONNECT_REQUEST and then reads its private data. Held: the original is
caught by AddressSanitizer (a heap-use-after-free of a block rdma_ack_cm_event freed), and the
port reads the token sent, exit 0, with no sanitizer report: cmsafe's copy is kept for the read.

One of cmsafe-lint's findings in others' code is run too, to see what the preload says of it:
cmatose's connect_handler rejects a request beyond its -c connections and never destroys the
request's id (cmsafe-lint: rejected-id-never-destroyed, cmatose.c:460). Debian's ucmatose
server with -c 1 under cmsafe-audit, CMSAFE_REJECTED_IDS=1, and a client asking for 2
connections: the preload must name it (==cmsafe== rejected-id-never-destroyed).

Prints "ok"/"FAIL"/"skip" lines and "migrate-in-guest: N passed, N failed, N apart".
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from typing import Sequence

from . import guest as guest_mod
from . import proc, real
from .real_programs import EXPECT_BY_NAME
from .tally import Tally

PROG = "migrate-in-guest"
SERVER_START = 20  # seconds for a server to listen
CLIENT_TIMEOUT = 120  # seconds for a client's run
SERVER_EXIT = 20  # seconds for the server to end once its client is done
TOKEN = "token-ack-then-read-5d41"

_SANITIZER = re.compile(r"^(==\d+==ERROR: (AddressSanitizer|LeakSanitizer)|.*runtime error: )")


@dataclass(frozen=True)
class Case:
    name: str  # the program pair's name in EXPECT_BY_NAME
    server: str  # argv, {a}: the address; {bin}: the build's directory
    client: str
    listen: str  # real.listening's spec
    expect: str  # EXPECT_BY_NAME's key


CASES = (
    Case("rping", "{bin}/rping -s -a {a} -C 3 -v", "{bin}/rping -c -a {a} -C 3 -v",
         "cm:rping:{a}:7174", "rping"),
    Case("cmatose", "{bin}/cmatose -b {a}", "{bin}/cmatose -s {a}", "cm:cmatose:{a}:7471",
         "ucmatose"),
    Case("udaddy", "{bin}/udaddy -b {a}", "{bin}/udaddy -s {a}", "cm:udaddy:{a}:7174", "udaddy"),
    Case("rdma_server_client", "{bin}/rdma_server -s {a}", "{bin}/rdma_client -s {a}",
         "cm:rdma_server:{a}:7471", "rdma_server_client"),
)


def sanitizer_lines(lines: Sequence[str]) -> list[str]:
    return [l for l in lines if _SANITIZER.match(l)]


RPING_RACE = "rdma_get_cm_event: Bad file descriptor"


def rping_race(rc: int, err: Sequence[str]) -> bool:
    """rping's teardown race, and nothing else: status 255 after rping's own line for the get
    that read the destroyed channel (exit(ret) of cm_thread)."""
    return rc == 255 and bool(err) and err[-1] == RPING_RACE


def key_lines(lines: Sequence[str], expect: str) -> list[str]:
    """The output lines EXPECT's alternatives name (each alternative a regex on one line)."""
    parts = [re.compile(p) for p in expect.split(r"\|")]
    return [l for l in lines if any(p.search(l) for p in parts)]


def check_side(build: str, side: str, rc: int, out: Sequence[str], err: Sequence[str],
               expect: str, race: bool = False) -> list[str]:
    """One side of one build: its problems (RACE: rping's, where its teardown race is accepted)."""
    problems = []
    if rc != 0 and not (race and rping_race(rc, err)):
        problems.append("%s %s: exit %d" % (build, side, rc))
    if not re.search(expect, "|".join(key_lines(out, expect))):
        problems.append("%s %s: its output does not say %r" % (build, side, expect))
    found = sanitizer_lines(err)
    if found:
        problems.append("%s %s: %s" % (build, side, found[0]))
    return problems


def check_same(orig: Sequence[str], port: Sequence[str], expect: str) -> list[str]:
    """The port says what the original says (its key lines, in order)."""
    a, b = key_lines(orig, expect), key_lines(port, expect)
    return [] if a == b else ["the port's lines %r are not the original's %r" % (b, a)]


def check_ack_then_read(build: str, rc: int, out: Sequence[str], err: Sequence[str]) -> list[str]:
    """The original must be caught reading freed memory; the port must read the token."""
    text = "\n".join(err)
    if build == "orig":
        if "ERROR: AddressSanitizer: heap-use-after-free" not in text or \
                "rdma_ack_cm_event" not in text:
            return ["the original: no heap-use-after-free of memory rdma_ack_cm_event freed "
                    "(exit %d)" % rc]
        return []
    problems = []
    if rc != 0 or ("token: %s" % TOKEN) not in out:
        problems.append("the port: exit %d, read %r" % (rc, out[-1] if out else ""))
    found = sanitizer_lines(err)
    if found:
        problems.append("the port: %s" % found[0])
    return problems


def check_pair(case: Case, results: dict) -> list[str]:
    """A pair's problems: RESULTS maps each build to (server status, server out, server err,
    client status, client out, client err)."""
    problems = []
    race = case.name == "rping"
    expect_srv = EXPECT_BY_NAME[(case.expect, "server")]
    expect_cli = EXPECT_BY_NAME[(case.expect, "client")]
    for build, (srv_rc, s_out, s_err, cli_rc, c_out, c_err) in results.items():
        problems += check_side(build, "server", srv_rc, s_out, s_err, expect_srv, race)
        problems += check_side(build, "client", cli_rc, c_out, c_err, expect_cli, race)
    problems += ["server: " + x for x in
                 check_same(results["orig"][1], results["port"][1], expect_srv)]
    problems += ["client: " + x for x in
                 check_same(results["orig"][4], results["port"][4], expect_cli)]
    return problems


def raced(results: dict) -> list[str]:
    """The sides that ended in rping's teardown race, as "BUILD SIDE"."""
    out = []
    for build, (srv_rc, _, s_err, cli_rc, _, c_err) in results.items():
        for side, rc, err in (("server", srv_rc, s_err), ("client", cli_rc, c_err)):
            if rping_race(rc, err):
                out.append("%s %s" % (build, side))
    return out


def run_pair(t: Tally, g: guest_mod.Guest, d: str, logs: str, case: Case) -> None:
    results = {}
    for build in ("orig", "port"):
        bindir = os.path.join(d, "bin", build)
        fill = {"a": g.addr, "bin": bindir}
        base = os.path.join(logs, "%s.%s" % (case.name, build))
        env = proc.environment({"LD_PRELOAD": None})
        server = proc.Background(case.server.format(**fill).split(), base + ".server", env)
        deadline = time.monotonic() + SERVER_START * g.time_scale
        listen = case.listen.format(**fill)
        while not real.listening(listen, base + ".server.out") and server.alive() and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        client = proc.run(case.client.format(**fill).split(), base + ".client", env=env,
                          timeout=CLIENT_TIMEOUT * g.time_scale)
        srv_rc = server.wait(SERVER_EXIT * g.time_scale)
        if srv_rc is None:
            server.stop()
            srv_rc = 124  # stopped: it did not end by itself
        results[build] = (srv_rc, server.out(), server.err(), client.rc, client.out, client.err)
    for x in check_pair(case, results):
        t.problem(x)
    race = raced(results)
    t.verdict("%s: the port's server and client end as the original's, with the same lines, "
              "no sanitizer report%s" % (case.name, "; rping's own teardown race (EBADF) in: "
                                         + ", ".join(race) if race else ""),
              [(build + " client", results[build][5]) for build in results])


def run_ack_then_read(t: Tally, g: guest_mod.Guest, d: str, logs: str) -> None:
    for build in ("orig", "port"):
        r = proc.run([os.path.join(d, "bin", build, "ack_then_read")],
                     os.path.join(logs, "ack_then_read." + build),
                     env=proc.environment({"LD_PRELOAD": None}), timeout=60 * g.time_scale)
        for x in check_ack_then_read(build, r.rc, r.out, r.err):
            t.problem(x)
        if build == "orig":
            t.verdict("ack_then_read, the original: AddressSanitizer's heap-use-after-free of "
                      "the event rdma_ack_cm_event freed", [("stderr", r.err)])
        else:
            t.verdict("ack_then_read, the port: read %s from cmsafe's copy after the ack, exit 0, "
                      "clean" % TOKEN, [("stderr", r.err)])


def check_rejected_seen(err: Sequence[str]) -> list[str]:
    """The preload names the rejected id cmatose never destroys."""
    if any(l.startswith("==cmsafe== rejected-id-never-destroyed: ") for l in err):
        return []
    return ["the server's preload said no rejected-id-never-destroyed"]


def run_rejected_seen(t: Tally, g: guest_mod.Guest, root: str, logs: str) -> None:
    audit = os.path.join(root, "bin", "cmsafe-audit")
    base = os.path.join(logs, "ucmatose_reject")
    env = proc.environment({"LD_PRELOAD": None, "CMSAFE_MODE": None, "CMSAFE_REPORT": None,
                            "CMSAFE_REJECTED_IDS": "1"})
    server = proc.Background([audit, "--", "ucmatose", "-b", g.addr, "-c", "1"],
                             base + ".server", env)
    deadline = time.monotonic() + SERVER_START * g.time_scale
    while not real.listening("cm:ucmatose:%s:7471" % g.addr, base + ".server.out") and \
            server.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.run(["ucmatose", "-s", g.addr, "-c", "2"], base + ".client",
             env=proc.environment({"LD_PRELOAD": None}), timeout=CLIENT_TIMEOUT * g.time_scale)
    if server.wait(SERVER_EXIT * g.time_scale) is None:
        server.stop()
    for x in check_rejected_seen(server.err()):
        t.problem(x)
    t.verdict("cmsafe-lint's cmatose.c:460 run: the preload names rejected-id-never-destroyed",
              [("server stderr", server.err())])


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        guest_mod.die(PROG, "usage: migrate-in-guest [DIR]")
    g = guest_mod.from_env(PROG)
    root = guest_mod.project_root()
    os.chdir(root)
    d = os.path.abspath(argv[0] if argv else os.path.join("target", "migrate-test"))
    logs = os.path.join(d, "guest")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    t = Tally(PROG)
    for case in CASES:
        run_pair(t, g, d, logs, case)
    run_ack_then_read(t, g, d, logs)
    run_rejected_seen(t, g, root, logs)
    return t.finish()
