"""The real stack's scale benchmark (cmsafe_harness/scale_live.py) and its plots (plot.py): the
runs read from a stand-in of bench/scale_live that prints what the real one prints, the tables,
the slice's verdicts and the SVG (the real runs need the guest: make bench-scale)."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import plot, scale_live  # noqa: E402

# A stand-in for bench/scale_live: the figures its arguments ask for, memory growing with N
# by 600 bytes an id raw and more under the preload (CMSAFE_MODE); $WRONG names wrong events.
STANDIN = r"""#!/bin/sh
extra=0
case "$CMSAFE_MODE" in audit) extra=${AUDIT_EXTRA:-40};; safe) extra=100;; esac
case "$1" in
live) n=$3; kb=$(( n * (600 + extra) / 1024 ));
      echo "live n=$n m=$4 threads=$8 life_ns=$(( 1000 + n / 10 )) event_ns=$(( 100 + n / 100 )) cpu_us=5000 rss_kb=1000,$(( 1000 + kb )) slab_kb=10,$(( 10 + n ))";;
pending) echo "pending p=$3 k=$4 destroy_ns=$(( 2000 + $3 )) got=$(( $3 - ${LOST:-0} ))";;
limit) echo "limit made=$3 errno=none resolved=$(( 2 * $4 )) wrong=${WRONG:-0}";;
esac
"""


class StandinTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="scale-live-test-")
        self.bin = os.path.join(self.dir, "scale_live")
        with open(self.bin, "w") as f:
            f.write(STANDIN)
        os.chmod(self.bin, stat.S_IRWXU)
        self.old = scale_live.BIN, os.environ.get("RXE_ADDR")
        scale_live.BIN = self.bin
        os.environ["RXE_ADDR"] = "192.0.2.1"

    def tearDown(self) -> None:
        scale_live.BIN = self.old[0]
        for k in ("RXE_ADDR", "LOST", "WRONG", "AUDIT_EXTRA"):
            os.environ.pop(k, None)
        if self.old[1] is not None:
            os.environ["RXE_ADDR"] = self.old[1]

    def slice(self) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = scale_live.main(["--slice"])
        return rc, out.getvalue(), err.getvalue()

    def test_the_slice_passes_within_the_limits(self):
        rc, out, err = self.slice()
        self.assertEqual(rc, 0, err)
        self.assertIn("scale-live: passed", err)
        # raw at 5,000 ids: 5000 * 600 / 1024 = 2929 kB, 599.8 bytes an id; safe +100.
        self.assertIn("| safe | acked | 5000 | 700 | +100 | 1024 |", out)
        self.assertIn("| raw | 5000 | 1.5 | 1.50 | 0.1 | 1.50 | (base) | 5 |", out)
        self.assertIn("| 1000 | 3.0 | 3.0 | 3.0 | 3.0 | 0.0 |", out)
        self.assertIn("| audit | 70000 | 70000 | none | 2000 | 0 |", out)

    def test_memory_past_the_limit_fails_the_slice(self):
        os.environ["AUDIT_EXTRA"] = "300"
        rc, _, err = self.slice()
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: audit adds 300 bytes per live id over raw at 5000 ids "
                      "(at most 256)", err)

    def test_a_lost_pending_event_or_a_wrong_id_fails_the_slice(self):
        os.environ["LOST"] = "1"
        os.environ["WRONG"] = "2"
        rc, _, err = self.slice()
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: raw: 999 of 1000 pending events got after the destroys", err)
        self.assertIn("scale-live: safe: 2 events named another id", err)
        self.assertIn("scale-live: 8 problems", err)

    def test_a_failed_run_is_named(self):
        with open(self.bin, "w") as f:
            f.write("#!/bin/sh\necho 'scale_live: rdma_create_id: Cannot allocate memory' >&2\n"
                    "exit 1\n")
        rc, _, err = self.slice()
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: raw live 10 300 2100 acked 1 1: exit 1: scale_live: "
                      "rdma_create_id: Cannot allocate memory", err)

    def test_plots_and_the_section_are_written(self):
        res = os.path.join(self.dir, "scale.md")
        with open(res, "w") as f:
            f.write("# t\n\n## Host, stand-in librdmacm (not the real stack)\n\nhost\n")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = scale_live.main(["--sizes", "10,1000", "--runs", "2", "--variants", "acked",
                                  "--pending", "0,10", "--limit", "5", "--setup", "0", "--out", res,
                                  "--plots", self.dir])
        self.assertEqual(rc, 0, err.getvalue())
        with open(res) as f:
            text = f.read()
        self.assertTrue(text.startswith("# t\n\n## Host, stand-in librdmacm (not the real "
                                        "stack)\n\nhost\n\n## Real stack, Soft-RoCE in the "
                                        "guest\n"), text[:200])
        for name in ("scale-event.svg", "scale-life.svg", "scale-memory.svg", "scale-pending.svg"):
            self.assertIn("](%s)" % name, text)
            ET.parse(os.path.join(self.dir, name))


# cmtime's client table as rdmacm-utils prints it: the step, then its time in ms (the preload's
# modes slower by what CMSAFE_MODE says).
CMTIME = r"""#!/bin/sh
case " $* " in *" -s "*) ;; *) sleep 5; exit 0;; esac
k=1; case "$CMSAFE_MODE" in safe) k=2;; audit) k=3;; esac
echo "step              total ms     max ms     min us  us / conn"
for s in "create id" "resolve addr" "resolve route" "create qp" connect disconnect destroy; do
  printf '%-14s:  %11s %10s %10s %10s\n' "$s" "$(( 10 * k )).00" 1.00 1.00 1.00
done
"""


class SetupTest(unittest.TestCase):
    def test_cmtimes_steps_side_by_side(self):
        d = tempfile.mkdtemp(prefix="scale-live-cmtime-")
        with open(os.path.join(d, "cmtime"), "w") as f:
            f.write(CMTIME)
        os.chmod(os.path.join(d, "cmtime"), stat.S_IRWXU)
        old = (os.environ["PATH"], os.environ.get("RXE_ADDR"), scale_live.cm_setup.SERVER_START,
               scale_live.cm_setup.OUT)
        os.environ["PATH"] = d + os.pathsep + old[0]
        os.environ["RXE_ADDR"] = "192.0.2.1"
        scale_live.cm_setup.SERVER_START = 0
        scale_live.cm_setup.OUT = os.path.join(d, "logs")
        try:
            o = scale_live.Options(runs=1)
            with contextlib.redirect_stderr(io.StringIO()):
                rows = scale_live.setup_section(o, [2000])
        finally:
            os.environ["PATH"] = old[0]
            scale_live.cm_setup.SERVER_START, scale_live.cm_setup.OUT = old[2], old[3]
            if old[1] is None:
                os.environ.pop("RXE_ADDR")
            else:
                os.environ["RXE_ADDR"] = old[1]
        self.assertIn("#### 2,000 connections", rows)
        self.assertIn("| create id | 10.0 | 20.0 | 2.00 | 30.0 | 3.00 |", rows)
        self.assertIn("| total | 70.0 | 140.0 | 2.00 | 210.0 | 3.00 |", rows)
        self.assertIn("| connections per second | 28571 | 14286 |  | 9524 |  |", rows)


class PortsTest(unittest.TestCase):
    def test_the_range_is_widened_only_when_too_narrow(self):
        d = tempfile.mkdtemp(prefix="scale-live-ports-")
        path = os.path.join(d, "ip_local_port_range")
        write = lambda text: open(path, "w").write(text)  # noqa: E731
        old = scale_live.PORT_RANGE
        scale_live.PORT_RANGE = path
        try:
            write("32768\t60999\n")
            self.assertIsNone(scale_live.widen_ports(28232))
            self.assertEqual(scale_live.widen_ports(54264), "32768 60999")
            with open(path) as f:
                self.assertEqual(f.read(), "1024 65535")
        finally:
            scale_live.PORT_RANGE = old
        o = scale_live.Options()
        self.assertEqual(scale_live.ports_needed(o), 50000 + 4200 + 64)


class OptionsTest(unittest.TestCase):
    def test_bad_options(self):
        self.assertIsNone(scale_live.options(["--sizes"]))
        self.assertIsNone(scale_live.options(["--bogus"]))
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            scale_live.options(["--modes", "audit"])
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            scale_live.options(["--pending", "1,x"])

    def test_the_slice(self):
        o = scale_live.options(["--slice"])
        assert o is not None
        self.assertEqual((o.sizes, o.m, o.runs, o.variants, o.pending, o.limit),
                         ([10, 5000], 300, 1, ["acked"], [1000], 70000))


class PlotTest(unittest.TestCase):
    def test_a_line_per_series_through_its_points(self):
        svg = plot.line_plot("t", "x", "y", {"raw": [(10, 1.0), (1000, 2.0)],
                                             "audit": [(10, 4.0), (1000, 4.0)]})
        root = ET.fromstring(svg)
        ns = "{http://www.w3.org/2000/svg}"
        lines = root.findall(ns + "polyline")
        self.assertEqual([ln.get("stroke") for ln in lines], ["#444444", "#d62728"])
        # x: 10 at the left edge (72), 1000 at the right (640 - 150); y: 0 at the bottom (344),
        # the top (40) 5, the first nice number at or above 4: 304 pixels for 5.
        self.assertEqual(lines[0].get("points"), "72.0,283.2 490.0,222.4")
        self.assertEqual(lines[1].get("points"), "72.0,100.8 490.0,100.8")
        texts = [t.text for t in root.findall(ns + "text")]
        self.assertIn("raw", texts)
        self.assertIn("1,000", texts)

    def test_nice_top(self):
        self.assertEqual([plot.nice_top(v) for v in (0.0, 3.0, 7.0, 12.0, 2000.0)],
                         [1.0, 5.0, 10.0, 20.0, 2000.0])

    def test_nothing_to_plot(self):
        with self.assertRaises(ValueError):
            plot.line_plot("t", "x", "y", {})


if __name__ == "__main__":
    unittest.main()
