"""The USDT probes, attached by bpftrace on the real stack (make usdt-test).

The preload's probes (preload/src/audit/probes.rs; docs/tracing.md lists them) are listed by
`bpftrace -l`, then a bpftrace attached by the library's path (every process that maps it)
prints each firing while the programs run under the preload in audit mode:
  soak_events N   N ids, each created, resolved (one ADDR_RESOLVED got and acked) and
                  destroyed: exactly N event_fetched and N event_acked firings, with the seq,
                  type, status and id of the JSON report's N event records and the same get and
                  ack times; a destroy_start and a destroy_done (rc 0) for each destroy record;
  misuse_double_ack   one finding firing: "double-ack", seq 2, "ROUTE_RESOLVED", the report's
                  finding record's id.
Then libcmsafe's probes: bench/syscall_loop's API loop (60 events through cmsafe_get_event and
cmsafe_event_release) with the flight recorder dumped at exit: exactly 60 event_fetched, 60
event_acked and 60 copy_released firings, with the dump's seq, type, status, ids and fetch and
ack times.
Then perf, whose SDT support places a probe by the file offset the note gives: `perf probe
sdt_cmsafe:event_fetched` and `perf stat` of soak_events count exactly N (a library whose code
sits at a file offset unequal to its address, rust-lld's layout, gets 0 or a wrong place:
docs/tracing.md, "Linker").
Ends with "usdt-in-guest: N passed, N failed, N apart"; exits non-zero on a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from typing import Sequence

from . import guest as guest_mod
from . import proc, reports
from .tally import Tally

PROG = "usdt-in-guest"
PROBES = ["event_fetched", "event_acked", "finding", "destroy_start", "destroy_done"]
# The preload's list: its own, and the release probe of the copies it keeps in safe mode (in the
# core both libraries are built on).
PRELOAD_PROBES = sorted(PROBES + ["copy_released"])
API_PROBES = ["event_fetched", "event_acked", "copy_released"]
API_EVENTS = 60  # syscall_loop api 50 10: fifty events measured after ten of warm-up
EVENTS = 50  # soak_events' ids: one event each
RUN_TIMEOUT = 60  # seconds for a program, in the x86_64 guest's time (RXE_TIME_SCALE stretches)
ATTACH_TIMEOUT = 60  # seconds for bpftrace to attach (it compiles its program first)
DRAIN_TIMEOUT = 30  # seconds for bpftrace to print what the program's run made it see


# What bpftrace prints for each probe: the line's first word and its arguments' formats (the
# arguments in order; str() for the preload's strings).
PRELOAD_LINES = {
    "event_fetched": ("fetched", ["%ld", "%ld", "%ld", "0x%lx", "%lu", "%ld"]),
    "event_acked": ("acked", ["%ld", "%ld", "%ld", "0x%lx", "%lu", "%lu"]),
    "finding": ("finding", ["%s", "%ld", "%s", "0x%lx", "%ld"]),
    "destroy_start": ("destroy_start", ["0x%lx", "%lu"]),
    "destroy_done": ("destroy_done", ["0x%lx", "%ld", "%lu"]),
}
API_LINES = {
    "event_fetched": ("fetched", ["%ld", "%ld", "%ld", "0x%lx", "0x%lx", "%lu"]),
    "event_acked": ("acked", ["%ld", "%ld", "%ld", "0x%lx", "%lu", "%lu"]),
    "copy_released": ("released", ["%ld", "%ld", "0x%lx", "%lu"]),
}


def script(lib: str, lines: dict = PRELOAD_LINES) -> str:
    """The bpftrace program: one line per firing, every argument printed."""
    out = [
        # bpftrace runs BEGIN once every probe is attached: the programs start after this line.
        'BEGIN { printf("attached\\n"); }',
    ]
    for probe, (word, formats) in lines.items():
        args = ", ".join("str(arg%d)" % i if f == "%s" else "arg%d" % i
                         for i, f in enumerate(formats))
        out.append('usdt:%s:cmsafe:%s { printf("%s %s\\n", %s); }'
                   % (lib, probe, word, " ".join(formats), args))
    return "\n".join(out)


# The probe a line's first word names, where the two differ.
_PROBE_OF_WORD = {"fetched": "event_fetched", "acked": "event_acked",
                  "released": "copy_released"}


def parse_firings(lines: Sequence[str], probes: Sequence[str] = PROBES) -> dict[str, list[list[str]]]:
    """bpftrace's lines, by probe: each firing's fields after the probe's name (the scripts
    print event_fetched and event_acked as "fetched" and "acked")."""
    out: dict[str, list[list[str]]] = {p: [] for p in probes}
    for line in lines:
        words = line.split()
        if not words:
            continue
        name = _PROBE_OF_WORD.get(words[0], words[0])
        if name in out:
            out[name].append(words[1:])
    return out


def read_report(paths: Sequence[str]) -> list[dict]:
    """The records of the reports (or dumps) PATHS, their whole lines' (reports.py); OSError
    for one not written."""
    records = []
    for p in paths:
        lines = reports.report_lines(p)
        if lines is None:
            raise FileNotFoundError(p)
        records += [json.loads(line) for line in lines if line.strip()]
    return records


def type_numbers(root: str) -> dict[str, int]:
    """librdmacm's enum rdma_cm_event_type, names without the prefix, from the installed
    header (the report names types; the probes carry numbers)."""
    numbers: dict[str, int] = {}
    n = 0
    with open("/usr/include/rdma/rdma_cma.h") as f:
        text = f.read()
    body = text[text.index("enum rdma_cm_event_type"):]
    body = body[body.index("{") + 1:body.index("}")]
    for m in re.finditer(r"RDMA_CM_EVENT_([A-Z_]+)\s*(?:=\s*(\d+))?", body):
        if m.group(2):
            n = int(m.group(2))
        numbers[m.group(1)] = n
        n += 1
    return numbers


def check_events(firings: dict[str, list[list[str]]], records: list[dict],
                 types: dict[str, int], want: int) -> list[str]:
    """The event probes against the report's event records: the same count (WANT), and for
    each seq the same type, status, id and times."""
    problems = []
    events = {r["seq"]: r for r in records if r.get("record") == "event"}
    fetched = {int(f[0]): f for f in firings["event_fetched"]}
    acked = {int(f[0]): f for f in firings["event_acked"]}
    for name, got in (("event records", len(events)), ("event_fetched firings", len(firings["event_fetched"])),
                      ("event_acked firings", len(firings["event_acked"]))):
        if got != want:
            problems.append("%d %s, want %d" % (got, name, want))
    for seq, r in sorted(events.items()):
        want_fields = [str(types.get(r["type"], -1)), str(r["status"]), r["id"].lower()]
        f, a = fetched.get(seq), acked.get(seq)
        if f is None or f[1:4] != want_fields or int(f[4]) != r["get_ns"]:
            problems.append("event_fetched of seq %d: %s, want type/status/id %s get_ns %d"
                            % (seq, f, want_fields, r["get_ns"]))
        if a is None or a[1:4] != want_fields or int(a[4]) != r["get_ns"] or int(a[5]) != r["ack_ns"]:
            problems.append("event_acked of seq %d: %s, want type/status/id %s get_ns %d ack_ns %d"
                            % (seq, a, want_fields, r["get_ns"], r["ack_ns"]))
        if len(problems) > 6:
            break
    return problems


def check_destroys(firings: dict[str, list[list[str]]], records: list[dict]) -> list[str]:
    destroys = [r["id"].lower() for r in records if r.get("record") == "destroy"]
    starts = [f[0] for f in firings["destroy_start"]]
    done = [f[0] for f in firings["destroy_done"] if f[1] == "0"]
    problems = []
    if sorted(starts) != sorted(destroys) or sorted(done) != sorted(destroys):
        problems.append("destroy_start ids %d, destroy_done (rc 0) ids %d, the report's destroy records %d: not the same ids"
                        % (len(starts), len(done), len(destroys)))
    for f in firings["destroy_done"]:
        start = [s for s in firings["destroy_start"] if s[0] == f[0]]
        if start and int(f[2]) < int(start[0][1]):
            problems.append("destroy_done of %s at %s before its destroy_start at %s" % (f[0], f[2], start[0][1]))
            break
    return problems


def check_finding(firings: dict[str, list[list[str]]], records: list[dict]) -> list[str]:
    found = [r for r in records if r.get("record") == "finding"]
    got = firings["finding"]
    if len(got) != 1 or len(found) != 1:
        return ["%d finding firings, %d finding records, want 1 each: %s" % (len(got), len(found), got)]
    f, r = got[0], found[0]
    want = ["double-ack", "2", "ROUTE_RESOLVED", r["id"].lower(), str(r["thread"])]
    return [] if f == want else ["finding firing %s, want %s (the report's record)" % (f, want)]


def parse_api_firings(lines: Sequence[str]) -> dict[str, list[list[str]]]:
    return parse_firings(lines, API_PROBES)


def check_api(firings: dict[str, list[list[str]]], dump: list[dict], types: dict[str, int],
              want: int) -> list[str]:
    """libcmsafe's probes against the flight recorder's dump: WANT of each, and for each seq
    the dump's type, status, ids, fetch and ack times; each copy released once."""
    problems = []
    records = {r["seq"]: r for r in dump if r.get("record") == "flight"}
    for name, got in (("flight records", len(records)),
                      ("event_fetched firings", len(firings["event_fetched"])),
                      ("event_acked firings", len(firings["event_acked"])),
                      ("copy_released firings", len(firings["copy_released"]))):
        if got != want:
            problems.append("%d %s, want %d" % (got, name, want))
    fetched = {int(f[0]): f for f in firings["event_fetched"]}
    acked = {int(f[0]): f for f in firings["event_acked"]}
    released = sorted(int(f[0]) for f in firings["copy_released"])
    if released != sorted(records):
        problems.append("copy_released seqs %s..., the dump's %s..." % (released[:5], sorted(records)[:5]))
    for seq, r in sorted(records.items()):
        lid = (r["listen_id"] or "0x0").lower()
        want_f = [str(types.get(r["type"], -1)), str(r["status"]), r["id"].lower(), lid,
                  str(r["fetch_ns"])]
        want_a = want_f[:3] + [str(r["fetch_ns"]), str(r["ack_ns"])]
        f, a = fetched.get(seq), acked.get(seq)
        if f is None or f[1:] != want_f:
            problems.append("event_fetched of seq %d: %s, want %s (the dump's)" % (seq, f, want_f))
        if a is None or a[1:] != want_a:
            problems.append("event_acked of seq %d: %s, want %s (the dump's)" % (seq, a, want_a))
        if len(problems) > 6:
            break
    return problems


def api_case(t: Tally, root: str, out: str, types: dict[str, int], scale: int) -> None:
    lib = os.path.join(root, "target", "release", "libcmsafe.so")
    log = os.path.join(out, "api")
    listed = subprocess.run(["bpftrace", "-l", "usdt:%s:*" % lib], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True).stdout.split()
    names = sorted(p.rsplit(":", 1)[-1] for p in listed if p.startswith("usdt:"))
    t.check("bpftrace -l lists libcmsafe's probes", names == sorted(API_PROBES), " ".join(names))
    tracer = Tracer(lib, log + ".bpftrace", script(lib, API_LINES))
    if not tracer.attached(ATTACH_TIMEOUT * scale):
        tracer.stop()
        t.problem("bpftrace did not attach: %s" % " | ".join(tracer.bg.err()[-3:]))
        t.verdict("api/syscall_loop under bpftrace")
        return
    dump = os.path.abspath(log + ".flight.jsonl")
    env = proc.environment({"CMSAFE_FLIGHT_DUMP": dump, "LD_PRELOAD": None})
    argv = [os.path.join(root, "target", "bench", "syscall_loop"), "api", "50", "10"]
    run = proc.run(argv, log, env=env, timeout=RUN_TIMEOUT * scale)
    tracer.drained(3 * API_EVENTS, DRAIN_TIMEOUT * scale, parse_api_firings)
    lines = tracer.stop()
    if run.hung or run.rc != 0:
        t.problem("exit status %d (hung: %s)" % (run.rc, run.hung))
    try:
        records = read_report([dump])
    except OSError:
        records = []
        t.problem("no flight recorder dump at exit")
    firings = parse_api_firings(lines)
    for p in check_api(firings, records, types, API_EVENTS):
        t.problem(p)
    t.verdict("api/syscall_loop api 50 10 under bpftrace: %s [%ss]" % (", ".join(
        "%d %s" % (len(v), k) for k, v in firings.items() if v), run.dur_text),
        [("stderr (%s.err, last lines)" % log, run.err), ("bpftrace", lines)])


def perf_stat_count(lines: Sequence[str], event: str) -> int | None:
    """The count `perf stat -x,` printed for EVENT, None when it printed none."""
    for line in lines:
        fields = line.split(",")
        if len(fields) > 2 and fields[2] == event and fields[0].isdigit():
            return int(fields[0])
    return None


def perf_case(t: Tally, lib: str, argv: list[str], env: dict[str, str], log: str,
              timeout: float) -> None:
    """perf's own SDT support on the preload's event_fetched: exactly EVENTS."""
    if not shutil.which("perf"):
        t.skip("perf stat of sdt_cmsafe:event_fetched", "no perf in this root (linux-perf)")
        return
    event = "sdt_cmsafe:event_fetched"
    # perf keeps the notes it read in $HOME/.debug: a directory of this run's, writable.
    perf_env = proc.environment({"HOME": os.path.abspath(log + ".home")})
    os.makedirs(perf_env["HOME"], exist_ok=True)
    steps = [["perf", "buildid-cache", "-v", "--add", lib], ["perf", "probe", "-d", "sdt_cmsafe:*"],
             ["perf", "probe", "-v", event]]
    for i, step in enumerate(steps):
        r = subprocess.run(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, env=perf_env)
        if r.returncode != 0 and i != 1:  # deleting probes that are not there fails harmlessly
            t.problem("%s: exit %d: %s" % (" ".join(step), r.returncode,
                                           " | ".join(r.stdout.strip().splitlines()[-8:])))
            t.verdict("perf stat of %s" % event)
            return
    run = proc.run(["perf", "stat", "-x,", "-e", event, "--"] + argv, log,
                   env=dict(env, HOME=perf_env["HOME"]), timeout=timeout)
    n = perf_stat_count(run.err, event)
    if run.hung or run.rc != 0:
        t.problem("exit status %d (hung: %s)" % (run.rc, run.hung))
    if n != EVENTS:
        t.problem("perf counted %s firings, the program fetched %d" % (n, EVENTS))
    subprocess.run(["perf", "probe", "-q", "-d", "sdt_cmsafe:*"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=perf_env)
    t.verdict("perf stat -e %s of soak_events %d: %s [%ss]" % (event, EVENTS, n, run.dur_text),
              [("stderr (%s.err, last lines)" % log, run.err)])


class Tracer:
    """bpftrace attached by path while the programs run; its lines once stopped."""

    def __init__(self, lib: str, log: str, program: str | None = None):
        self.bg = proc.Background(["bpftrace", "-e", program or script(lib)], log)

    def attached(self, timeout: float) -> bool:
        return self.bg.wait_line(r"^attached$", timeout)

    def drained(self, want: int, timeout: float, parse=None) -> bool:
        """Waits until bpftrace has printed WANT firing lines (it prints from its ring buffers
        after the program made them): False at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            firings = (parse or parse_firings)(self.bg.out())
            if sum(len(v) for v in firings.values()) >= want:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(proc.POLL)

    def stop(self) -> list[str]:
        self.bg.stop(signal.SIGINT, 20)
        return self.bg.out()


def main(argv: list[str]) -> int:
    g = guest_mod.from_env(PROG)
    root = guest_mod.project_root()
    os.chdir(root)
    t = Tally(PROG)
    out = os.path.join("target", "usdt")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    lib = os.path.join(root, "target", "release", "libcmsafe_preload.so")
    bins = os.path.join(root, "target", "preload-tests")
    # uprobe_events, where perf adds its probes and bpftrace removes its own: the guest's init
    # mounts no tracefs.
    if not os.path.isdir("/sys/kernel/tracing/events"):
        r = subprocess.run(["mount", "-t", "tracefs", "tracefs", "/sys/kernel/tracing"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            guest_mod.die(PROG, "cannot mount tracefs: %s" % r.stdout.strip())
    if not shutil.which("bpftrace"):
        guest_mod.die(PROG, "no bpftrace (make deps installs it)")
    listed = subprocess.run(["bpftrace", "-l", "usdt:%s:*" % lib], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True).stdout.split()
    names = sorted(p.rsplit(":", 1)[-1] for p in listed if p.startswith("usdt:"))
    t.check("bpftrace -l lists the preload's probes", names == PRELOAD_PROBES, " ".join(names))
    types = type_numbers(root)
    scale = g.time_scale
    env_base = {"LD_PRELOAD": lib, "CMSAFE_MODE": "audit"}
    cases = [
        ("soak_events %d" % EVENTS, [os.path.join(bins, "soak_events"), str(EVENTS), "1"], "soak"),
        ("misuse_double_ack", [os.path.join(bins, "misuse_double_ack")], "double_ack"),
    ]
    for what, argv_, name in cases:
        log = os.path.join(out, name)
        tracer = Tracer(lib, log + ".bpftrace")
        if not tracer.attached(ATTACH_TIMEOUT * scale):
            tracer.stop()
            t.problem("bpftrace did not attach: %s" % " | ".join(tracer.bg.err()[-3:]))
            t.verdict("audit/%s under bpftrace" % what)
            continue
        env = proc.environment(dict(env_base, CMSAFE_REPORT=os.path.abspath(log) + ".%p.jsonl"))
        run = proc.run(argv_, log, env=env, timeout=RUN_TIMEOUT * scale)
        reports = sorted(os.path.join(out, f) for f in os.listdir(out)
                         if f.startswith(name + ".") and f.endswith(".jsonl"))
        # One firing per event fetched and acked, destroy called and returned, finding said.
        want = sum({"event": 2, "destroy": 2, "finding": 1}.get(r.get("record"), 0)
                   for r in read_report(reports))
        tracer.drained(want, DRAIN_TIMEOUT * scale)
        lines = tracer.stop()
        if run.hung or run.rc != 0:
            t.problem("exit status %d (hung: %s)" % (run.rc, run.hung))
        if not reports:
            t.problem("no JSON report")
        else:
            records = read_report(reports)
            firings = parse_firings(lines)
            if name == "soak":
                for p in check_events(firings, records, types, EVENTS) + check_destroys(firings, records):
                    t.problem(p)
            else:
                for p in check_finding(firings, records):
                    t.problem(p)
        counts = parse_firings(lines)
        t.verdict("audit/%s under bpftrace: %s [%ss]" % (what, ", ".join(
            "%d %s" % (len(v), k) for k, v in counts.items() if v), run.dur_text),
            [("stderr (%s.err, last lines)" % log, run.err), ("bpftrace", lines)])
    perf_case(t, lib, cases[0][1], proc.environment(env_base), os.path.join(out, "perf"),
              RUN_TIMEOUT * scale)
    api_case(t, root, out, types, scale)
    return t.finish()
