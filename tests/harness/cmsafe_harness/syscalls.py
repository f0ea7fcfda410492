"""System calls per event, raw librdmacm against the cmsafe API and the preload, counted in the
guest (scripts/syscall-count; make syscall-test, make syscall-bench).

Run inside scripts/rxe-vm; needs target/bench/syscall_loop and, for the preload rows,
target/release/libcmsafe_preload.so. Each loop of bench/syscall_loop.c runs under `strace -f`;
only the calls between its two marker writes are counted (the warm-up before them fills cmsafe's
pools), per system call name, divided by the events in the window. A count is deterministic, so
each API row has an exact budget: its extra calls per event over its raw loop, by name. Prints a
markdown table with each target and met / NOT met.

    scripts/syscall-count [--events N] [--warmup N] [--check] [--cq-only]

--check: exit 1 if any row is off its budget. --cq-only: only the completion-event rows.

Only the thread that wrote the markers counts: the program's own path. Calls of other threads in
the window (the preload's hang watcher, per tick and not per event) go to LABEL.others, said
under the table.

The system call behind poll(2) is the C library's choice, by architecture: poll where the kernel
has one (x86_64), ppoll where it has none (aarch64: glibc's poll() calls ppoll with the timeout
converted). The raw-nb loop calls poll() before each get, so its trace names it; the timed rows'
budgets are in that name.

The preload's rows run in its steady state: past the first 4096 acks, where safe mode's kept
copies and audit mode's quarantined pages stop growing (their memory is not a per-event cost).
Budgets: safe mode adds nothing. Audit with CMSAFE_GUARD=mprotect adds the guard page's seal at
each ack (mprotect), and opens the pages ahead in runs of 64 (per run, one mprotect and one
madvise(MADV_POPULATE_WRITE) that spares each page its write fault): S seals per iteration plus,
for the E events in the window, floor(E/64) or ceil(E/64) runs (where the window falls decides
which). Audit's default where the kernel gives userfaultfd (these guests run as root) adds a
seal's madvise(MADV_DONTNEED) per ack and nothing else: its pages, once opened, stay accessible,
and the fault thread fills each run at its first touch (its calls are another thread's). The life
rows (per id, two events each) go through the wrapped rdma_create_id and rdma_destroy_id too,
and the destroy's hang watcher: safe mode adds nothing there either; audit adds the two seals
(and, with mprotect, its page runs).

Completion events: the same rounds of c-tests/preload/preload_cq_loop.c raw and under the
preload; it counts each CQ's events got and acked with no system call of its own, in either mode.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from typing import Callable, Iterable, Optional, Sequence

from . import guest as guest_mod
from . import proc

PROG = "syscall-count"
USAGE = "usage: scripts/syscall-count [--events N] [--warmup N] [--check] [--cq-only]"
BIN = "target/bench/syscall_loop"
CQ_BIN = "target/preload-tests/preload_cq_loop"
CQ_EVENTS = 100
CQ_WARMUP = 10
PRELOAD = "target/release/libcmsafe_preload.so"
OUT = "target/bench/syscalls"

# The API rows: label, mode, base, budget (extra calls per event, by name; POLL is the C
# library's name for poll(2)'s call), target.
API_ROWS = [
    ("api", "api", "raw", "none", "blocking cmsafe_get_event: 0 extra"),
    ("api-forever", "api-forever", "raw", "none", "cmsafe_get_event_timeout(-1): 0 extra"),
    ("api-timed", "api-timed", "raw", "POLL +1",
     "timed wait on a blocking channel: at most 1 poll per call"),
    ("api-batch", "api-batch", "raw", "POLL +2",
     "blocking batch, timed: 1 poll to wait, 1 per further event tried (here: the one that finds it empty)"),
    ("api-nb", "api-nb", "raw-nb", "none", "O_NONBLOCK cmsafe_get_event: 0 extra"),
    ("api-nb-batch", "api-nb-batch", "raw-nb", "none",
     "O_NONBLOCK cmsafe_get_events(64, 0), drained to a short count: 0 extra"),
    ("api-nb-batch0", "api-nb-batch0", "raw-nb", "write +1",
     "(no target) the same drained until 0: the last call's EAGAIN, once per wakeup"),
    ("api-life", "api-life", "raw-life", "none",
     "an id's whole life on the API (create, two resolutions, destroy): 0 extra"),
]
# The preload's rows: mode, loop, warm-up, seals per iteration and events per iteration (None:
# no budget but none).
# (preload mode, raw loop, warm-up, seals per iteration and events per iteration; None for no
# extra call at all). "audit" is audit with CMSAFE_GUARD=mprotect (its pages closed by mprotect,
# opened in runs); "audit-uffd" is audit's default where the kernel gives userfaultfd (the guests
# run as root): a seal empties its page (madvise MADV_DONTNEED), and the runs cost the program's
# thread nothing once opened (the fault thread fills them).
PRELOAD_ROWS = [
    ("safe", "raw", 4200, None),
    ("audit", "raw", 4200, (1, 1)),
    ("audit-uffd", "raw", 4200, (1, 1)),
    ("safe", "raw-life", 2100, None),
    ("audit", "raw-life", 2100, (2, 2)),
    ("audit-uffd", "raw-life", 2100, (2, 2)),
]
PAGE_RUN = 64  # pages audit mode opens ahead at once
MODE_TEXT = {
    "safe": "CMSAFE_MODE=safe",
    "audit": "CMSAFE_MODE=audit CMSAFE_GUARD=mprotect",
    "audit-uffd": "CMSAFE_MODE=audit (userfaultfd)",
}

_CALL = re.compile(r"^([0-9]+ +)?([a-z_0-9]+)\(")
_RESUMED = re.compile(r"<\.\.\. [a-z_0-9]+ resumed>")

Counts = dict  # system call name -> calls


def parse_trace(lines: Iterable[str], marker: str) -> tuple[Counts, Counts]:
    """strace -f's lines: the calls made between MARKER's begin and end writes, by name, of the
    thread that wrote the begin marker, and apart those of the other threads. A call cut by
    another thread's line counts once, at its start (its "resumed" line is not a call)."""
    begin = 'write(-1, "%s: begin"' % marker
    end = 'write(-1, "%s: end"' % marker
    main: Counts = {}
    others: Counts = {}
    on = False
    main_tid = ""
    for line in lines:
        words = line.split(None, 1)
        tid = words[0] if words and words[0].isdigit() else ""
        if begin in line:
            on = True
            main_tid = tid
            continue
        if end in line:
            on = False
        if _RESUMED.search(line):
            continue
        m = _CALL.match(line) if on else None
        if m:
            into = main if tid == main_tid else others
            into[m.group(2)] = into.get(m.group(2), 0) + 1
    return main, others


def counts_lines(counts: Counts) -> list[str]:
    """LABEL.counts: "name count" lines, sorted."""
    return sorted("%s %d" % kv for kv in counts.items())


def read_counts(lines: Iterable[str]) -> Counts:
    out: Counts = {}
    for line in lines:
        name, n = line.split()
        out[name] = int(n)
    return out


def _diffs(counts: Counts, base: Counts) -> list[tuple[str, int]]:
    return [(name, counts.get(name, 0) - base.get(name, 0)) for name in sorted(set(counts) | set(base))]


def extra(counts: Counts, base: Counts, n: int) -> str:
    """"name +x.xx, ..." for every name whose count per event differs from BASE's; "none" if none."""
    parts = ["%s %+.4g" % (name, d / n) for name, d in _diffs(counts, base) if d != 0]
    return ", ".join(parts) if parts else "none"


def total(counts: Counts, n: int) -> str:
    return "%.2f" % (sum(counts.values()) / n)


def others_text(others: Counts) -> str:
    """"name count, ..." of the calls other threads made in the window; empty if none."""
    return ", ".join("%s %d" % kv for kv in sorted(others.items()))


def seals_ok(counts: Counts, base: Counts, n: int, seals: int, per: int) -> bool:
    """Whether the calls over BASE are only mprotect, SEALS per iteration plus the window's page
    runs, and one madvise per run."""
    m = a = 0
    for name, d in _diffs(counts, base):
        if name == "mprotect":
            m = d
        elif name == "madvise":
            a = d
        elif d != 0:
            return False
    e = n * per
    runs = m - seals * n
    return e // PAGE_RUN <= runs <= (e + PAGE_RUN - 1) // PAGE_RUN and a == runs


def emptied_ok(counts: Counts, base: Counts, n: int, seals: int, per: int) -> bool:
    """Whether the calls over BASE are exactly SEALS madvise calls per iteration (userfaultfd's
    seals) and nothing else."""
    del per
    # Only the calls whose counts differ: a call both loops make as often (write) is no extra.
    return {name: d for name, d in _diffs(counts, base) if d != 0} == {"madvise": seals * n}


def preload_env(preload: str, mode: str) -> list[str]:
    """strace's -E options for the preload in MODE ("safe", "audit": audit with
    CMSAFE_GUARD=mprotect, "audit-uffd": audit's default guard)."""
    opts = ["-E", "LD_PRELOAD=" + preload, "-E", "CMSAFE_MODE=" + mode.split("-")[0],
            "-E", "CMSAFE_LOG=error"]
    if mode == "audit":
        opts += ["-E", "CMSAFE_GUARD=mprotect"]
    return opts


class Failed(Exception):
    """A loop that did not run: the harness stops with the loop's log on stderr."""


# A loop's counts: (label, mode, preload mode or None, warm-up) -> (calls, other threads' calls).
CountFn = Callable[[str, str, Optional[str], int], "tuple[Counts, Counts]"]


def report(count: CountFn, say: Callable[[str], None], events: int, warmup: int, cq_only: bool,
           preload_built: bool, cq_built: bool) -> bool:
    """The table, said line by line as the loops are counted; True when a row is off its
    budget. COUNT runs (or, on the host, reads) one loop."""
    failed = False
    c: dict[str, Counts] = {}
    if not cq_only:
        for label in ("raw", "raw-nb", "raw-life"):
            c[label] = count(label, label, None, warmup)[0]
        poll = next((name for name in sorted(c["raw-nb"]) if name in ("poll", "ppoll")), None)
        if poll is None:
            raise Failed("the raw-nb loop made neither poll nor ppoll calls")
        say("System calls per event, %d ADDR_RESOLVED events (rdma_resolve_addr of $RXE_ADDR, one "
            "at a time) after %d warm-up events, and per id for the life rows (%d ids); `strace "
            "-f`, only the calls the program's thread made between bench/syscall_loop.c's "
            "markers; extra = per-name difference from the matching raw loop." % (events, warmup, events))
        say("")
        say("| loop | calls/event | extra over raw, by call | budget | target | met |")
        say("|---|---:|---|---|---|---|")
        say("| raw: rdma_get_cm_event + rdma_ack_cm_event (blocking) | %s | (baseline) | | | |"
            % total(c["raw"], events))
        say("| raw-nb: poll, then rdma_get_cm_event until EAGAIN (O_NONBLOCK) | %s | (baseline) | | | |"
            % total(c["raw-nb"], events))
        say("| raw-life: per id, rdma_create_id, rdma_resolve_addr + get + ack, rdma_resolve_route "
            "+ get + ack, rdma_destroy_id (calls per id, not per event) | %s | (baseline) | | | |"
            % total(c["raw-life"], events))
        for label, mode, base, budget, target in API_ROWS:
            c[label] = count(label, mode, None, warmup)[0]
            got = extra(c[label], c[base], events)
            want = budget.replace("POLL", poll)
            met = "met" if got == want else "NOT met"
            failed |= got != want
            say("| %s (vs %s) | %s | %s | %s | %s | %s |"
                % (label, base, total(c[label], events), got, want, target, met))
        if preload_built:
            for mode, base, warm, seals in PRELOAD_ROWS:
                label = "preload-" + mode + base[len("raw"):]
                counts, others = count(label, base, mode, warm)
                got = extra(counts, c[base], events)
                if seals is None:
                    want = "none"
                    ok = got == "none"
                elif mode == "audit-uffd":
                    want = "madvise +%d per iteration" % seals[0]
                    ok = emptied_ok(counts, c[base], events, *seals)
                else:
                    want = ("mprotect +%d per iteration + the page runs (1 per 64 events), "
                            "madvise 1 per run" % seals[0])
                    ok = seals_ok(counts, c[base], events, *seals)
                failed |= not ok
                bg = others_text(others)
                say("| %s under the preload, %s, after %d warm-up %s (vs %s) | %s | %s%s "
                    "| %s | safe 0, audit its guard's call per seal | %s |"
                    % (base, MODE_TEXT[mode], warm, "events" if base == "raw" else "ids", base,
                       total(counts, events), got, " (other threads: %s)" % bg if bg else "",
                       want, "met" if ok else "NOT met"))
        else:
            say("| preload | | (target/release/libcmsafe_preload.so not built: make preload) | | | |")
            failed = True
    else:
        say("System calls per completion event; `strace -f`, only the calls between "
            "c-tests/preload/preload_cq_loop.c's markers; extra = per-name difference from the "
            "raw loop.")
        say("")
        say("| loop | calls/event | extra over raw, by call | budget | target | met |")
        say("|---|---:|---|---|---|---|")
    if cq_built and preload_built:
        raw = count("cq-raw", "cq", None, CQ_WARMUP)[0]
        say("| cq-raw: ibv_req_notify_cq, a send, ibv_get_cq_event, ibv_poll_cq, ibv_ack_cq_events "
            "(%d rounds after %d) | %s | (baseline) | | | |" % (CQ_EVENTS, CQ_WARMUP, total(raw, CQ_EVENTS)))
        for mode in ("safe", "audit"):
            counts = count("cq-preload-" + mode, "cq", mode, CQ_WARMUP)[0]
            got = extra(counts, raw, CQ_EVENTS)
            failed |= got != "none"
            say("| the same under the preload, CMSAFE_MODE=%s (vs cq-raw) | %s | %s | none | "
                "no system call per completion event | %s |"
                % (mode, total(counts, CQ_EVENTS), got, "met" if got == "none" else "NOT met"))
    else:
        say("| cq | | (%s or the preload not built: make preload preload-tests) | | | |" % CQ_BIN)
        failed = True
    say("")
    say("Traces: %s/*.trace (the guest's writes to target/ come back to the host)." % OUT)
    return failed


def strace_count(events: int, preload: str) -> CountFn:
    """Runs one loop under strace -f in the guest and counts its trace (LABEL.trace, .log,
    .counts and .others in OUT)."""

    def count(label: str, mode: str, preload_mode: str | None, warmup: int) -> tuple[Counts, Counts]:
        if mode == "cq":
            cmd, marker, n = [CQ_BIN, str(CQ_EVENTS), str(CQ_WARMUP)], "cq_loop", CQ_EVENTS
        else:
            cmd, marker, n = [BIN, mode, str(events), str(warmup)], "syscall_loop", events
        opts = [] if preload_mode is None else preload_env(preload, preload_mode)
        base = os.path.join(OUT, label)
        rc = proc.run_to(["strace", "-f", "-qq", "-o", base + ".trace"] + opts + cmd, base + ".log")
        log = proc.read_lines(base + ".log")
        if rc != 0 or "events %d" % n not in log:
            raise Failed("%s failed:" % label, log)
        counts, others = parse_trace(proc.read_lines(base + ".trace"), marker)
        with open(base + ".counts", "w") as f:
            f.writelines(line + "\n" for line in counts_lines(counts))
        if os.path.exists(base + ".others"):
            os.unlink(base + ".others")
        if others:
            with open(base + ".others", "w") as f:
                f.writelines("%s %d\n" % kv for kv in others.items())
        return counts, others

    return count


def _number(prog: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        guest_mod.die(prog, "%s: not a whole number" % value)
    return int(value)


def main(argv: Sequence[str]) -> int:
    events, warmup, check, cq_only = 400, 50, False, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("--events", "--warmup") and args:
            v = _number(PROG, args.pop(0))
            if a == "--events":
                events = v
            else:
                warmup = v
        elif a == "--check":
            check = True
        elif a == "--cq-only":
            cq_only = True
        else:
            print(USAGE, file=sys.stderr)
            return 2
    os.environ["LC_ALL"] = "C"
    os.chdir(guest_mod.project_root())
    if not os.environ.get("RXE_ADDR"):
        guest_mod.die(PROG, "run inside scripts/rxe-vm", 1)
    os.makedirs(OUT, exist_ok=True)
    if not shutil.which("strace"):
        guest_mod.die(PROG, "strace is missing", 1)
    preload = os.path.abspath(PRELOAD)
    return execute(strace_count(events, preload), events, warmup, check, cq_only,
                   os.path.isfile(preload), os.access(CQ_BIN, os.X_OK))


def execute(count: CountFn, events: int, warmup: int, check: bool, cq_only: bool,
            preload_built: bool, cq_built: bool) -> int:
    """The table on stdout; the exit status: 1 when a loop failed, or under CHECK when a row is
    off its budget."""

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        failed = report(count, say, events, warmup, cq_only, preload_built, cq_built)
    except Failed as e:
        print("%s: %s" % (PROG, e.args[0]), file=sys.stderr)
        for line in e.args[1] if len(e.args) > 1 else []:
            print(line, file=sys.stderr)
        return 1
    if check and failed:
        print("%s: a row is off its budget" % PROG, file=sys.stderr)
        return 1
    return 0
