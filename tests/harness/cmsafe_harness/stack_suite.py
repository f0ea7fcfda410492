"""The suite on one stack, inside `scripts/rxe-vm --stack NAME` (scripts/stacks runs it on every
stack: make stacks, make stacks-smoke), on that stack's own build (scripts/stack-root built it in
the suite's root; target/ is the stack's target/stacks/NAME/target; on bookworm, the default
stack, the host's own build and target/):

  scripts/stack-suite-in-guest [PART...]     (default: every part, in this order)

The arm64 guest (`scripts/rxe-vm --arch arm64`, scripts/stacks' stack arm64) runs it on make
cross-arm64's build: its target/ is target/arm64, and it has no compiler, so install is counted
apart there.

  install     what a user of the suite gets from `make install`: `pkg-config --cflags --libs
              cmsafe`, the headers, an example built with pkg-config only and run on the real
              stack, cmsafe-audit on PATH running a raw librdmacm program, libcmsafe_preload.so
  c-tests     c-tests/run-in-guest (the C tests, the C++ wrapper, the Rust real-stack tests)
  new-events  c-tests/new-events: rdma-core 60's event types (USER's arg,
              rdma_resolve_addrinfo) through the API, raw, under audit and under safe; counted
              apart without RDMACM_1.4
  misuse      scripts/preload-misuse-tests (raw, audit and safe)
  real        scripts/preload-real-programs audit safe (rdma-core's samples, perftest, qperf,
              libfabric: each against its raw run); a program this stack lacks is counted apart
  demo        scripts/demo-in-guest (its 3 outcomes)
  storm       scripts/storm-in-guest, short: 50 connections from 5 clients, 2 waves, the
              checked builds under ASan, and the control (the legacy server without the
              preload, caught)

On Soft-iWARP (scripts/stacks' NAME/iwarp: RXE_TRANSPORT=iwarp) every part runs as it is: the
programs ask the device its transport. demo-in-guest's 50 connections and the storm's 50 fit
siw's 144 queue mappings per process (docs/stacks.md, "iWARP"); what has no meaning there is
counted apart by the part's own script (the storm's IB CM counters, the UD programs).

Each part's log goes to target/stack-suite/PART.log. The summary goes to stdout and
target/stack-suite/summary.txt (scripts/stacks reads it): a first line naming the stack, then
per part one line
  part PART: P passed, F failed, A apart
followed by its failures ("  FAIL ...") and what was counted apart with its reason
("  apart: ..."). Counted apart: what cannot run on this stack (a part not built here, a program
the suite lacks) and a run of a program that hit a known bug of its own, named by the audit
(preload-real-programs' "skip" lines); never a failure. A part's counts are its script's own
last "N passed, N failed" (or "N checks passed, N failed") line; a script that says no failure
but exits non-zero has failed. Exits non-zero when a part failed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Sequence

from . import guest, proc

PROG = "stack-suite-in-guest"
PARTS = ("install", "c-tests", "new-events", "misuse", "real", "demo", "storm")
OUT = "target/stack-suite"
PREFIX_CUT = 300  # characters of an apart line in the summary
REASON_CUT = 160  # characters of the build's first error


@dataclass(frozen=True)
class RealProgram:
    """A program of preload-real-programs' basic set and the commands it needs."""

    name: str
    commands: tuple[str, ...]


REAL_PROGRAMS = (
    RealProgram("rping", ("rping",)), RealProgram("ucmatose", ("ucmatose",)),
    RealProgram("udaddy", ("udaddy",)), RealProgram("cmtime", ("cmtime",)),
    RealProgram("ib_send_bw", ("ib_send_bw",)), RealProgram("ib_send_bw_events", ("ib_send_bw",)),
    RealProgram("qperf", ("qperf",)), RealProgram("fi_pingpong", ("fi_pingpong",)),
    RealProgram("rdma_server_client", ("rdma_server", "rdma_client")),
    RealProgram("rstream_sockets", ("rstream",)), RealProgram("rstream_rsocket", ("rstream",)),
)

STORM_ARGS = ("--conns", "50", "--clients", "5", "--waves", "2", "--legacy-check", "asan",
              "--control")

# The first error of a failed stack build, as the reason for every part that needs it.
_BUILD_ERROR = re.compile(r"undefined reference to .[a-z_]*.|\"[^\"]*\" is not a valid Ident|"
                          r"error: [^(]*")
_COUNTS = re.compile(r"([0-9]+) (checks )?passed, ([0-9]+) failed")


# ---- what the logs say --------------------------------------------------------------------

def stack_name(cmdline: str, os_release: Sequence[str]) -> tuple[str, bool]:
    """The stack's name as rxe-vm booted it (rxevm.stack= on the kernel's command line; none:
    bookworm; rxevm.arch=arm64: arm64), not the root's os-release: sid's names the next
    release. Whether it is the arm64 guest."""
    m = re.search(r"rxevm\.stack=([^ ]*)", cmdline)
    stack = m.group(1).strip() if m else ""
    if "rxevm.arch=arm64" in cmdline:
        return "arm64", True
    if stack:
        return stack, False
    release = {}
    for line in os_release:
        key, _, value = line.partition("=")
        release[key] = value.strip().strip('"')
    return release.get("VERSION_CODENAME") or release.get("PRETTY_NAME", ""), False


def build_reason(log: Sequence[str]) -> str:
    """The first error of the stack's build log (its matches on the first line that has one)."""
    for line in log:
        found = [m.group(0)[:REASON_CUT] for m in _BUILD_ERROR.finditer(line)]
        if found:
            return "\n".join(found)
    return ""


def counts(lines: Sequence[str]) -> tuple[int, int] | None:
    """The part's counts: the last "N passed, N failed" (or "N checks passed, N failed")."""
    last = None
    for line in lines:
        for m in _COUNTS.finditer(line):
            last = (int(m.group(1)), int(m.group(3)))
    return last


def apart_lines(lines: Sequence[str], extra: Sequence[str]) -> list[str]:
    """What the part counted apart: its "skip" lines and the runs it could not make."""
    found = ["apart: " + x[len("skip "):] for x in lines if x.startswith("skip ")]
    return [x for x in found + ["apart: " + e for e in extra] if x != "apart: "]


def failure_lines(lines: Sequence[str]) -> list[str]:
    """A part's FAIL and apart lines as the summary repeats them, indented by two."""
    return ["  " + x.lstrip(" ") for x in lines if re.match(r"^(FAIL|  FAIL:|apart:)", x)]


def demo_counts(lines: Sequence[str], rc: int) -> tuple[int, int]:
    """The demo's outcomes: its OK and FAIL lines; an exit without a FAIL line is one."""
    n = sum(1 for x in lines if x.startswith("  OK: "))
    f = sum(1 for x in lines if x.startswith("  FAIL: "))
    return n, f if rc == 0 or f else 1


def real_sets(have: dict[str, bool]) -> tuple[list[str], list[str]]:
    """The programs to run (all their commands installed) and the missing ones with what this
    root lacks; HAVE says which commands are installed."""
    only, missing = [], []
    for p in REAL_PROGRAMS:
        lacks = [c for c in p.commands if not have.get(c)]
        if lacks:
            missing.append("%s: this suite's root has no %s" % (p.name, ", ".join(lacks)))
        else:
            only.append(p.name)
    return only, missing


# ---- the run ------------------------------------------------------------------------------

def first_line(argv: Sequence[str]) -> str:
    try:
        r = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    except OSError:
        return ""
    lines = r.stdout.decode("utf-8", "replace").splitlines()
    return lines[0] if lines else ""


class Suite:
    def __init__(self, addr: str, out: str = OUT):
        self.addr = addr
        self.out = out
        self.summary = open(os.path.join(out, "summary.txt"), "w")
        self.bad = 0
        self.reason = ""

    def line(self, text: str) -> None:
        print(text, flush=True)
        self.summary.write(text + "\n")
        self.summary.flush()

    def part_line(self, name: str, p: int, f: int, a: int, log: str | None = None) -> bool:
        self.line("part %s: %d passed, %d failed, %d apart" % (name, p, f, a))
        if log:
            for x in failure_lines(proc.read_lines(log)):
                self.line(x)
        return f == 0

    def cannot(self, name: str, why: str) -> None:
        """A whole part that cannot run on this stack, counted apart."""
        self.line("part %s: 0 passed, 0 failed, 1 apart" % name)
        self.line("  apart: the part cannot run here: %s" % why)

    def part_script(self, name: str, argv: Sequence[str], extra: Sequence[str] = ()) -> bool:
        """The command's own counts as the part's; its "skip" lines and EXTRA counted apart."""
        log = os.path.join(self.out, name + ".log")
        with open(log, "wb") as f:
            rc = proc.shell_status(subprocess.call(list(argv), stdin=subprocess.DEVNULL, stdout=f,
                                                   stderr=subprocess.STDOUT))
        lines = proc.read_lines(log)
        apart = apart_lines(lines, extra)
        with open(log + ".apart", "w") as f:
            f.write("".join(x + "\n" for x in apart))
        n_apart = sum(1 for x in lines if x.startswith("skip ")) + len(extra)
        c = counts(lines)
        if c is None:
            self.line("part %s: 0 passed, 1 failed, %d apart" % (name, n_apart))
            self.line("  FAIL no count from '%s' (exit %d; log: %s)" % (" ".join(argv), rc, log))
            return False
        p, failed = c
        if rc != 0 and failed == 0:  # no failure said, but a non-zero exit: a failure
            failed = 1
        self.part_line(name, p, failed, n_apart, log)
        for x in apart:
            self.line(("  " + x)[:PREFIX_CUT])
        return rc == 0

    def install(self) -> bool:
        log = os.path.join(OUT, "install.log")
        d = tempfile.mkdtemp()
        n = f = 0
        build = ("cc -std=c11 -Wall -Werror -o %s/%%s examples/%%s.c $(pkg-config --cflags "
                 "--libs cmsafe libibverbs)" % d)
        checks = [
            ("pkg-config --cflags --libs cmsafe", ["pkg-config", "--cflags", "--libs", "cmsafe"]),
            ("headers in /usr/local/include", ["test", "-e", "/usr/local/include/cmsafe.h"]),
            ("token_server built with pkg-config only",
             ["sh", "-c", build % ("token_server", "token_server")]),
            ("token_client built with pkg-config only",
             ["sh", "-c", build % ("token_client", "token_client")]),
            ("token_server/token_client (pkg-config build) on the real stack",
             ["sh", "-c", "\n    timeout 60 %s/token_server %s 7481 0x1234 5 & s=$!\n    sleep 1\n"
                          "    timeout 60 %s/token_client %s 7481 0x1234 5 && wait $s"
              % (d, self.addr, d, self.addr)]),
            ("libcmsafe_preload.so installed",
             ["test", "-e", "/usr/local/lib/libcmsafe_preload.so"]),
            ("cmsafe-audit on PATH runs a raw program (misuse_never_acked: its finding)",
             ["sh", "-c", "\n    command -v cmsafe-audit && timeout 60 cmsafe-audit -- "
                          "target/preload-tests/misuse_never_acked 2>&1 |\n      tee %s/audit.out; "
                          "grep -q never-acked %s/audit.out" % (d, d)]),
        ]
        for what, argv in checks:
            with open(log, "ab") as out:
                rc = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT)
            with open(log, "a") as out:
                out.write(("ok   %s\n" if rc == 0 else "FAIL %s\n") % what)
            n, f = (n + 1, f) if rc == 0 else (n, f + 1)
        shutil.rmtree(d, ignore_errors=True)
        return self.part_line("install", n, f, 0, log)

    def real(self) -> bool:
        only, missing = real_sets({c: shutil.which(c) is not None
                                   for p in REAL_PROGRAMS for c in p.commands})
        if not only:
            self.cannot("real", "none of the programs is installed")
            return True
        # Two runs (audit, safe) of each program this stack lacks, counted apart.
        extra = [x for e in missing for x in ("audit: " + e, "safe: " + e)]
        return self.part_script("real", ["scripts/preload-real-programs", "--only", ",".join(only),
                                         "audit", "safe"], extra)

    def demo(self) -> bool:
        log = os.path.join(OUT, "demo.log")
        with open(log, "wb") as f:
            rc = proc.shell_status(subprocess.call(["scripts/demo-in-guest"],
                                                   stdin=subprocess.DEVNULL, stdout=f,
                                                   stderr=subprocess.STDOUT))
        n, failed = demo_counts(proc.read_lines(log), rc)
        return self.part_line("demo", n, failed, 0, log)

    def run(self, parts: Sequence[str], arm64: bool, host_stack: bool) -> int:
        preload = os.path.exists("target/release/libcmsafe_preload.so")
        not_built = "not built on this suite: %s" % self.reason
        for p in parts:
            ok = True
            if p == "install":
                if arm64:
                    self.cannot(p, "the arm64 guest's root has no compiler: cmsafe is "
                                   "cross-built on the host (make cross-arm64), and make "
                                   "install-check checks the installed build on x86_64")
                elif host_stack:
                    self.cannot(p, "bookworm is the host's own stack, with no root of its own "
                                   "to install into: make install-check checks the installed "
                                   "build there")
                elif os.path.exists("/usr/local/lib/libcmsafe.so"):
                    ok = self.install()
                else:
                    self.cannot(p, "libcmsafe.so not built on this suite: %s" % self.reason)
            elif p == "c-tests":
                if os.access("target/c-tests/test_private_data", os.X_OK) and \
                        os.access("target/c-tests/real_stack", os.X_OK):
                    ok = self.part_script(p, ["c-tests/run-in-guest"])
                else:
                    self.cannot(p, not_built)
            elif p == "new-events":
                if os.access("target/c-tests/test_new_events_plain", os.X_OK) and preload:
                    ok = self.part_script(p, ["c-tests/new-events"])
                else:
                    self.cannot(p, not_built)
            elif p in ("misuse", "real"):
                if not preload:
                    self.cannot(p, "libcmsafe_preload.so not built on this suite: %s"
                                % self.reason)
                elif p == "misuse":
                    ok = self.part_script(p, ["scripts/preload-misuse-tests"])
                else:
                    ok = self.real()
            elif p == "demo":
                if os.access("target/c-tests/token_server", os.X_OK) and \
                        os.access("target/c-tests/seed_incident", os.X_OK):
                    ok = self.demo()
                else:
                    self.cannot(p, "its programs are not built on this suite: %s" % self.reason)
            elif p == "storm":
                if os.access("target/storm/storm_server_cmsafe", os.X_OK) and preload:
                    ok = self.part_script(p, ["scripts/storm-in-guest"] + list(STORM_ARGS) +
                                          ["--results", os.path.join(OUT, "storm")])
                else:
                    self.cannot(p, "the storm's programs are not built on this suite: %s"
                                % self.reason)
            if not ok:
                self.bad += 1
        self.line("parts failed: %d" % self.bad)
        return 1 if self.bad else 0


def main(argv: list[str]) -> int:
    os.chdir(guest.project_root())
    addr = os.environ.get("RXE_ADDR")
    if not addr:
        guest.die(PROG, "run this inside scripts/rxe-vm --stack NAME")
    parts = list(argv) or list(PARTS)
    for p in parts:
        if p not in PARTS:
            guest.die(PROG, "unknown part %s (%s)" % (p, " ".join(PARTS)))
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    cmdline = "\n".join(proc.read_lines("/proc/cmdline"))
    stack, arm64 = stack_name(cmdline, proc.read_lines("/etc/os-release"))
    fmt = "${Version}\\n"
    arch = first_line(["dpkg", "--print-architecture"])
    rdmacore = first_line(["dpkg-query", "-W", "-f=" + fmt, "rdma-core"]) or \
        first_line(["dpkg-query", "-W", "-f=" + fmt, "librdmacm1:" + arch])
    glibc = first_line(["dpkg-query", "-W", "-f=" + fmt, "libc6:" + arch])
    compiler = first_line(["cc", "--version"]) or \
        "no compiler (cross-built on the host: make cross-arm64)"
    suite = Suite(addr)
    suite.line("stack %s: kernel %s, rdma-core %s, glibc %s, %s"
               % (stack, os.uname().release, rdmacore, glibc, compiler))
    # What did not build on this suite (scripts/stack-root ran make -k): its first error, the
    # reason given for every part that needs it. On bookworm (the host's stack) there is no
    # stack build.
    host_stack = not os.path.exists("target/stack-build.status")
    status = proc.read_lines("target/stack-build.status")
    if not host_stack and status[:1] != ["0"]:
        suite.reason = build_reason(proc.read_lines("target/stack-build.log"))
        suite.line("build: parts failed on this suite: %s"
                   % (suite.reason or "see target/stacks/NAME/target/stack-build.log"))
    sys.stdout.flush()
    return suite.run(parts, arm64, host_stack)
