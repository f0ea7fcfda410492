# The converter (bin/cmsafe-timeline) fuzzed with Hypothesis: for any bytes as a report, and
# for reports made of valid records mutated (a field of another type or value, a field gone, a
# string with any character, a line cut, repeated or swapped), it exits 0 with a JSON timeline
# that parses and, with --svg, a picture that is well-formed XML; or it exits non-zero with
# exactly one line on stderr and no traceback. --check, given any mutation of a valid timeline,
# names its problems, one line each, or says it is valid.
#
# Hypothesis is no part of the standard library: this file runs in the virtualenv that
# `make timeline-fuzz` (part of make check: a fixed number of examples from a fixed seed, a few
# seconds) and `make fuzz-timeline` (CMSAFE_FUZZ=long: many more, random, the failures kept in
# target/fuzz-timeline-db to replay) create under target/ from tests/timeline/fuzz-requirements.txt.
# Each failure it finds becomes a plain test in test_hostile.py.

import contextlib
import io
import json
import os
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# Hypothesis keeps caches in a directory of its own: under target/, not in the sources.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(ROOT, "target", "hypothesis"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402

from test_timeline import DATA, tl  # noqa: E402

settings.register_profile(
    "check", max_examples=150, derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "long", max_examples=int(os.environ.get("CMSAFE_FUZZ_EXAMPLES", "20000")), deadline=None,
    database=DirectoryBasedExampleDatabase(os.path.join(ROOT, "target", "fuzz-timeline-db")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("long" if os.environ.get("CMSAFE_FUZZ") == "long" else "check")


def records(*names):
    out = []
    for name in names:
        with open(os.path.join(DATA, name), encoding="utf-8") as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


# Every kind of record the converter reads, from the small reports written for its tests.
VALID = records("listener.json", "findings.json", "addresses.json", "flight.json",
                "never_acked.json")
FIELDS = sorted({k for r in VALID for k in r})

# Any character at all, and often those a picture or a message must take care of: controls,
# lone surrogates, what XML cannot carry or escapes, line separators.
TEXT = st.text(st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.sampled_from(["\x00", "\x01", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\ud800",
                     "\udfff", "\ufffe", "\uffff", "\u2028", "<", "&", "]", ">", "\u00b5"])),
    max_size=12)
INTEGERS = st.one_of(
    st.integers(), st.integers(min_value=2 ** 63 - 2, max_value=2 ** 64 + 2),
    st.integers(min_value=-(2 ** 63) - 2, max_value=-(2 ** 63) + 2),
    st.sampled_from([0, -1, 10 ** 400, -(10 ** 400)]))
NUMBERS = st.one_of(INTEGERS, st.floats(allow_nan=True))
# Strings of the characters a picture or a message must take care of, most of them.
AWKWARD = st.text(st.sampled_from(["\x00", "\x01", "\n", "\x1b", "\x7f", "\x85", "\ud800",
                                   "\udc80", "\ufffe", "<", "&", "a"]), min_size=1, max_size=6)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT,
                    st.sampled_from(["0x0", "0x10", "0xffffffffffffffff", "event", "finding",
                                     "flight", "destroy", "address", "exit", "ESTABLISHED"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6)


@st.composite
def mutated_record(draw):
    """A valid record with one to three changes: most keep a field's type (a string of any
    characters, an integer of any size), so that the record may still be read and drawn."""
    rec = dict(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["text", "text", "int", "int", "set", "drop", "add",
                                       "nest"]))
        strings = sorted(k for k, v in rec.items() if isinstance(v, str) and k != "record")
        ints = sorted(k for k, v in rec.items() if isinstance(v, int) and v is not True
                      and v is not False)
        key = draw(st.sampled_from(FIELDS))
        if action == "text" and strings:
            rec[draw(st.sampled_from(strings))] = draw(TEXT)
        elif action == "int" and ints:
            rec[draw(st.sampled_from(ints))] = draw(INTEGERS)
        elif action in ("set", "text", "int") or (action == "drop" and key not in rec):
            rec[key] = draw(VALUES)
        elif action == "drop":
            del rec[key]
        elif action == "add":
            rec[draw(TEXT)] = draw(VALUES)
        else:
            rec[key] = [[[rec.get(key)]]] * draw(st.integers(1, 3))
    return rec


@st.composite
def one_field_changed(draw):
    """A valid report with one string field (one any string may be: not an id) holding
    AWKWARD, or one integer field any integer: still read, drawn, or refused."""
    recs = [dict(r) for r in draw(st.lists(st.sampled_from(VALID), min_size=1, max_size=4))]
    rec = draw(st.sampled_from(recs))
    key = draw(st.sampled_from(sorted(k for k, v in rec.items() if type(v) is int or (
        isinstance(v, str) and k not in ("record", "id", "listen_id")))))
    rec[key] = draw(INTEGERS if type(rec[key]) is int else AWKWARD)
    return b"".join(json.dumps(r).encode() + b"\n" for r in recs)


@st.composite
def mutated_report(draw):
    """A report's bytes: valid and mutated records as the preload writes them (JSON, escaped
    or raw UTF-8, surrogates as their bytes), then lines repeated, swapped, added or cut."""
    lines = []
    recs = draw(st.lists(st.sampled_from(VALID), max_size=6))
    for _ in range(draw(st.integers(0, 2))):
        recs.insert(draw(st.integers(0, len(recs))), draw(mutated_record()))
    for rec in recs:
        text = json.dumps(rec, ensure_ascii=draw(st.booleans()), separators=(",", ":"))
        lines.append(text.encode("utf-8", "surrogatepass") + b"\n")
    for _ in range(draw(st.integers(0, 2))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["repeat", "swap", "junk", "blank", "nest"]))
        if action == "repeat":
            lines.insert(i, lines[i])
        elif action == "swap":
            lines[0], lines[i] = lines[i], lines[0]
        elif action == "junk":
            lines.insert(i, draw(st.binary(max_size=20)) + b"\n")
        elif action == "blank":
            lines.insert(i, b" \r\n")
        else:
            depth = draw(st.sampled_from([10, 999, 5000]))
            lines.insert(i, b"[" * depth + b"]" * depth + b"\n")
    raw = b"".join(lines)
    if raw and draw(st.booleans()):
        raw = raw[:draw(st.integers(0, len(raw)))]
    return raw


OPTIONS = st.sampled_from([[], ["--svg"], ["--svg", "--svg-max-tracks", "1"],
                           ["--svg", "--svg-window", "100:"], ["--svg", "--svg-max-tracks", "0",
                                                               "--svg-window", ":50.5"]])


class Fuzz(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def run_converter(self, argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = tl.main(argv)
            except SystemExit as e:  # argparse's usage errors only
                status = e.code
        return status, out.getvalue(), err.getvalue()

    def holds(self, reports, options):
        """The property, for the reports' bytes (one file each, as report-PID.json) converted
        with OPTIONS (--svg: to a file)."""
        for i, raw in enumerate(reports):
            with open(os.path.join(self.dir.name, f"report-{100 + i}.json"), "wb") as f:
                f.write(raw)
        svg = os.path.join(self.dir.name, "t.svg")
        argv = [a for o in options for a in ([o, svg] if o == "--svg" else [o])]
        status, out, err = self.run_converter(
            argv + ["-o", "-", os.path.join(self.dir.name, "report-%p.json")])
        self.assertNotIn("Traceback", err)
        if status == 0:
            json.loads(out)
            if "--svg" in options:
                ET.parse(svg)
        else:
            self.assertEqual(status, 1, err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith("cmsafe-timeline: ") and err.endswith("\n"), err)
        for i in range(len(reports)):
            os.unlink(os.path.join(self.dir.name, f"report-{100 + i}.json"))

    @given(st.lists(st.binary(max_size=300), min_size=1, max_size=2), OPTIONS)
    def test_any_bytes(self, reports, options):
        self.holds(reports, options)

    @given(st.lists(mutated_report(), min_size=1, max_size=2), OPTIONS)
    def test_mutated_reports(self, reports, options):
        self.holds(reports, options)

    @given(one_field_changed(), OPTIONS)
    def test_one_field_changed(self, report, options):
        self.holds([report], options)

    @given(st.data())
    def test_check_of_a_mutated_timeline(self, data):
        reports = tl.read_reports([os.path.join(DATA, "listener.json")])
        trace = json.loads(json.dumps(tl.convert(reports)))
        marks = trace["traceEvents"]
        for _ in range(data.draw(st.integers(1, 3))):
            m = marks[data.draw(st.integers(0, len(marks) - 1))]
            m[data.draw(st.sampled_from(["ph", "pid", "tid", "ts", "id", "cat", "name", "args",
                                         "dur", "bp"]))] = data.draw(VALUES)
        path = os.path.join(self.dir.name, "t.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(trace))
        status, out, err = self.run_converter(
            ["--check", path, os.path.join(DATA, "listener.json")])
        self.assertNotIn("Traceback", err)
        self.assertIn(status, (0, 1))
        lines = err.splitlines()
        self.assertEqual(bool(lines), status == 1, err)
        self.assertTrue(all(x.startswith("cmsafe-timeline: ") for x in lines), err)
        self.assertEqual(out.endswith("valid (3 events of 1 reports)\n"), status == 0, out)


if __name__ == "__main__":
    unittest.main()
