"""Cost per event and per id life as live cm_ids grow, on the host's stand-in librdmacm, not the
real stack (scripts/scale-host; make scale-host).

tests/host/programs/scale.c holds N ids live (each with one ADDR_RESOLVED got, as a resolved id
has) beside a loop of M id lives (rdma_create_id, an ADDR_RESOLVED queued, got and acked,
rdma_destroy_id) and M plain events of one id that lives throughout, after a warm-up that fills
every bounded table of the preload (audit's quarantine of acked pages, safe mode's kept copies,
the destroyed ids remembered). valgrind's callgrind counts the instructions of the whole
process inside the loop (--toggle-collect of its `measure`; its profile gives each of the two
halves): the program's, the stand-in's, and the preload's or libcmsafe's. The same binary and
input give the same count however busy the machine is. Each N is compared with N=10: a cost that
grows with the ids held shows as a ratio above 1.

    scripts/scale-host [--sizes N,N,...] [--m M] [--warm W] [--modes raw,api,audit,safe]
                       [--variants acked,held,channels] [--out FILE] [--check]

Variants: "acked" (each held id's event acked: the resolved ids of a server), "held" (each
held unacked to the end: the preload's tables of unacked events at their largest), "channels"
(acked, the held ids spread over 1,000 event channels). Memory: each mode and N run again
without valgrind, VmRSS after the warm-up and after the N ids were made, per id, and what each
mode adds over raw. --out FILE: the tables replace the section under HEADING in FILE (the rest,
the guest's sections, stays). --check: exit 1 when a ratio at N over N=10 passes LIMIT.

audit runs under callgrind with CMSAFE_GUARD=mprotect (valgrind has no userfaultfd(2), which
the preload would try first); its memory is measured with either guard.

What the stand-in is not: a kernel. Its queue walk at a destroy (the events of the id still
queued) is as the kernel's, but it has no device, no address resolution and no system calls but
an eventfd's; the real stack's figures are the guest's (bench/results/scale.md, the other
sections).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypeVar

from . import guest as guest_mod

PROG = "scale-host"
USAGE = ("usage: scripts/scale-host [--sizes N,N,...] [--m M] [--warm W] [--modes MODES]\n"
         "                          [--variants VARIANTS] [--out FILE] [--check]")
BIN = "target/host-tests/bin/scale"
PRELOAD = "target/release/libcmsafe_preload.so"
HEADING = "## Host, stand-in librdmacm (not the real stack)"
MODES = ("raw", "api", "audit", "safe")
SIZES = (10, 1000, 10000, 50000)
M = 8192
# 5,000 lives and 5,000 plain events: past audit's quarantine and safe mode's kept copies
# (4,096 each) and the destroyed ids remembered (4,096).
WARM = 5000
LIMIT = 1.10  # the highest ratio to N=10 --check lets through
CHANNELS = 1000
# variant: its argument to scale (hold, channels) and its table's title.
VARIANTS = {
    "acked": ("acked", 1, "each held id's ADDR_RESOLVED acked, one event channel"),
    "held": ("held", 1, "each held id's ADDR_RESOLVED held unacked, one event channel"),
    "channels": ("acked", CHANNELS, "acked, the held ids spread over {:,} event channels"
                 .format(CHANNELS)),
}

T = TypeVar("T")

_NAMED = re.compile(r"\((\d+)\)(?: (.*))?$")


class Failed(Exception):
    """A run that failed or counted nothing: the harness stops, saying which."""


def calls(lines: Sequence[str]) -> list[tuple[str, str, int, int]]:
    """Each call site callgrind's own file records, as (caller, callee, calls made, their
    inclusive instructions): a `calls=COUNT ...` line, then a line with the calls' cost (names
    are compressed: "(id) name" defines an id, "(id)" refers to it)."""
    names: dict[str, str] = {}
    fn = cfn = ""
    pending = 0
    out: list[tuple[str, str, int, int]] = []

    def named(rest: str) -> str:
        m = _NAMED.match(rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "")

    for line in lines:
        if line.startswith("fn="):
            fn = named(line[3:].strip())
        elif line.startswith("cfn="):
            cfn = named(line[4:].strip())
        elif line.startswith("calls="):
            pending = int(line[6:].split()[0])
        elif pending:
            fields = line.split()
            if len(fields) > 1:
                out.append((fn, cfn, pending, int(fields[1])))
            pending = 0
    return out


def calls_from(lines: Sequence[str], parent: str) -> dict[str, int]:
    """The inclusive instructions of each call PARENT makes, by callee."""
    out: dict[str, int] = {}
    for fn, cfn, _, cost in calls(lines):
        if fn == parent:
            out[cfn] = out.get(cfn, 0) + cost
    return out


def calls_to(lines: Sequence[str], callee: str) -> tuple[int, int]:
    """The calls of CALLEE from any caller, and their inclusive instructions."""
    found = [(n, cost) for _, cfn, n, cost in calls(lines) if cfn == callee]
    return sum(n for n, _ in found), sum(cost for _, cost in found)


def environment(mode: str, preload: str) -> dict[str, str]:
    """The process's environment for MODE: no CMSAFE_* or LD_PRELOAD of ours but what MODE
    names ("audit+mprotect": audit with CMSAFE_GUARD=mprotect)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CMSAFE_") and k != "LD_PRELOAD"}
    if mode in ("raw", "api"):
        return env
    cmsafe_mode, _, guard = mode.partition("+")
    env.update({"LD_PRELOAD": preload, "CMSAFE_MODE": cmsafe_mode, "CMSAFE_LOG": "error"})
    if guard:
        env["CMSAFE_GUARD"] = guard
    return env


def argv_of(binary: str, mode: str, n: int, m: int, warm: int, hold: str,
            channels: int) -> list[str]:
    return [binary, "api" if mode == "api" else "raw", str(n), str(m), str(warm), hold,
            str(channels)]


@dataclass
class Count:
    life: float  # instructions per id life
    event: float  # per plain event


def count(binary: str, preload: str, mode: str, n: int, m: int, warm: int, hold: str,
          channels: int, workdir: str) -> Count:
    """Instructions per id life and per event of the loop, with N ids held (callgrind)."""
    profile = os.path.join(workdir, "scale-%s-%d-%s-%d.cg" % (mode, n, hold, channels))
    # audit's first guard, userfaultfd(2), is a system call valgrind does not know.
    run_mode = "audit+mprotect" if mode == "audit" else mode
    argv = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=measure",
            "--callgrind-out-file=" + profile] + argv_of(binary, mode, n, m, warm, hold, channels)
    p = subprocess.run(argv, env=environment(run_mode, preload), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, errors="replace")
    if p.returncode != 0 or "done %d %d" % (n, m) not in p.stdout.splitlines():
        raise Failed("%s (%s) failed, status %d:\n%s%s" % (" ".join(argv[5:]), mode, p.returncode,
                                                          p.stdout[-2000:], p.stderr[-2000:]))
    with open(profile) as f:
        calls = calls_from(f.read().splitlines(), "measure")
    os.unlink(profile)
    lives, events = calls.get("measure_lives"), calls.get("measure_events")
    if not lives or not events:
        raise Failed("%s (%s): no instructions counted inside measure (%s)" % (
            " ".join(argv[5:]), mode, calls))
    return Count(lives / m, events / m)


_RSS = re.compile(r"^rss before=(\d+) ids=(\d+) end=(\d+)$")


def memory(binary: str, preload: str, mode: str, n: int, warm: int, hold: str) -> int:
    """The resident memory the N ids hold, in bytes (VmRSS after them less before them), run
    without valgrind."""
    argv = argv_of(binary, mode, n, 0, warm, hold, 1)
    p = subprocess.run(argv, env=environment(mode, preload), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, errors="replace")
    rss = [m for m in map(_RSS.match, p.stdout.splitlines()) if m]
    if p.returncode != 0 or len(rss) != 1:
        raise Failed("%s (%s) failed, status %d:\n%s%s" % (" ".join(argv), mode, p.returncode,
                                                          p.stdout[-2000:], p.stderr[-2000:]))
    return (int(rss[0].group(2)) - int(rss[0].group(1))) * 1024


def ratio_text(v: float, base: float) -> str:
    return "%.3f" % (v / base)


def cost_table(counts: dict[tuple[str, int], Count], modes: Sequence[str],
               sizes: Sequence[int], held: str = "live ids",
               unit: str = "id life") -> tuple[list[str], list[str]]:
    """The table of one variant (HELD beside each life, a UNIT), and the ratios past LIMIT
    (each said)."""
    lines = ["| mode | %s | instructions per %s | at N / at %d | instructions per "
             "event | at N / at %d |" % (held, unit, sizes[0], sizes[0]),
             "|---|---:|---:|---:|---:|---:|"]
    over = []
    for mode in modes:
        base = counts[(mode, sizes[0])]
        for n in sizes:
            c = counts[(mode, n)]
            lines.append("| %s | %d | %.0f | %s | %.0f | %s |" % (
                mode, n, c.life, ratio_text(c.life, base.life), c.event,
                ratio_text(c.event, base.event)))
            for what, v, b in ((unit, c.life, base.life), ("event", c.event, base.event)):
                if v / b > LIMIT:
                    over.append("%s at %d %s: %.0f instructions per %s, %.3f times those at %d"
                                % (mode, n, held.split()[-1], v, what, v / b, sizes[0]))
    return lines, over


# The fewest ids whose memory is told per id: below, a table's doubling (its buckets a power of
# two) and a page's rounding are most of the figure.
MEMORY_FROM = 10000
# The first look's method: 200 ids and 20,000, no warm-up before them, per id between the two.
FIRST_LOOK = (200, 20000)


def memory_table(rss: dict[tuple[str, str, int], int], modes: Sequence[str],
                 sizes: Sequence[int], holds: Sequence[str]) -> list[str]:
    """Bytes of resident memory per held id, and over raw's, at each N from MEMORY_FROM."""
    lines = ["| mode | event of each id | live ids | bytes per id | over raw, per id |",
             "|---|---|---:|---:|---:|"]
    for hold in holds:
        for mode in modes:
            for n in sizes:
                if n < MEMORY_FROM:
                    continue
                per = rss[(hold, mode, n)] / n
                raw = rss[(hold, "raw", n)] / n
                lines.append("| %s | %s | %d | %.0f | %s |" % (
                    mode, hold, n, per, "(baseline)" if mode == "raw" else "%+.0f" % (per - raw)))
    return lines


def first_look_table(rss: dict[tuple[str, int], int], modes: Sequence[str]) -> list[str]:
    """Bytes per id between FIRST_LOOK's two sizes, without a warm-up, and over raw's."""
    few, many = FIRST_LOOK
    lines = ["| mode | bytes per id, %d to %d ids | over raw, per id |" % (few, many),
             "|---|---:|---:|"]
    per = {mode: (rss[(mode, many)] - rss[(mode, few)]) / (many - few) for mode in modes}
    for mode in modes:
        lines.append("| %s | %.0f | %s |" % (mode, per[mode], "(baseline)" if mode == "raw"
                                            else "%+.0f" % (per[mode] - per["raw"])))
    return lines


def section(body: list[str], m: int, warm: int) -> list[str]:
    return [HEADING, "",
            "`make scale-host` (scripts/scale-host): tests/host/programs/scale.c on the stand-in "
            "librdmacm of the host tests (tests/host/standin), not a kernel: no device, no "
            "address resolution. User-space instructions per loop iteration of the whole process "
            "(the program, the stand-in, and the preload or libcmsafe), counted by valgrind's "
            "callgrind inside the loop only: %d id lives (rdma_create_id, an ADDR_RESOLVED "
            "queued, got and acked, rdma_destroy_id) and %d plain events of one id, after %d of "
            "each to warm up, with N ids held live beside them. A ratio above 1 is a cost that "
            "grows with the ids held. audit runs with CMSAFE_GUARD=mprotect under callgrind "
            "(valgrind has no userfaultfd). api: cmsafe_get_event and cmsafe_event_release "
            "instead of rdma_get_cm_event and rdma_ack_cm_event. safe mode's figures move by a few "
            "percent with where the loop falls among the compactions of its kept copies' ring "
            "and index (bounded work, every few thousand events), not with N." % (m, m, warm),
            ""] + body


def replace_section(path: str, new: list[str], heading: str = HEADING) -> None:
    """Writes NEW in place of FILE's section under HEADING (to the next "## " heading), or at
    its end; the rest of FILE stays."""
    try:
        with open(path) as f:
            old = f.read().splitlines()
    except FileNotFoundError:
        old = ["# Live cm_ids by the thousand: cost and memory as they grow", ""]
    start = next((i for i, line in enumerate(old) if line == heading), None)
    if start is None:
        out = old + ([""] if old and old[-1] else []) + new
    else:
        end = next((i for i in range(start + 1, len(old)) if old[i].startswith("## ")), len(old))
        out = old[:start] + new + ([""] + old[end:] if end < len(old) else [])
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out).rstrip("\n") + "\n")


@dataclass
class Options:
    sizes: list[int] = field(default_factory=lambda: list(SIZES))
    m: int = M
    warm: int = WARM
    modes: list[str] = field(default_factory=lambda: list(MODES))
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    out: str | None = None
    check: bool = False


def numbers(what: str, text: str) -> list[int]:
    """TEXT's comma-separated whole numbers, each above 0; or exit 2 saying what WHAT takes."""
    v = [int(x) for x in text.split(",") if x.isdigit()]
    if len(v) != len(text.split(",")) or any(x < 1 for x in v):
        guest_mod.die(PROG, "%s takes whole numbers above 0, comma-separated, not %s"
                      % (what, text))
    return v


def one_number(what: str, text: str) -> int:
    v = numbers(what, text)
    if len(v) != 1:
        guest_mod.die(PROG, "%s takes one whole number above 0, not %s" % (what, text))
    return v[0]


def some_of(what: str, text: str, known: Sequence[str]) -> list[str]:
    v = text.split(",")
    if any(x not in known for x in v):
        guest_mod.die(PROG, "%s takes some of %s, not %s" % (what, ",".join(known), text))
    return v


def with_raw(what: str, text: str) -> list[str]:
    v = some_of(what, text, MODES)
    if "raw" not in v:
        guest_mod.die(PROG, "%s takes raw, every other mode's base, not %s" % (what, text))
    return v


# Each option that takes a value: what it sets from it.
SETTERS = {
    "--sizes": lambda o, v: setattr(o, "sizes", sorted(set(numbers("--sizes", v)))),
    "--m": lambda o, v: setattr(o, "m", one_number("--m", v)),
    "--warm": lambda o, v: setattr(o, "warm", one_number("--warm", v)),
    "--modes": lambda o, v: setattr(o, "modes", with_raw("--modes", v)),
    "--variants": lambda o, v: setattr(o, "variants", some_of("--variants", v, list(VARIANTS))),
    "--out": lambda o, v: setattr(o, "out", v),
}


def parse_into(o: T, argv: Sequence[str], setters: dict[str, Callable[[T, str], None]],
               flags: dict[str, Callable[[T], None]]) -> T | None:
    """O with ARGV applied (SETTERS for an option with a value, FLAGS for one without); None
    for one not known, or without its value."""
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in flags:
            flags[a](o)
        elif a in setters and args:
            setters[a](o, args.pop(0))
        else:
            return None
    return o


def options(argv: Sequence[str]) -> Options | None:
    """The options ARGV gives; None for one not known, or without its value."""
    return parse_into(Options(), argv, SETTERS, {"--check": lambda o: setattr(o, "check", True)})


def main(argv: Sequence[str]) -> int:
    os.environ["LC_ALL"] = "C"
    os.chdir(guest_mod.project_root())
    o = options(argv)
    if o is None:
        print(USAGE, file=sys.stderr)
        return 2
    sizes, m, warm, modes, variants = o.sizes, o.m, o.warm, o.modes, o.variants
    for need, how in ((BIN, "make host-tests"), (PRELOAD, "make preload")):
        if not os.path.exists(need):
            guest_mod.die(PROG, "%s is missing (%s)" % (need, how), 1)
    if not shutil.which("valgrind"):
        guest_mod.die(PROG, "valgrind is missing (scripts/setup-deps)", 1)
    binary, preload = os.path.abspath(BIN), os.path.abspath(PRELOAD)

    body: list[str] = []
    over: list[str] = []
    workdir = tempfile.mkdtemp(prefix="cmsafe-scale-")
    try:
        for variant in variants:
            hold, channels, title = VARIANTS[variant]
            counts = {}
            for mode in modes:
                for n in sizes:
                    counts[(mode, n)] = count(binary, preload, mode, n, m, warm, hold, channels,
                                              workdir)
                    print("%s %s %d: %.0f per id life, %.0f per event" % (
                        variant, mode, n, counts[(mode, n)].life, counts[(mode, n)].event),
                        file=sys.stderr, flush=True)
            lines, past = cost_table(counts, modes, sizes)
            body += ["### Instructions, %s" % title, ""] + lines + [""]
            over += ["%s: %s" % (variant, p) for p in past]
        holds = [h for h in ("acked", "held") if h in variants]
        mem_modes = [x for x in modes if x != "audit"] + (
            ["audit", "audit+mprotect"] if "audit" in modes else [])
        mem_modes.sort(key=lambda x: (x != "raw", x))
        if holds and [n for n in sizes if n >= MEMORY_FROM]:
            rss = {(hold, mode, n): memory(binary, preload, mode, n, warm, hold)
                   for hold in holds for mode in mem_modes for n in sizes if n >= MEMORY_FROM}
            body += ["### Resident memory per live id",
                     "",
                     "VmRSS after the N ids were made less VmRSS after the warm-up, over N, "
                     "without valgrind (audit with userfaultfd, the guard it takes as root, and "
                     "with CMSAFE_GUARD=mprotect). What a mode holds whatever the ids "
                     "(audit's quarantine of 4,096 acked pages, safe mode's 4,096 kept copies) "
                     "was reached in the warm-up and is not in these figures.",
                     ""] + memory_table(rss, mem_modes, sizes, holds) + [""]
        if "acked" in variants:
            first = {(mode, n): memory(binary, preload, mode, n, 0, "acked")
                     for mode in mem_modes for n in FIRST_LOOK}
            body += ["### The same without a warm-up",
                     "",
                     "%d ids and %d, acked, no loop run before them: per id between the two, "
                     "each mode's fixed memory filled by the ids' own events (audit's "
                     "quarantine, safe mode's kept copies and their index) counted in."
                     % FIRST_LOOK,
                     ""] + first_look_table(first, mem_modes) + [""]
    except Failed as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    new = section(body, m, warm)
    print("\n".join(new))
    if o.out:
        replace_section(o.out, new)
    for line in over:
        print("%s: past %.2f: %s" % (PROG, LIMIT, line), file=sys.stderr)
    return 1 if over and o.check else 0
