"""The cmsafe demo on a real RDMA stack, inside scripts/rxe-vm (make demo; scripts/demo-in-guest).

Three outcomes, each an "  OK: " or "  FAIL: " line (scripts/stack-suite-in-guest counts them),
then "demo: all 3 outcomes as expected" or "demo: N of 3 outcomes NOT as expected (...)"; exits
non-zero if any is not seen. Full logs stay in target/demo/.

  1. token_server and token_client: 50 clients, each sending "tok:<index>:<32 hex>" (derived
     from a random seed) as private data; the server verifies each token after the event was
     acked (from cmsafe's copy), accepts and echoes it back; the client verifies the echoes.
     Both must exit 0, the server having verified, accepted, seen established and disconnected
     all 50, the client all 50 disconnected.
  2. the seed incident, raw librdmacm (c-tests/seed_incident raw): rdma_ack_cm_event, then the
     read of the private data; AddressSanitizer must report the heap-use-after-free, the memory
     freed in rdma_ack_cm_event and allocated in rdma_get_cm_event.
  3. the seed incident through cmsafe (seed_incident cmsafe): the same read from
     cmsafe_get_event's copy, clean under ASan and LSan, the token read correctly.

RXE_TRANSPORT=iwarp (make demo TRANSPORT=iwarp) runs it on Soft-iWARP: only the banner differs.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Sequence

from . import guest, proc, storm, tally

PROG = "demo-in-guest"
BIN = "target/c-tests"
LOGS = "target/demo"
CLIENTS = 50
PORT = 7471
TIMEOUT = "90"  # seconds, each program (timeout(1)): a hung run ends and fails its outcome
LISTEN_WAIT = 10.0  # seconds for the server's "listening" line
STOP_WAIT = 5.0  # seconds the server gets to end by itself after its client failed
ASAN_OPTIONS = "detect_leaks=1:color=never"
OUTCOMES = 3


def frame(lines: Sequence[str], pattern: str) -> str:
    """The first frame of an ASan stack (the 12 lines after PATTERN) that is not the sanitizer's
    own, as "function (file)"."""
    for line in storm.grep_after(pattern, lines, 12):
        if not re.match(r"^ +#[0-9]+ ", line) or re.search(r"libsanitizer|__interceptor_|asan_",
                                                           line):
            continue
        text = re.sub(r"^ *#[0-9]+ 0x[0-9a-f]+ in ", "", line, count=1)
        return re.sub(r" \(([^()]*/)?([^()/+]+)\+0x[0-9a-f]+\)$", r" (\2)", text, count=1)
    return ""


def first_match(pattern: str, lines: Sequence[str]) -> str:
    """grep -m1 -o: PATTERN's first match, in the first line that has one."""
    for line in lines:
        m = re.search(pattern, line)
        if m:
            return m.group(0)
    return ""


def token_verdict(server_rc: int, client_rc: int, server: Sequence[str], client: Sequence[str],
                  clients: int = CLIENTS) -> tuple[bool, str]:
    ok = server_rc == 0 and client_rc == 0 \
        and any("verified %d/%d tokens" % (clients, clients) in x for x in server) \
        and any("%d accepted, %d established, %d disconnected" % (clients, clients, clients) in x
                for x in server) \
        and any("%d/%d disconnected" % (clients, clients) in x for x in client)
    if ok:
        return True, ("all %d tokens verified by the server and echoes verified by the client"
                      % clients)
    return False, "token demo (server exit %d, client exit %d)" % (server_rc, client_rc)


def seed_raw_verdict(rc: int, log: Sequence[str]) -> tuple[bool, list[str]]:
    """ASan's report of the raw server's read: the verdict and the lines said ("Seen: ...")."""
    read_at = frame(log, "^READ of size")
    freed_at = frame(log, "^freed by thread")
    alloc_at = frame(log, "^previously allocated by thread")
    ok = rc != 0 and any("ERROR: AddressSanitizer: heap-use-after-free" in x for x in log) \
        and freed_at.startswith("rdma_ack_cm_event") and alloc_at.startswith("rdma_get_cm_event")
    if not ok:
        return False, []
    return True, [
        "  Seen:     %s, exit status %d" % (first_match(r"^SUMMARY: AddressSanitizer: [a-z-]*",
                                                        log), rc),
        "            %s in %s" % (first_match(r"^READ of size [0-9]*", log), read_at),
        "            freed in     %s" % freed_at,
        "            allocated in %s" % alloc_at]


def seed_cmsafe_verdict(rc: int, log: Sequence[str]) -> tuple[bool, list[str]]:
    """Clean through cmsafe: exit 0, no sanitizer report, the token read. The verdict and the
    line said."""
    token = [x for x in log if x.startswith("cmsafe server read the token")]
    ok = rc == 0 and not any("Sanitizer" in x for x in log) \
        and any(x.startswith("cmsafe server read the token: token:") for x in log)
    return ok, ["  Seen:     clean (exit 0, no sanitizer report); %s" % (token[0] if token else "")]


class Demo:
    def __init__(self, addr: str):
        self.addr = addr
        self.t = tally.Tally("demo", ok_prefix="  OK: ", fail_prefix="  FAIL: ")

    def say(self, text: str = "") -> None:
        self.t.say(text)

    def show(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.say("  | " + line)

    def run(self, argv: Sequence[str], log: str) -> subprocess.Popen:
        with open(os.path.join(LOGS, log), "wb") as f:
            return subprocess.Popen(["timeout", TIMEOUT] + list(argv), stdin=subprocess.DEVNULL,
                                    stdout=f, stderr=subprocess.STDOUT)

    def banner(self, text: str) -> None:
        self.say()
        self.say("=== %s ===" % text)

    def tokens(self) -> None:
        s = storm.seed()
        self.banner("1. token_server: %d clients, each token read from cmsafe's copy of its "
                    "CONNECT_REQUEST" % CLIENTS)
        self.say('  Every client sends "tok:<index>:<32 hex>" (derived from seed %s) as private '
                 'data;' % s)
        self.say("  the server verifies it after the event was acked, accepts and echoes it "
                 "back.")
        server_log = os.path.join(LOGS, "token_server.log")
        args = [self.addr, str(PORT), s, str(CLIENTS)]
        server = self.run(["%s/token_server" % BIN] + args, "token_server.log")
        deadline = time.monotonic() + LISTEN_WAIT
        while time.monotonic() < deadline and server.poll() is None:
            if any("listening" in x for x in proc.read_lines(server_log)):
                break
            time.sleep(0.1)
        client_rc = proc.shell_status(self.run(["%s/token_client" % BIN] + args,
                                               "token_client.log").wait())
        if client_rc != 0:  # the server would wait for the missing clients: stop it soon
            try:
                server.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                server.terminate()
        server_rc = proc.shell_status(server.wait())
        server_lines = proc.read_lines(server_log)
        client_lines = proc.read_lines(os.path.join(LOGS, "token_client.log"))
        verified = re.compile(r"verified [0-9]*/")
        self.show([x for x in server_lines[-10:] if not verified.search(x)])
        self.show(client_lines[-10:])
        self.show([x for x in server_lines[-10:] if verified.search(x)])
        ok, text = token_verdict(server_rc, client_rc, server_lines, client_lines)
        self.t.check(text, ok)

    def seed(self, mode: str, banner: str, expected: str, verdict, ok_text: str,
             fail_text: str) -> None:
        """c-tests/seed_incident MODE: what VERDICT sees in its log said, then the outcome."""
        self.banner(banner)
        self.say("  Expected: " + expected)
        name = "seed_incident_%s.log" % mode
        rc = proc.shell_status(self.run(["%s/seed_incident" % BIN, mode], name).wait())
        log = proc.read_lines(os.path.join(LOGS, name))
        ok, seen = verdict(rc, log)
        if ok:
            for line in seen:
                self.say(line)
            self.t.check(ok_text, True)
        else:
            self.show(log[-30:])
            self.t.check(fail_text % rc, False)

    def main(self) -> int:
        stack = "Soft-iWARP" if os.environ.get("RXE_TRANSPORT", "roce") == "iwarp" \
            else "Soft-RoCE"
        self.say("cmsafe demo: %s device %s at %s" % (stack, os.environ.get("RXE_DEV", "rxe0"),
                                                     self.addr))
        self.tokens()
        self.seed("raw", "2. the seed incident, raw librdmacm: rdma_ack_cm_event, then read the "
                  "private data", "AddressSanitizer heap-use-after-free, the memory freed in "
                  "rdma_ack_cm_event.", seed_raw_verdict,
                  "the raw server read freed memory, as expected",
                  "AddressSanitizer did not report the use after rdma_ack_cm_event (exit %d)")
        self.seed("cmsafe", "3. the seed incident through cmsafe: the same read, from "
                  "cmsafe_get_event's copy", "clean under AddressSanitizer and LeakSanitizer, the "
                  "token read correctly.", seed_cmsafe_verdict,
                  "the cmsafe server read the token after the ack, safely",
                  "not clean (exit %d or a sanitizer report)")
        self.say()
        if self.t.failed == 0:
            self.say("demo: all %d outcomes as expected" % OUTCOMES)
        else:
            self.say("demo: %d of %d outcomes NOT as expected (logs in %s/)"
                     % (self.t.failed, OUTCOMES, LOGS))
        return 1 if self.t.failed else 0


def main(argv: list[str]) -> int:
    os.chdir(guest.project_root())
    addr = os.environ.get("RXE_ADDR")
    if not addr:
        guest.die(PROG, "run this inside scripts/rxe-vm")
    os.makedirs(LOGS, exist_ok=True)
    os.environ["ASAN_OPTIONS"] = ASAN_OPTIONS
    os.environ["LSAN_OPTIONS"] = storm.cases.LSAN_OPTIONS % os.getcwd()
    os.environ["UBSAN_OPTIONS"] = storm.cases.UBSAN_OPTIONS
    return Demo(addr).main()
