"""The reconnect storm on the real RDMA stack, inside one scripts/rxe-vm guest (scripts/storm).

scripts/storm-in-guest [--conns N] [--clients P] [--waves W] [--servers "cmsafe legacy raw"]
                       [--check-conns N] [--check-waves W] [--legacy-check valgrind|asan]
                       [--wave-timeout S] [--window K] [--control] [--profile-waves W]
                       [--label TEXT] [--results DIR] [--reports]

A wave, for one server: wait for its "ready" line, start P storm_client processes (N/P
connections each), wait for its "established" line, SIGKILL every client at once (the real-time
clock is read just before the kill: the servers' times are CLOCK_REALTIME), and read how long
the server took to see the dead peers and destroy every QP and id. The timed runs (plain -O2
builds) keep the servers up side by side and interleave their waves, rotating the order each
wave, so a slow spell of the emulated machine falls on all of them alike; only one server has
clients at any time. Then the checked runs, one server after the other, at --check-conns x
--check-waves: cmsafe and raw built with ASan+UBSan+LSan (c-tests/lsan.supp); legacy under
valgrind --leak-check=full or as an ASan build, always under the safe-mode preload. --control
also runs the legacy server WITHOUT the preload under ASan, which must report the
heap-use-after-free its ack-then-read makes. --profile-waves W runs each plain server once more
under `perf record -e cpu-clock` for W waves and says which libraries the server's CPU time went
to (skipped when perf is not installed). Results: DIR/storm.tsv, DIR/checks.txt, DIR/storm.md
(the tables), DIR/logs/. Exits non-zero if any run or check fails.

--reports has every run write what its library records into DIR/reports/, named by the run:
the legacy server's preload its report (CMSAFE_REPORT=DIR/reports/legacy-VARIANT-%p.json), the
cmsafe server its flight recorder's dump at exit (CMSAFE_FLIGHT_DUMP=
DIR/reports/cmsafe-VARIANT-flight.json); bin/cmsafe-timeline draws them (`make storm-picture`).
A report is a line written per event, so the legacy server's times are not those of a run
without: a run for the picture, not for the tables.

The checks of each run: the server exits 0 having seen all its waves ("STORM wave=" lines and
the "STORM done" line's waves=W); cmsafe's counters balance (fetched == acked == released,
nothing live); raw fetched as many events as it acked; the legacy server too, and the preload's
summary says safe mode, as many events, 0 findings; an ASan build reports nothing; valgrind's
memcheck 0 errors and no definite or indirect leak.

On Soft-iWARP (scripts/rxe-vm --transport iwarp; the device's node type says so) the programs
are the same (each QP is made before rdma_accept and rdma_connect, every QP of a process shares
one CQ); what differs: siw gives a process at most 144 queue mappings (a QP with shared CQs
takes 2, the CQ 1: docs/stacks.md, "iWARP"), so a server holds at most 71 connections and
--conns above that is refused before any run; and iWARP has no IB CM, so the DREQ/DREP counters
are counted apart ("skip" line) and a dead client's connections end by TCP (its kernel closes
the sockets) rather than by a DREQ.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Sequence

from . import guest, proc, tally
from . import storm_cases as cases

PROG = "storm-in-guest"
SERVER_EXIT_GRACE = 30.0  # seconds a server gets to exit after its last line (or its bound)


# ---- what the servers' lines say ---------------------------------------------------------

def fields(line: str) -> dict[str, str]:
    """The NAME=VALUE words of a STORM line (the last of a name wins, as awk's split does)."""
    v: dict[str, str] = {}
    for word in line.split():
        name, _, value = word.partition("=")
        v[name] = value
    return v


def num(text: str | None) -> float:
    """A number as awk reads one: its leading numeric part, 0 when there is none."""
    m = re.match(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text or "")
    return float(m.group(0)) if m else 0.0


def after(text: str, marker: str) -> str:
    """bash's ${text#*MARKER}: TEXT after the first MARKER, or all of it without one."""
    i = text.find(marker)
    return text[i + len(marker):] if i >= 0 else text


def grep(prefix: str, lines: Sequence[str]) -> list[str]:
    return [line for line in lines if line.startswith(prefix)]


def tsv_row(kind: str, variant: str, wave_line: str, kill: float, ready_us: str, est_us: str,
            cm_before: Sequence[int], cm_after: Sequence[int]) -> list[str]:
    """storm.tsv's row for one wave: its "STORM wave=" line, the kill's time (seconds of the real
    time clock), the ready and established lines' times, the CM counters before and after."""
    v = fields(wave_line)
    ku = kill * 1e6

    def ms(name: str) -> str:
        return "%.1f" % ((num(v.get(name)) - ku) / 1000)

    def count(name: str) -> str:
        return "%d" % int(num(v.get(name)))

    return [kind, variant, count("wave"), count("conns"), ms("first_event_us"),
            ms("last_event_us"), ms("last_destroy_us"),
            "%.1f" % ((num(est_us) - num(ready_us)) / 1000),
            "%.1f" % (num(v.get("destroy_max_us")) / 1000), count("events"),
            count("disconnected"), count("timewait"), count("other"),
            "%.1f" % (num(v.get("cpu_connect_us")) / 1000),
            "%.1f" % (num(v.get("cpu_drain_us")) / 1000)] + \
        ["%d" % (a - b) for a, b in zip(cm_after, cm_before)]


def wave_summary(name: str, row: Sequence[str]) -> str:
    """The line said after each wave, from its storm.tsv row."""
    return ("storm: %s wave %d: kill -> first event %.1f ms, -> last event %.1f ms, -> last id "
            "destroyed %.1f ms (%d DISCONNECTED, %d TIMEWAIT_EXIT, %d other; server CPU %.0f ms; "
            "CM: %d DREQ sent, %d received, %d resent, %d DREP sent)"
            % (name, num(row[2]), num(row[4]), num(row[5]), num(row[6]), num(row[10]),
               num(row[11]), num(row[12]), num(row[14]), num(row[15]), num(row[16]),
               num(row[18]), num(row[17])))


# ---- the checks on a server's logs (shared with the network faults) ----------------------

_COUNTERS = re.compile(r"fetched=([0-9]+) acked=([0-9]+) released=([0-9]+) live_events=0 "
                       r"live_buffers=0 pending=0")
_GOT_ACKED = re.compile(r"got=([0-9]+) acked=([0-9]+)")
_SUMMARY = re.compile(r"mode safe, ([0-9]+) events, 0 findings")
_SAN = re.compile(r"Sanitizer|runtime error")


def done_line(out: Sequence[str]) -> str:
    return "\n".join(grep("STORM done", out))


def cmsafe_counters(out: Sequence[str]) -> tuple[bool, str]:
    """cmsafe_stats_get at the end: every event fetched was acked and released, nothing live.
    The verdict and the counters' text."""
    st = "\n".join(grep("STORM cmsafe", out))
    m = _COUNTERS.search(st)
    ok = bool(m) and m.group(1) == m.group(2) == m.group(3)
    return ok, st[len("STORM cmsafe "):] if st.startswith("STORM cmsafe ") else st


def raw_acks(out: Sequence[str]) -> tuple[bool, str]:
    """Every event rdma_get_cm_event gave was acked. The verdict and the counts' text."""
    done = done_line(out)
    m = _GOT_ACKED.search(done)
    return bool(m) and m.group(1) == m.group(2), after(done, "events=")


def preload_summary(err: Sequence[str]) -> str:
    lines = [line for line in err if line.startswith("==cmsafe== summary:")]
    return lines[-1] if lines else ""


def legacy_preload(out: Sequence[str], err: Sequence[str]) -> tuple[bool, str]:
    """The legacy server acked every event it got, and the preload's summary says safe mode, as
    many events, no finding. The verdict and its detail."""
    done = done_line(out)
    summary = preload_summary(err)
    m = _GOT_ACKED.search(done)
    s = _SUMMARY.search(summary)
    ok = bool(m) and m.group(1) == m.group(2) and bool(s) and s.group(1) == m.group(1)
    shown = summary[len("==cmsafe== summary: "):] if summary.startswith("==cmsafe== summary: ") \
        else summary
    return ok, "%s; preload: %s" % (after(done, "events="), shown)


def sanitizer_reported(err: Sequence[str]) -> bool:
    return any(_SAN.search(line) for line in err)


_LOST = re.compile(r"definitely lost: [0-9,]* bytes|indirectly lost: [0-9,]* bytes|"
                   r"possibly lost: [0-9,]* bytes|All heap blocks were freed")
_VG_ERRORS = re.compile(r"Invalid |uninitialised|definitely lost in|indirectly lost in")


def valgrind_verdict(err: Sequence[str]) -> tuple[bool, str]:
    """memcheck: 0 errors, no invalid access, no definite or indirect leak; the detail names
    its leak summary."""
    lost = ",".join(m.group(0) for line in err for m in _LOST.finditer(line))
    ok = any("ERROR SUMMARY: 0 errors" in line for line in err) and \
        not any(_VG_ERRORS.search(line) for line in err)
    return ok, "memcheck: 0 errors; %s" % (lost or "no leak summary")


def waves_seen(out: Sequence[str], waves: int) -> bool:
    """Every wave reported ("STORM wave=" lines) and the done line says as many."""
    return len(grep("STORM wave=", out)) == waves and (" waves=%d " % waves) in done_line(out)


def grep_after(pattern: str, lines: Sequence[str], count: int) -> list[str]:
    """grep -A COUNT: each line matching PATTERN and the COUNT lines after it."""
    regex = re.compile(pattern)
    keep: set[int] = set()
    for i, line in enumerate(lines):
        if regex.search(line):
            keep.update(range(i, min(i + count + 1, len(lines))))
    return [lines[i] for i in sorted(keep)]


def control_verdict(rc: int, err: Sequence[str]) -> tuple[bool, str]:
    """The legacy server without the preload under ASan: it must fail with the
    heap-use-after-free of the event freed in rdma_ack_cm_event, allocated in
    rdma_get_cm_event."""
    ok = rc != 0 and any("ERROR: AddressSanitizer: heap-use-after-free" in line for line in err) \
        and any("rdma_ack_cm_event" in line for line in grep_after("^freed by thread", err, 12)) \
        and any("rdma_get_cm_event" in line
                for line in grep_after("^previously allocated by thread", err, 12))
    if not ok:
        return False, "ASan did not report the legacy server's use after ack (exit %d)" % rc
    where = ""
    for line in err:
        found = re.findall(r"storm_server_legacy\.c:[0-9]*", line)
        if found:
            where = "\n".join(found)
            break
    return True, ("without the preload ASan reports the bug: heap-use-after-free, freed in "
                  "rdma_ack_cm_event, read at %s" % where)


# ---- the tables ---------------------------------------------------------------------------

def median(values: Sequence[float]) -> float:
    a = sorted(values)
    n = len(a)
    if n == 0:
        return 0.0
    return a[(n - 1) // 2] if n % 2 else (a[n // 2 - 1] + a[n // 2]) / 2


def _div(a: float, b: float) -> float:
    if b:
        return a / b
    return float("nan") if a == 0 else float("inf")


def read_tsv(path: str) -> list[list[str]]:
    """A results table's rows without its header line."""
    return [line.split("\t") for line in proc.read_lines(path)[1:]]


@dataclass
class _Waves:
    """One server's plain waves, in file order: each wave's number and row."""

    rows: list[list[float]] = field(default_factory=list)
    by_wave: dict[int, int] = field(default_factory=dict)

    def col(self, c: int | str) -> list[float]:
        if isinstance(c, str):  # span: first -> last event; lag: last event -> last destroy
            return [r[5] - r[4] if c == "span" else r[6] - r[5] for r in self.rows]
        return [r[c - 1] for r in self.rows]

    def med(self, c: int | str) -> float:
        return median(self.col(c))


def timing_tables(rows: Sequence[Sequence[str]], servers: Sequence[str], conns: int,
                  clients: int, transport: str) -> str:
    """The tables of the timed (plain) runs from storm.tsv's rows."""
    w: dict[str, _Waves] = {}
    maxw = 0
    maxlag = minfirst = maxfirst = 0.0
    seen = 0
    sums: dict[str, list[float]] = {}
    dmax: dict[str, float] = {}
    for r in rows:
        if len(r) < 2 or r[1] != "plain":
            continue
        s = r[0]
        values = [num(x) for x in r]
        waves = w.setdefault(s, _Waves())
        waves.rows.append(values)
        waves.by_wave[int(values[2])] = len(waves.rows) - 1
        maxw = max(maxw, int(values[2]))
        t = sums.setdefault(s, [0.0] * 7)
        for i, c in enumerate((11, 12, 13, 16, 17, 18, 19)):
            t[i] += values[c - 1] if c <= len(values) else 0.0
        if s not in dmax or values[8] > dmax[s]:
            dmax[s] = values[8]
        lag = values[6] - values[5]
        if not seen or lag > maxlag:
            maxlag = lag
        if not seen or values[4] < minfirst:
            minfirst = values[4]
        if not seen or values[4] > maxfirst:
            maxfirst = values[4]
        seen += 1
    empty = _Waves()

    def of(s: str) -> _Waves:
        return w.get(s, empty)

    def pairmed(s: str, c: int) -> float:
        """The waves of s and raw with the same number ran back to back: their ratio shares the
        machine's mood of the moment."""
        ratios = []
        raw = of("raw")
        for n in range(1, maxw + 1):
            if n in of(s).by_wave and n in raw.by_wave and raw.rows[raw.by_wave[n]][c - 1] > 0:
                ratios.append(of(s).rows[of(s).by_wave[n]][c - 1] / raw.rows[raw.by_wave[n]][c - 1])
        return median(ratios)

    def avg(s: str, c: int) -> float:
        col = of(s).col(c)
        return _div(sum(col), len(col))

    def lo_hi(s: str, c: int) -> tuple[float, float]:
        col = of(s).col(c) or [0.0]
        return min(col), max(col)

    has_raw = bool(of("raw").rows)
    o: list[str] = []
    o.append("Time from the SIGKILL of every client to the last rdma_destroy_id returning, in ms "
             "(%d connections from %d client processes, per wave):\n\n" % (conns, clients))
    o.append("| wave |" + "".join(" %s |" % cases.title(s) for s in servers) + "\n")
    o.append("| ---: |" + " ---: |" * len(servers) + "\n")
    for n in range(1, maxw + 1):
        o.append("| %d |" % n + "".join(
            " %s |" % ("%.1f" % of(s).rows[of(s).by_wave[n]][6] if n in of(s).by_wave else "-")
            for s in servers) + "\n")
    o.append("| **median** |" + "".join(" **%.1f** |" % of(s).med(7) for s in servers) + "\n")
    o.append("| mean |" + "".join(" %.1f |" % avg(s, 7) for s in servers) + "\n")
    o.append("| min - max |" + "".join(" %.1f - %.1f |" % lo_hi(s, 7) for s in servers) + "\n")
    if has_raw:
        o.append("| **ratio to raw (medians)** |" + "".join(
            " **%.2f** |" % _div(of(s).med(7), of("raw").med(7)) for s in servers) + "\n")
        o.append("| ratio to raw (means) |" + "".join(
            " %.2f |" % _div(avg(s, 7), avg("raw", 7)) for s in servers) + "\n")
        o.append("| ratio to raw (median of the per-wave ratios) |" + "".join(
            " %.2f |" % pairmed(s, 7) for s in servers) + "\n")
        if of("legacy").rows:
            r = _div(of("legacy").med(7), of("raw").med(7))
            o.append("\nIssue 9's target: the legacy server under the safe preload within 1.05x "
                     "the raw server (medians): %.2f, %s.\n" % (r, "met" if r <= 1.05 else "not met"))
    o.append("\nWhere the time goes (medians over the waves; ms of wall-clock time from the kill, "
             "and the server process's own CPU time, user + system):\n\n")
    o.append("| server | kill -> first event | first -> last event | last event -> last destroy "
             "| slowest rdma_destroy_id (max) | server CPU, kill to last destroy | its ratio to "
             "raw (per-wave) | connect %d: wall | connect: server CPU | its ratio to raw "
             "(per-wave) | events after the kill, all waves |\n" % conns)
    o.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
    for s in servers:
        if not of(s).rows:
            continue
        t = sums[s]
        o.append("| %s | %.1f | %.1f | %.1f | %.1f | %.0f | %s | %.0f | %.0f | %s | %d "
                 "DISCONNECTED, %d TIMEWAIT_EXIT, %d other |\n" % (
                     cases.title(s), of(s).med(5), of(s).med("span"), of(s).med("lag"), dmax[s],
                     of(s).med(15), "%.2f" % pairmed(s, 15) if has_raw else "-", of(s).med(8),
                     of(s).med(14), "%.2f" % pairmed(s, 14) if has_raw else "-",
                     t[0], t[1], t[2]))
    o.append("\nEvent throughput during the drain (medians over the waves): the %d events of a "
             "wave over the time from its first to its last event, which the kernel's delivery "
             "bounds (the servers keep up, see below), and over the server's own CPU time from "
             "the kill to the last destroy, which is what fetching and handling them costs each "
             "server:\n\n" % conns)
    o.append("| server | fetch | events/s, wall (first -> last event) | events per CPU-second of "
             "the server | its ratio to raw |\n| --- | --- | ---: | ---: | ---: |\n")
    for s in servers:
        if not of(s).rows:
            continue
        span = of(s).med("span")
        wall = conns * 1000 / span if span > 0 else 0
        cpu = conns * 1000 / of(s).med(15) if of(s).med(15) > 0 else 0
        cpu_raw = conns * 1000 / of("raw").med(15) if of("raw").med(15) > 0 else 0
        server = cases.SERVERS.get(s)
        o.append("| %s | %s | %.0f | %.0f | %s |\n" % (
            cases.title(s), server.fetch if server else "", wall, cpu,
            "%.2f" % (cpu / cpu_raw) if has_raw and cpu_raw > 0 else "-"))
    if seen:
        o.append("\nIn every wave of every server the first event came %.0f-%.0f ms after the "
                 "kill, and the last rdma_destroy_id returned at most %.1f ms after the last event "
                 "arrived: the servers keep up with the events as they come, and the time from the "
                 "kill to the last destroy is mostly the kernel tearing down the dead clients' ids "
                 "and delivering the %d DISCONNECTED events, on the same vCPUs the server runs "
                 "on.\n" % (minfirst, maxfirst, maxlag, conns))
    if transport == "iwarp":
        o.append("\nNo IB CM on iWARP: no DREQ/DREP counters (counted apart under Checks).\n")
        return "".join(o)
    o.append("\nWhat the kernel's IB CM did between the kill and the end of each wave, summed over "
             "the waves (the sysfs counters of the one port both ends use):\n\n")
    o.append("| server | DREQ sent | DREQ received | DREQ resent | DREP sent |\n"
             "| --- | ---: | ---: | ---: | ---: |\n")
    for s in servers:
        if of(s).rows:
            t = sums[s]
            o.append("| %s | %d | %d | %d | %d |\n" % (cases.title(s), t[3], t[4], t[6], t[5]))
    return "".join(o)


def rss_table(rows: Sequence[Sequence[str]]) -> str:
    """Each run's peak RSS and its ratio to the raw server's run of the same build."""
    rss = {r[0]: num(r[1]) for r in rows}
    o = ["\nPeak resident memory of each server process (getrusage ru_maxrss at exit), and its "
         "ratio to the raw baseline of the same kind of build:\n\n",
         "| run | peak RSS, KiB | ratio to raw |\n| --- | ---: | ---: |\n"]
    for r in rows:
        base = re.sub(r"^[a-z]+-", "raw-", r[0], count=1)
        o.append("| %s | %d | %s |\n" % (r[0], rss[r[0]], "%.2f" % (rss[r[0]] / rss[base])
                                          if rss.get(base, 0) > 0 else "-"))
    return "".join(o)


def profile_rows(kind: str, report: Sequence[str]) -> list[str]:
    """perf report --sort dso -n: the rows "KIND\tSAMPLES\tDSO" of its sample lines."""
    rows = []
    for line in report:
        f = line.split()
        if len(f) >= 2 and f[0].endswith("%") and f[1].isdigit():
            rows.append("%s\t%s\t%s" % (kind, f[1], f[2] if len(f) > 2 else ""))
    return rows


def profile_symbols(kind: str, report: Sequence[str], limit: int = 4) -> list[str]:
    """perf report --sort dso,sym: the first LIMIT lines of the cmsafe libraries' symbols."""
    rows = []
    for line in report:
        f = line.split()
        if len(f) >= 2 and f[0].endswith("%") and "libcmsafe" in f[1]:
            rows.append("%s: %s" % (kind, line.lstrip(" ")))
    return rows[:limit]


def profile_table(rows: Sequence[Sequence[str]], servers: Sequence[str]) -> str:
    tot: dict[str, float] = {}
    c: dict[tuple[str, str], float] = {}
    for r in rows:
        s, n = r[0], num(r[1])
        tot[s] = tot.get(s, 0) + n
        g = cases.profile_group(r[2] if len(r) > 2 else "")
        c[s, g] = c.get((s, g), 0) + n
    o = [cases.PROFILE_HEADER + "\n", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"]
    for s in servers:
        if not tot.get(s):
            continue
        o.append("| %s | %d |" % (cases.title(s), tot[s]) + "".join(
            " %.1f |" % (100 * c.get((s, g), 0) / tot[s]) for g in cases.PROFILE_GROUPS) + "\n")
    return "".join(o)


# ---- the run ------------------------------------------------------------------------------

@dataclass
class Options:
    conns: int = 100
    clients: int = 5
    waves: int = 2
    servers: str = "cmsafe legacy raw"
    check_conns: int = 0
    check_waves: int = 0
    legacy_check: str = "valgrind"
    wave_timeout: int = 120
    window: int = 16
    control: bool = False
    profile_waves: int = 0
    label: str = ""
    results: str = "target/storm/results"
    reports: bool = False


_NUMBERS = {"--conns": "conns", "--clients": "clients", "--waves": "waves",
            "--check-conns": "check_conns", "--check-waves": "check_waves",
            "--wave-timeout": "wave_timeout", "--window": "window",
            "--profile-waves": "profile_waves"}
_TEXTS = {"--servers": "servers", "--legacy-check": "legacy_check", "--label": "label",
          "--results": "results"}


def parse_options(prog: str, argv: Sequence[str], o: object, flags: dict[str, str],
                  numbers: dict[str, str], texts: dict[str, str]) -> set[str]:
    """Sets O's attributes from ARGV as bash's option loops did: FLAGS alone (True), NUMBERS and
    TEXTS with the word after them; anything else is a usage error (exit 2). The attributes
    given."""
    given: set[str] = set()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in flags:
            setattr(o, flags[a], True)
            given.add(flags[a])
            i += 1
        elif (a in numbers or a in texts) and i + 1 < len(argv):
            value = argv[i + 1]
            if a in numbers:
                try:
                    setattr(o, numbers[a], int(value))
                except ValueError:
                    guest.die(prog, "%s takes a number: %s" % (a, value))
                given.add(numbers[a])
            else:
                setattr(o, texts[a], value)
                given.add(texts[a])
            i += 2
        else:
            guest.die(prog, "unknown option %s" % a)
    return given


def parse_args(argv: Sequence[str]) -> Options:
    o = Options()
    given = parse_options(PROG, argv, o, {"--control": "control", "--reports": "reports"},
                          _NUMBERS, _TEXTS)
    if "check_conns" not in given:
        o.check_conns = o.conns
    if "check_waves" not in given:
        o.check_waves = o.waves
    if o.legacy_check not in ("valgrind", "asan"):
        guest.die(PROG, "--legacy-check valgrind|asan")
    return o


def seed() -> str:
    return "0x%016x" % int.from_bytes(os.urandom(8), "little")


def vcpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def mem_mib() -> str:
    for line in proc.read_lines("/proc/meminfo"):
        if line.startswith("MemTotal"):
            return "%d MiB" % (int(line.split()[1]) // 1024)
    return "0 MiB"


def kill_all(procs: Sequence[subprocess.Popen]) -> None:
    """SIGKILL at once, then reap: the storm's way of making the peers vanish."""
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


def record_env(kind: str, variant: str, reports: str) -> list[str]:
    """With --reports: the environment that has KIND's server in VARIANT write what its library
    records into the directory REPORTS, named by the run: the preload's report for the legacy
    server (CMSAFE_REPORT, one file a process), the flight recorder's dump at exit for the
    cmsafe server (CMSAFE_FLIGHT_DUMP); the raw server links neither."""
    if kind == "legacy":
        return ["CMSAFE_REPORT=%s/legacy-%s-%%p.json" % (reports, variant)]
    if kind == "cmsafe":
        return ["CMSAFE_FLIGHT_DUMP=%s/cmsafe-%s-flight.json" % (reports, variant)]
    return []


class ServerRun:
    """One storm server: its process, the lines read so far, its clients of the wave."""

    def __init__(self, name: str, kind: str, variant: str, conns: int, waves: int,
                 port: int, seed_text: str, argv: list[str], log: str):
        self.name, self.kind, self.variant = name, kind, variant
        self.conns, self.waves, self.port, self.seed = conns, waves, port, seed_text
        self.why = ""
        self.clients: list[subprocess.Popen] = []
        self.kill_time = 0.0
        self.ready = self.est = ""
        self.t0 = time.time()
        self.bg = proc.Background(argv, log)
        self.out_path = log + ".out"
        self.err_path = log + ".err"
        self._f = open(self.out_path, "rb")
        self._partial = b""

    def next_line(self, timeout: float) -> str | None:
        """The server's next whole line within TIMEOUT seconds; None when none came (self.eof
        says whether the server has ended with nothing more to say)."""
        deadline = time.monotonic() + timeout
        self.eof = False
        while True:
            chunk = self._f.readline()
            if chunk:
                self._partial += chunk
                if self._partial.endswith(b"\n"):
                    line, self._partial = self._partial[:-1], b""
                    return line.decode("utf-8", "replace")
                continue
            if not self.bg.alive():
                chunk = self._f.readline()
                if chunk:
                    self._partial += chunk
                    continue
                if self._partial:  # its last line without newline
                    line, self._partial = self._partial, b""
                    return line.decode("utf-8", "replace")
                self.eof = True
                return None
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def close(self) -> None:
        self._f.close()


class Storm:
    def __init__(self, opts: Options, g: guest.Guest, record):
        self.o = opts
        self.g = g
        self.t = tally.Tally("storm", record=record)
        self.logs = os.path.join(opts.results, "logs")
        self.tsv = os.path.join(opts.results, "storm.tsv")
        self.rss = os.path.join(opts.results, "rss.tsv")
        self.tmp = tempfile.mkdtemp(prefix="storm.", dir="/tmp")
        self.port = 7600
        self.root = os.getcwd()
        self.cm_port = "/sys/class/infiniband/%s/ports/1" % g.dev

    def say(self, text: str) -> None:
        self.t.say("storm: " + text)

    def show(self, path: str, n: int = 25) -> None:
        for line in proc.read_lines(path)[-n:]:
            self.t.say("     | " + line)

    def append(self, path: str, text: str) -> None:
        with open(path, "a") as f:
            f.write(text)

    def cm_counters(self) -> list[int]:
        """The IB CM's DREQ/DREP counters of the port both ends use; iWARP has none (0s)."""
        values = []
        for name in cases.CM_COUNTERS:
            v = 0
            if self.g.transport == "ib":
                lines = proc.read_lines(os.path.join(self.cm_port, name))
                if lines and lines[0].strip().isdigit():
                    v = int(lines[0].strip())
            values.append(v)
        return values

    def server_cmd(self, kind: str, variant: str) -> tuple[list[str], list[str]]:
        """The command of KIND's server in VARIANT, and the same with the tree's relative paths
        (for the results)."""
        exe = "%s/storm_server_%s" % (cases.BIN, kind)
        if variant not in ("plain", "profile"):
            exe = "%s/asan/storm_server_%s" % (cases.BIN, kind)
        cmd: list[str] = []
        shown: list[str] = []
        if self.o.reports:
            reports = os.path.join(self.o.results, "reports")
            shown = record_env(kind, variant, reports)
            cmd = record_env(kind, variant, os.path.join(self.root, reports))
            cmd = ["env"] + cmd if cmd else cmd
        if kind == "legacy":
            cmd = ["env", "LD_PRELOAD=%s/%s" % (self.root, cases.PRELOAD),
                   "CMSAFE_MODE=safe"] + cmd[1:]
            shown = ["LD_PRELOAD=%s" % cases.PRELOAD, "CMSAFE_MODE=safe"] + shown
            if variant == "valgrind":
                late = "CMSAFE_LATE_ACK_MS=%s" % cases.VALGRIND_LATE_ACK_MS
                exe = "%s/storm_server_legacy" % cases.BIN
                cmd += [late] + list(cases.VALGRIND)
                shown += [late] + list(cases.VALGRIND)
            elif variant == "asan":
                # The preload comes first in the library list, ahead of libasan; it does not
                # interpose malloc, so ASan still sees every allocation (the preload's included).
                asan = "ASAN_OPTIONS=%s:verify_asan_link_order=0" % cases.ASAN_OPTIONS
                cmd = ["env", asan] + cmd[1:]
                shown = [asan] + shown
        cmd.append(exe)
        shown.append(exe)
        if variant == "profile":  # perf follows env's exec into the server
            data = "%s.perf.data" % kind
            if cmd[0] == "env":
                shown = ["env"] + shown
            cmd = list(cases.PERF_RECORD) + ["-o", os.path.join(self.tmp, data), "--"] + cmd
            shown = list(cases.PERF_RECORD) + ["-o", data, "--"] + shown
        return cmd, shown

    # ---- one server's run: start, its waves, finish ---------------------------------------

    def start(self, name: str, kind: str, variant: str, n: int, w: int) -> ServerRun:
        s = seed()
        self.port += 1
        cmd, shown = self.server_cmd(kind, variant)
        args = [self.g.addr, str(self.port), s, str(n), str(w), str(self.o.wave_timeout)]
        text = " ".join(shown + args)
        self.append(os.path.join(self.logs, name + ".cmd"), text + "\n")
        self.say("%s: %d connections from %d clients x %d waves: %s"
                 % (name, n, self.o.clients, w, text))
        return ServerRun(name, kind, variant, n, w, self.port, s, cmd + args,
                         os.path.join(self.logs, name))

    def expect(self, srv: ServerRun, prefix: str) -> str | None:
        """The server's next line that starts with PREFIX; None on a failure (srv.why says it):
        the server's end, a client dead before the kill, or no line for the wave's bound."""
        if srv.why:
            return None
        quiet = 0
        while True:
            line = srv.next_line(1.0)
            if line is not None:
                if line.startswith(prefix):
                    return line
                continue
            if srv.eof:
                srv.why = 'the server ended its output before "%s"' % prefix
                return None
            quiet += 1
            if srv.kill_time == 0 and any(c.poll() is not None for c in srv.clients):
                srv.why = "a client exited before the kill"
                return None
            if quiet > self.o.wave_timeout + 30:
                srv.why = 'no word from the server for %ds waiting for "%s"' % (quiet, prefix)
                return None

    def wave(self, srv: ServerRun, w: int) -> bool:
        line = self.expect(srv, "STORM ready wave=%d " % w)
        if line is None:
            return False
        srv.ready = line.rsplit("us=", 1)[-1]
        srv.kill_time = 0.0
        per, extra = divmod(srv.conns, self.o.clients)
        base = 0
        for c in range(self.o.clients):
            k = per + (1 if c < extra else 0)
            if k <= 0:
                continue
            with open(os.path.join(self.logs, "%s.client%d.log" % (srv.name, c)), "wb") as log:
                srv.clients.append(subprocess.Popen(
                    ["%s/storm_client" % cases.BIN, self.g.addr, str(srv.port), srv.seed, str(w),
                     str(base), str(k), str(self.o.window), str(self.o.wave_timeout)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
            base += k
        line = self.expect(srv, "STORM established wave=%d " % w)
        if line is None:
            return False
        srv.est = line.rsplit("us=", 1)[-1]
        cm_before = self.cm_counters()
        srv.kill_time = time.time()
        kill_all(srv.clients)
        srv.clients = []
        line = self.expect(srv, "STORM wave=%d " % w)
        if line is None:
            return False
        cm_after = self.cm_counters()
        row = tsv_row(srv.kind, srv.variant, line, srv.kill_time, srv.ready, srv.est,
                      cm_before, cm_after)
        self.append(self.tsv, "\t".join(row) + "\n")
        self.t.say(wave_summary(srv.name, row))
        return True

    def finish(self, srv: ServerRun) -> bool:
        name = srv.name
        if not srv.why:
            self.expect(srv, "STORM done ")
        if srv.why and not srv.why.startswith("the server ended"):
            srv.bg.stop(signal.SIGKILL)
        kill_all(srv.clients)
        srv.clients = []
        rc = srv.bg.wait(SERVER_EXIT_GRACE)
        if rc is None:  # said it was done but does not end: a hang at exit
            rc = srv.bg.stop(signal.SIGKILL)
            srv.why = srv.why or "the server did not exit %ds after its last line" \
                % SERVER_EXIT_GRACE
        srv.close()
        out = proc.read_lines(srv.out_path)
        err = proc.read_lines(srv.err_path)
        if srv.why or rc != 0:
            self.t.check(name, False, "%s (exit status %d)" % (srv.why or "the server", rc))
            self.show(srv.err_path, 30)
            for path in sorted(glob.glob(os.path.join(self.logs, name + ".client*.log"))):
                lines = [x for x in proc.read_lines(path)
                         if not x.startswith("STORM-CLIENT established")]
                for x in lines[-5:]:
                    self.t.say("     | client: " + x)
            return False
        done = done_line(out)
        m = re.search(r"maxrss_kb=([0-9]+)", done)
        if m:
            self.append(self.rss, "%s\t%s\n" % (name, m.group(1)))
        self.t.check(name, waves_seen(out, srv.waves),
                     "%d waves of %d: every connection established, every peer's death seen, every "
                     "QP and id destroyed (%.0f s)" % (srv.waves, srv.conns, time.time() - srv.t0))
        if srv.kind == "cmsafe":
            ok, text = cmsafe_counters(out)
            self.t.check(name + " counters", ok, "cmsafe_stats_get: " + text)
        elif srv.kind == "raw":
            ok, text = raw_acks(out)
            self.t.check(name + " acks", ok, "rdma_get_cm_event/rdma_ack_cm_event: " + text)
        elif srv.kind == "legacy":
            ok, text = legacy_preload(out, err)
            if not self.t.check(name + " preload", ok, text):
                self.show(srv.err_path, 15)
        if srv.variant == "asan":
            reported = sanitizer_reported(err)
            self.t.check(name + " sanitizers", not reported,
                         "AddressSanitizer, UBSan and LeakSanitizer: %s"
                         % ("REPORTED (see the log)" if reported else "no report, exit 0"))
            if reported:
                self.show(srv.err_path, 30)
        elif srv.variant == "valgrind":
            ok, text = valgrind_verdict(err)
            if not self.t.check(name + " valgrind", ok, text):
                self.show(srv.err_path, 30)
        return True

    def run_server(self, kind: str, variant: str, n: int, w: int) -> bool:
        srv = self.start("%s-%s" % (kind, variant), kind, variant, n, w)
        for k in range(1, w + 1):
            if not self.wave(srv, k):
                break
        return self.finish(srv)

    def control(self) -> None:
        """The legacy server alone, under ASan and without the preload: the use after ack must
        show."""
        name = "legacy-control"
        s = seed()
        self.port += 1
        exe = "%s/asan/storm_server_legacy" % cases.BIN
        args = [self.g.addr, str(self.port), s, "4", "1", "60"]
        text = " ".join([exe] + args)
        self.append(os.path.join(self.logs, name + ".cmd"), text + "\n")
        self.say("%s: the legacy server without the preload, under ASan: %s" % (name, text))
        server = proc.Background([exe] + args, os.path.join(self.logs, name))
        server.wait_line("STORM ready", 10.0)
        with open(os.path.join(self.logs, name + ".client.log"), "wb") as log:
            client = subprocess.Popen(
                ["timeout", "60", "%s/storm_client" % cases.BIN, self.g.addr, str(self.port), s,
                 "1", "0", "4", "4", "30"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        # Its own bound: one wave of 60 s (the last argument), then ASan's report.
        rc = server.wait(60 + SERVER_EXIT_GRACE)
        if rc is None:
            rc = server.stop(signal.SIGKILL)
        kill_all([client])
        ok, detail = control_verdict(rc, server.err())
        self.t.check(name, ok, detail)
        if not ok:
            self.show(server.log + ".err", 20)

    def profile(self, servers: Sequence[str]) -> str:
        """Each plain server once more under perf; the profile table's file, or ""."""
        if shutil.which("perf") is None:
            self.say("perf is not installed: no profile")
            return ""
        table = os.path.join(self.o.results, "profile.tsv")
        for s in servers:
            if not self.run_server(s, "profile", self.o.conns, self.o.profile_waves):
                continue
            data = os.path.join(self.tmp, "%s.perf.data" % s)
            dso = self.perf_report(data, "dso", ["-n"])
            self.append(table, "".join(r + "\n" for r in profile_rows(s, dso)))
            sym = self.perf_report(data, "dso,sym", [])
            self.append(os.path.join(self.o.results, "profile-symbols.txt"),
                        "".join(r + "\n" for r in profile_symbols(s, sym)))
        return table

    @staticmethod
    def perf_report(data: str, sort: str, extra: list[str]) -> list[str]:
        r = subprocess.run(["perf", "report", "-i", data, "--sort", sort] + extra + ["--stdio"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
        return r.stdout.decode("utf-8", "replace").splitlines()

    # ---- the whole run ------------------------------------------------------------------

    def run(self) -> int:
        o = self.o
        order = o.servers.split()
        start = time.time()
        self.say("device %s (%s) at %s, kernel %s, %d vCPUs, %s"
                 % (self.g.dev, self.g.transport_name, self.g.addr, platform.release(), vcpus(),
                    mem_mib()))
        # Timed: every server up, waves interleaved, the order rotating from wave to wave.
        plain = {s: self.start(s + "-plain", s, "plain", o.conns, o.waves) for s in order}
        for w in range(1, o.waves + 1):
            for i in range(len(order)):
                s = order[(i + w - 1) % len(order)]
                if not self.wave(plain[s], w):
                    self.say("%s-plain: wave %d failed: %s" % (s, w, plain[s].why))
        for s in order:
            self.finish(plain[s])
        mid = time.time()
        # Checked: one server at a time.
        for s in order:
            self.run_server(s, o.legacy_check if s == "legacy" else "asan", o.check_conns,
                            o.check_waves)
        if o.control:
            self.control()
        # Counted apart, with the reason: what has no meaning on this transport.
        if self.g.transport == "iwarp":
            self.t.skip("the IB CM's DREQ/DREP counters",
                        "iWARP has no IB CM (a dead client's kernel closes its TCP connections; "
                        "the server's siw turns the FIN or RST into DISCONNECTED)")
        table = self.profile(order) if o.profile_waves > 0 else ""
        end = time.time()
        md = self.tables(order, "timed runs %.0f s, checked (and profiled) runs %.0f s"
                         % (mid - start, end - mid), table)
        with open(os.path.join(o.results, "storm.md"), "w") as f:
            f.write(md)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.t.say("")
        sys.stdout.write(md)
        self.t.say("")
        self.t.say("storm: %d checks passed, %d failed" % (self.t.passed, self.t.failed))
        return 1 if self.t.failed else 0

    def tables(self, order: Sequence[str], timing: str, profile: str) -> str:
        o = self.o
        stack = ("Soft-iWARP %s" if self.g.transport == "iwarp" else "Soft-RoCE %s") % self.g.dev
        parts = []
        if o.label:
            parts.append("%s\n\n" % o.label)
        parts.append("Guest: qemu TCG (software-emulated CPU), %d vCPUs, %s, kernel %s, %s on a "
                     "dummy netdev. %s.\n\n" % (vcpus(), mem_mib(), platform.release(), stack, timing))
        parts.append(timing_tables(read_tsv(self.tsv), order, o.conns, o.clients,
                                   self.g.transport))
        rss = [line.split("\t") for line in proc.read_lines(self.rss)]
        if rss:
            parts.append(rss_table(rss))
        if profile and os.path.exists(profile) and os.path.getsize(profile) > 0:
            parts.append("\nWhere each server's CPU time goes (perf record -e cpu-clock at 2000 "
                         "Hz, %d wave(s) of %d connections, connect and drain; share of the "
                         "server's samples, %%):\n\n" % (o.profile_waves, o.conns))
            parts.append(profile_table([r.split("\t") for r in proc.read_lines(profile)], order))
            symbols = proc.read_lines(os.path.join(o.results, "profile-symbols.txt"))
            if symbols:
                parts.append("\nThe hottest symbols of the cmsafe libraries in those profiles "
                             "(share of all the server's samples):\n\n")
                parts.append("".join("    %s\n" % x for x in symbols))
        parts.append("\nChecks (timed runs: %d connections x %d waves; checked runs: %d x %d):\n\n"
                     % (o.conns, o.waves, o.check_conns, o.check_waves))
        parts.append("".join("    %s\n" % x
                             for x in proc.read_lines(os.path.join(o.results, "checks.txt"))))
        parts.append("\nCommands (ADDR PORT SEED CONNS WAVES WAVE_TIMEOUT_S; clients: "
                     "`target/storm/storm_client ADDR PORT SEED WAVE BASE COUNT %d %d`, %d "
                     "processes per wave):\n\n" % (o.window, o.wave_timeout, o.clients))
        for path in sorted(glob.glob(os.path.join(self.logs, "*.cmd"))):
            parts.append("    %s\n" % "\n".join(proc.read_lines(path)))
        parts.append("\nEnvironment of every run: ASAN_OPTIONS=%s, LSAN_OPTIONS=suppressions="
                     "c-tests/lsan.supp:print_suppressions=0, UBSAN_OPTIONS=%s.\n"
                     % (cases.ASAN_OPTIONS, cases.UBSAN_OPTIONS))
        return "".join(parts)


def sanitizer_env(root: str) -> None:
    """The sanitizers' settings, for every program the run starts."""
    os.environ["ASAN_OPTIONS"] = cases.ASAN_OPTIONS
    os.environ["LSAN_OPTIONS"] = cases.LSAN_OPTIONS % root
    os.environ["UBSAN_OPTIONS"] = cases.UBSAN_OPTIONS


def missing_programs(prog: str) -> None:
    for f in cases.PROGRAMS:
        path = os.path.join(cases.BIN, f)
        if not os.access(path, os.X_OK):
            guest.die(prog, "%s is missing: make storm-bins" % path)


def main(argv: list[str]) -> int:
    os.chdir(guest.project_root())
    if not os.environ.get("RXE_ADDR"):
        guest.die(PROG, "run this inside scripts/rxe-vm")
    o = parse_args(argv)
    logs = os.path.join(o.results, "logs")
    shutil.rmtree(o.results, ignore_errors=True)
    try:
        os.makedirs(logs)
        if o.reports:
            os.makedirs(os.path.join(o.results, "reports"))
    except OSError:
        guest.die(PROG, "cannot create %s (the guest writes under target/ only)" % logs)
    with open(os.path.join(o.results, "storm.tsv"), "w") as f:
        f.write("\t".join(cases.TSV_COLUMNS) + "\n")
    open(os.path.join(o.results, "rss.tsv"), "w").close()
    sanitizer_env(os.getcwd())
    missing_programs(PROG)
    if not os.path.exists(cases.PRELOAD):
        guest.die(PROG, "%s is missing: make preload" % cases.PRELOAD)
    os.environ.setdefault("RXE_DEV", "rxe0")
    g = guest.from_env(PROG)
    if g.transport == "iwarp" and max(o.conns, o.check_conns) > cases.IWARP_MAX_CONNS:
        guest.die(PROG, "on iWARP a server holds at most 71 connections (siw: 144 queue mappings "
                  "per process, 2 per QP and 1 for the shared CQ); --conns %d, --check-conns %d"
                  % (o.conns, o.check_conns))
    with open(os.path.join(o.results, "checks.txt"), "w") as record:
        return Storm(o, g, record).run()
