"""Cost and memory as live cm_ids grow, on the real stack: Soft-RoCE in the guest
(scripts/scale-live; make bench-scale, and a counted slice in make test).

bench/scale_live.c holds N ids live, each resolved (its ADDR_RESOLVED got; acked, or held to the
end), after a warm-up that fills the preload's bounded tables (audit's quarantine, safe mode's
kept copies, 4,096 events each), then times M id lives beside them (create, resolve the address
and the route, an event each, destroy), the get and ack of each event timed once its fd is
readable. Raw librdmacm, the API, audit and safe run the same program in the same guest, one
after another, each size RUNS times (the median kept: under emulation one run's times move by
a third either way, as a whole); every size is compared with 10 ids, and each mode's growth with
raw's own. --counts: the same loop's user-space instructions (the program, librdmacm and
libibverbs, and the preload or libcmsafe; not the kernel's), counted by callgrind inside the
timed lives only, at each of those sizes: deterministic where the times are not; a section of
its own (COUNT_HEADING). --mimic: cmtime's mimic mode (-m 0, rdma-core 56 and later: trixie's
root, scripts/rxe-vm --stack trixie) setting up N connections with no QP, past the device's QPs;
a section of its own too (MIMIC_HEADING). --own: VmRSS per live id beside the preload's own
account of its memory (its exit summary's "own memory at its most"), each over 10 ids, with
the held ids' events acked and held (OWN_HEADING). --only counts|mimic|own: that section
alone; --only time: the time tables of --variants alone, the rest of the section as it was.

    scripts/scale-live [--sizes N,N,...] [--m M] [--warm W] [--runs R] [--modes MODES]
                       [--variants VARIANTS] [--pending P,P,...] [--limit IDS]
                       [--setup N,N,...] [--counts N,N,...] [--mimic N,N,...]
                       [--own N,N,...] [--only counts|mimic|own|time] [--out FILE]
                       [--plots DIR] [--slice]

Variants: "acked" (one event channel, each held id's event acked), "channels" (the held ids
over 1,000 channels), "threads" (16 threads each running lives on a channel of its own),
"held" (each held id's ADDR_RESOLVED unacked to the end). --pending: rdma_destroy_id timed on a
channel with P events pending in the kernel. --limit: ids made past librdmacm's 65,535-entry
table, and events of the first and last made checked to name their own id. --setup: cmtime
(rdmacm-utils) setting up N connections at once, raw and under the preload (0: none). --out FILE: the
tables replace the section under HEADING in FILE; --plots DIR: an SVG per figure there.

--slice (make test): 10 and 5,000 live ids, 1,000 events pending, 70,000 ids made, every mode;
what it holds are counts: every event of the id it names (the program checks), every pending
event got afterwards, as many ids made in each mode as raw, and what each mode adds per live id
(VmRSS, pages) at most MEMORY_LIMIT bytes over raw. The times are printed, never held.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Sequence

from . import cm_setup
from . import guest as guest_mod
from . import plot, scale_host

PROG = "scale-live"
USAGE = ("usage: scripts/scale-live [--sizes N,N,...] [--m M] [--warm W] [--runs R] "
         "[--modes MODES]\n"
         "                          [--variants VARIANTS] [--pending P,P,...] [--limit IDS]\n"
         "                          [--setup N,N,...] [--counts N,N,...] [--mimic N,N,...]\n"
         "                          [--own N,N,...] [--only counts|mimic|own|time] [--out FILE]\n"
         "                          [--plots DIR] [--slice]")
BIN = "target/bench/scale_live"
PRELOAD, MODES, SIZES = scale_host.PRELOAD, scale_host.MODES, scale_host.SIZES
HEADING = "## Real stack, Soft-RoCE in the guest"
COUNT_HEADING = "## Real stack, instructions counted in the guest"
MIMIC_HEADING = "## Real stack, cmtime's mimic mode (rdma-core 56 and later)"
OWN_HEADING = "## Real stack, the preload's own memory"
OWN_VARIANTS = ("acked", "held")
M = 1000
# 2,100 lives are 4,200 events: past audit's quarantine and safe mode's kept copies (4,096).
WARM = 2100
RUNS = 3
COUNT_M = 200  # id lives counted under callgrind (its instructions per life do not vary)
VALGRIND = "valgrind"
PENDING = (0, 100, 1000, 10000)
DESTROYS = 200  # ids destroyed, each timed, beside the pending events
LIMIT_IDS = 70000  # past librdmacm's table of 65,535 (its IDX_MAX_INDEX)
SAMPLE = 1000  # of the first and of the last ids made, resolved and checked
SETUP = (1000, 4000)  # connections cmtime sets up at once
MIMIC_SERVER_QPN = 1 << 20  # the server's first QP number in mimic mode: past the client's
SETUP_MODES = ("raw", "safe", "audit")  # cmtime has no API column: it is raw librdmacm
MEMORY_LIMIT = 256  # bytes per live id a mode may add over raw (the slice holds it)
TIMEOUT = 1800
# variant: (hold, channels, threads, title)
VARIANTS = {
    "acked": ("acked", 1, 1, "one event channel, each held id's ADDR_RESOLVED acked"),
    "channels": ("acked", 1000, 1, "the held ids over 1,000 event channels, acked"),
    "threads": ("acked", 1, 16, "16 threads running the lives, each on a channel of its own"),
    "held": ("held", 1, 1, "one event channel, each held id's ADDR_RESOLVED held unacked"),
}


# Each resolved id holds a local port of the rdma_cm's port space, taken from the kernel's
# ephemeral range (net.ipv4.ip_local_port_range, 28,232 ports by default): past that many
# resolved ids on one address rdma_resolve_addr fails with EADDRNOTAVAIL, raw or not. A run
# that needs more widens the range in the guest for its time.
PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
WIDE_RANGE = "1024 65535"


def ports_needed(o: "Options") -> int:
    """The most resolved ids a run holds at once: the N ids, the warm-up's, the lives' own."""
    return max(o.sizes + o.counts, default=0) + 2 * o.warm + 64


def widen_ports(need: int) -> str | None:
    """The port range as it was, when it had to be widened for NEED ports; None otherwise."""
    with open(PORT_RANGE) as f:
        old = f.read().split()
    if int(old[1]) - int(old[0]) + 1 >= need:
        return None
    with open(PORT_RANGE, "w") as f:
        f.write(WIDE_RANGE)
    return " ".join(old)


class Failed(Exception):
    """A run that failed or printed no figures: the harness stops, saying which."""


@dataclass
class Live:
    life_ns: int
    event_ns: int
    cpu_us: int
    rss_kb: tuple[int, int]
    slab_kb: tuple[int, int]

    def per_id(self, n: int) -> float:
        """VmRSS the N ids added, in bytes per id."""
        return (self.rss_kb[1] - self.rss_kb[0]) * 1024 / n

    def slab_per_id(self, n: int) -> float:
        return (self.slab_kb[1] - self.slab_kb[0]) * 1024 / n


_LIVE = re.compile(r"^live n=\d+ m=\d+ threads=\d+ life_ns=(\d+) event_ns=(\d+) cpu_us=(\d+) "
                   r"rss_kb=(\d+),(\d+) slab_kb=(\d+),(\d+)$")
_PENDING = re.compile(r"^pending p=(\d+) k=\d+ destroy_ns=(\d+) got=(\d+)$")
_LIMIT = re.compile(r"^limit made=(\d+) errno=(\S+) resolved=(\d+) wrong=(\d+)$")
_OWN = re.compile(r"^==cmsafe==   own memory at its most: tables (\d+) KiB, copies (\d+) KiB"
                  r"(?:, audit pages (\d+))?$")


def run(mode: str, args: Sequence[str], pattern: re.Pattern[str]) -> re.Match[str]:
    """scale_live ARGS under MODE; the match of PATTERN in its output, or Failed."""
    return run_full(mode, args, pattern)[0]


def run_full(mode: str, args: Sequence[str], pattern: re.Pattern[str],
             under: Sequence[str] = (), run_mode: str | None = None,
             suffix: str = "") -> tuple[re.Match[str], list[str]]:
    """scale_live ARGS under MODE (the environment of RUN_MODE when given), started by UNDER
    (a tool's command line, or nothing); the match of PATTERN in its output and its stderr's
    lines, or Failed, named with SUFFIX."""
    what = "%s %s%s" % (mode, " ".join(args), suffix)
    argv = list(under) + [os.path.abspath(BIN), args[0], "api" if mode == "api" else "raw"] \
        + list(args[1:])
    env = scale_host.environment(run_mode or mode, os.path.abspath(PRELOAD))
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failed("%s: still running after %d s" % (what, TIMEOUT))
    found = [m for m in map(pattern.match, p.stdout.splitlines()) if m]
    if p.returncode != 0 or not found:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise Failed("%s: exit %d: %s" % (what, p.returncode, tail[:300]))
    return found[0], p.stderr.splitlines()


@dataclass
class Own:
    rss_kb: int  # VmRSS the N ids added
    tables_kb: int  # the preload's own, at its most (its exit summary)
    copies_kb: int
    pages: int


def own(mode: str, n: int, warm: int, hold: str) -> Own:
    """N ids made after the warm-up and no timed lives: what they added to VmRSS, and what the
    preload's exit summary says it held at its most."""
    m, err = run_full(mode, ["live", str(n), "0", str(warm), hold, "1", "1"], _LIVE)
    said = [x for x in map(_OWN.match, err) if x]
    if mode not in ("raw", "api") and not said:
        raise Failed("%s live %d: no \"own memory\" line in the exit summary" % (mode, n))
    g = said[0].groups() if said else ("0", "0", None)
    return Own(int(m.group(5)) - int(m.group(4)), int(g[0]), int(g[1]), int(g[2] or 0))


def own_section(o: "Options") -> list[str]:
    """VmRSS per live id beside what the preload says it holds at its most, each over 10 ids
    (the warm-up's share alike in both), per mode and variant."""
    page = os.sysconf("SC_PAGE_SIZE")
    rows = ["| mode | variant | live ids | VmRSS per id over raw | the preload's own per id: "
            "tables | copies | audit pages | all three |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for variant in OWN_VARIANTS:
        got = {(mode, n): own(mode, n, o.warm, variant) for mode in o.modes
               for n in [10] + o.own}
        for n in o.own:
            raw = got[("raw", n)].rss_kb * 1024 / n
            for mode in o.modes:
                r, b = got[(mode, n)], got[(mode, 10)]
                parts = [(r.tables_kb - b.tables_kb) * 1024 / (n - 10),
                         (r.copies_kb - b.copies_kb) * 1024 / (n - 10),
                         (r.pages - b.pages) * page / (n - 10)]
                preload = mode not in ("raw", "api")
                rows.append("| %s | %s | %d | %s | %s |" % (
                    mode, variant, n,
                    "(base)" if mode == "raw" else "%+.0f" % (r.rss_kb * 1024 / n - raw),
                    " | ".join(["%.0f" % v for v in parts] + ["%.0f" % sum(parts)]) if preload
                    else "- | - | - | -"))
                say("own %s %s %d: %s" % (variant, mode, n, rows[-1]))
    return [OWN_HEADING,
            "",
            "`scripts/scale-live --only own --own %s` in the Soft-RoCE guest: the N ids made "
            "after the same warm-up, and no lives; VmRSS they added, per id, over raw's; and "
            "what the preload's exit summary says it held at its most (`own memory at its "
            "most`: the bytes its allocator mapped for its tables, the bytes committed for "
            "event copies, the pages of audit's ring; none is ever given back, so the most is "
            "what the N ids made it reach), less the same at 10 ids, per id. The allocator's "
            "figure counts a table's old and new blocks both while it grows, and whole chunks "
            "of 256 KiB mapped: above what the ids keep resident." % ",".join(map(str, o.own)),
            ""] + rows


def median(values: Sequence[int]) -> int:
    """The middle value (of an even count, the lower middle: a figure some run gave)."""
    v = sorted(values)
    return v[(len(v) - 1) // 2]


def live(mode: str, n: int, m: int, warm: int, variant: str, runs: int) -> Live:
    """The median times of RUNS runs; the memory of the first."""
    hold, channels, threads, _ = VARIANTS[variant]
    got: list[Live] = []
    for _ in range(max(runs, 1)):
        g = [int(x) for x in run(mode, ["live", str(n), str(m), str(warm), hold, str(channels),
                                        str(threads)], _LIVE).groups()]
        got.append(Live(g[0], g[1], g[2], (g[3], g[4]), (g[5], g[6])))
    r = got[0]
    r.life_ns = median([x.life_ns for x in got])
    r.event_ns = median([x.event_ns for x in got])
    r.cpu_us = median([x.cpu_us for x in got])
    return r


def callgrind(mode: str, collect: str, args: Sequence[str],
              pattern: re.Pattern[str]) -> list[str]:
    """scale_live ARGS under MODE and callgrind, collecting inside COLLECT only: the profile's
    lines (PATTERN must match a line of the program's output)."""
    with tempfile.TemporaryDirectory(prefix="scale-live-count-") as d:
        profile = os.path.join(d, "callgrind.out")
        tool = [VALGRIND, "--tool=callgrind", "--collect-atstart=no",
                "--toggle-collect=" + collect, "--callgrind-out-file=" + profile]
        # audit's first guard, userfaultfd(2), is a system call valgrind does not know.
        run_full(mode, args, pattern, tool, "audit+mprotect" if mode == "audit" else None,
                 " under callgrind")
        try:
            with open(profile) as f:
                return f.read().splitlines()
        except OSError as e:
            raise Failed("%s %s under callgrind: no profile: %s" % (mode, " ".join(args),
                                                                    e.strerror))


def totals(lines: Sequence[str]) -> int | None:
    return next((int(x.split()[1]) for x in lines if x.startswith("totals:")), None)


def count(mode: str, n: int, warm: int) -> scale_host.Count:
    """User-space instructions per id life and per event (get and release) of COUNT_M lives
    beside N live ids, acked, one channel: callgrind collects inside scale_live's `measure`
    only, and `scale_event` is one event's get and release."""
    args = ["live", str(n), str(COUNT_M), str(warm), "acked", "1", "1"]
    lines = callgrind(mode, "measure", args, _LIVE)
    total = totals(lines)
    # callgrind counts the calls made outside `measure` too (the warm-up's), but not their
    # instructions: the lives' events are 2 * COUNT_M of them.
    calls, events = scale_host.calls_to(lines, "scale_event")
    if total is None or calls < 2 * COUNT_M:
        raise Failed("%s live %d %d under callgrind: %s instructions counted, %d calls of "
                     "scale_event (want at least %d)" % (mode, n, COUNT_M,
                                                         [total] if total else "no", calls,
                                                         2 * COUNT_M))
    return scale_host.Count(total / COUNT_M, events / (2 * COUNT_M))


def count_pending(mode: str, p: int) -> float:
    """User-space instructions per rdma_create_id and rdma_destroy_id beside P events pending
    on the channel (callgrind inside scale_live's `timed_destroys` only)."""
    total = totals(callgrind(mode, "timed_destroys", ["pending", str(p), str(DESTROYS)],
                             _PENDING))
    if not total:
        raise Failed("%s pending %d under callgrind: no instructions counted" % (mode, p))
    return total / DESTROYS


def us(ns: float) -> str:
    return "%.1f" % (ns / 1000)


def growth_table(lives: dict[tuple[str, int], Live], modes: Sequence[str],
                 sizes: Sequence[int]) -> list[str]:
    """Time per id life and per event, each size over the smallest, and that growth over
    raw's."""
    base = sizes[0]
    rows = ["| mode | live ids | µs per id life | at N / at %d | µs per event | at N / at %d "
            "| event growth / raw's | CPU ms in the loop |" % (base, base),
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in modes:
        for n in sizes:
            r, b = lives[(mode, n)], lives[(mode, base)]
            raw, raw_b = lives[("raw", n)], lives[("raw", base)]
            life_g = r.life_ns / b.life_ns if b.life_ns else 0.0
            ev_g = r.event_ns / b.event_ns if b.event_ns else 0.0
            raw_g = raw.event_ns / raw_b.event_ns if raw_b.event_ns else 0.0
            rows.append("| %s | %d | %s | %.2f | %s | %.2f | %s | %d |" % (
                mode, n, us(r.life_ns), life_g, us(r.event_ns), ev_g,
                "(base)" if mode == "raw" else "%.2f" % (ev_g / raw_g if raw_g else 0.0),
                r.cpu_us // 1000))
    return rows


def memory_rows(lives: dict[tuple[str, int], Live], modes: Sequence[str], sizes: Sequence[int],
                variant: str) -> list[str]:
    rows = []
    for n in sizes:
        if n < 1000:
            continue
        raw = lives[("raw", n)].per_id(n)
        for mode in modes:
            v = lives[(mode, n)].per_id(n)
            rows.append("| %s | %s | %d | %.0f | %s | %.0f |" % (
                mode, variant, n, v, "(base)" if mode == "raw" else "%+.0f" % (v - raw),
                lives[(mode, n)].slab_per_id(n)))
    return rows


def over_memory(lives: dict[tuple[str, int], Live], modes: Sequence[str], n: int) -> list[str]:
    """What passes MEMORY_LIMIT bytes per live id over raw at N ids."""
    raw = lives[("raw", n)].per_id(n)
    return ["%s adds %.0f bytes per live id over raw at %d ids (at most %d)"
            % (mode, lives[(mode, n)].per_id(n) - raw, n, MEMORY_LIMIT)
            for mode in modes if lives[(mode, n)].per_id(n) - raw > MEMORY_LIMIT]


@dataclass
class Options:
    sizes: list[int] = field(default_factory=lambda: list(SIZES))
    m: int = M
    warm: int = WARM
    runs: int = RUNS
    modes: list[str] = field(default_factory=lambda: list(MODES))
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    pending: list[int] = field(default_factory=lambda: list(PENDING))
    limit: int = LIMIT_IDS
    setup: list[int] = field(default_factory=lambda: list(SETUP))
    counts: list[int] = field(default_factory=lambda: list(SIZES))
    mimic: list[int] = field(default_factory=list)
    own: list[int] = field(default_factory=list)
    time_only: bool = False  # --only time: the variants' time tables, no memory table
    out: str | None = None
    plots: str | None = None
    slice: bool = False


def zero_or_more(what: str, text: str) -> list[int]:
    v = [int(x) for x in text.split(",") if x.isdigit()]
    if len(v) != len(text.split(",")):
        guest_mod.die(PROG, "%s takes whole numbers, comma-separated, not %s" % (what, text))
    return sorted(set(v))


SETTERS = {
    "--sizes": lambda o, v: setattr(o, "sizes", sorted(set(scale_host.numbers("--sizes", v)))),
    "--m": lambda o, v: setattr(o, "m", scale_host.one_number("--m", v)),
    "--warm": lambda o, v: setattr(o, "warm", scale_host.one_number("--warm", v)),
    "--runs": lambda o, v: setattr(o, "runs", scale_host.one_number("--runs", v)),
    "--modes": lambda o, v: setattr(o, "modes", scale_host.with_raw("--modes", v)),
    "--variants": lambda o, v: setattr(o, "variants",
                                       scale_host.some_of("--variants", v, list(VARIANTS))),
    "--pending": lambda o, v: setattr(o, "pending", zero_or_more("--pending", v)),
    "--limit": lambda o, v: setattr(o, "limit", scale_host.one_number("--limit", v)),
    "--setup": lambda o, v: setattr(o, "setup", zero_or_more("--setup", v)),
    "--counts": lambda o, v: setattr(o, "counts", [n for n in zero_or_more("--counts", v) if n]),
    "--mimic": lambda o, v: setattr(o, "mimic", [n for n in zero_or_more("--mimic", v) if n]),
    "--own": lambda o, v: setattr(o, "own", [n for n in zero_or_more("--own", v) if n > 10]),
    "--only": lambda o, v: only(o, v),
    "--out": lambda o, v: setattr(o, "out", v),
    "--plots": lambda o, v: setattr(o, "plots", v),
}


def only(o: Options, part: str) -> None:
    """--only counts, mimic or own: that section alone (own at the sizes of 1,000 and up);
    --only time: the time tables of --variants alone (the rest of the section kept)."""
    if part not in ("counts", "mimic", "own", "time"):
        guest_mod.die(PROG, "--only takes counts, mimic, own or time, not %s" % part)
    o.time_only = part == "time"
    if not o.time_only:
        o.variants = []
    o.pending, o.limit, o.setup = [], 0, []
    if part != "counts":
        o.counts = []
    if part != "mimic":
        o.mimic = []
    if part == "own" and not o.own:
        o.own = [n for n in SIZES if n >= 1000]


def as_slice(o: Options) -> None:
    o.slice = True
    o.sizes, o.m, o.runs, o.variants = [10, 5000], 300, 1, ["acked"]
    o.pending, o.limit, o.setup, o.counts = [1000], LIMIT_IDS, [], []


def options(argv: Sequence[str]) -> Options | None:
    """The options ARGV gives; None for one not known, or without its value."""
    return scale_host.parse_into(Options(), argv, SETTERS, {"--slice": as_slice})


def write_plot(o: Options, name: str, svg: str, figures: list[str], caption: str) -> None:
    if not o.plots:
        return
    os.makedirs(o.plots, exist_ok=True)
    with open(os.path.join(o.plots, name), "w") as f:
        f.write(svg)
    figures.append("![%s](%s)" % (caption, name))


def setup_section(o: Options, sizes: Sequence[int], mimic: bool = False) -> list[str]:
    """cmtime (rdmacm-utils) setting up SIZES connections at once, raw and under the preload:
    each step's time, of the run whose total is the median. MIMIC: cmtime's mimic mode (-m 0,
    rdma-core 56 on: no QP made or modified, so past the device's QPs)."""
    os.makedirs(cm_setup.OUT, exist_ok=True)
    steps = cm_setup.STEPS[:-1]
    head = "| step | " + " | ".join(
        "%s ms | over raw" % m if m != "raw" else "raw ms" for m in SETUP_MODES) + " |"
    flag = " -m 0" if mimic else ""
    out = ["### Connection setup at scale: cmtime" + ("'s mimic mode" if mimic else ""),
           "",
           "`cmtime -b $RXE_ADDR -c N%s` and `cmtime -s $RXE_ADDR -c N%s` in the guest (both "
           "sides under the same environment: no preload, or the preload in safe or audit "
           "mode), the run of median total of %d; each step is all N connections' (cmtime's own "
           "table, ms). Connections per second: N over the total." % (
               flag + (" -q %d" % MIMIC_SERVER_QPN if mimic else ""), flag, o.runs)]
    if mimic:
        out[-1] += (" In mimic mode cmtime makes no QP: its create qp and the QP's moves in "
                    "connect are a sleep of 0 µs, so the CM alone is timed, past the number of "
                    "QPs the device allows.")
    out.append("")
    for n in sizes:
        # Without QPs cmtime numbers each side's connections from its -q (1000 by default): on
        # one address both sides would give the same numbers, and the CM rejects the second
        # connection with a QP number it already knows from that address (stale connection).
        bench = cm_setup.Bench(os.environ["RXE_ADDR"], n, os.path.abspath(PRELOAD),
                               ["-m", "0"] if mimic else [],
                               ["-q", str(MIMIC_SERVER_QPN)] if mimic else [])
        best: dict[str, dict[str, float]] = {}
        for mode in SETUP_MODES:
            tried = []
            for r in range(max(o.runs, 1)):
                label = "scale-%s%s-%d-%d" % (mode, "-mimic" if mimic else "", n, r)
                got = {k: float(v) for k, v in bench.cmtime(mode, label)}
                got["total"] = sum(got.get(k, 0.0) for k in steps)
                tried.append(got)
            tried.sort(key=lambda t: t["total"])
            best[mode] = tried[(len(tried) - 1) // 2]
            say("setup %s %d: %.0f ms" % (mode, n, best[mode]["total"]))
        rows = ["#### %s connections" % "{:,}".format(n), "", head,
                "|---|" + "---:|" * (2 * len(SETUP_MODES) - 1)]
        for k in steps + ["total"]:
            raw = best["raw"].get(k, 0.0)
            cells = ["%.1f" % raw]
            for mode in SETUP_MODES[1:]:
                v = best[mode].get(k, 0.0)
                cells += ["%.1f" % v, "%.2f" % (v / raw) if raw else "-"]
            rows.append("| %s | %s |" % (k.replace("_", " "), " | ".join(cells)))
        rate = ["%.0f" % (n * 1000 / best[m]["total"]) if best[m]["total"] else "-"
                for m in SETUP_MODES]
        rows.append("| connections per second | %s |" % " | ".join(
            [rate[0]] + [x for r in rate[1:] for x in (r, "")]))
        out += rows + [""]
    return out


def old_section(path: str | None, heading: str) -> list[str]:
    """The lines of PATH's section under HEADING, to the next "## " heading (none: [])."""
    try:
        with open(path or "") as f:
            old = f.read().splitlines()
    except OSError:
        return []
    if heading not in old:
        return []
    start = old.index(heading) + 1
    end = next((i for i in range(start, len(old)) if old[i].startswith("## ")), len(old))
    return old[start:end]


def old_figures(path: str | None, heading: str) -> list[str]:
    """The plots PATH's section under HEADING shows (a run that drew none keeps them)."""
    return [line for line in old_section(path, heading) if line.startswith("![")][:1]


def kept_from(path: str | None, heading: str, body: Sequence[str]) -> list[str]:
    """The "### " parts of PATH's section under HEADING that BODY does not make again (a run of
    some variants only), each with a line saying which earlier run made them."""
    section = old_section(path, heading)
    intro = next((line for line in section if line.startswith("`scripts/scale-live")), "")
    cmd = intro[1:intro.index("`", 1)] if intro.count("`") >= 2 else "an earlier run"
    stat = re.search(r"times are the (\w+ of \d+ runs)", intro)
    note = "Not run again: as `%s` left it (its times the %s)." % (
        cmd, stat.group(1) if stat else "figures it said")
    made = {line for line in body if line.startswith("### ")}
    out: list[str] = []
    part: list[str] = []
    for line in section + ["### "]:
        if line.startswith("### "):
            if part and part[0] not in made:
                while part[-1] == "":
                    part.pop()
                out += ([""] if out else []) + [part[0], "", note] + part[1:]
            part = [line]
        elif part:
            part.append(line)
    return out


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: Sequence[str]) -> int:
    os.environ["LC_ALL"] = "C"
    os.chdir(guest_mod.project_root())
    o = options(argv)
    if o is None:
        print(USAGE, file=sys.stderr)
        return 2
    needs = [(PRELOAD, "make preload")]
    if o.variants or o.pending or o.limit or o.counts or o.own:
        needs.append((BIN, "make target/bench/scale_live"))
    for need, how in needs:
        if not os.path.exists(need):
            guest_mod.die(PROG, "%s is missing (%s)" % (need, how), 1)
    if not os.environ.get("RXE_ADDR"):
        guest_mod.die(PROG, "RXE_ADDR is not set: run it in the guest (scripts/rxe-vm)", 1)
    body: list[str] = []
    counts: list[str] = []
    mimic: list[str] = []
    owned: list[str] = []
    figures: list[str] = []
    problems: list[str] = []
    memory: list[str] = []
    try:
        old_range = widen_ports(ports_needed(o))
    except OSError as e:
        guest_mod.die(PROG, "%s: %s (more ports are needed for %d resolved ids)"
                      % (PORT_RANGE, e.strerror, ports_needed(o)), 1)
    if old_range:
        say("%s: %s for this run (was %s)" % (PORT_RANGE, WIDE_RANGE, old_range))
    try:
        for variant in o.variants:
            title = VARIANTS[variant][3]
            lives = {}
            for mode in o.modes:
                for n in o.sizes:
                    r = lives[(mode, n)] = live(mode, n, o.m, o.warm, variant, o.runs)
                    say("%s %s %d: %s µs per id life, %s µs per event, %.0f bytes per id"
                        % (variant, mode, n, us(r.life_ns), us(r.event_ns), r.per_id(n)))
            body += ["### Time, %s" % title, ""] + growth_table(lives, o.modes, o.sizes) + [""]
            memory += memory_rows(lives, o.modes, o.sizes, variant)
            if o.slice:
                problems += over_memory(lives, o.modes, o.sizes[-1])
            if variant == "acked":
                for what, key, unit in (("event", "event_ns", "µs per event (get and ack)"),
                                        ("life", "life_ns", "µs per id life")):
                    series = {mode: [(n, getattr(lives[(mode, n)], key) / 1000) for n in o.sizes]
                              for mode in o.modes}
                    write_plot(o, "scale-%s.svg" % what,
                               plot.line_plot("Time per %s as live ids grow (Soft-RoCE)"
                                              % ("event" if what == "event" else "id life"),
                                              "live cm_ids", unit, series),
                               figures, "%s against live ids" % unit)
                if [n for n in o.sizes if n >= 1000]:
                    series = {mode: [(n, lives[(mode, n)].per_id(n)) for n in o.sizes if n >= 1000]
                              for mode in o.modes}
                    write_plot(o, "scale-memory.svg",
                               plot.line_plot("Resident memory per live id (Soft-RoCE)",
                                              "live cm_ids", "bytes per id (VmRSS)", series),
                               figures, "bytes per live id against live ids")
        if memory and not o.time_only:
            body += ["### Memory per live id",
                     "",
                     "VmRSS after the N ids were made less VmRSS after the warm-up, over N; and "
                     "the kernel's Slab (/proc/meminfo) the same way, for scale: the kernel's own "
                     "cost of an id, which no mode changes.",
                     "",
                     "| mode | variant | live ids | bytes per id | over raw | kernel slab bytes "
                     "per id |",
                     "|---|---|---:|---:|---:|---:|"] + memory + [""]
        if o.pending:
            rows = ["| events pending | " + " | ".join("%s µs" % m for m in o.modes)
                    + " | ours over raw, µs |",
                    "|---:|" + "---:|" * (len(o.modes) + 1)]
            series: dict[str, list[tuple[float, float]]] = {m: [] for m in o.modes}
            for p in o.pending:
                cells = []
                for mode in o.modes:
                    means = []
                    for _ in range(max(o.runs, 1)):
                        g = run(mode, ["pending", str(p), str(DESTROYS)], _PENDING).groups()
                        if int(g[2]) != p:
                            problems.append("%s: %s of %d pending events got after the "
                                            "destroys" % (mode, g[2], p))
                        means.append(int(g[1]))
                    best = median(means)
                    cells.append(best)
                    series[mode].append((max(p, 1), best / 1000))
                    say("pending %s %d: %s µs per destroy" % (mode, p, us(best)))
                worst = max(cells[1:], default=cells[0]) - cells[0]
                rows.append("| %d | %s | %s |" % (p, " | ".join(us(c) for c in cells), us(worst)))
            body += ["### rdma_destroy_id with events pending on its channel",
                     "",
                     "P ids on one channel resolved and their events left unread; then %d ids "
                     "made on the same channel and destroyed, each destroy timed (the median "
                     "mean of the runs). The kernel walks the channel's pending events at each "
                     "destroy; every pending event is got afterwards, in each mode." % DESTROYS,
                     ""] + rows + [""]
            write_plot(o, "scale-pending.svg",
                       plot.line_plot("rdma_destroy_id with events pending (Soft-RoCE)",
                                      "events pending on the channel (0 drawn at 1)",
                                      "µs per rdma_destroy_id", series),
                       figures, "µs per destroy against events pending")
        if o.limit:
            rows = ["| mode | ids asked | ids made | errno | ids resolved and checked | "
                    "events naming another id |", "|---|---:|---:|---|---:|---:|"]
            made = {}
            for mode in o.modes:
                g = run(mode, ["limit", str(o.limit), str(SAMPLE)], _LIMIT).groups()
                made[mode] = int(g[0])
                rows.append("| %s | %d | %s | %s | %s | %s |" % ((mode, o.limit) + g))
                say("limit %s: %s made, %s wrong" % (mode, g[0], g[3]))
                if int(g[3]):
                    problems.append("%s: %s events named another id" % (mode, g[3]))
            problems += ["%s made %d ids, raw %d" % (mode, n, made["raw"])
                         for mode, n in made.items() if n != made["raw"]]
            body += ["### Past librdmacm's table of 65,535 ids",
                     "",
                     "rdma_create_id on one channel until it fails or %d ids are live; then "
                     "the %d made first and the %d made last resolved, each event checked to "
                     "name its own id." % (o.limit, SAMPLE, SAMPLE),
                     ""] + rows + [""]
        if [n for n in o.setup if n > 0]:
            body += setup_section(o, [n for n in o.setup if n > 0])
        if o.mimic:
            mimic = [MIMIC_HEADING, ""] + setup_section(o, o.mimic, mimic=True)
        if o.own:
            owned = own_section(o)
        if o.counts:
            counted: dict[tuple[str, int], scale_host.Count] = {}
            for mode in o.modes:
                for n in o.counts:
                    c = counted[(mode, n)] = count(mode, n, o.warm)
                    say("count %s %d: %.0f instructions per id life, %.0f per event"
                        % (mode, n, c.life, c.event))
            table, over = scale_host.cost_table(counted, o.modes, o.counts)
            problems += over
            most = max([n for n in o.pending if n] or [PENDING[-1]])
            pend = ["", "Per rdma_create_id and rdma_destroy_id (%d of each) on a channel with "
                    "none and with %d events pending in the kernel, the same way "
                    "(scale_live's `timed_destroys`):" % (DESTROYS, most), "",
                    "| mode | instructions, 0 pending | %d pending | ratio |" % most,
                    "|---|---:|---:|---:|"]
            for mode in o.modes:
                a, b = count_pending(mode, 0), count_pending(mode, most)
                pend.append("| %s | %.0f | %.0f | %.3f |" % (mode, a, b, b / a))
                say("count pending %s: %.0f, %.0f" % (mode, a, b))
                if b / a > scale_host.LIMIT:
                    problems.append("%s: %.0f instructions per create and destroy beside %d "
                                    "pending events, %.3f times those beside none"
                                    % (mode, b, most, b / a))
            table += pend
            counts = [COUNT_HEADING,
                      "",
                      "`scripts/scale-live --counts %s` in the Soft-RoCE guest: the lives of the "
                      "section above (%d of them, after the same warm-up) beside N live ids, each "
                      "held id's ADDR_RESOLVED acked, one event channel, under valgrind's "
                      "callgrind: the user-space instructions of the whole process inside the "
                      "timed lives only (the program, librdmacm and libibverbs, and the preload "
                      "or libcmsafe; the kernel's are not counted), per id life, and per event "
                      "for its get and release. audit runs with CMSAFE_GUARD=mprotect (valgrind "
                      "has no userfaultfd). A ratio above %.2f fails the run." % (
                          ",".join(map(str, o.counts)), COUNT_M, scale_host.LIMIT), ""] + table
    except Failed as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("%s: %s: %s" % (PROG, e.filename, e.strerror), file=sys.stderr)
        return 1
    finally:
        if old_range:
            with open(PORT_RANGE, "w") as f:
                f.write(old_range)
    intro = ("`scripts/scale-live --m %d --warm %d --runs %d` in the Soft-RoCE guest "
             "(bench/scale_live.c): raw librdmacm, the API, the preload in audit and safe mode, "
             "one after another in one guest; times are the median of %d runs, each size over "
             "10 ids, and each mode's growth over raw's. A guest is not a bare machine: the "
             "ratios are the figures to read, not the microseconds. Each resolved id holds a "
             "local port of the kernel's ephemeral range (net.ipv4.ip_local_port_range, 28,232 "
             "ports by default): past that many resolved ids on one address rdma_resolve_addr "
             "fails with EADDRNOTAVAIL, raw librdmacm as well, so a run of more widens it to "
             "%s for its time." % (o.m, o.warm, o.runs, o.runs, WIDE_RANGE))
    sections = []
    if body:
        body += kept_from(o.out, HEADING, body)
        if not figures:
            figures = old_figures(o.out, HEADING)
        sections.append(([HEADING, "", intro, ""] + ([" ".join(figures), ""] if figures else [])
                         + body, HEADING))
    if counts:
        sections.append((counts, COUNT_HEADING))
    if mimic:
        sections.append((mimic, MIMIC_HEADING))
    if owned:
        sections.append((owned, OWN_HEADING))
    for new, heading in sections:
        print("\n".join(new))
    if o.out:
        try:
            for new, heading in sections:
                scale_host.replace_section(o.out, new, heading)
        except OSError as e:
            print("%s: %s: %s" % (PROG, e.filename, e.strerror), file=sys.stderr)
            return 1
    for p in problems:
        print("%s: %s" % (PROG, p), file=sys.stderr)
    if o.slice:
        print("%s: %s" % (PROG, "passed" if not problems else "%d problems" % len(problems)),
              file=sys.stderr)
    return 1 if problems else 0
