"""The preload's output, checked: finding lines and the summary on stderr, the JSON report.

Every function takes lines (or report paths) and returns problems, one sentence each; none
runs a program. The formats are the preload's (preload/src/audit/report.rs and findings.rs,
docs/preload.md): "==cmsafe== KIND: ... seq=N type=T id=0x... thread=TID ..." per finding,
"==cmsafe== summary: ... E events, F findings" and its detail lines at exit, and a JSON report
of event, finding, destroy and address records, one a line (their fields:
c-tests/lists/report-fields).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from . import reports

PREFIX = "==cmsafe== "

# The repository this package lives in (tests/harness/cmsafe_harness): its lists' sources.
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

_record_fields: dict[str, list[str]] = {}


def record_fields() -> dict[str, list[str]]:
    """The fields each JSON record of a report must have, from their one source: the writers'
    format strings, read by c-tests/lists/report-fields. The flight recorder's record is the API's,
    never a preload report's, so it is left out."""
    if not _record_fields:
        out = subprocess.run([os.path.join(ROOT, "c-tests", "lists", "report-fields")], check=True,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout
        for line in out.splitlines():
            name, *keys = line.split()
            if name != "flight":
                _record_fields[name] = keys
    return _record_fields


def finding_kinds(root: str) -> list[str]:
    """The finding kinds, from their one source (c-tests/lists/finding-kinds reads
    preload/src/audit/findings.rs)."""
    out = subprocess.run([os.path.join(root, "c-tests", "lists", "finding-kinds")], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return out.split()


def line_of(lines: Sequence[str], pattern: str) -> int:
    """The first line (1-based) that PATTERN matches, 0 when none does."""
    regex = re.compile(pattern)
    for i, line in enumerate(lines, 1):
        if regex.search(line):
            return i
    return 0


def any_matches(pattern: str, lines: Iterable[str]) -> bool:
    regex = re.compile(pattern)
    return any(regex.search(line) for line in lines)


def kind_lines(err: Sequence[str], kind: str) -> list[str]:
    """The stderr lines "==cmsafe== KIND: ..."."""
    start = "%s%s: " % (PREFIX, kind)
    return [line for line in err if line.startswith(start)]


def check_no_findings(err: Sequence[str], kinds: Sequence[str]) -> list[str]:
    problems = []
    for k in kinds:
        mine = kind_lines(err, k)
        if mine:
            problems.append("unexpected finding: %s" % mine[0])
    return problems


def check_finding(err: Sequence[str], kind: str, seq: str, typ: str, before: str, after: str,
                  kinds: Sequence[str]) -> list[str]:
    """The stderr lines of finding KIND: there, no line of another kind, one with seq=SEQ and
    type=TYPE ("*": any value), an id and a thread; the first after the marker BEFORE and
    before the marker AFTER (regexes; "" for none)."""
    mine = kind_lines(err, kind)
    if not mine:
        return ["no '%s%s: ' line on stderr" % (PREFIX, kind)]
    problems = []
    first = mine[0]
    for k in kinds:
        if k != kind:
            other = kind_lines(err, k)
            if other:
                problems.append("unexpected finding kind on stderr: %s" % other[0])
    seqre = r"[^ ,;)]+" if seq == "*" else re.escape(seq)
    typere = r"[^ ,;)]+" if typ == "*" else re.escape(typ)
    if not any_matches(r"(^|[^A-Za-z_])seq=%s([^0-9]|$)" % seqre, mine):
        problems.append("no %s line with seq=%s: %s" % (kind, seq, first))
    if not any_matches(r"(^|[^A-Za-z_])type=%s([^0-9A-Za-z_]|$)" % typere, mine):
        problems.append("no %s line with type=%s: %s" % (kind, typ, first))
    if not any_matches(r"id=0x[0-9a-fA-F]+", mine):
        problems.append("no %s line with id=0x...: %s" % (kind, first))
    if not any_matches(r"(^|[^A-Za-z_])thread=[0-9]+", mine):
        problems.append("no %s line with thread=<tid>: %s" % (kind, first))
    f = line_of(err, "^%s%s: " % (re.escape(PREFIX), re.escape(kind)))
    if before:
        b = line_of(err, before)
        if b == 0 or f < b:
            problems.append("the %s line (stderr line %d) does not follow the marker '%s' (line %d)"
                            % (kind, f, before, b))
    if after:
        a = line_of(err, after)
        if a != 0 and f > a:
            problems.append("the %s line (stderr line %d) comes after the marker '%s' (line %d)"
                            % (kind, f, after, a))
    return problems


def summary_lines(err: Sequence[str]) -> list[str]:
    return [line for line in err if line.startswith(PREFIX + "summary: ")]


_AFTER = re.compile(r"^==cmsafe== after the summary: pid [0-9]+, ([0-9]+) more findings")


def after_lines(err: Sequence[str]) -> list[str]:
    return [line for line in err if _AFTER.match(line)]


def findings_after_summary(err: Sequence[str]) -> int:
    """Findings another thread counted after the exit summary took its counts: the preload says
    them on a line of their own, to be added to the summary's."""
    return sum(int(m.group(1)) for m in map(_AFTER.match, err) if m)


_COUNTS = re.compile(r"(^|[^0-9])([0-9]+) events, ([0-9]+) findings")


def summary_counts(line: str) -> tuple[int, int] | None:
    """(events, findings) of a summary line, None when it says no such counts."""
    m = _COUNTS.search(line)
    return (int(m.group(2)), int(m.group(3))) if m else None


def check_summary(err: Sequence[str], want_events: str, want_findings: str,
                  count: int = 1) -> list[str]:
    """COUNT summary lines, the first saying these counts ("*": any)."""
    sums = summary_lines(err)
    if not sums:
        return ["no '%ssummary:' line on stderr at exit" % PREFIX]
    problems = []
    if len(sums) != count:
        problems.append("%d summary lines, want %d" % (len(sums), count))
    counts = summary_counts(sums[0])
    if counts is None:
        problems.append("summary line without '<E> events, <F> findings': %s" % sums[0])
        return problems
    e, f = counts
    if count == 1:
        f += findings_after_summary(err)
    if want_events != "*" and str(e) != want_events:
        problems.append("summary says %d events, the program fetched %s: %s" % (e, want_events, sums[0]))
    if want_findings != "*" and str(f) != want_findings:
        problems.append("summary says %d findings, want %s (finding records in the JSON report): %s"
                        % (f, want_findings, " / ".join(sums + after_lines(err))))
    return problems


def check_no_token(err: Sequence[str], token: str) -> list[str]:
    """No private data byte (the programs' token) on stderr."""
    for line in err:
        if token in line:
            return ["private data bytes (%s...) on stderr: %s" % (token, line)]
    return []


@dataclass
class ReportCheck:
    """What check_report found: its problems and the report's event records."""

    problems: list[str] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return [str(e.get("type")) for e in self.events]

    def event(self, seq: int) -> dict | None:
        """The last event record with this seq, as the bash harness picked it."""
        found = None
        for e in self.events:
            if e.get("seq") == seq:
                found = e
        return found


def report_record(name: str, n: int, line: str) -> tuple[dict | None, list[str]]:
    """Line N of the JSON report NAME: its record (None when it is no record of the preload's)
    and its problems, "NAME:N ...": not JSON, not one of the report's records, a record without
    its fields."""
    try:
        o = json.loads(line)
    except ValueError as e:
        return None, ["%s:%d is not JSON (%s): %.100s" % (name, n, e, line)]
    need = record_fields()
    if not isinstance(o, dict) or o.get("record") not in need:
        return None, ["%s:%d: not %s record: %.100s"
                      % (name, n, " or ".join("a" + ("n " if r[0] in "aeiou" else " ") + r
                                              for r in sorted(need)), line)]
    missing = [k for k in need[o["record"]] if k not in o]
    if missing:
        return o, ["%s:%d: %s record without %s" % (name, n, o["record"], ", ".join(missing))]
    return o, []


def check_report(paths: Sequence[str], kind: str = "-", seq: str = "*", typ: str = "*",
                 nevents: str = "*", token: str = "", foreign_seq_ok: bool = False) -> ReportCheck:
    """The JSON reports PATHS: each present, every line JSON with its record's fields and an
    integer seq, no RDMA_CM_EVENT_ prefix, no private data byte (TOKEN); the finding records:
    KIND "-" none, else each kind of the comma-separated KIND (with SEQ and TYPE, "*": any) and
    no other; NEVENTS event records ("*": any). FOREIGN_SEQ_OK: a foreign-ack finding has no
    event, so no integer seq."""
    r = ReportCheck()
    out = r.problems
    records = []
    for path in paths:
        name = os.path.basename(path)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError:
            out.append("no JSON report %s" % name)
            continue
        if token and token.encode() in raw:
            out.append("private data bytes (%s...) in the JSON report %s" % (token, name))
        lines = reports.whole_lines(name, raw)
        if not lines:
            out.append("JSON %s is empty" % name)
        for n, line in enumerate(lines, 1):
            o, problems = report_record(name, n, line)
            out += ["JSON " + p for p in problems]
            if o is None:
                continue
            rec = o["record"]
            if rec in ("event", "finding") and not isinstance(o.get("seq"), int) and not (
                    rec == "finding" and foreign_seq_ok):
                out.append("JSON %s:%d: seq %r is not an integer" % (name, n, o.get("seq")))
            if isinstance(o.get("type"), str) and o["type"].startswith("RDMA_CM_EVENT_"):
                out.append("JSON %s:%d: type %r keeps the RDMA_CM_EVENT_ prefix" % (name, n, o["type"]))
            records.append(o)
    r.events = [o for o in records if o["record"] == "event"]
    r.findings = [o for o in records if o["record"] == "finding"]
    if kind == "-":
        for f in r.findings:
            out.append("unexpected finding record: %.240s" % json.dumps(f))
    else:
        kinds = kind.split(",")
        for k in kinds:
            match = [f for f in r.findings if f.get("finding") == k
                     and (seq == "*" or f.get("seq") == int(seq))
                     and (typ == "*" or f.get("type") == typ)]
            if not match:
                out.append("no finding record %s seq=%s type=%s in the JSON report (finding records: %s)"
                           % (k, seq, typ, json.dumps([[f.get("finding"), f.get("seq"), f.get("type")]
                                                       for f in r.findings])))
        for f in r.findings:
            if f.get("finding") not in kinds:
                out.append("JSON finding record of another kind: %.240s" % json.dumps(f))
        if seq != "*":
            ev = [e for e in r.events if e.get("seq") == int(seq)]
            if ev and typ != "*" and ev[0].get("type") != typ:
                out.append("JSON event record seq=%s has type %r, want %s" % (seq, ev[0].get("type"), typ))
    if nevents != "*" and len(r.events) != int(nevents):
        out.append("JSON: %d event records, want %s (types: %s)"
                   % (len(r.events), nevents, " ".join(r.types)))
    return r


_BYTYPE = re.compile(r"^==cmsafe== +events by type: (.*)$")
_HELD = re.compile(r"^==cmsafe== +.*median [0-9.]+.*max [0-9.]+")
_PAIR = re.compile(r"^[, ]*([A-Z_]+)[ =:]+([0-9]+)(.*)$")


def check_summary_details(err: Sequence[str], report: ReportCheck, kind: str, seq: str) -> list[str]:
    """The summary's other lines: events by type (as many of each as the report's event
    records), the held time's median and max, and for KIND ("-": none) its count (the report's
    finding records) and first example (with SEQ, "*": any)."""
    bytype = held = kindl = None
    kind_re = re.compile(r"^==cmsafe==  +%s: ([0-9]+) .*first" % re.escape(kind)) if kind != "-" else None
    for line in err:
        m = _BYTYPE.search(line)
        if m:
            bytype = m.group(1)
        if _HELD.search(line):
            held = line
        if kind_re is not None and kind_re.search(line):
            kindl = line
    problems = []
    if bytype is None:
        problems.append("no '==cmsafe==   events by type: ...' summary line")
    else:
        want: dict[str, int] = {}
        for t in report.types:
            want[t] = want.get(t, 0) + 1
        got: dict[str, str] = {}
        rest = bytype
        m = _PAIR.match(rest)
        while m:
            got[m.group(1)] = m.group(2)
            rest = m.group(3)
            m = _PAIR.match(rest)
        for t, n in want.items():
            if got.get(t, "0") != str(n):
                problems.append("summary counts %s %s, the JSON report %d" % (got.get(t, "0"), t, n))
        for t, n in got.items():
            if t not in want and n != "0":
                problems.append("summary counts %s %s, the JSON report none" % (n, t))
    if held is None:
        problems.append("no summary line with the held time's median and max")
    if kind != "-":
        if kindl is None:
            problems.append("no summary line '==cmsafe==   %s: <count> (first: ...)'" % kind)
        else:
            n = re.search(r"%s: ([0-9]+)" % re.escape(kind), kindl).group(1)
            if n != str(len(report.findings)):
                problems.append("summary counts %s %s, the JSON report %d finding records"
                                % (n, kind, len(report.findings)))
            if seq != "*" and not re.search(r"seq=%s([^0-9]|$)" % re.escape(seq), kindl):
                problems.append("the summary's first %s example is not seq=%s: %s" % (kind, seq, kindl))
    return problems
