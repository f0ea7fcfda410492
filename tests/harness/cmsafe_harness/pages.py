"""pages-in-guest: the suite's page-size-dependent parts on a guest whose kernel has pages of a
given size (make arm64-16k-test: `scripts/rxe-vm --arch arm64 --pages 16k`). Run it inside the
guest:

  scripts/rxe-vm --arch arm64 --pages 16k -- scripts/pages-in-guest 16384 [PART...]

PAGE is the size the kernel is known to have: the run stops at once (exit 1) unless the page
size (`getconf PAGESIZE`) says it, so that a guest that booted another kernel never passes for
this one. The parts, in this order (default: all):

  unit    the unit tests of cmsafe-core, cmsafe-sync and cmsafe-preload, cross-built (make
          arm64-unit-tests puts them in the guest's target/unit-tests), with
          CMSAFE_TEST_PAGE_SIZE=PAGE: crates/core/src/page.rs's test asserts that size was read
          at run time, and preload/src/audit/pages.rs's that a guard is the whole run-time page (a seal
          closes its last byte and not the next page's copy). One test thread: the guest has two
          vCPUs, and the tests' own threads are enough. The first program that fails ends the
          part; no program there is a failure.
  c       the C tests (c-tests/run-in-guest, without LeakSanitizer's exit check, as make
          arm64-test: it costs the emulated guest tens of seconds a process).
  misuse  the preload's misuse suite (scripts/preload-misuse-tests: raw, audit, safe; audit's
          use-after-ack is a read of a sealed page of that size).

Each part's own output goes to stdout as it comes (the whole run takes about 26 minutes), then
its outcome and wall time: "pages-in-guest: PART ok in Ns" or "pages-in-guest: PART FAILED
(exit N) in Ns"; an unknown part is a failed one. The last line is the parts' count,
"pages-in-guest: N passed, N failed", and the exit status is 1 when one failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Callable, Sequence, TextIO

from . import guest
from . import proc

PROG = "pages-in-guest"
PARTS = ("unit", "c", "misuse")
UNIT_TESTS = os.path.join("target", "unit-tests")
USAGE = "usage: scripts/pages-in-guest PAGE [unit] [c] [misuse]"


def say(stream: TextIO, text: str) -> None:
    print(text, file=stream, flush=True)


def call(argv: Sequence[str], out: TextIO, err: TextIO, env: dict[str, str] | None = None) -> int:
    """A part's program, its output straight to OUT and ERR as it comes (no deadline: the parts
    have their own), its shell status."""
    return proc.shell_status(subprocess.call(list(argv), stdout=out, stderr=err, env=env))


def unit(page: str, out: TextIO, err: TextIO) -> int:
    n = 0
    for t in sorted(os.listdir(UNIT_TESTS)) if os.path.isdir(UNIT_TESTS) else []:
        path = os.path.join(UNIT_TESTS, t)
        if not os.access(path, os.X_OK):
            continue
        n += 1
        say(out, "-- %s" % t)
        if call([path, "--test-threads=1", "-q"], out, err,
                proc.environment({"CMSAFE_TEST_PAGE_SIZE": page})) != 0:
            return 1
    if n == 0:
        say(err, "no unit tests in %s: run make arm64-unit-tests" % UNIT_TESTS)
        return 1
    return 0


def run_part(part: str, page: str, out: TextIO, err: TextIO) -> int:
    """One part, run from the work tree (the current directory); its shell status."""
    if part == "unit":
        return unit(page, out, err)
    if part == "c":
        return call([os.path.join("c-tests", "run-in-guest")], out, err,
                    proc.environment({"CTESTS_DETECT_LEAKS": "0"}))
    if part == "misuse":
        return call([os.path.join("scripts", "preload-misuse-tests")], out, err)
    say(err, "%s: unknown part %s (unit, c or misuse)" % (PROG, part))
    return 1


def verdict_line(part: str, rc: int, secs: int) -> str:
    return "%s: %s %s in %ds" % (PROG, part, "ok" if rc == 0 else "FAILED (exit %d)" % rc, secs)


def pages(page: str, parts: Sequence[str], got: int, system: tuple[str, str], out: TextIO,
          err: TextIO, runner: Callable[[str, str, TextIO, TextIO], int] = run_part) -> int:
    """The run, in the work tree (the current directory): the page size check against GOT (the
    kernel's; SYSTEM: its release and machine, as uname says them), then each of PARTS (none:
    all) by RUNNER, its outcome and time, the parts' count; the exit status."""
    say(out, "%s: kernel %s, %s, page size %d" % (PROG, system[0], system[1], got))
    if str(got) != page:
        say(err, "%s: the page size is %d, not %s" % (PROG, got, page))
        return 1
    passed = failed = 0
    for part in parts or PARTS:
        # Whole seconds of the wall clock, as date +%s gave them.
        start = int(time.time())
        rc = runner(part, page, out, err)
        if rc == 0:
            passed += 1
        else:
            failed += 1
        say(out, verdict_line(part, rc, int(time.time()) - start))
    say(out, "%s: %d passed, %d failed" % (PROG, passed, failed))
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    os.chdir(guest.project_root())
    if not os.environ.get("RXE_ADDR"):
        guest.die(PROG, "RXE_ADDR: run this inside scripts/rxe-vm", 1)
    if not argv:
        say(sys.stderr, USAGE)
        return 2
    u = os.uname()
    return pages(argv[0], argv[1:], os.sysconf("SC_PAGE_SIZE"), (u.release, u.machine),
                 sys.stdout, sys.stderr)
