# The converter (bin/cmsafe-timeline) against what a report may hold that the small reports of
# data/ do not: strings with control characters and lone surrogates (the preload escapes them in
# its JSON, as it should, and the picture must still be XML), numbers and nesting no report has,
# wrong types, a FIFO where a report should be, and a report cut at any byte (a full disk, a crash
# mid-write). Every input gives a valid output, or a one-line error and a non-zero exit: never a
# traceback, never a hang. The fuzzer (fuzz_timeline.py, make timeline-fuzz) tries many more;
# each input it found to fail is a test here. Standard library only: make timeline-check.

import json
import os
import resource
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

from test_timeline import SCRIPT, SVG_NS, data, run, tl

EVENT = {"record": "event", "seq": 1, "type": "ESTABLISHED", "status": 0, "id": "0x10",
         "listen_id": None, "thread": 7, "get_ns": 5000, "ack_ns": 9000, "private_data_len": 0,
         "internal": False}
FINDING = {"record": "finding", "finding": "late-ack", "seq": 1, "type": "ESTABLISHED",
           "id": "0x10", "thread": 7, "where": "server+0x10 (main)", "message": "held"}


def line(rec):
    """A record as the preload writes it: JSON with its strings' control characters escaped."""
    return json.dumps(rec, separators=(",", ":")) + "\n"


def command(*argv, timeout=20):
    """The converter as a command, as a user runs it: (status, stdout, stderr as text). A hang
    ends the test (subprocess.TimeoutExpired) instead of the run."""
    done = subprocess.run([sys.executable, SCRIPT] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, check=False)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def report(self, content, name="r.json"):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(content.encode("utf-8") if isinstance(content, str) else content)
        return p

    def one_line_error(self, status, err, *needles):
        """A refusal as the converter must say it: a non-zero status, one line, no traceback."""
        self.assertNotIn("Traceback", err)
        self.assertNotEqual(status, 0, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.endswith("\n"), err)
        for needle in needles:
            self.assertIn(needle, err)

    def svg_of(self, *reports):
        """The picture of REPORTS, drawn by the command, parsed (it must be well-formed XML):
        (its text, its root)."""
        out = self.path("t.svg")
        status, _, err = command("--svg", out, *reports)
        self.assertEqual(status, 0, err)
        with open(out, encoding="utf-8") as f:
            text = f.read()
        return text, ET.fromstring(text.encode("utf-8"))


class Escaped(Case):
    """What the picture shows of a report's strings: every character XML 1.0 cannot carry (C0
    controls but tab, newline and carriage return; lone surrogates; U+FFFE, U+FFFF), and the
    controls it can carry but that would break a line of a tooltip, written visibly as \\uXXXX."""

    def test_control_characters_are_drawn_visibly(self):
        weird = "a\u0001b\u001b[31mc\u0000d\u007fe\tf\ng\rh\ufffei\u0085j"
        report = self.report(
            line(dict(EVENT, type="EST\u0007ABLISHED"))
            + line({"record": "address", "id": "0x10", "src": "10.0.0.1:1\u0002",
                    "dst": "10.0.0.2:2"})
            + line(dict(FINDING, finding="late\u001back", message=weird, where="w\u0003")))
        text, root = self.svg_of(report)
        shown = "a\\u0001b\\u001b[31mc\\u0000d\\u007fe\\u0009f\\u000ag\\u000dh\\ufffei\\u0085j"
        self.assertIn("message: " + shown, text)
        self.assertIn("where: w\\u0003", text)
        (g,) = [e for e in root.iter() if e.get("class") == "finding"]
        self.assertEqual(g.find(SVG_NS + "text").text, "late\\u001back")
        lanes = [" ".join(t.text for t in e.iter(SVG_NS + "tspan")) for e in root.iter()
                 if e.get("class") == "t lane-label"]
        self.assertEqual(lanes, ["cm_id 0x10 10.0.0.1:1\\u0002 -> 10.0.0.2:2 (first event "
                                 "EST\\u0007ABLISHED) - r.json"])
        # The JSON keeps the strings as they were: a viewer escapes them itself.
        status, out, err = command(report)
        self.assertEqual(status, 0, err)
        (mark,) = [m for m in json.loads(out)["traceEvents"] if m["ph"] == "i"]
        self.assertEqual(mark["args"]["message"], weird)
        self.assertEqual(mark["name"], "late\u001back")

    def test_a_lone_surrogate_is_drawn_visibly(self):
        report = self.report(line(dict(FINDING, message="x\ud800y\udfffz")))
        text, _ = self.svg_of(report)
        self.assertIn("message: x\\ud800y\\udfffz", text)
        status, out, err = command(report)
        self.assertEqual(status, 0, err)
        (mark,) = [m for m in json.loads(out)["traceEvents"] if m["ph"] == "i"]
        self.assertEqual(mark["args"]["message"], "x\ud800y\udfffz")

    def test_a_surrogate_in_an_event_type_gets_its_colour(self):
        # The colour of a type not in librdmacm's list is a checksum of its name's bytes.
        report = self.report(line(dict(EVENT, type="X\udc80")))
        text, root = self.svg_of(report)
        (g,) = [e for e in root.iter() if e.get("class") == "span"]
        self.assertIn(g.find(SVG_NS + "rect").get("fill"), tl.FALLBACK)
        self.assertIn("X\\udc80 from 0.0 us to 4.0 us", text)

    def test_a_file_name_that_is_not_utf8(self):
        # A name from the command line is bytes: those not UTF-8 are shown, not a failure.
        d = os.fsencode(self.dir.name)
        name = os.path.join(d, b"r\xff\x01.json")
        with open(name, "wb") as f:
            f.write(line(EVENT).encode())
        out = self.path("t.svg")
        done = subprocess.run([sys.executable, SCRIPT, "--svg", out, "-o", self.path("t.json"),
                               name], capture_output=True, timeout=20, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(out, "rb") as f:
            root = ET.fromstring(f.read())
        self.assertIn("reports: r\\udcff\\u0001.json",
                      [e.text for e in root.iter(SVG_NS + "text")])
        with open(self.path("t.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["otherData"]["reports"], ["r\udcff\u0001.json"])

    def test_an_error_names_a_file_with_a_newline_on_one_line(self):
        p = self.report("{\n", name="a\nb.json")
        status, _, err = command(p)
        self.one_line_error(status, err, "a\\u000ab.json:1: not JSON")


class Numbers(Case):
    """Integers beyond any the preload writes (u64 times, i32 threads), floats, nesting."""

    def test_a_huge_time_is_refused(self):
        for value in ("1" + "0" * 400, "18446744073709551616", "-9223372036854775809"):
            text = line(EVENT).replace('"get_ns":5000', '"get_ns":' + value).replace(
                '"ack_ns":9000', '"ack_ns":' + value)
            status, _, err = command(self.report(text))
            self.one_line_error(status, err, 'r.json:1: "get_ns" is ')
            self.assertLess(len(err), 300)

    def test_the_largest_u64_time_is_taken(self):
        big = 2 ** 64 - 1
        report = self.report(line(dict(EVENT, get_ns=big - 10, ack_ns=big)))
        status, out, err = command(report)
        self.assertEqual(status, 0, err)
        (b,) = [m for m in json.loads(out)["traceEvents"] if m["ph"] == "b"]
        self.assertEqual(b["ts"], 0.0)
        self.svg_of(report)

    def test_an_integer_too_long_to_read(self):
        # Python refuses to convert integers of more than 4300 digits: still "not JSON".
        text = line(EVENT).replace('"seq":1', '"seq":' + "9" * 5000)
        status, _, err = command(self.report(text))
        self.one_line_error(status, err, "r.json:1: not JSON")

    def test_deep_nesting(self):
        for text in ("[" * 100000 + "]" * 100000, '{"a":' * 100000 + "1" + "}" * 100000):
            status, _, err = command(self.report(text + "\n"))
            self.one_line_error(status, err, "r.json:1: not JSON")

    def test_floats_and_specials_are_not_integers(self):
        for value in ("5e3", "NaN", "Infinity", "1e999", "5000.0"):
            text = line(EVENT).replace('"get_ns":5000', '"get_ns":' + value)
            status, _, err = command(self.report(text))
            self.one_line_error(status, err, '"get_ns" is ', "not an integer")

    def test_a_window_beyond_any_float(self):
        status, _, err = command("--svg", self.path("t.svg"), "--svg-window",
                                 "1" * 400 + ":", data("listener.json"))
        self.assertEqual(status, 2)
        self.assertNotIn("Traceback", err)
        self.assertIn("--svg-window", err)


class WrongTypes(Case):
    """--check reads any JSON as a trace: wrong types are problems it names, not tracebacks."""

    def trace(self):
        reports = tl.read_reports([data("overlap.json")])
        return json.loads(json.dumps(tl.convert(reports)))

    def check(self, trace):
        p = self.path("t.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(trace, f)
        return command("--check", p, data("overlap.json"))

    def test_marks_of_wrong_types(self):
        cases = [
            ("args", []), ("args", "x"), ("cat", ["a"]), ("cat", {"a": 1}), ("name", None),
            ("id", 10 ** 30), ("ts", True), ("ts", "1"), ("id", "1"),
        ]
        for key, value in cases:
            trace = self.trace()
            begin = next(m for m in trace["traceEvents"] if m["ph"] == "b")
            begin[key] = value
            status, _, err = self.check(trace)
            self.assertEqual(status, 1, (key, value, err))
            self.assertNotIn("Traceback", err)
            self.assertTrue(err and all(x.startswith("cmsafe-timeline: ")
                                        for x in err.splitlines()), err)

    def test_a_begin_without_a_name(self):
        trace = self.trace()
        begin = next(m for m in trace["traceEvents"] if m["ph"] == "b")
        del begin["name"]
        status, _, err = self.check(trace)
        self.assertEqual(status, 1)
        self.assertNotIn("Traceback", err)
        self.assertIn("differs from its begin in name or track", err)

    def test_not_a_trace_at_all(self):
        for trace in ([], {"traceEvents": {}}, {"traceEvents": [1, None, [], "b"]}, 5):
            status, _, err = self.check(trace)
            self.assertEqual(status, 1)
            self.assertNotIn("Traceback", err)

    def test_a_trace_nested_too_deep(self):
        p = self.path("t.json")
        with open(p, "w") as f:
            f.write("[" * 100000 + "]" * 100000)
        status, _, err = command("--check", p, data("overlap.json"))
        self.one_line_error(status, err, "t.json: not JSON")


class FoundByTheFuzzer(Case):
    """Inputs make fuzz-timeline found that failed, each kept as a plain test."""

    def test_an_event_record_with_a_flight_records_release(self):
        # An event record with a field of a flight record's, "release_ns", of any type or
        # size: the field takes no part in an event (it ended in a TypeError or an
        # OverflowError).
        for value in ('""', "-1" + "0" * 400, "5"):
            report = self.report(line(EVENT)[:-2] + ',"release_ns":%s}\n' % value)
            status, out, err = command(report)
            self.assertEqual((status, err), (0, ""))
            (b,) = [m for m in json.loads(out)["traceEvents"] if m["ph"] == "b"]
            self.assertEqual(b["args"]["held_ms"], 0.004)


class NotAFile(Case):
    """A FIFO (or a directory, a device) where a report or a trace should be: refused at once,
    never waited on."""

    def test_a_fifo_named_directly(self):
        fifo = self.path("r.json")
        os.mkfifo(fifo)
        status, _, err = command(fifo)
        self.one_line_error(status, err, "r.json: not a regular file")

    def test_a_fifo_among_the_pid_reports(self):
        self.report(line(EVENT), "report-100.json")
        os.mkfifo(self.path("report-200.json"))
        status, _, err = command(self.path("report-%p.json"))
        self.one_line_error(status, err, "report-200.json: not a regular file")

    def test_a_directory_and_a_device(self):
        for p in (self.dir.name, "/dev/null"):
            status, _, err = command(p)
            self.one_line_error(status, err, ": not a regular file")

    def test_a_fifo_as_the_trace_to_check(self):
        fifo = self.path("t.json")
        os.mkfifo(fifo)
        status, _, err = command("--check", fifo, data("overlap.json"))
        self.one_line_error(status, err, "t.json: not a regular file")


class OutOfMemory(Case):
    """A report larger than the memory the converter may have (ulimit -v): one line, no
    MemoryError traceback."""

    def test_a_report_past_the_address_space_limit(self):
        big = self.path("big.json")
        with open(big, "wb") as f:
            f.truncate(1 << 30)  # sparse: costs no disk
        limit = 600 << 20

        def cap():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        done = subprocess.run([sys.executable, SCRIPT, "-o", self.path("t.json"), big],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                              check=False, preexec_fn=cap)
        err = done.stderr.decode("utf-8", "replace")
        self.one_line_error(done.returncode, err, "out of memory reading the reports", "big.json")
        self.assertFalse(os.path.exists(self.path("t.json")), "no timeline written")


class Cut(Case):
    """A report cut at any byte: its whole lines are used, its cut last line skipped and said
    in one line naming the file; the exit status stays 0."""

    def test_cut_at_every_byte_of_the_last_line(self):
        whole = (line(EVENT) + line(dict(EVENT, seq=2, type="DISCONNECTED", get_ns=9500,
                                         ack_ns=9900))).encode()
        # A message with characters of two and three bytes: cuts fall inside them.
        last = line(dict(FINDING, message="held 1.5 \u00b5s \u2013 ok")).encode()
        for cut in range(len(last) + 1):
            p = self.report(whole + last[:cut])
            status, out, err = run(p)
            self.assertEqual(status, 0, (cut, err))
            trace = json.loads(out)
            self.assertEqual(len([m for m in trace["traceEvents"] if m["ph"] == "b"]), 2, cut)
            findings = [m for m in trace["traceEvents"] if m["ph"] == "i"]
            if cut in (0, len(last) - 1, len(last)):
                # Nothing of the line, or all of it but its newline: nothing skipped.
                self.assertEqual(err, "", cut)
                self.assertEqual(len(findings), 0 if cut == 0 else 1, cut)
            else:
                self.assertEqual(err, "cmsafe-timeline: %s: the last line is cut (%d bytes, no "
                                 "newline): skipped\n" % (p, cut), cut)
                self.assertEqual(findings, [], cut)

    def test_a_cut_report_among_others_by_pid(self):
        self.report(line(EVENT), "report-100.json")
        self.report(line(EVENT) + line(EVENT)[:20], "report-200.json")
        status, out, err = command(self.path("report-%p.json"))
        self.assertEqual(status, 0, err)
        self.assertEqual(len([m for m in json.loads(out)["traceEvents"] if m["ph"] == "b"]), 2)
        self.assertEqual(err.splitlines(), ["cmsafe-timeline: %s: the last line is cut (20 "
                                            "bytes, no newline): skipped"
                                            % self.path("report-200.json")])

    def test_a_whole_line_that_is_not_utf8_is_still_refused(self):
        p = self.report(line(EVENT).encode() + b'{"record":"x\xff"}\n')
        status, _, err = command(p)
        self.one_line_error(status, err, "r.json:2: not UTF-8")


if __name__ == "__main__":
    unittest.main()
