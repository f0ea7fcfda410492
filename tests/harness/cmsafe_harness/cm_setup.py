"""Connection setup on the real stack (scripts/bench-cm-setup-in-guest; make setup-bench, part
of make bench), run inside scripts/rxe-vm:
  cmtime (rdma-core's) raw, under the preload's safe mode, under its audit mode;
  bench/cm_setup (cmtime's steps in one process) raw and on the cmsafe API;
  and two controls that say what this run can resolve: cmtime raw a second time in each round
  (raw against raw: the run's own noise, place in the round included) and under the preload
  with CMSAFE_MODE=off (loaded, every call passed straight on: what interposing alone costs).

Each round runs every variant once, in an order shuffled for that round (the same for a given
round number on every run): a run is faster or slower by its place in a round and by the run
before it, and a fixed order would give each variant its own bias. After ROUNDS rounds it prints
a markdown table of the median per-step and total ms and the ratios to raw, with the commands
that produced them; then the setup-cost targets on the totals (met / not met: times are figures,
never held by a test), the controls, what audit's seals cost, and a perf profile of the client,
raw and in each cmsafe column (one more run each, outside the timed rounds) saying where its
CPU time went.

    scripts/bench-cm-setup-in-guest [CONNECTIONS] [ROUNDS]   (defaults 200 and 5; make bench: 21)

Each round's ratio pairs runs made moments apart, so a slow spell of the machine falls on both.
The controls have no target: they bound what the verdicts can mean. Raw against raw is 1.00 on a
machine without noise; a verdict whose margin is smaller than this run's is not resolved.

Audit's one system call per event is the seal at the ack (bench/results/syscalls.md): what one
costs in this guest (bench/seal_cost.c), times the seals the audit client made (the events its
exit summary counts), against audit's time over raw.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import time
from typing import Callable, Iterable, Sequence

from . import figures
from . import guest as guest_mod
from . import proc

PROG = "bench-cm-setup"
OUT = "target/bench/cm-setup"
PORT = 7800  # the first run's port is the next one
RUN_TIMEOUT = 300  # seconds for one client or cm_setup run
SERVER_START = 1  # seconds for cmtime's server to listen
VARIANTS = ["raw", "safe", "audit", "api_raw", "api_cmsafe", "raw_again", "off"]
STEPS = ["create_id", "resolve_addr", "resolve_route", "create_qp", "connect", "disconnect",
         "destroy", "total"]
TARGETS = [  # variant, base, what, target ratio of the totals
    ("safe", "raw", "cmtime under the safe preload / raw", "1.03"),
    ("audit", "raw", "cmtime under the audit preload / raw", "1.10"),
    ("api_cmsafe", "api_raw", "cm_setup on the cmsafe API / raw", "1.03"),
]
CONTROLS = [  # variant, base, what, what it says
    ("raw_again", "raw", "cmtime raw again (a second raw run in each round) / raw",
     "the run's own noise: a difference of this size between identical runs"),
    ("off", "raw", "cmtime under the preload, CMSAFE_MODE=off / raw",
     "loading the preload with every call passed straight on"),
]
SEAL_MODES = ["alone", "spinning", "sleeping"]
PROFILED = ["raw", "safe", "audit", "api_cmsafe"]

# cmtime's client table: "create id    :        0.61 ..."; cm_setup's: "step create id   0.61".
_CMTIME_STEP = re.compile(r"^([a-z ]*[a-z]) *: *([0-9.]*)")
_SETUP_STEP = re.compile(r"^step (.*[a-z]) *([0-9.]*)$")
_SUMMARY = re.compile(r"^==cmsafe== summary: pid [0-9]*, mode audit, ([0-9]*) events")
_PERF_ROW = re.compile(r"^ *[0-9.]+%")
_HOT = re.compile(r"^ +[0-9.]+%.*libcmsafe")


def order(r: int) -> list[str]:
    """Round R's order of the variants: shuffled, the same for R on every run."""
    v = list(VARIANTS)
    random.Random(r).shuffle(v)
    return v


def steps(lines: Iterable[str], pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """A run's (step, ms) pairs, the step's spaces made underscores."""
    out = []
    for line in lines:
        m = pattern.match(line)
        if m:
            out.append((m.group(1).replace(" ", "_"), m.group(2)))
    return out


# rdma-core 56's cmtime prints a table per test instead ("step avg/iter total(us) us/conn ..."):
# its first test's rows, by the names of 44's steps; total(us) is the step's wall time over all
# the connections, as 44's ms are.
_CMTIME56_ROW = re.compile(r"^([a-z][a-z ]*[a-z]) +[0-9]+ +([0-9]+) ")
_CMTIME56_NAMES = {"create id": "create_id", "resolve addr": "resolve_addr",
                   "resolve route": "resolve_route", "create qp": "create_qp",
                   "cm connect": "connect", "disconnect": "disconnect", "destroy id": "destroy"}


def steps56(lines: Iterable[str]) -> list[tuple[str, str]]:
    """The (step, ms) pairs of rdma-core 56's cmtime table, its first test's (empty when the
    output is 44's)."""
    out: list[tuple[str, str]] = []
    tables = 0
    for line in lines:
        if line.startswith("step ") and "avg/iter" in line:
            tables += 1
            continue
        m = _CMTIME56_ROW.match(line)
        if tables == 1 and m and m.group(1) in _CMTIME56_NAMES:
            out.append((_CMTIME56_NAMES[m.group(1)], "%.1f" % (int(m.group(2)) / 1000)))
    return out


def add(total: str, ms: str) -> str:
    """A running total as the table's figures are: two decimals at each step."""
    return "%.2f" % (figures.number(total) + figures.number(ms))


def ratio(a: str, b: str) -> str:
    bn = figures.number(b)
    return "%.3f" % (figures.number(a) / bn) if bn > 0 else "-"


def verdict(r: str, target: str) -> str:
    return "met" if r != "-" and figures.number(r) <= figures.number(target) else "not met"


class Results:
    """Each variant's figures by step (ms, as printed), and its total per round."""

    def __init__(self, rounds: int):
        self.rounds = rounds
        self.sums: dict[tuple[str, str], list[str]] = {}
        self.totals: dict[tuple[str, int], str] = {}

    def record(self, variant: str, r: int, pairs: Sequence[tuple[str, str]]) -> None:
        total = "0"
        for step, ms in pairs:
            self.sums.setdefault((variant, step), []).append(ms)
            total = add(total, ms)
        self.sums.setdefault((variant, "total"), []).append(total)
        self.totals[(variant, r)] = total

    def median(self, variant: str, step: str) -> str:
        return figures.median(self.sums.get((variant, step), []))

    def ratios(self, variant: str, base: str) -> list[str]:
        return [ratio(self.totals.get((variant, r), ""), self.totals.get((base, r), ""))
                for r in range(1, self.rounds + 1)]

    def per_round(self, variant: str, base: str) -> str:
        return figures.median(self.ratios(variant, base))

    def spread(self, variant: str, base: str) -> str:
        """The per-round ratios' quartiles, "Q1-Q3"."""
        v = sorted((s for s in self.ratios(variant, base) if s != ""),
                   key=lambda s: (figures.is_number(s), figures.number(s)))
        if not v:
            return "-"
        k = (len(v) + 3) // 4
        return "%s-%s" % (v[k - 1], v[len(v) - k])


def tables(res: Results, n: int) -> list[str]:
    """The step table, the targets and the controls."""
    lines = [
        "### Connection setup, %d connections (median of %d rounds, each in a shuffled order, ms)" % (n, res.rounds),
        "",
        "Commands (both sides under the same environment): `cmtime -b $A -p PORT -c %d` and" % n,
        "`cmtime -s $A -p PORT -c %d`, with LD_PRELOAD=libcmsafe_preload.so and CMSAFE_MODE=safe or" % n,
        "audit for the preload columns; `bench/cm_setup raw|cmsafe $A PORT %d` (cmtime's steps in one" % n,
        "process, events raw or through cmsafe_get_events) for the API columns; the controls: cmtime raw",
        "a second time, and under the preload with CMSAFE_MODE=off.",
        "",
        "| step | cmtime raw | preload safe | ratio | preload audit | ratio | cm_setup raw | cm_setup cmsafe | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step in STEPS:
        raw, safe, audit = res.median("raw", step), res.median("safe", step), res.median("audit", step)
        ar, ac = res.median("api_raw", step), res.median("api_cmsafe", step)
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            step.replace("_", " "), raw, safe, ratio(safe, raw), audit, ratio(audit, raw), ar, ac,
            ratio(ac, ar)))
    lines += [
        "",
        "| target (total, %d rounds) | ratio of the medians | median of the per-round ratios | per-round ratios, middle half | target | verdict (ratio of the medians) |" % res.rounds,
        "|---|---:|---:|---:|---:|---|",
    ]
    for variant, base, what, target in TARGETS:
        r = ratio(res.median(variant, "total"), res.median(base, "total"))
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            what, r, res.per_round(variant, base), res.spread(variant, base), target, verdict(r, target)))
    lines += [
        "",
        "| control (total, the same rounds) | ratio of the medians | median of the per-round ratios | per-round ratios, middle half | what it says |",
        "|---|---:|---:|---:|---|",
    ]
    for variant, base, what, says in CONTROLS:
        lines.append("| %s | %s | %s | %s | %s |" % (
            what, ratio(res.median(variant, "total"), res.median(base, "total")),
            res.per_round(variant, base), res.spread(variant, base), says))
    return lines


def seal_table(seals: str, seal_ns: dict[str, str], audit: str, raw: str) -> list[str]:
    lines = [
        "",
        "What audit's seal costs here (`target/bench/seal_cost 9 1024`: one mprotect(PROT_NONE) of a",
        "written page, the median of 9 runs of 1024 pages), and what the audit client's seals add up to:",
        "",
        "| seal, with the process's other thread | ns per seal | the client's seals (%s events, by its exit summary) |" % seals,
        "|---|---:|---:|",
    ]
    for mode in SEAL_MODES:
        lines.append("| %s | %s | %.1f ms |" % (
            mode, seal_ns.get(mode) or "?",
            figures.number(seals or "0") * figures.number(seal_ns.get(mode) or "0") / 1e6))
    lines += [
        "",
        "Audit's total over raw in this run (medians): %.1f ms." % (figures.number(audit) - figures.number(raw)),
        "",
        "(cmtime's client spins on sched_yield in its main thread while its event thread handles the",
        "events, so the spinning row is the client's case; the server seals its own events too, which",
        "delays the client's connect and disconnect steps.)",
    ]
    return lines


def seal_costs(lines: Iterable[str]) -> dict[str, str]:
    """seal_cost's "seal MODE NS" lines: mode -> ns (as printed)."""
    out = {}
    for line in lines:
        words = line.split(None, 2)
        if len(words) == 3:
            out[words[1]] = words[2].strip()
    return out


def dso_row(label: str, lines: Iterable[str]) -> str:
    """`perf report --sort dso -n`'s lines: the share of the samples by library, one row."""
    k = p = c = lc = rd = prog = total = 0
    for line in lines:
        if not _PERF_ROW.match(line):
            continue
        fields = line.split()
        n = int(figures.number(fields[1])) if len(fields) > 1 else 0
        dso = fields[-1]
        total += n
        if "kernel" in dso:
            k += n
        elif "libcmsafe_preload" in dso:
            p += n
        elif "libcmsafe" in dso:
            c += n
        elif re.search(r"libc\.so|ld-linux", dso):
            lc += n
        elif re.search(r"librdmacm|libibverbs|rxe|rdmav", dso):
            rd += n
        else:
            prog += n
    if not total:
        return "| %s | 0 | | | | | | |" % label
    return "| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
        label, total, 100 * k / total, 100 * p / total, 100 * c / total, 100 * lc / total,
        100 * rd / total, 100 * prog / total)


def hottest(label: str, lines: Iterable[str], top: int = 5) -> list[str]:
    """cmsafe's TOP hottest symbols in `perf report --sort dso,sym`'s lines."""
    return ["    %s: %s" % (label, line.lstrip(" ")) for line in lines if _HOT.match(line)][:top]


class Bench:
    """The runs, each on a port of its own; a server that outlives its client is stopped."""

    def __init__(self, addr: str, n: int, preload: str, cmtime_args: Sequence[str] = (),
                 server_args: Sequence[str] = ()):
        self.addr = addr
        self.n = n
        self.cmtime_args = list(cmtime_args)  # both sides' (e.g. -m 0: no QPs, rdma-core 56)
        self.server_args = list(server_args)  # the server's alone
        self.port = PORT
        self.env = {
            "raw": {"CMSAFE_MODE": "off"},
            "raw_again": {"CMSAFE_MODE": "off"},
            "off": {"LD_PRELOAD": preload, "CMSAFE_MODE": "off"},
            "safe": {"LD_PRELOAD": preload, "CMSAFE_MODE": "safe"},
            "audit": {"LD_PRELOAD": preload, "CMSAFE_MODE": "audit"},
        }

    def next_port(self) -> str:
        self.port += 1
        return str(self.port)

    def cmtime_pair(self, variant: str, server_log: str,
                    client: Callable[[list[str], dict[str, str]], int]) -> int:
        """cmtime's server in the background and CLIENT (given the client's argv and
        environment), both under VARIANT's environment; the client's status."""
        env = proc.environment(self.env[variant])
        port = self.next_port()
        with open(server_log, "wb") as f:
            server = subprocess.Popen(["cmtime", "-b", self.addr, "-p", port, "-c", str(self.n)]
                                      + self.cmtime_args + self.server_args,
                                      stdin=subprocess.DEVNULL, stdout=f,
                                      stderr=f, env=env)
        try:
            time.sleep(SERVER_START)
            return client(["cmtime", "-s", self.addr, "-p", port, "-c", str(self.n)]
                          + self.cmtime_args, env)
        finally:
            server.terminate()
            try:
                server.wait(5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

    def cmtime(self, variant: str, label: str) -> list[tuple[str, str]]:
        log = os.path.join(OUT, label + ".client.log")
        rc = self.cmtime_pair(variant, os.path.join(OUT, label + ".server.log"),
                              lambda argv, env: proc.run_to(argv, log, env=env, timeout=RUN_TIMEOUT))
        if rc != 0:
            fail("cmtime (%s) failed:" % label, proc.read_lines(log))
        lines = proc.read_lines(log)
        return steps56(lines) or steps(lines, _CMTIME_STEP)

    def setup(self, mode: str, label: str) -> list[tuple[str, str]]:
        log = os.path.join(OUT, label + ".log")
        rc = proc.run_to(["target/bench/cm_setup", mode, self.addr, self.next_port(), str(self.n)],
                         log, timeout=RUN_TIMEOUT)
        if rc != 0:
            fail("cm_setup %s failed:" % mode, proc.read_lines(log))
        return steps(proc.read_lines(log), _SETUP_STEP)

    def run(self, variant: str, r: int) -> list[tuple[str, str]]:
        if variant == "api_raw":
            return self.setup("raw", "api_raw.%d" % r)
        if variant == "api_cmsafe":
            return self.setup("cmsafe", "api_cmsafe.%d" % r)
        return self.cmtime(variant, "%s.%d" % (variant, r))

    def profile(self, label: str) -> int:
        """One more run of the client under perf record (cpu-clock, 2000 Hz); its status."""
        data = os.path.join(OUT, label + ".perf.data")
        log = os.path.join(OUT, label + ".profile.log")
        perf = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", data, "--"]
        if label == "api_cmsafe":
            return proc.run_to(perf + ["target/bench/cm_setup", "cmsafe", self.addr, self.next_port(),
                                       str(self.n)], log, timeout=RUN_TIMEOUT)
        return self.cmtime_pair(label, os.path.join(OUT, label + ".profile.server.log"),
                                lambda argv, env: proc.run_to(perf + argv, log, env=env,
                                                              timeout=RUN_TIMEOUT))


def fail(message: str, log: Sequence[str]) -> None:
    print("bench-cm-setup: %s" % message, file=sys.stderr)
    for line in log:
        print(line, file=sys.stderr)
    sys.exit(1)


def perf_report(data: str, sort: str, extra: Sequence[str] = ()) -> list[str]:
    r = subprocess.run(["perf", "report", "-i", data, "--sort", sort] + list(extra) + ["--stdio"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True)
    return r.stdout.splitlines()


def main(argv: Sequence[str]) -> int:
    root = guest_mod.project_root()
    os.chdir(root)
    if len(argv) > 2 or any(not a.isdigit() or int(a) < 1 for a in argv):
        print("usage: scripts/bench-cm-setup-in-guest [CONNECTIONS] [ROUNDS]", file=sys.stderr)
        return 2
    n = int(argv[0]) if argv else 200
    rounds = int(argv[1]) if len(argv) > 1 else 5
    addr = os.environ.get("RXE_ADDR")
    if not addr:
        guest_mod.die(PROG, "run inside scripts/rxe-vm", 1)
    os.makedirs(OUT, exist_ok=True)
    bench = Bench(addr, n, os.path.join(root, "target/release/libcmsafe_preload.so"))
    res = Results(rounds)
    for r in range(1, rounds + 1):
        for variant in order(r):
            res.record(variant, r, bench.run(variant, r))

    def say(lines: Iterable[str]) -> None:
        for line in lines:
            print(line, flush=True)

    say(tables(res, n))
    seals = figures.median(
        m.group(1) for r in range(1, rounds + 1)
        for m in map(_SUMMARY.match, proc.read_lines(os.path.join(OUT, "audit.%d.client.log" % r))) if m)
    sc = subprocess.run(["target/bench/seal_cost", "9", "1024"], stdout=subprocess.PIPE,
                        universal_newlines=True)
    if sc.returncode != 0:
        return proc.shell_status(sc.returncode)
    say(seal_table(seals, seal_costs(sc.stdout.splitlines()), res.median("audit", "total"),
                   res.median("raw", "total")))
    if not shutil.which("perf"):
        say(["", "(perf is not installed in the guest: no profile)"])
        return 0
    for label in PROFILED:
        rc = bench.profile(label)
        if rc != 0:
            return rc
    say(["",
         "Where the client's CPU time goes, one more run of each under `perf record -e cpu-clock -F 2000`",
         "(share of the client's samples, %; kernel = system calls: the CM, verbs and rxe):",
         "",
         "| run | samples | kernel | libcmsafe_preload.so | libcmsafe.so | libc + ld.so | librdmacm, libibverbs, providers | the program |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"])
    for label in PROFILED:
        say([dso_row(label, perf_report(os.path.join(OUT, label + ".perf.data"), "dso", ["-n"]))])
    say(["", "cmsafe's hottest symbols in those runs (share of all the client's samples):", ""])
    for label in PROFILED[1:]:
        say(hottest(label, perf_report(os.path.join(OUT, label + ".perf.data"), "dso,sym")))
    return 0
