"""Cost and memory as live cm_ids grow, on the real stack: Soft-RoCE in the guest
(scripts/scale-live; make bench-scale, and a counted slice in make test).

bench/scale_live.c holds N ids live, each resolved (its ADDR_RESOLVED got; acked, or held to the
end), after a warm-up that fills the preload's bounded tables (audit's quarantine, safe mode's
kept copies, 4,096 events each), then times M id lives beside them (create, resolve the address
and the route, an event each, destroy), the get and ack of each event timed once its fd is
readable, and a fixed piece of work, the reference, timed just before it. Raw librdmacm, the
API, audit and safe run the same program in the same guest, one after another, RUNS processes
each, a process taking the sizes up and back down (each size's figure the mean of its visits,
then the median of the runs). Under emulation the guest's speed moves between two states, one
about twice the other, for seconds at a time: the figure compared is the median over the events
of each one's time over its reference's, which moves with the guest (best on a guest of one
vCPU: RXE_VM_SMP=1). Every size is compared with 10 ids, and each mode's growth with raw's own.
Variant "connections": connection lives (no QP, both sides in one process, the storm's seven
events) beside N held connections (--conns). Memory comes from processes of its own (N ids, no
lives): only the first size of a process stands alone.

--counts: the same loop's user-space instructions (the program, librdmacm and libibverbs, and
the preload or libcmsafe; not the kernel's), counted by callgrind inside the timed lives only,
at each of those sizes: deterministic where the times are not; a section of its own
(COUNT_HEADING). --conn-counts: connection lives counted beside held connections the same way
(0: none), a section too (CONN_COUNT_HEADING). --mimic: cmtime's mimic mode (-m 0, rdma-core 56
and later: trixie's root, scripts/rxe-vm --stack trixie) setting up N connections with no QP,
past the device's QPs; a section of its own too (MIMIC_HEADING). --own: VmRSS per live id
beside the preload's own account of its memory (its exit summary's "own memory at its most"),
each over 10 ids, with the held ids' events acked and held, and over 1,000 channels
(OWN_HEADING). --only counts|mimic|own: that section alone (counts: both counting sections);
--only time: the time tables of --variants alone, the rest of the section as it was.

    scripts/scale-live [--sizes N,N,...] [--m M] [--warm W] [--runs R] [--modes MODES]
                       [--variants VARIANTS] [--conns N,N,...] [--pending P,P,...]
                       [--limit IDS] [--setup N,N,...] [--counts N,N,...]
                       [--conn-counts N,N,...] [--mimic N,N,...]
                       [--own N,N,...] [--only counts|mimic|own|time] [--out FILE]
                       [--plots DIR] [--slice]

Variants: "acked" (one event channel, each held id's event acked), "channels" (the held ids
over 1,000 channels), "threads" (16 threads each running lives on a channel of its own),
"held" (each held id's ADDR_RESOLVED unacked to the end), "connections" (above). --pending:
rdma_destroy_id timed on a channel with P events pending in the kernel. --limit: ids made past
librdmacm's 65,535-entry table, and events of the first and last made checked to name their own
id. --setup: cmtime (rdmacm-utils) setting up N connections at once, raw and under the preload
(0: none). --out FILE: the tables replace the section under HEADING in FILE; --plots DIR: an SVG
per figure there.

--slice (make test): 5,000 and then 10 live ids in one process a mode (the memory of the first
size), 1,000 events pending, 70,000 ids made, every mode, and audit with 16 threads; what it
holds are counts: every event of the id it names (the program checks), every pending event got
afterwards, as many ids made in each mode as raw, what each mode adds per live id (VmRSS,
pages) at most MEMORY_LIMIT bytes over raw, and audit's fault thread waiting at most once per
WAITS_PER events with threads. The times are printed, never held.
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
         "                          [--variants VARIANTS] [--conns N,N,...] [--pending P,P,...]\n"
         "                          [--limit IDS] [--setup N,N,...] [--counts N,N,...]\n"
         "                          [--conn-counts N,N,...] [--mimic N,N,...]\n"
         "                          [--own N,N,...] [--only counts|mimic|own|time] [--out FILE]\n"
         "                          [--plots DIR] [--slice]")
BIN = "target/bench/scale_live"
PRELOAD, MODES, SIZES = scale_host.PRELOAD, scale_host.MODES, scale_host.SIZES
HEADING = "## Real stack, Soft-RoCE in the guest"
COUNT_HEADING = "## Real stack, instructions counted in the guest"
CONN_COUNT_HEADING = "## Real stack, connection lives counted in the guest"
MIMIC_HEADING = "## Real stack, cmtime's mimic mode (rdma-core 56 and later)"
OWN_HEADING = "## Real stack, the preload's own memory"
# The threads variant makes its held ids as acked does (its threads run the lives only): its
# memory is acked's.
OWN_VARIANTS = ("acked", "channels", "held")
M = 1000
# 2,100 lives are 4,200 events: past audit's quarantine and safe mode's kept copies (4,096).
WARM = 2100
RUNS = 3
COUNT_M = 200  # id lives counted under callgrind (its instructions per life do not vary)
CONNECTIONS = "connections"  # the variant of connection lives beside held connections
# Held connections: each is two ids in one process, under librdmacm's table of 65,535.
CONN_SIZES = (10, 1000, 5000, 20000)
CONN_COUNTS = (10, 1000, 5000)
CONN_M = 300  # connection lives timed at each size, 7 events each
CONN_WARM = 700  # 4,900 events: past audit's quarantine and safe mode's kept copies
COUNT_CONNS = 100  # connection lives counted under callgrind
CONN_EVENTS = 7
VALGRIND = "valgrind"
PENDING = (0, 100, 1000, 10000)
DESTROYS = 200  # ids destroyed, each timed, beside the pending events
LIMIT_IDS = 70000  # past librdmacm's table of 65,535 (its IDX_MAX_INDEX)
LIBRDMACM_IDS = 65535
SAMPLE = 1000  # of the first and of the last ids made, resolved and checked
SETUP = (1000, 4000)  # connections cmtime sets up at once
MIMIC_SERVER_QPN = 1 << 20  # the server's first QP number in mimic mode: past the client's
SETUP_MODES = ("raw", "safe", "audit")  # cmtime has no API column: it is raw librdmacm
MEMORY_LIMIT = 256  # bytes per live id a mode may add over raw (the slice holds it)
# The slice's audit run with threads: THREADS_M lives over 16 threads, and at most one wait of
# the userfaultfd thread per WAITS_PER events (it fills a run of 64 pages at a wait; with
# threads taking pages at once a run cut short costs a wait per event).
THREADS_M = 300
WAITS_PER = 16
TIMEOUT = 1800
# variant: (hold, channels, threads, title)
VARIANTS = {
    "acked": ("acked", 1, 1, "one event channel, each held id's ADDR_RESOLVED acked"),
    "channels": ("acked", 1000, 1, "the held ids over 1,000 event channels, acked"),
    "threads": ("acked", 1, 16, "16 threads running the lives, each on a channel of its own"),
    "held": ("held", 1, 1, "one event channel, each held id's ADDR_RESOLVED held unacked"),
}
CONN_TITLE = ("connection lives beside held connections (no QP, both sides in one process: a "
              "listen id, the clients on one channel, the server's ids on another)")


# Each resolved id holds a local port of the rdma_cm's port space, taken from the kernel's
# ephemeral range (net.ipv4.ip_local_port_range, 28,232 ports by default): past that many
# resolved ids on one address rdma_resolve_addr fails with EADDRNOTAVAIL, raw or not. A run
# that needs more widens the range in the guest for its time.
PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
WIDE_RANGE = "1024 65535"


def ports_needed(o: "Options") -> int:
    """The most resolved ids a run holds at once: the N ids, the warm-up's, the lives' own (a
    held connection's client is one)."""
    return max(o.sizes + o.counts + o.conns + o.conn_counts + o.setup + o.mimic,
               default=0) + 2 * o.warm + 64


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
    """The times at one size: each the mean of the size's visits in a run, then the median of
    the runs."""
    life_ns: float
    event_ns: float  # the median event's time
    relative: float  # the median over the events of each one's time over its reference's
    cpu_us: float


_LIVE = re.compile(r"^live n=(\d+) m=\d+ threads=\d+ life_ns=(\d+) event_ns=\d+ "
                   r"event_median_ns=(\d+) reference_median_ns=\d+ over_reference=([\d.]+) "
                   r"cpu_us=(\d+) rss_kb=(\d+),(\d+) slab_kb=(\d+),(\d+) "
                   r"fault_waits=(-?\d+)$")
_CONNS = re.compile(r"^conns n=(\d+) m=\d+ life_ns=(\d+) event_ns=\d+ event_median_ns=(\d+) "
                    r"reference_median_ns=\d+ over_reference=([\d.]+) cpu_us=(\d+)$")
_PENDING = re.compile(r"^pending p=(\d+) k=\d+ destroy_ns=(\d+) got=(\d+)$")
_LIMIT = re.compile(r"^limit made=(\d+) errno=(\S+) resolved=(\d+) wrong=(\d+)$")
_OWN = re.compile(r"^==cmsafe==   own memory at its most: tables (\d+) KiB, copies (\d+) KiB"
                  r"(?:, audit pages (\d+))?$")


def run(mode: str, args: Sequence[str], pattern: re.Pattern[str]) -> re.Match[str]:
    """scale_live ARGS under MODE; the match of PATTERN in its output, or Failed."""
    return run_full(mode, args, pattern)[0][0]


def run_full(mode: str, args: Sequence[str], pattern: re.Pattern[str],
             under: Sequence[str] = (), run_mode: str | None = None,
             suffix: str = "") -> tuple[list[re.Match[str]], list[str]]:
    """scale_live ARGS under MODE (the environment of RUN_MODE when given), started by UNDER
    (a tool's command line, or nothing); the matches of PATTERN in its output, in order, and
    its stderr's lines, or Failed, named with SUFFIX."""
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
    return found, p.stderr.splitlines()


@dataclass
class Own:
    rss_kb: int  # VmRSS the N ids added
    tables_kb: int  # the preload's own, at its most (its exit summary)
    copies_kb: int
    pages: int
    slab_kb: int = 0  # the kernel's Slab the N ids added

    def per_id(self, n: int) -> float:
        """VmRSS the N ids added, in bytes per id."""
        return self.rss_kb * 1024 / n


# Each process of own() runs once a run of scale-live: the memory table and the own section
# read the same ones.
_owned: dict[tuple[str, int, str], Own] = {}


def own(mode: str, n: int, warm: int, variant: str) -> Own:
    """N ids made after the warm-up (VARIANT's channels and hold) and no timed lives, in a
    process of their own: the first size's memory is the only one that stands alone (see
    bench/scale_live.c). What they added to VmRSS and Slab, and what the preload's exit summary
    says it held at its most."""
    key = (mode, n, variant)
    if key not in _owned:
        hold, channels, _, _ = VARIANTS[variant]
        found, err = run_full(mode, ["live", str(n), "0", str(warm), hold, str(channels), "1"],
                              _LIVE)
        _owned[key] = own_of(mode, n, found[0], err)
    return _owned[key]


def own_of(mode: str, n: int, m: re.Match[str], err: Sequence[str]) -> Own:
    """The memory of a process's first size (M, its line) and its exit summary (ERR)."""
    said = [x for x in map(_OWN.match, err) if x]
    if mode not in ("raw", "api") and not said:
        raise Failed("%s live %d: no \"own memory\" line in the exit summary" % (mode, n))
    g = said[0].groups() if said else ("0", "0", None)
    return Own(int(m.group(7)) - int(m.group(6)), int(g[0]), int(g[1]), int(g[2] or 0),
               int(m.group(9)) - int(m.group(8)))


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


def median(values: Sequence[float]) -> float:
    """The middle value (of an even count, the lower middle: a figure some run gave)."""
    v = sorted(values)
    return v[(len(v) - 1) // 2]


def there_and_back(sizes: Sequence[int]) -> list[int]:
    """SIZES up, then down again to the first: each size but the last visited twice, at times
    either side of the largest, so a drift of the guest's speed over the run falls alike on
    every size."""
    return list(sizes) + list(reversed(sizes[:-1]))


LIVE_FIELDS = ("life_ns", "event_ns", "relative", "cpu_us")


def timed(mode: str, args: Sequence[str], pattern: re.Pattern[str], runs: int,
          first: list[tuple[re.Match[str], list[str]]] | None = None) -> dict[int, Live]:
    """Each size's times from RUNS runs of scale_live ARGS (one process a run, the sizes in
    turn, each event beside the reference): in a run, the mean of the size's visits; then the
    median of the runs. FIRST, when given, gets the first run's first line and stderr."""
    got: dict[int, list[Live]] = {}
    for r in range(max(runs, 1)):
        visits: dict[int, list[Live]] = {}
        found, err = run_full(mode, list(args) + ["reference"], pattern)
        if first is not None and r == 0:
            first.append((found[0], err))
        for x in found:
            g = x.groups()
            visits.setdefault(int(g[0]), []).append(Live(int(g[1]), int(g[2]), float(g[3]),
                                                         int(g[4])))
        for n, v in visits.items():
            got.setdefault(n, []).append(Live(*(sum(getattr(x, f) for x in v) / len(v)
                                                for f in LIVE_FIELDS)))
    return {n: Live(*(median([getattr(x, f) for x in v]) for f in LIVE_FIELDS))
            for n, v in got.items()}


def live(mode: str, sizes: Sequence[int], m: int, warm: int, variant: str, runs: int,
         memory_first: bool = False) -> dict[int, Live]:
    """M id lives at each of SIZES live ids, VARIANT's way. MEMORY_FIRST (the slice, whose
    times are only printed): the sizes once each, the largest first, whose memory then stands
    alone and is kept for own(): no process of its own for it."""
    hold, channels, threads, _ = VARIANTS[variant]
    order = sorted(sizes, reverse=True) if memory_first else there_and_back(sizes)
    first: list[tuple[re.Match[str], list[str]]] = []
    got = timed(mode, ["live", ",".join(map(str, order)), str(m), str(warm), hold,
                       str(channels), str(threads)], _LIVE, runs, first)
    if memory_first:
        _owned[(mode, order[0], variant)] = own_of(mode, order[0], *first[0])
    return got


def connections(mode: str, sizes: Sequence[int], runs: int) -> dict[int, Live]:
    """CONN_M connection lives at each of SIZES held connections."""
    return timed(mode, ["conns", ",".join(map(str, there_and_back(sizes))), str(CONN_M),
                        str(CONN_WARM)], _CONNS, runs)


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


def counted(mode: str, args: Sequence[str], collect: str, pattern: re.Pattern[str],
            lives: int, per_life: int) -> scale_host.Count:
    """User-space instructions per life and per event of the LIVES lives scale_live ARGS runs
    inside COLLECT (PER_LIFE events each, each one call of `scale_event`: its get and
    release)."""
    lines = callgrind(mode, collect, args, pattern)
    total = totals(lines)
    # callgrind counts the calls made outside COLLECT too (the warm-up's), but not their
    # instructions: the lives' events are PER_LIFE * LIVES of them.
    calls, events = scale_host.calls_to(lines, "scale_event")
    want = per_life * lives
    if total is None or calls < want:
        raise Failed("%s %s %s %d under callgrind: %s instructions counted, %d calls of "
                     "scale_event (want at least %d)" % (mode, args[0], args[1], lives,
                                                         [total] if total else "no", calls,
                                                         want))
    return scale_host.Count(total / lives, events / want)


def count(mode: str, n: int, warm: int) -> scale_host.Count:
    """Per id life and per event (get and release), COUNT_M lives beside N live ids, acked,
    one channel: inside scale_live's `measure`."""
    return counted(mode, ["live", str(n), str(COUNT_M), str(warm), "acked", "1", "1"],
                   "measure", _LIVE, COUNT_M, 2)


def count_conns(mode: str, n: int) -> scale_host.Count:
    """Per connection life, both sides, and per event, COUNT_CONNS lives beside N held
    connections: inside scale_live's `measure_conns`."""
    return counted(mode, ["conns", str(n), str(COUNT_CONNS), str(CONN_WARM)], "measure_conns",
                   _CONNS, COUNT_CONNS, CONN_EVENTS)


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
                 sizes: Sequence[int], unit: str = "id life", held: str = "live ids"
                 ) -> list[str]:
    """Time per life (UNIT) and per event, each size over the smallest, and that growth over
    raw's."""
    base = sizes[0]
    rows = ["| mode | %s | µs per %s | at N / at %d | µs per event (median) | over the "
            "reference | at N / at %d | event growth / raw's | CPU ms in the loop |"
            % (held, unit, base, base),
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in modes:
        for n in sizes:
            r, b = lives[(mode, n)], lives[(mode, base)]
            raw, raw_b = lives[("raw", n)], lives[("raw", base)]
            life_g = r.life_ns / b.life_ns if b.life_ns else 0.0
            ev_g = r.relative / b.relative if b.relative else 0.0
            raw_g = raw.relative / raw_b.relative if raw_b.relative else 0.0
            rows.append("| %s | %d | %s | %.2f | %s | %.2f | %.2f | %s | %d |" % (
                mode, n, us(r.life_ns), life_g, us(r.event_ns), r.relative, ev_g,
                "(base)" if mode == "raw" else "%.2f" % (ev_g / raw_g if raw_g else 0.0),
                r.cpu_us // 1000))
    return rows


def memory_rows(o: "Options", variant: str) -> list[str]:
    rows = []
    for n in o.sizes:
        if n < 1000:
            continue
        raw = own("raw", n, o.warm, variant).per_id(n)
        for mode in o.modes:
            r = own(mode, n, o.warm, variant)
            rows.append("| %s | %s | %d | %.0f | %s | %.0f |" % (
                mode, variant, n, r.per_id(n), "(base)" if mode == "raw" else
                "%+.0f" % (r.per_id(n) - raw), r.slab_kb * 1024 / n))
    return rows


def fault_thread(o: "Options") -> tuple[list[str], list[str]]:
    """Audit with 16 threads (the slice): the userfaultfd thread's waits over THREADS_M lives,
    as rows, and what passes one per WAITS_PER events."""
    found, _ = run_full("audit", ["live", "10", str(THREADS_M), "100", "acked", "1", "16"],
                        _LIVE)
    waits, events = int(found[0].group(10)), 2 * THREADS_M
    rows = ["### Audit's userfaultfd thread, 16 threads",
            "",
            "%d id lives over 16 threads, each on its own channel, beside 10 live ids, under audit "
            "(its default guard): the waits of its fault thread (cmsafe-uffd's voluntary "
            "context switches), each a fault it answered alone. Held: at most one per %d events."
            % (THREADS_M, WAITS_PER),
            "",
            "| events | fault thread's waits | per event |",
            "|---:|---:|---:|",
            "| %d | %d | %.3f |" % (events, waits, waits / events), ""]
    if waits < 0:
        return rows, ["audit: no userfaultfd thread (cmsafe-uffd) in the process: its waits "
                      "were not counted"]
    limit = events // WAITS_PER
    return rows, ["audit: its userfaultfd thread waited %d times over %d events of 16 threads "
                  "(at most %d)" % (waits, events, limit)] if waits > limit else []


def over_memory(o: "Options", n: int) -> list[str]:
    """What passes MEMORY_LIMIT bytes per live id over raw at N ids."""
    raw = own("raw", n, o.warm, "acked").per_id(n)
    more = {mode: own(mode, n, o.warm, "acked").per_id(n) - raw for mode in o.modes}
    return ["%s adds %.0f bytes per live id over raw at %d ids (at most %d)"
            % (mode, extra, n, MEMORY_LIMIT) for mode, extra in more.items()
            if extra > MEMORY_LIMIT]


@dataclass
class Options:
    sizes: list[int] = field(default_factory=lambda: list(SIZES))
    m: int = M
    warm: int = WARM
    runs: int = RUNS
    modes: list[str] = field(default_factory=lambda: list(MODES))
    variants: list[str] = field(default_factory=lambda: list(VARIANTS) + [CONNECTIONS])
    pending: list[int] = field(default_factory=lambda: list(PENDING))
    limit: int = LIMIT_IDS
    setup: list[int] = field(default_factory=lambda: list(SETUP))
    counts: list[int] = field(default_factory=lambda: list(SIZES))
    conns: list[int] = field(default_factory=lambda: list(CONN_SIZES))
    conn_counts: list[int] = field(default_factory=lambda: list(CONN_COUNTS))
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
                                       scale_host.some_of("--variants", v,
                                                          list(VARIANTS) + [CONNECTIONS])),
    "--conns": lambda o, v: setattr(o, "conns", sorted(set(scale_host.numbers("--conns", v)))),
    "--pending": lambda o, v: setattr(o, "pending", zero_or_more("--pending", v)),
    "--limit": lambda o, v: setattr(o, "limit", scale_host.one_number("--limit", v)),
    "--setup": lambda o, v: setattr(o, "setup", zero_or_more("--setup", v)),
    "--counts": lambda o, v: setattr(o, "counts", [n for n in zero_or_more("--counts", v) if n]),
    "--conn-counts": lambda o, v: setattr(o, "conn_counts",
                                          [n for n in zero_or_more("--conn-counts", v) if n]),
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
        o.counts, o.conn_counts = [], []
    if part != "mimic":
        o.mimic = []
    if part == "own" and not o.own:
        o.own = [n for n in SIZES if n >= 1000]


def as_slice(o: Options) -> None:
    o.slice = True
    o.sizes, o.m, o.runs, o.variants = [10, 5000], 300, 1, ["acked"]
    o.pending, o.limit, o.setup, o.counts, o.conn_counts = [1000], LIMIT_IDS, [], [], []


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
        qps = device_qps()
        if qps:
            out[-1] += (" This device allows %d QPs (ibv_devinfo's max_qp); cmtime without "
                        "mimic mode makes two a connection on one address (the client's and "
                        "the server's), so its QPs run out past %d connections" % (qps,
                                                                               qps // 2))
            out[-1] += ("." if qps // 2 <= LIBRDMACM_IDS else
                        ", past librdmacm's %d ids a process: here the ids run out first, and "
                        "mimic mode times the CM without QPs' costs." % LIBRDMACM_IDS)
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


def device_qps() -> int | None:
    """The QPs the guest's RDMA device allows (ibv_devinfo -v's max_qp); None when unread."""
    try:
        text = subprocess.run(["ibv_devinfo", "-v"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^\s*max_qp:\s*(\d+)", text, re.M)
    return int(m.group(1)) if m else None


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
    some variants only), each with a line saying which earlier run made them (a part kept once
    already keeps its own line: it is older than that run)."""
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
                said = any(x.startswith("Not run again:") for x in part[1:])
                out += ([""] if out else []) + [part[0]] + ([] if said else ["", note]) \
                    + part[1:]
            part = [line]
        elif part:
            part.append(line)
    return out


def guest_cpus() -> str:
    n = os.cpu_count() or 0
    return ", a guest of %d vCPU%s" % (n, "" if n == 1 else "s")


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
    if o.variants or o.pending or o.limit or o.counts or o.conn_counts or o.own:
        needs.append((BIN, "make target/bench/scale_live"))
    for need, how in needs:
        if not os.path.exists(need):
            guest_mod.die(PROG, "%s is missing (%s)" % (need, how), 1)
    if not os.environ.get("RXE_ADDR"):
        guest_mod.die(PROG, "RXE_ADDR is not set: run it in the guest (scripts/rxe-vm)", 1)
    body: list[str] = []
    counts: list[str] = []
    conn_counts: list[str] = []
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
        _owned.clear()
        for variant in o.variants:
            if variant == CONNECTIONS:
                conns = {(mode, n): r for mode in o.modes
                         for n, r in connections(mode, o.conns, o.runs).items()}
                for (mode, n), r in conns.items():
                    say("%s %s %d: %s µs per connection life, %s µs per event, %.2f of the "
                        "reference" % (variant, mode, n, us(r.life_ns), us(r.event_ns),
                                       r.relative))
                body += ["### Time, %s" % CONN_TITLE, "",
                         "%d connection lives at each size, 7 events each (ADDR_RESOLVED, "
                         "ROUTE_RESOLVED, CONNECT_REQUEST, the client's CONNECT_RESPONSE, "
                         "ESTABLISHED, DISCONNECTED at the server and at the client); the "
                         "storm's events, held connections in place of its clients."
                         % CONN_M, ""]
                body += growth_table(conns, o.modes, o.conns, "connection life",
                                     "held connections") + [""]
                continue
            title = VARIANTS[variant][3]
            lives = {(mode, n): r for mode in o.modes
                     for n, r in live(mode, o.sizes, o.m, o.warm, variant, o.runs,
                                      o.slice).items()}
            for (mode, n), r in lives.items():
                say("%s %s %d: %s µs per id life, %s µs per event, %.2f of the reference"
                    % (variant, mode, n, us(r.life_ns), us(r.event_ns), r.relative))
            body += ["### Time, %s" % title, ""] + growth_table(lives, o.modes, o.sizes) + [""]
            if variant in OWN_VARIANTS and not o.time_only:
                memory += memory_rows(o, variant)
            if o.slice:
                problems += over_memory(o, o.sizes[-1])
                if "audit" in o.modes:
                    rows, over = fault_thread(o)
                    body += rows
                    problems += over
            if variant == "acked":
                # The event's time over the reference's, the figure the growth is read from;
                # the id life in µs (no reference beside it).
                for what, key, scale, unit in (
                        ("event", "relative", 1, "an event's time (get and ack) over the "
                         "reference's"),
                        ("life", "life_ns", 1000, "µs per id life")):
                    series = {mode: [(n, getattr(lives[(mode, n)], key) / scale)
                                     for n in o.sizes] for mode in o.modes}
                    write_plot(o, "scale-%s.svg" % what,
                               plot.line_plot("Time per %s as live ids grow (Soft-RoCE)"
                                              % ("event" if what == "event" else "id life"),
                                              "live cm_ids", unit, series),
                               figures, "%s against live ids" % unit)
                big = [n for n in o.sizes if n >= 1000]
                if big and not o.time_only:
                    series = {mode: [(n, own(mode, n, o.warm, variant).per_id(n)) for n in big]
                              for mode in o.modes}
                    write_plot(o, "scale-memory.svg",
                               plot.line_plot("Resident memory per live id (Soft-RoCE)",
                                              "live cm_ids", "bytes per id (VmRSS)", series),
                               figures, "bytes per live id against live ids")
        if memory and not o.time_only:
            body += ["### Memory per live id",
                     "",
                     "The N ids made after the warm-up, with no lives, in a process of their "
                     "own: VmRSS after they were made less VmRSS before, over N; and the "
                     "kernel's Slab (/proc/meminfo) the same way, for scale: the kernel's own "
                     "cost of an id, which no mode changes. (The threads variant makes its ids "
                     "as acked does.)",
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
        if o.conn_counts:
            counted = {}
            for mode in o.modes:
                for n in o.conn_counts:
                    c = counted[(mode, n)] = count_conns(mode, n)
                    say("count conns %s %d: %.0f instructions per connection life, %.0f per "
                        "event" % (mode, n, c.life, c.event))
            table, over = scale_host.cost_table(counted, o.modes, o.conn_counts,
                                                "held connections", "connection life")
            problems += over
            conn_counts = [
                CONN_COUNT_HEADING,
                "",
                "`scripts/scale-live --conn-counts %s` in the Soft-RoCE guest: %d connection "
                "lives (no QP, both sides in one process: the 7 events of the time section's "
                "connections, the storm's events) after %d more as a warm-up, beside N "
                "connections held established, under callgrind as above (inside scale_live's "
                "`measure_conns` only). A ratio above %.2f fails the run."
                % (",".join(map(str, o.conn_counts)), COUNT_CONNS, CONN_WARM,
                   scale_host.LIMIT),
                ""] + table
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
    intro = ("`scripts/scale-live --m %d --warm %d --runs %d%s` in the Soft-RoCE guest "
             "(bench/scale_live.c%s): raw librdmacm, the API, the preload in audit and safe "
             "mode, one after another in one guest; times are the median of %d runs, %s, "
             "each size over the smallest, and each mode's growth over raw's. The growth is of "
             "each event's time over the reference's, a fixed piece of work timed just before "
             "it: under emulation the guest's speed moves between two states, one about twice "
             "the other, for seconds at a time, and the reference moves with it. A guest is not "
             "a bare machine: the ratios are the figures to read, not the microseconds. Each "
             "resolved id holds a local port of the kernel's ephemeral range "
             "(net.ipv4.ip_local_port_range, 28,232 ports by default): past that many resolved "
             "ids on one address rdma_resolve_addr fails with EADDRNOTAVAIL, raw librdmacm as "
             "well, so a run of more widens it to %s for its time."
             % (o.m, o.warm, o.runs,
                " --only time --variants " + ",".join(o.variants) if o.time_only else "",
                guest_cpus(), o.runs,
                "one process a mode taking the sizes once, the largest first (whose memory is "
                "the table's)" if o.slice else "a process each taking the sizes up and back "
                "down (a size's figure the mean of its visits)", WIDE_RANGE))
    sections = []
    if body:
        body += kept_from(o.out, HEADING, body)
        if not figures:
            figures = old_figures(o.out, HEADING)
        sections.append(([HEADING, "", intro, ""] + ([" ".join(figures), ""] if figures else [])
                         + body, HEADING))
    if counts:
        sections.append((counts, COUNT_HEADING))
    if conn_counts:
        sections.append((conn_counts, CONN_COUNT_HEADING))
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
