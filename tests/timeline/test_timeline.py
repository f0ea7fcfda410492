# The timeline converter (bin/cmsafe-timeline) against small reports kept in data/: each written
# by hand in the preload's format (preload/src/audit/report.rs) to hold one case, and one real
# run's (data/real/, docs/preload.md, "Timeline"); its JSON and its SVG picture. Standard library
# only, run on the host by `make timeline-check`: python3 -m unittest discover -s tests/timeline.

import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
SCRIPT = os.path.join(HERE, "..", "..", "bin", "cmsafe-timeline")


def load():
    # The script has no .py suffix (it is a command): load it by its path.
    loader = importlib.machinery.SourceFileLoader("cmsafe_timeline", SCRIPT)
    spec = importlib.util.spec_from_loader("cmsafe_timeline", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


tl = load()


def data(*parts):
    return os.path.join(DATA, *parts)


def run(*argv):
    """main() with its output caught: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = tl.main(list(argv))
        except SystemExit as e:  # argparse's usage errors
            status = e.code
    return status, out.getvalue(), err.getvalue()


def convert(*names):
    reports = tl.read_reports([data(n) for n in names])
    trace = tl.convert(reports)
    # What a viewer reads: the text, not the object.
    trace = json.loads(json.dumps(trace))
    return reports, trace


def marks(trace, ph):
    return [m for m in trace["traceEvents"] if m["ph"] == ph]


def track_names(trace):
    return {m["pid"]: m["args"]["name"] for m in trace["traceEvents"]
            if m["ph"] == "M" and m["name"] == "process_name"}


class Converted(unittest.TestCase):
    def check_valid(self, reports, trace):
        self.assertEqual(tl.validate(trace, reports), [])
        n = sum(len(r.events) for r in reports)
        self.assertEqual(len(marks(trace, "b")), n)
        self.assertEqual(len(marks(trace, "e")), n)

    def test_overlap_is_async_on_one_track(self):
        reports, trace = convert("overlap.json")
        self.check_valid(reports, trace)
        begins = marks(trace, "b")
        # One cm_id, one track, even though ROUTE_RESOLVED (1300-1550 us from 1000) and
        # ESTABLISHED (1400-1700) overlap without nesting: async slices, one id each.
        self.assertEqual({m["pid"] for m in begins}, {1})
        self.assertEqual(len({m["id"] for m in begins}), 4)
        by = {m["name"]: m for m in begins}
        ends = {m["id"]: m for m in marks(trace, "e")}
        route, est = by["ROUTE_RESOLVED"], by["ESTABLISHED"]
        self.assertLess(est["ts"], ends[route["id"]]["ts"])
        self.assertLess(ends[route["id"]]["ts"], ends[est["id"]]["ts"])
        # Microseconds from the first record (get_ns 1000000).
        self.assertEqual(by["ADDR_RESOLVED"]["ts"], 0.0)
        self.assertEqual(ends[est["id"]]["ts"], 700.0)
        self.assertEqual(route["args"]["held_ms"], 0.25)
        self.assertIn("0x5610a0001000", track_names(trace)[1])
        # Events are async slices, never complete ones, which would be dropped on overlap.
        self.assertFalse(marks(trace, "X"))

    def test_a_connect_request_is_an_arrow_from_its_listen_id(self):
        reports, trace = convert("listener.json")
        self.check_valid(reports, trace)
        names = track_names(trace)
        pid = {cm: p for p, name in names.items() for cm in [name.split()[1]]}
        # The listen id got no event of its own: a track named for what it is.
        self.assertEqual(names[pid["0x5610b0001000"]],
                         "cm_id 0x5610b0001000 (listen id) - listener.json")
        starts, finishes = marks(trace, "s"), marks(trace, "f")
        self.assertEqual(len(starts), 2)
        self.assertEqual(len(finishes), 2)
        for s in starts:
            self.assertEqual(s["pid"], pid["0x5610b0001000"])
        ends = {f["id"]: f for f in finishes}
        self.assertEqual({ends[s["id"]]["pid"] for s in starts},
                         {pid["0x5610b0002000"], pid["0x5610b0003000"]})
        for s in starts:
            f = ends[s["id"]]
            self.assertEqual((s["ts"], f["ts"], f["bp"]), (f["ts"], s["ts"], "e"))
        # Each end sits on a mark of no length on its thread row, which the arrow binds to.
        xs = {(m["pid"], m["tid"], m["ts"]) for m in marks(trace, "X")}
        for m in starts + finishes:
            self.assertIn((m["pid"], m["tid"], m["ts"]), xs)
        # ESTABLISHED (listen_id null) draws no arrow.
        self.assertEqual(len(marks(trace, "X")), 4)

    def test_tracks_are_named_by_their_addresses_and_listener(self):
        _, trace = convert("addresses.json")
        names = sorted(track_names(trace).values())
        self.assertEqual(names, [
            # The client's last address record (the port it connected from) names it.
            "cm_id 0x5610b0001000 (listen id on 10.0.2.15:7471) - addresses.json",
            "cm_id 0x5610b0002000 10.0.2.15:7471 -> 10.0.2.15:40002 (first event "
            "CONNECT_REQUEST, listen id 0x5610b0001000) - addresses.json",
            "cm_id 0x5610b0005000 10.0.2.15:40002 -> 10.0.2.15:7471 (first event "
            "ADDR_RESOLVED) - addresses.json",
        ])

    def test_an_address_record_without_its_fields_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "r.json")
            with open(p, "w") as f:
                f.write('{"record":"address","id":"0x10","src":"10.0.2.15:1"}\n')
            status, _, err = run("-o", os.path.join(d, "t.json"), p)
        self.assertEqual(status, 1)
        self.assertIn('r.json:1: address record without "dst"', err)

    def test_a_destroy_is_an_instant_on_its_ids_track(self):
        reports, trace = convert("listener.json")
        names = track_names(trace)
        destroys = [m for m in marks(trace, "i") if m["cat"] == "destroy"]
        self.assertEqual(len(destroys), 2)
        by_id = {m["args"]["cm_id"]: m for m in destroys}
        self.assertEqual(by_id["0x5610b0003000"]["ts"], 400.0)  # from get_ns 2000000
        self.assertIn("0x5610b0003000 (first event CONNECT_REQUEST, listen id 0x5610b0001000)",
                      names[by_id["0x5610b0003000"]["pid"]])
        # An id destroyed with no event of its own still gets a track that says so.
        self.assertIn("0x5610b0004000 (no event, destroyed)", names[by_id["0x5610b0004000"]["pid"]])
        self.assertEqual(by_id["0x5610b0004000"]["tid"], 801)

    def test_reports_without_listen_ids_draw_no_arrows(self):
        reports, trace = convert("overlap.json")
        self.assertFalse(marks(trace, "s") + marks(trace, "f"))

    def test_never_acked_ends_at_the_reports_end(self):
        reports, trace = convert("never_acked.json")
        self.check_valid(reports, trace)
        begin = [m for m in marks(trace, "b") if m["args"]["never_acked"]]
        self.assertEqual(len(begin), 1)
        self.assertEqual(begin[0]["name"], "DISCONNECTED (never acked)")
        end = [m for m in marks(trace, "e") if m["id"] == begin[0]["id"]][0]
        self.assertEqual(end["ts"], 2000.0)  # the report's last time, its own get
        # Its end follows its begin though both are at one time.
        events = trace["traceEvents"]
        self.assertLess(events.index(begin[0]), events.index(end))
        finding = marks(trace, "i")[0]
        self.assertEqual(finding["name"], "never-acked")
        self.assertEqual(finding["ts"], 2000.0)  # said at exit: the report's end

    def test_findings_are_instants_with_their_text(self):
        reports, trace = convert("findings.json")
        self.check_valid(reports, trace)
        found = {m["name"]: m for m in marks(trace, "i")}
        self.assertEqual(set(found), {"late-ack", "foreign-ack", "cq-destroy-with-unacked"})
        late = found["late-ack"]
        self.assertIn("held 1500.0 ms", late["args"]["message"])
        self.assertEqual(late["args"]["where"], "server+0x1a2b (main)")
        # Written just before its own event's line, at that event's ack.
        self.assertEqual(late["ts"], 1501000.0)
        names = track_names(trace)
        self.assertIn("no cm_id", names[found["foreign-ack"]["pid"]])
        self.assertIn("COMPLETION", names[found["cq-destroy-with-unacked"]["pid"]])
        # Between the acks of the lines around it: after DISCONNECTED's, before TIMEWAIT_EXIT's.
        self.assertEqual(found["foreign-ack"]["args"]["said_between_us"], [1590100.0, 1690050.0])
        for m in found.values():
            self.assertEqual(m["s"], "t")
        self.assertEqual(trace["otherData"]["records_of_other_kinds"], 1)

    def test_multi_process_files_by_pid(self):
        reports, trace = convert(os.path.join("multi", "report-%p.json"))
        self.check_valid(reports, trace)
        self.assertEqual([r.label for r in reports],
                         ["pid 4101 (report-4101.json)", "pid 4102 (report-4102.json)"])
        # The same cm_id address in two processes: two tracks.
        names = track_names(trace)
        self.assertEqual(len(names), 2)
        self.assertTrue(any("pid 4101" in n for n in names.values()))
        self.assertTrue(any("pid 4102" in n for n in names.values()))
        # One time origin for both: the client's first event (19000000 ns).
        self.assertEqual(min(m["ts"] for m in marks(trace, "b")), 0.0)
        self.assertEqual(trace["otherData"]["origin_ns"], 19000000)

    def test_a_name_taken_is_the_name_and_a_pid(self):
        # The preload writes NAME.<pid> when NAME exists, and a child forked after it read a
        # name without %p writes its own so: each is that pid's report.
        with tempfile.TemporaryDirectory() as d:
            for name in ("r.json", "r.json.301", "r.json.32", "r.json.x", "q-7.json",
                         "q-7.json.7", "q-8.json.8", "q-7.json.7.1"):
                with open(os.path.join(d, name), "w") as f:
                    f.write("")
            self.assertEqual(tl.expand(os.path.join(d, "r.json")), [
                (os.path.join(d, "r.json"), "r.json"),
                (os.path.join(d, "r.json.32"), "pid 32 (r.json.32)"),
                (os.path.join(d, "r.json.301"), "pid 301 (r.json.301)")])
            self.assertEqual([label for _, label in tl.expand(os.path.join(d, "q-%p.json"))],
                             ["pid 7 (q-7.json)", "pid 7 (q-7.json.7)", "pid 8 (q-8.json.8)"])

    def test_per_track_times_never_go_back(self):
        for name in ("overlap.json", "never_acked.json", "findings.json"):
            _, trace = convert(name)
            last = {}
            for m in trace["traceEvents"]:
                if m["ph"] == "M":
                    continue
                key = (m["pid"], m["tid"])
                self.assertGreaterEqual(m["ts"], last.get(key, 0), name)
                last[key] = m["ts"]


class Validator(unittest.TestCase):
    def setUp(self):
        self.reports, self.trace = convert("overlap.json")

    def problems(self):
        return tl.validate(self.trace, self.reports)

    def test_a_missing_end(self):
        ev = self.trace["traceEvents"]
        ev.remove(next(m for m in ev if m["ph"] == "e"))
        self.assertTrue(any("never ended" in p for p in self.problems()))

    def test_an_end_on_another_track(self):
        next(m for m in self.trace["traceEvents"] if m["ph"] == "e")["tid"] += 1
        self.assertTrue(any("name or track" in p for p in self.problems()))

    def test_time_going_back(self):
        marks(self.trace, "b")[-1]["ts"] = 0.5
        self.assertTrue(any("goes back" in p for p in self.problems()))

    def test_a_lost_event_record(self):
        ev = self.trace["traceEvents"]
        b = marks(self.trace, "b")[1]
        ev[:] = [m for m in ev if m.get("id") != b["id"]]
        self.assertTrue(any("overlap.json:2: event record in the timeline 0 times" in p
                            for p in self.problems()))

    def test_an_id_used_twice(self):
        b = marks(self.trace, "b")
        for m in self.trace["traceEvents"]:
            if m.get("id") == b[1]["id"]:
                m["id"] = b[0]["id"]
        self.assertTrue(any("begun twice" in p for p in self.problems()))


class Fields(unittest.TestCase):
    def test_the_tables_are_the_writers_fields(self):
        # c-tests/lists/report-fields reads the records' fields from their writers (the preload's
        # report, the flight recorder): a field the writer adds or renames must reach the
        # tables the converter checks records by, or it would refuse real reports.
        out = subprocess.run([os.path.join(HERE, "..", "..", "c-tests", "lists", "report-fields")],
                             check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
        written = {line.split()[0]: sorted(line.split()[1:]) for line in out.splitlines()}
        tables = {
            "event": {**tl.EVENT_FIELDS, **tl.EVENT_OPTIONAL},
            "finding": tl.FINDING_FIELDS,
            "destroy": tl.DESTROY_FIELDS,
            "address": tl.ADDRESS_FIELDS,
            "flight": {**tl.FLIGHT_FIELDS, **tl.EVENT_OPTIONAL},
        }
        self.assertEqual(sorted(written), sorted(tables))
        for name, table in tables.items():
            self.assertEqual(written[name], sorted(table), name)


class BadInput(unittest.TestCase):
    """Bad input never ends in a traceback: a line naming the file and line, status 1."""

    def report(self, text):
        fd, path = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def fails(self, text, *needles):
        path = self.report(text)
        status, out, err = run(path)
        self.assertEqual(status, 1, err)
        self.assertEqual(out, "")
        for needle in (path,) + needles:
            self.assertIn(needle, err)
        self.assertNotIn("Traceback", err)
        return err

    good = json.dumps({"record": "event", "seq": 1, "type": "ESTABLISHED", "status": 0,
                       "id": "0x10", "thread": 1, "get_ns": 5, "ack_ns": 9,
                       "private_data_len": 0, "internal": False})

    def test_not_json(self):
        self.fails(self.good + "\n{\"record\": \"event\", \n", ":2: not JSON")

    def test_not_an_object(self):
        self.fails("[1, 2]\n", ":1: not a report record")

    def test_a_missing_field(self):
        rec = json.loads(self.good)
        del rec["get_ns"]
        self.fails(self.good + "\n" + json.dumps(rec) + "\n", ':2: event record without "get_ns"')

    def test_a_wrong_type(self):
        rec = json.loads(self.good)
        rec["internal"] = 1
        self.fails(json.dumps(rec) + "\n", ':1: "internal" is 1, not true or false')
        rec = json.loads(self.good)
        rec["seq"] = True
        self.fails(json.dumps(rec) + "\n", ':1: "seq" is true, not an integer')

    def test_an_id_that_is_no_address(self):
        rec = json.loads(self.good)
        rec["id"] = "id-1"
        self.fails(json.dumps(rec) + "\n", ':1: "id" is "id-1"')

    def test_a_destroy_without_its_time(self):
        rec = {"record": "destroy", "id": "0x10", "thread": 1}
        self.fails(json.dumps(rec) + "\n", ':1: destroy record without "at_ns"')

    def test_a_listen_id_that_is_no_address(self):
        rec = json.loads(self.good)
        rec["listen_id"] = 7
        self.fails(json.dumps(rec) + "\n", ':1: "listen_id" is 7')

    def test_an_ack_before_its_get(self):
        rec = json.loads(self.good)
        rec["ack_ns"] = 1
        self.fails(json.dumps(rec) + "\n", ':1: "ack_ns" is before "get_ns"')

    flight = json.dumps({"record": "flight", "seq": 3, "type": "ESTABLISHED", "status": 0,
                         "id": "0x10", "listen_id": None, "fetch_ns": 5, "ack_ns": 5,
                         "release_ns": 9})

    def test_a_flight_record_without_its_release(self):
        rec = json.loads(self.flight)
        del rec["release_ns"]
        self.fails(json.dumps(rec) + "\n", ':1: flight record without "release_ns"')

    def test_a_release_before_its_ack(self):
        rec = json.loads(self.flight)
        rec["release_ns"] = 4
        self.fails(json.dumps(rec) + "\n", ':1: "release_ns" is before the ack')

    def test_a_negative_fetch_time(self):
        rec = json.loads(self.flight)
        rec["fetch_ns"] = -5
        self.fails(json.dumps(rec) + "\n", ':1: "fetch_ns" is negative')

    def test_a_finding_without_its_message(self):
        self.fails('{"record":"finding","finding":"late-ack","seq":1,"type":"X","id":"0x1",'
                   '"thread":1,"where":"w"}\n', ':1: finding record without "message"')

    def test_not_utf8(self):
        fd, path = tempfile.mkstemp(suffix=".json")
        os.write(fd, b"\xff\xfe\n")
        os.close(fd)
        self.addCleanup(os.unlink, path)
        status, _, err = run(path)
        self.assertEqual(status, 1)
        self.assertEqual(err, f"cmsafe-timeline: {path}:1: not UTF-8\n")

    def test_a_missing_file(self):
        status, _, err = run(data("no-such-report.json"))
        self.assertEqual(status, 1)
        self.assertIn("cannot read", err)

    def test_no_file_for_a_pid_template(self):
        status, _, err = run(data("none-%p.json"))
        self.assertEqual(status, 1)
        self.assertIn("no file matches", err)

    def test_usage(self):
        status, _, err = run()
        self.assertEqual(status, 2)
        self.assertIn("usage", err)
        status, _, _ = run("--no-such-option", data("overlap.json"))
        self.assertEqual(status, 2)

    def test_no_report_at_all_with_missing_ok(self):
        # cmsafe-audit --timeline's own run of a program that never touched librdmacm.
        for name in ("none-%p.json", "none.json"):
            status, out, err = run("--missing-ok", data(name))
            self.assertEqual(status, 0, err)
            self.assertEqual(json.loads(out)["traceEvents"], [])
            self.assertIn("no report", err)

    def test_empty_report_and_blank_lines(self):
        path = self.report("\n\n")
        status, out, _ = run(path)
        self.assertEqual(status, 0)
        self.assertEqual(json.loads(out)["traceEvents"], [])

    def test_check_of_a_timeline_that_is_not_json(self):
        path = self.report("{not json")
        status, _, err = run("--check", path, data("overlap.json"))
        self.assertEqual(status, 1)
        self.assertIn("not JSON", err)
        self.assertNotIn("Traceback", err)


class Flight(unittest.TestCase):
    """A flight recorder's dump (cmsafe_flight_dump(3)): drawn as a report's events are, with
    each copy's hold to its release."""

    def test_a_dump_draws_events_arrows_and_holds(self):
        reports, trace = convert("flight.json")
        self.assertEqual(tl.validate(trace, reports), [])
        begins = marks(trace, "b")
        events = [m for m in begins if m["cat"] == "cm_event"]
        holds = {m["args"]["seq"]: m for m in begins if m["cat"] == "cm_hold"}
        self.assertEqual([m["args"]["seq"] for m in events], [11, 12, 14, 15])
        self.assertEqual(sorted(holds), [11, 12, 14, 15])
        ends = {m["id"]: m for m in marks(trace, "e")}
        span = {m["args"]["seq"]: (m["ts"], ends[m["id"]]["ts"]) for m in events}
        # Acked in the fetch's call: a span of no length at the fetch (origin 5000000 ns).
        self.assertEqual(span[11], (0.0, 0.0))
        self.assertEqual(span[12], (400.0, 400.0))
        # Acked by its caller (cmsafe_event_copy): no ack time, the span ends at the fetch.
        self.assertEqual(span[15], (1100.0, 1100.0))
        by_seq = {m["args"]["seq"]: m for m in events}
        self.assertTrue(by_seq[15]["args"]["acked_by_caller"])
        self.assertFalse(by_seq[11]["args"]["acked_by_caller"])
        self.assertFalse(by_seq[15]["args"]["never_acked"])
        hold = {seq: (m["ts"], ends[m["id"]]["ts"], m["name"]) for seq, m in holds.items()}
        self.assertEqual(hold[11], (0.0, 200.0, "CONNECT_REQUEST held"))
        self.assertEqual(hold[12], (400.0, 450.0, "ESTABLISHED held"))
        self.assertEqual(hold[15], (1100.0, 1300.0, "REJECTED held"))
        # Not released by the dump: held to the dump's last time, and says so.
        self.assertEqual(hold[14], (1000.0, 1300.0, "DISCONNECTED held (not released by the dump)"))
        self.assertFalse(holds[14]["args"]["released"])
        # The CONNECT_REQUEST's arrow, from its listen id's track to the new id's.
        names = track_names(trace)
        pid = {name.split()[1]: p for p, name in names.items()}
        (s,), (f,) = marks(trace, "s"), marks(trace, "f")
        self.assertEqual((s["pid"], f["pid"], s["ts"]), (pid["0x5610c0001000"],
                                                          pid["0x5610c0002000"], 0.0))
        self.assertEqual(names[pid["0x5610c0002000"]],
                         "cm_id 0x5610c0002000 (first event CONNECT_REQUEST, listen id "
                         "0x5610c0001000) - flight.json")
        # A dump names no thread: one row, thread 0, named for that.
        self.assertEqual({m["tid"] for m in events}, {0})
        rows = [m["args"]["name"] for m in trace["traceEvents"]
                if m["ph"] == "M" and m["name"] == "thread_name"]
        self.assertIn("events (the flight recorder names no thread)", rows)

    def test_a_dump_and_a_report_together(self):
        reports, trace = convert("flight.json", "listener.json")
        self.assertEqual(tl.validate(trace, reports), [])
        self.assertEqual(len([m for m in marks(trace, "b") if m["cat"] == "cm_event"]), 7)

    def test_through_the_launcher(self):
        audit = os.path.join(os.path.dirname(SCRIPT), "cmsafe-audit")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.json")
            done = subprocess.run([audit, "--timeline", out, "--from", data("flight.json")],
                                  capture_output=True, text=True, check=False)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out, encoding="utf-8") as f:
                trace = json.load(f)
            self.assertEqual(tl.validate(trace, tl.read_reports([data("flight.json")])), [])
            self.assertEqual(len(marks(trace, "b")), 8)


class RealRun(unittest.TestCase):
    """The reports of a real run (rping and ucmatose, client and server, in the Soft-RoCE
    guest): every event there, and a valid timeline."""

    def test_real_reports(self):
        real = data("real")
        names = sorted(f for f in os.listdir(real) if f.endswith(".json"))
        self.assertTrue(names, "no real reports under data/real")
        reports = tl.read_reports([os.path.join(real, n) for n in names])
        trace = json.loads(json.dumps(tl.convert(reports)))
        self.assertEqual(tl.validate(trace, reports), [])
        self.assertGreater(sum(len(r.events) for r in reports), 10)
        # Each CONNECT_REQUEST names its listen id: one arrow each, listener to new id.
        requests = [e for r in reports for _, e in r.events if e["type"] == "CONNECT_REQUEST"]
        self.assertTrue(requests)
        self.assertTrue(all(e["listen_id"] for e in requests))
        self.assertEqual(len(marks(trace, "s")), len(requests))
        self.assertEqual(len(marks(trace, "f")), len(requests))
        # Every rdma_destroy_id the preload saw is an instant on its id's track.
        destroys = sum(len(r.destroys) for r in reports)
        self.assertGreater(destroys, 10)
        self.assertEqual(len([m for m in marks(trace, "i") if m["cat"] == "destroy"]), destroys)
        # Every connected id's track is named by its addresses, and each client's local port is
        # a server-side id's peer port: the two ends of a connection, in different processes.
        # (The preload's reports: a flight recorder's dump records no addresses.)
        names = track_names(trace).values()
        ends = [n.split()[2:5] for n in names if " -> " in n]
        reported = [e for r in reports for _, e in r.events
                    if e["type"] == "CONNECT_REQUEST" and e["record"] == "event"]
        self.assertEqual(len(ends), len(reported) * 2)
        pairs = {(a, b) for a, _, b in ends}
        self.assertTrue(all((b, a) in pairs for a, b in pairs), sorted(pairs))


class FlightRealRun(unittest.TestCase):
    """The flight recorder's dumps at exit of a real run (the demo's token server and client,
    3 connections, CMSAFE_FLIGHT_DUMP, in the Soft-RoCE guest): every event in fetch order,
    drawn."""

    def dump(self, name):
        reports = tl.read_reports([data("real", name)])
        return reports, json.loads(json.dumps(tl.convert(reports)))

    def test_the_servers_dump(self):
        reports, trace = self.dump("token-server-flight.json")
        self.assertEqual(tl.validate(trace, reports), [])
        events = [e for _, e in reports[0].events]
        self.assertEqual([e["seq"] for e in events], list(range(1, 10)))
        self.assertEqual([e["type"] for e in events],
                         ["CONNECT_REQUEST", "ESTABLISHED"] * 3 + ["DISCONNECTED"] * 3)
        # Each connection's three events on its new id; each request from the one listen id.
        for i in range(3):
            req, est = events[2 * i], events[2 * i + 1]
            self.assertEqual(req["id"], est["id"])
            self.assertEqual(req["listen_id"], events[0]["listen_id"])
        self.assertEqual(len({e["id"] for e in events}), 3)
        # Acked at the fetch, released after, all before exit.
        for e in events:
            self.assertEqual(e["ack_ns"], e["get_ns"])
            self.assertGreaterEqual(e["release_ns"], e["ack_ns"])
        self.assertEqual(len(marks(trace, "s")), 3)
        holds = [m for m in marks(trace, "b") if m["cat"] == "cm_hold"]
        self.assertEqual(len(holds), 9)
        self.assertTrue(all(m["args"]["released"] for m in holds))

    def test_the_clients_dump(self):
        reports, trace = self.dump("token-client-flight.json")
        self.assertEqual(tl.validate(trace, reports), [])
        events = [e for _, e in reports[0].events]
        self.assertEqual([e["seq"] for e in events], list(range(1, 13)))
        self.assertEqual([e["type"] for e in events],
                         ["ADDR_RESOLVED", "ROUTE_RESOLVED", "ESTABLISHED"] * 3
                         + ["DISCONNECTED"] * 3)
        self.assertFalse(marks(trace, "s"))
        # Three ids, each a track with its four events.
        names = track_names(trace)
        self.assertEqual(len(names), 3)


SVG_NS = "{http://www.w3.org/2000/svg}"


def picture(*names, **options):
    """The SVG of the reports, parsed: (its text, its root element)."""
    text = tl.svg(tl.build(tl.read_reports([data(n) for n in names])), **options)
    return text, ET.fromstring(text.encode("utf-8"))


def of_class(root, cls):
    return [e for e in root.iter() if cls in e.get("class", "").split()]


def title(e):
    return e.find(SVG_NS + "title").text


def lane_names(root):
    """Each lane's name as drawn: its lines joined again."""
    return [" ".join(t.text for t in e.iter(SVG_NS + "tspan"))
            for e in of_class(root, "lane-label")]


def bar(g):
    """The first rect of a span's group: its bar, as numbers."""
    r = g.find(SVG_NS + "rect")
    return {k: float(r.get(k)) for k in ("x", "y", "width")}


class Picture(unittest.TestCase):
    """--svg: the Timeline the JSON is made of, drawn."""

    def counts(self, root):
        return {c: len(of_class(root, c)) for c in
                ("lane", "span", "hold", "open", "arrow", "destroy", "finding")}

    def test_lanes_bars_arrows_and_marks(self):
        _, root = picture("listener.json")
        self.assertEqual(self.counts(root), {"lane": 4, "span": 3, "hold": 0, "open": 0,
                                             "arrow": 2, "destroy": 2, "finding": 0})
        # Each lane is named as its track is in the JSON, in the JSON's order.
        _, trace = convert("listener.json")
        names = track_names(trace)
        self.assertEqual(lane_names(root), [names[pid] for pid in sorted(names)])
        # Each arrow at its CONNECT_REQUEST's get (50 us after the first at 0): from the listen
        # id's lane (the second) down to the new id's (the third), as its bar begins.
        arrows = of_class(root, "arrow")
        self.assertEqual([title(a).splitlines()[0] for a in arrows], [
            "CONNECT_REQUEST from listen id 0x5610b0001000 to 0x5610b0002000 at 0.0 us",
            "CONNECT_REQUEST from listen id 0x5610b0001000 to 0x5610b0003000 at 50.0 us"])
        spans = {title(g).splitlines()[0]: bar(g) for g in of_class(root, "span")}
        second = spans["CONNECT_REQUEST from 50.0 us to 150.0 us"]
        line = arrows[1].find(SVG_NS + "line")
        self.assertEqual(float(line.get("x1")), second["x"])
        self.assertLess(float(line.get("y1")), float(line.get("y2")))
        self.assertLess(float(line.get("y2")), second["y"])
        # 450 us on 1000 pixels: the first request's 100 us are 222.2 of them.
        self.assertAlmostEqual(spans["CONNECT_REQUEST from 0.0 us to 100.0 us"]["width"], 222.2)

    def test_overlapping_spans_take_rows_of_their_own(self):
        _, root = picture("overlap.json")
        bars = {title(g).splitlines()[0].split()[0]: bar(g) for g in of_class(root, "span")}
        # ROUTE_RESOLVED (300-550 us) and ESTABLISHED (400-700) overlap: one under the other.
        self.assertEqual(bars["ROUTE_RESOLVED"]["y"], bars["ADDR_RESOLVED"]["y"])
        self.assertEqual(bars["ESTABLISHED"]["y"], bars["ROUTE_RESOLVED"]["y"] + tl.ROW_H)
        # DISCONNECTED begins as ESTABLISHED ends (700 us): the first row is free again.
        self.assertEqual(bars["DISCONNECTED"]["y"], bars["ADDR_RESOLVED"]["y"])
        self.assertEqual(bars["DISCONNECTED"]["x"] - bars["ADDR_RESOLVED"]["x"], 875.0)

    def test_a_never_acked_span_is_drawn_as_such(self):
        _, root = picture("never_acked.json")
        (g,) = of_class(root, "open")
        self.assertEqual(g.get("class"), "span open")
        hatch = g.findall(SVG_NS + "rect")[1]
        self.assertEqual((hatch.get("fill"), hatch.get("stroke")), ("url(#hatch)", tl.OPEN))
        # Its name beside it (of no length, it ends the report, at the right edge: before it).
        text = g.find(SVG_NS + "text")
        self.assertEqual((text.text, text.get("text-anchor")),
                         ("DISCONNECTED (never acked)", "end"))
        self.assertIn("never_acked: true", title(g).splitlines())
        for other in of_class(root, "span"):
            if other is not g:
                self.assertEqual(len(other.findall(SVG_NS + "rect")), 1)
        self.assertEqual(len(of_class(root, "finding")), 1)
        self.assertTrue(of_class(root, "legend"))

    def test_a_findings_title_is_its_json_args(self):
        _, root = picture("findings.json")
        _, trace = convert("findings.json")
        found = {m["name"]: m for m in marks(trace, "i")}
        drawn = {g.find(SVG_NS + "text").text: g for g in of_class(root, "finding")}
        self.assertEqual(set(drawn), {"late-ack", "foreign-ack", "cq-destroy-with-unacked"})
        for name, g in drawn.items():
            lines = title(g).splitlines()
            self.assertEqual(lines[0], f"{name} at {found[name]['ts']} us")
            self.assertEqual(lines[1:], [f"{k}: {v if isinstance(v, str) else json.dumps(v)}"
                                         for k, v in found[name]["args"].items()])
        self.assertIn("message: held 1500.0 ms before rdma_ack_cm_event (CMSAFE_LATE_ACK_MS="
                      "1000); the id's state machine waited", title(drawn["late-ack"]))
        self.assertIn("said_between_us: [1590100.0, 1690050.0]", title(drawn["foreign-ack"]))
        # In the warning colour.
        path = drawn["late-ack"].find(SVG_NS + "path")
        self.assertEqual(path.get("fill"), tl.WARN)

    def test_a_dump_draws_holds(self):
        _, root = picture("flight.json")
        self.assertEqual(self.counts(root), {"lane": 3, "span": 4, "hold": 4, "open": 1,
                                             "arrow": 1, "destroy": 0, "finding": 0})
        (g,) = of_class(root, "open")
        self.assertEqual(g.get("class"), "hold open")
        self.assertEqual(g.find(SVG_NS + "text").text,
                         "DISCONNECTED held (not released by the dump)")

    def test_the_real_run_whole(self):
        real = sorted(os.path.join("real", f) for f in os.listdir(data("real"))
                      if f.endswith(".json"))
        _, root = picture(*real)
        _, trace = convert(*real)
        self.assertEqual(self.counts(root), {
            "lane": len(track_names(trace)), "span": 56, "hold": 21, "open": 0,
            "arrow": len(marks(trace, "s")), "destroy": 16, "finding": 0})
        # The reports' 5 CONNECT_REQUESTs and the token server dump's 3.
        self.assertEqual(len(marks(trace, "s")), 8)
        self.assertFalse(of_class(root, "note"))

    def test_the_same_reports_give_the_same_bytes(self):
        real = sorted(os.path.join(DATA, "real", f) for f in os.listdir(data("real")))
        real = [p for p in real if p.endswith(".json")]
        outs = []
        with tempfile.TemporaryDirectory() as tmp:
            # Another process each, another string hash each: no order may come from a set.
            for seed in ("1", "2"):
                out = os.path.join(tmp, f"t{seed}.svg")
                env = dict(os.environ, PYTHONHASHSEED=seed)
                done = subprocess.run([sys.executable, SCRIPT, "--svg", out] + real, env=env,
                                      capture_output=True, text=True, check=False)
                self.assertEqual((done.returncode, done.stdout), (0, ""), done.stderr)
                with open(out, "rb") as f:
                    outs.append(f.read())
        self.assertEqual(outs[0], outs[1])
        self.assertEqual(ET.fromstring(outs[0]).tag, SVG_NS + "svg")
        self.assertGreater(len(outs[0]), 10000)

    def test_max_tracks_keeps_the_ones_with_findings(self):
        _, root = picture("listener.json", "findings.json", max_tracks=3)
        names = lane_names(root)
        self.assertEqual(len(names), 3)
        self.assertTrue(all(n.endswith(" - findings.json") for n in names), names)
        # listener.json's arrows lost their lanes; their events are counted in the note.
        self.assertFalse(of_class(root, "arrow"))
        (note,) = of_class(root, "note")
        self.assertEqual(note.text, "3 of 7 tracks drawn (--svg-max-tracks 3), those with "
                         "findings first: 4 left out, with 3 events")
        _, root = picture("listener.json", "findings.json", max_tracks=0)
        self.assertEqual(len(of_class(root, "lane")), 7)

    def test_a_window_draws_its_time_alone(self):
        _, root = picture("overlap.json", window=(300.0, 600.0))
        bars = {title(g).splitlines()[0].split()[0]: bar(g) for g in of_class(root, "span")}
        self.assertEqual(set(bars), {"ROUTE_RESOLVED", "ESTABLISHED"})
        # ESTABLISHED (400-700 us) is cut at the window's end.
        est = bars["ESTABLISHED"]
        self.assertAlmostEqual(est["width"], tl.PLOT_W * 2 / 3, places=1)
        self.assertAlmostEqual(est["x"] + est["width"], bars["ROUTE_RESOLVED"]["x"] + tl.PLOT_W,
                               places=1)
        (note,) = of_class(root, "note")
        self.assertEqual(note.text, "time window 300 to 600 us from the first record "
                         "(--svg-window)")
        # A window with nothing of a track in it leaves the track out, and says so.
        _, root = picture("listener.json", window=(420.0, None))
        self.assertEqual(len(of_class(root, "lane")), 1)
        self.assertTrue(of_class(root, "note")[0].text.endswith(
            "tracks with nothing in it left out: 3"))

    def test_ticks(self):
        self.assertEqual(tl.time_ticks(0, 800), [(k * 100.0, f"{k * 100} \u00b5s")
                                                 for k in range(9)])
        ticks = tl.time_ticks(3535000, 3910000)
        self.assertEqual([t for _, t in ticks],
                         [f"{v} ms" for v in range(3550, 3901, 50)])
        self.assertEqual([t for _, t in tl.time_ticks(0, 7.5e6)][:3], ["0 s", "1 s", "2 s"])
        # A step under a millisecond is in microseconds; under one, with decimals (a picture of
        # one event of no length is a microsecond wide).
        self.assertEqual([t for _, t in tl.time_ticks(0, 4500)][:3], ["0 \u00b5s", "500 \u00b5s",
                                                                     "1000 \u00b5s"])
        self.assertEqual([t for _, t in tl.time_ticks(0, 20000)][:3], ["0 ms", "2 ms", "4 ms"])
        self.assertEqual([t for _, t in tl.time_ticks(7.0, 8.0)][:3],
                         ["7.0 \u00b5s", "7.1 \u00b5s", "7.2 \u00b5s"])

    def test_long_names_wrap_at_spaces(self):
        name = ("cm_id 0x55619f700bb0 192.0.2.1:7471 -> 192.0.2.1:55639 (first event "
                "CONNECT_REQUEST, listen id 0x55619f700250) - pid 1234 (legacy-plain-1234.json)")
        lines = tl.wrap(name)
        self.assertEqual(lines[0], "cm_id 0x55619f700bb0 192.0.2.1:7471 -> 192.0.2.1:55639")
        self.assertEqual(len(lines), 2)
        self.assertEqual(" ".join(lines), name)
        self.assertEqual(" ".join(tl.wrap(name, 30)), name)
        self.assertTrue(all(len(x) <= 30 for x in tl.wrap(name, 30)))


class PictureCommand(unittest.TestCase):
    """--svg on the command line: alone, with -o, and its usage errors."""

    def test_svg_alone_and_with_json(self):
        with tempfile.TemporaryDirectory() as d:
            out, js = os.path.join(d, "t.svg"), os.path.join(d, "t.json")
            status, stdout, err = run("--svg", out, data("listener.json"))
            self.assertEqual((status, stdout), (0, ""), err)
            with open(out, encoding="utf-8") as f:
                alone = f.read()
            self.assertEqual(ET.fromstring(alone.encode("utf-8")).tag, SVG_NS + "svg")
            status, stdout, err = run("--svg", out, "-o", js, data("listener.json"))
            self.assertEqual((status, stdout), (0, ""), err)
            with open(out, encoding="utf-8") as f:
                self.assertEqual(f.read(), alone)
            with open(js, encoding="utf-8") as f:
                self.assertEqual(len(marks(json.load(f), "s")), 2)
            status, stdout, _ = run("--svg", "-", "-o", js, data("listener.json"))
            self.assertEqual((status, stdout), (0, alone))

    def test_usage_errors(self):
        for argv in (["--svg-window", "1:2"], ["--svg-max-tracks", "3"],
                     ["--svg", "t.svg", "--svg-window", "5:3"],
                     ["--svg", "t.svg", "--svg-window", "five"],
                     ["--svg", "t.svg", "--svg-max-tracks", "-1"],
                     ["--svg", "-"], ["--check", "t.json", "--svg", "t.svg"]):
            status, _, err = run(*argv, data("listener.json"))
            self.assertEqual(status, 2, argv)
            self.assertIn("usage", err)

    def test_windows(self):
        self.assertEqual(tl.parse_window("2500000:"), (2500000.0, None))
        self.assertEqual(tl.parse_window(":10.5"), (None, 10.5))
        self.assertEqual(tl.parse_window("1:2"), (1.0, 2.0))
        for bad in ("", "1", "2:1", "1:1", "a:b", "1.2.3:4"):
            with self.assertRaises(ValueError, msg=bad):
                tl.parse_window(bad)

    def test_no_report_draws_an_empty_picture(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.svg")
            status, _, err = run("--missing-ok", "--svg", out, data("none-%p.json"))
            self.assertEqual(status, 0, err)
            root = ET.parse(out).getroot()
        self.assertEqual(root.tag, SVG_NS + "svg")
        self.assertFalse(of_class(root, "lane"))
        self.assertEqual(root.find(SVG_NS + "text").text, "cmsafe-timeline: 0 events on 0 tracks")

    def test_an_unwritable_picture(self):
        status, _, err = run("--svg", os.path.join(DATA, "no-such-dir", "t.svg"),
                             data("listener.json"))
        self.assertEqual(status, 1)
        self.assertIn("cannot write", err)


if __name__ == "__main__":
    unittest.main()
