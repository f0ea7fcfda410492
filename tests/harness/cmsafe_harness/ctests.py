"""run-in-guest: the C tests on the real RDMA stack (make guest-test, make iwarp-test, make
arm64-test, the stacks' c-tests part, scripts/pages-in-guest's c part).

  scripts/rxe-vm [--transport iwarp] [--arch arm64] -- c-tests/run-in-guest

Runs the binaries `make c-tests` built under target/c-tests, each under AddressSanitizer,
LeakSanitizer and UBSan (their options set here: halt on the first error, LeakSanitizer's
suppressions from c-tests/lsan.supp) or ThreadSanitizer (the *_tsan builds, whose options are
built in: see cm_util.c):

  programs that check themselves (the Rust API's real-stack tests, the C tests, the C++
    wrapper's cpp_events): exit 0 with the count line printed last is the verdict; the ok line quotes the program's own last
    "N passed, N failed" (", N skipped" when the transport cannot run some steps: their "skip:"
    lines, with the reason, are shown under the test's line, so no skip goes unseen; the Rust
    harness's "N passed; N failed").
  the seed incident, raw: AddressSanitizer must catch the read of the acked event, freed inside
    rdma_ack_cm_event and allocated inside rdma_get_cm_event.
  the seed incident through cmsafe: clean under ASan and LSan, and the token read back.
  the same raw server (ack, then read), unchanged, built with -include cmsafe_compat.h: safe
    mode from source, clean under ASan and LSan, the token read right.

CTESTS_DETECT_LEAKS=0 turns LeakSanitizer's check at each ASan process's exit off (default 1).
On the arm64 guest that check costs tens of seconds a process, most of that guest's C-test time:
GCC 12's sanitizer allocator on aarch64 Linux is the 32-bit-style one (SizeClassAllocator32),
whose leak scan visits its map of every region of the 48-bit address space, a fraction of a
second on hardware. make arm64-test's slice turns it off there; the x86_64 guest checks the same
code with it (docs/testing.md, "arm64: the emulated guest").

ThreadSanitizer lays its shadow out for the size of the address space, which it takes from the
highest bit of the stack's address. GCC 12's libtsan knows three layouts on aarch64, for 39, 42
and 48 bits (tsan_platform_linux.cpp's InitializePlatformEarly), and dies on any other
("unsupported VMA range"); a kernel with 16K pages gives user space 47 bits. On such a kernel
the TSan programs cannot start: each is a skip with that reason, not a failure, and the same
code runs under TSan on the 4K guests.

Each line ends with the test's time [N.Ns] (from the end of the one before), as
scripts/preload-misuse-tests' do: what a slower guest costs, test by test. A failure shows the
last 40 lines of the program's log (stdout and stderr together, target/c-tests/logs/NAME.log).
A program that does not end within RUN_TIMEOUT seconds (times RXE_TIME_SCALE) is killed and
fails by name, and the others still run. The last line is "c-tests: N passed, N failed" (", N
skipped" when some were); the exit status is 1 when one failed.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from . import guest
from . import proc
from .tally import Tally

PROG = "run-in-guest"
BIN = os.path.join("target", "c-tests")
TAIL = 40  # log lines shown under a failure
RUN_TIMEOUT = 900  # seconds for one program, in the x86_64 guest's time
TOKEN = "token:7f3a9c21-acme-storage-node-17"

# A check's outcome: passed, the text of its verdict (the ok line's parenthesis, the FAIL line's
# reason), and the lines shown under an ok line.
Outcome = tuple[bool, str, list[str]]

_COUNTS = re.compile(r"[0-9]* passed; [0-9]* failed|[0-9]* passed, [0-9]* failed(, [0-9]* skipped)?")


def counts_of(lines: Sequence[str]) -> str:
    """The program's own last count: "N passed, N failed[, N skipped]" or the Rust harness's
    "N passed; N failed"; "" when it printed none."""
    last = ""
    for line in lines:
        for m in _COUNTS.finditer(line):
            last = m.group(0)
    return last


def check_program(rc: int, lines: Sequence[str]) -> Outcome:
    """A program that checks itself: its exit status is the verdict, its count the ok line's
    detail, its "skip:" lines shown under it."""
    if rc != 0:
        return False, "exit status %d" % rc, []
    counts = counts_of(lines)
    if not counts:
        # Every program prints its count last: one that ends 0 without it stopped early.
        return False, "exit status 0 without a count line", []
    return True, counts, ["     | " + x for x in lines if x.startswith("skip: ")]


def following(lines: Sequence[str], pattern: str, n: int) -> list[str]:
    """Each line PATTERN matches and the N lines after it (grep -A N)."""
    regex = re.compile(pattern)
    picked: set[int] = set()
    for i, line in enumerate(lines):
        if regex.search(line):
            picked.update(range(i, min(i + n + 1, len(lines))))
    return [lines[i] for i in sorted(picked)]


def check_seed_raw(rc: int, lines: Sequence[str]) -> Outcome:
    """The raw seed incident: ASan reports the heap use after free, the block freed in
    rdma_ack_cm_event and allocated in rdma_get_cm_event (each within the 12 frames under its
    header), and the program dies of it."""
    caught = (rc != 0
              and any("ERROR: AddressSanitizer: heap-use-after-free" in x for x in lines)
              and any("rdma_ack_cm_event" in x for x in following(lines, "^freed by thread", 12))
              and any("rdma_get_cm_event" in x
                      for x in following(lines, "^previously allocated by thread", 12)))
    if not caught:
        return False, "AddressSanitizer did not report the use after ack (exit %d)" % rc, []
    kind = "heap-use-after-free" if any("heap-use-after-free on address" in x for x in lines) else ""
    return True, "ASan: %s, freed in rdma_ack_cm_event" % kind, []


def sanitizer_clean(rc: int, lines: Sequence[str]) -> bool:
    return rc == 0 and not any("Sanitizer" in x for x in lines)


def check_seed_cmsafe(rc: int, lines: Sequence[str], clean: str) -> Outcome:
    """The seed incident through cmsafe: exit 0, no sanitizer report, the token read after the
    ack. CLEAN says which sanitizers were on."""
    if sanitizer_clean(rc, lines) and any(x.startswith("cmsafe server read the token: token:")
                                          for x in lines):
        return True, "%s, token read after the ack" % clean, []
    return False, "not clean (exit status or sanitizer report)", []


def check_seed_compat(rc: int, lines: Sequence[str]) -> Outcome:
    """The unchanged raw server built with cmsafe_compat.h: clean, and the token read right."""
    if sanitizer_clean(rc, lines) and "raw server read the token: " + TOKEN in lines:
        return True, "ack-then-read code, unchanged, clean with cmsafe_compat.h", []
    return False, "not clean or wrong token", []


def stack_top(maps: Sequence[str]) -> str:
    """The end address (hex) of the first [stack] mapping of /proc/self/maps, "" for none."""
    for line in maps:
        fields = line.split()
        if len(fields) >= 6 and fields[5] == "[stack]":
            return fields[0].split("-")[1] if "-" in fields[0] else ""
    return ""


def vma_bits(top: str) -> int:
    """The address space's size in bits: the highest bit of the stack's last address."""
    v = int(top, 16) - 1 if top else -1
    return v.bit_length() if v > 0 else 0


def tsan_skip_reason(machine: str, top: str, page: int) -> str:
    """Why the TSan programs cannot start on this kernel; "" when they can."""
    if machine != "aarch64":
        return ""
    bits = vma_bits(top)
    if bits in (39, 42, 48):
        return ""
    return ("GCC 12's ThreadSanitizer supports aarch64 address spaces of 39, 42 and 48 bits; "
            "this kernel's is %d (%d-byte pages)" % (bits, page))


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]  # the program (under target/c-tests) and its arguments
    kind: str = "program"  # program, tsan (a program skipped where TSan cannot start), seed_raw,
    # seed_cmsafe, seed_compat


CASES = (
    Case("rust_real_stack", ("real_stack", "--ignored", "--test-threads=1", "--color=never")),
    Case("test_private_data", ("test_private_data",)),
    Case("test_ack_happened", ("test_ack_happened",)),
    Case("test_event_types", ("test_event_types",)),
    Case("test_pdata_lengths", ("test_pdata_lengths",)),
    Case("test_event_order", ("test_event_order",)),
    Case("test_many_clients", ("test_many_clients",)),
    Case("test_threads", ("test_threads",)),
    Case("test_threads_tsan", ("test_threads_tsan",), "tsan"),
    # One event shared by threads: buffer references taken and given back while others read it.
    Case("test_shared_event", ("test_shared_event",)),
    Case("test_shared_event_tsan", ("test_shared_event_tsan",), "tsan"),
    Case("test_fetch_modes", ("test_fetch_modes",)),
    Case("test_alloc_failure", ("test_alloc_failure",)),
    Case("test_misuse", ("test_misuse",)),
    Case("test_logging", ("test_logging",)),
    # The flight recorder: a dump of a real connection's events, a ring that wraps, the dump at
    # exit and on a misuse's abort.
    Case("test_flight", ("test_flight",)),
    Case("seed_incident_raw", ("seed_incident", "raw"), "seed_raw"),
    Case("seed_incident_cmsafe", ("seed_incident", "cmsafe"), "seed_cmsafe"),
    Case("seed_incident_compat", ("seed_incident_compat", "raw"), "seed_compat"),
    # The C++ wrapper (cmsafe.hpp) on the real stack: copy/move/refcounts, private data, batches.
    Case("cpp_events", ("cpp_events",)),
)


def say_outcome(t: Tally, name: str, outcome: Outcome, took: str, log: Sequence[str]) -> None:
    """The check's line ("ok   NAME (TEXT) TOOK", "FAIL NAME: TEXT TOOK") and what goes under
    it: an ok's notes, a failure's last TAIL log lines."""
    ok, text, notes = outcome
    if ok:
        t.check("%s (%s) %s" % (name, text, took), True)
    else:
        t.check(name, False, "%s %s" % (text, took))
        notes = ["     | " + line for line in list(log)[-TAIL:]]
    for line in notes:
        t.say(line)


def checker(kind: str, clean: str) -> Callable[[int, Sequence[str]], Outcome]:
    if kind == "seed_raw":
        return check_seed_raw
    if kind == "seed_cmsafe":
        return lambda rc, lines: check_seed_cmsafe(rc, lines, clean)
    if kind == "seed_compat":
        return check_seed_compat
    return check_program


def clean_text(detect_leaks: str) -> str:
    return "ASan and LSan clean" if detect_leaks == "1" else "ASan clean, LSan off"


def summary(t: Tally) -> str:
    return "c-tests: %d passed, %d failed%s" % (t.passed, t.failed,
                                                 ", %d skipped" % t.apart if t.apart else "")


def sanitizer_env(root: str, detect_leaks: str) -> dict[str, str | None]:
    return {
        "ASAN_OPTIONS": "detect_leaks=%s:halt_on_error=1:color=never" % detect_leaks,
        "LSAN_OPTIONS": "suppressions=%s/c-tests/lsan.supp:print_suppressions=0" % root,
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    }


def main(argv: list[str]) -> int:
    root = guest.project_root()
    os.chdir(root)
    # CTESTS_DIR: the C tests of another build than make c-tests' (scripts/deb-test's, built
    # with pkg-config against the installed packages), whose logs go beside them. The Rust
    # API's test is cargo's, not the packages': counted apart there.
    bin_dir = os.environ.get("CTESTS_DIR") or BIN
    packages = bin_dir != BIN
    logs = os.path.join(bin_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    detect_leaks = os.environ.get("CTESTS_DETECT_LEAKS") or "1"
    if detect_leaks not in ("0", "1"):
        guest.die(PROG, "CTESTS_DETECT_LEAKS is 0 or 1")
    scale = guest.time_scale_of(os.environ.get("RXE_TIME_SCALE"))
    env = proc.environment(sanitizer_env(root, detect_leaks))
    clean = clean_text(detect_leaks)
    t = Tally("c-tests")
    last = time.monotonic()
    tsan_skip = None  # worked out once, before the first TSan program

    def took() -> str:
        nonlocal last
        now = time.monotonic()
        d, last = now - last, now
        return "[%ss]" % proc.secs_text(d)

    for case in CASES:
        if packages and case.argv[0] == "real_stack":
            t.skip(case.name, "the Rust API's test is built by cargo, not against the packages")
            continue
        if case.kind == "tsan":
            if tsan_skip is None:
                with open("/proc/self/maps") as f:
                    tsan_skip = tsan_skip_reason(os.uname().machine, stack_top(f.readlines()),
                                                 os.sysconf("SC_PAGE_SIZE"))
            if tsan_skip:
                t.skip(case.name, "%s %s" % (tsan_skip, took()))
                continue
        log = os.path.join(logs, case.name + ".log")
        r = proc.run([os.path.join(bin_dir, case.argv[0])] + list(case.argv[1:]), log, env=env,
                     timeout=RUN_TIMEOUT * scale, merged=True)
        if r.hung:
            ok, text, notes = False, "no end within %d s, killed (exit status %d)" % (
                RUN_TIMEOUT * scale, r.rc), []
        else:
            ok, text, notes = checker(case.kind, clean)(r.rc, r.out)
        say_outcome(t, case.name, (ok, text, notes), took(), r.out)
    t.say(summary(t))
    return 1 if t.failed else 0
