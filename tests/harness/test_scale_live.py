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
live) most=0
      for n in $(echo "$3" | tr , ' '); do
        kb=$(( n * (600 + extra) / 1024 )); e=$(( 100 + n / 100 )); [ "$n" -gt "$most" ] && most=$n
        q=$(( e / 50 )).$(printf %04d $(( e % 50 * 200 )))
        [ "$9" = reference ] || q=0.0000
        w=-1; [ "$CMSAFE_MODE" = audit ] && w=${FAULT_WAITS:-$(( 2 * $4 / 64 + 1 ))}
        echo "live n=$n m=$4 threads=$8 life_ns=$(( 1000 + n / 10 )) event_ns=$(( e + 7 )) event_median_ns=$e reference_median_ns=50 over_reference=$q cpu_us=5000 rss_kb=1000,$(( 1000 + kb )) slab_kb=10,$(( 10 + n )) fault_waits=$w"
      done
      n=$most
      case "$CMSAFE_MODE" in
      safe) echo "==cmsafe==   own memory at its most: tables $(( 3000 + n / 5 )) KiB, copies $(( 100 + n / 10 )) KiB" >&2;;
      audit) echo "==cmsafe==   own memory at its most: tables $(( 3000 + n / 5 )) KiB, copies 0 KiB, audit pages $(( 4224 + n / 100 ))" >&2;;
      esac;;
conns) for n in $(echo "$3" | tr , ' '); do
        e=$(( 300 + n / 100 + extra )); q=$(( e / 100 )).$(printf %04d $(( e % 100 * 100 )))
        echo "conns n=$n m=$4 life_ns=$(( 4000 + n / 10 )) event_ns=$e event_median_ns=$e reference_median_ns=100 over_reference=$q cpu_us=9000"
      done;;
pending) echo "pending p=$3 k=$4 destroy_ns=$(( 2000 + $3 )) got=$(( $3 - ${LOST:-0} ))";;
limit) echo "limit made=$3 errno=none resolved=$(( 2 * $4 )) wrong=${WRONG:-0}";;
esac
"""


# A stand-in for valgrind's callgrind: runs the program (after its 4 options), then writes the
# profile callgrind would of the lives: per life 9,000 instructions and 1,000 per event (2 events
# a life, each one call of scale_event), safe's growing by $SAFE_GROW per mille at 10,000 ids or
# more; $CALLS overrides the calls of scale_event.
VALGRIND = r"""#!/bin/sh
out=${4#--callgrind-out-file=}
shift 4
"$@" || exit $?
m=$5; n=$4; grow=0; per=2; [ "$2" = conns ] && per=7
[ "$CMSAFE_MODE" = safe ] && [ "$n" -ge 10000 ] && grow=${SAFE_GROW:-0}
calls=${CALLS:-$(( per * m ))}
{
  echo "events: Ir"
  echo "fn=(1) measure"
  echo "cfn=(2) run_lives"
  echo "calls=1 5"
  echo "5 $(( 9000 * m * (1000 + grow) / 1000 ))"
  echo "fn=(2)"
  echo "cfn=(3) scale_event"
  echo "calls=$calls 7"
  echo "7 $(( 2000 * m * (1000 + grow) / 1000 ))"
  echo "totals: $(( 9000 * m * (1000 + grow) / 1000 ))"
} > "$out"
"""


def main_of(argv: list[str]) -> tuple[int, str, str]:
    """scale-live's status, stdout and stderr with ARGV."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = scale_live.main(argv)
    return rc, out.getvalue(), err.getvalue()


class StandinTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="scale-live-test-")
        self.bin = os.path.join(self.dir, "scale_live")
        with open(self.bin, "w") as f:
            f.write(STANDIN)
        os.chmod(self.bin, stat.S_IRWXU)
        valgrind = os.path.join(self.dir, "valgrind")
        with open(valgrind, "w") as f:
            f.write(VALGRIND)
        os.chmod(valgrind, stat.S_IRWXU)
        self.old = scale_live.BIN, os.environ.get("RXE_ADDR"), scale_live.VALGRIND
        scale_live.BIN, scale_live.VALGRIND = self.bin, valgrind
        os.environ["RXE_ADDR"] = "192.0.2.1"

    def tearDown(self) -> None:
        scale_live.BIN, scale_live.VALGRIND = self.old[0], self.old[2]
        for k in ("RXE_ADDR", "LOST", "WRONG", "AUDIT_EXTRA", "SAFE_GROW", "CALLS", "FAULT_WAITS"):
            os.environ.pop(k, None)
        if self.old[1] is not None:
            os.environ["RXE_ADDR"] = self.old[1]

    def slice(self) -> tuple[int, str, str]:
        return main_of(["--slice"])

    def test_the_slice_passes_within_the_limits(self):
        rc, out, err = self.slice()
        self.assertEqual(rc, 0, err)
        self.assertIn("scale-live: passed", err)
        # raw at 5,000 ids: 5000 * 600 / 1024 = 2929 kB, 599.8 bytes an id; safe +100.
        self.assertIn("| safe | acked | 5000 | 700 | +100 | 1024 |", out)
        # the sizes there and back in one process, each event beside the reference: 150 ns
        # over 50 at 5,000 ids.
        self.assertIn("| raw | 5000 | 1.5 | 1.50 | 0.1 | 3.00 | 1.50 | (base) | 5 |", out)
        self.assertIn("| 1000 | 3.0 | 3.0 | 3.0 | 3.0 | 0.0 |", out)
        self.assertIn("| audit | 70000 | 70000 | none | 2000 | 0 |", out)

    def test_the_fault_thread_waits_are_counted(self):
        rc, out, err = self.slice()
        self.assertEqual(rc, 0, err)
        # 300 lives, 600 events: 2 * 300 / 64 + 1 waits.
        self.assertIn("| 600 | 10 | 0.017 |", out)
        os.environ["FAULT_WAITS"] = "600"
        rc, out, err = self.slice()
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: audit: its userfaultfd thread waited 600 times over 600 events "
                      "of 16 threads (at most 37)", err)
        os.environ["FAULT_WAITS"] = "-1"
        rc, out, err = self.slice()
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: audit: no userfaultfd thread (cmsafe-uffd) in the process: its "
                      "waits were not counted", err)

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
        self.assertIn("scale-live: 8 problems", err)  # the fault thread's count passes

    def test_a_failed_run_is_named(self):
        with open(self.bin, "w") as f:
            f.write("#!/bin/sh\necho 'scale_live: rdma_create_id: Cannot allocate memory' >&2\n"
                    "exit 1\n")
        rc, _, err = self.slice()
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: raw live 5000,10 300 2100 acked 1 1 reference: exit 1: "
                      "scale_live: "
                      "rdma_create_id: Cannot allocate memory", err)

    def counted(self) -> tuple[int, str, str]:
        return main_of(["--variants", "acked", "--sizes", "10", "--runs", "1", "--pending", "0",
                        "--limit", "5", "--setup", "0", "--counts", "10,10000,50000"])

    def test_counts_flat_as_ids_grow(self):
        rc, out, err = self.counted()
        self.assertEqual(rc, 0, err)
        self.assertIn("## Real stack, instructions counted in the guest", out)
        self.assertIn("| safe | 50000 | 9000 | 1.000 | 1000 | 1.000 |", out)
        self.assertIn("| api | 10 | 9000 | 1.000 | 1000 | 1.000 |", out)
        self.assertIn("| mode | instructions, 0 pending | 10000 pending | ratio |", out)
        self.assertIn("| safe | 9000 | 9000 | 1.000 |", out)
        self.assertIn("## Real stack, connection lives counted in the guest", out)
        self.assertIn("| mode | held connections | instructions per connection life | at N / "
                      "at 10 | instructions per event | at N / at 10 |", out)
        # 7 events a connection life, 2,000 instructions of scale_event per life.
        self.assertIn("| audit | 5000 | 9000 | 1.000 | 286 | 1.000 |", out)

    def test_connection_lives_beside_held_connections(self):
        rc, out, err = main_of(["--variants", "connections", "--conns", "10,5000", "--runs", "1",
                                "--pending", "0", "--limit", "5", "--setup", "0", "--counts",
                                "0", "--conn-counts", "0"])
        self.assertEqual(rc, 0, err)
        self.assertIn("| mode | held connections | µs per connection life | at N / at 10 |", out)
        # raw 300 ns an event over the reference's 100 at 10, 350 at 5,000; safe 400 and 450.
        self.assertIn("| raw | 5000 | 4.5 | 1.12 | 0.3 | 3.50 | 1.17 | (base) | 9 |", out)
        self.assertIn("| safe | 5000 | 4.5 | 1.12 | 0.5 | 4.50 | 1.12 | 0.96 | 9 |", out)
        self.assertNotIn("### Memory per live id", out)

    def test_counts_that_grow_fail_the_run(self):
        os.environ["SAFE_GROW"] = "150"
        rc, out, err = self.counted()
        self.assertEqual(rc, 1)
        self.assertIn("| safe | 10000 | 10350 | 1.150 | 1150 | 1.150 |", out)
        self.assertIn("scale-live: safe at 10000 ids: 10350 instructions per id life, 1.150 "
                      "times those at 10", err)
        self.assertIn("scale-live: safe at 50000 ids: 1150 instructions per event, 1.150 "
                      "times those at 10", err)
        self.assertIn("scale-live: safe: 10350 instructions per create and destroy beside 10000 "
                      "pending events, 1.150 times those beside none", err)
        self.assertNotIn("audit at", err)

    def test_counts_alone_are_a_section_of_their_own(self):
        res = os.path.join(self.dir, "scale.md")
        with open(res, "w") as f:
            f.write("# t\n\n## Real stack, Soft-RoCE in the guest\n\ntimes\n")
        rc, _, err = main_of(["--only", "counts", "--counts", "10,50000", "--out", res])
        self.assertEqual(rc, 0, err)
        self.assertNotIn("µs", err)
        with open(res) as f:
            text = f.read()
        self.assertTrue(text.startswith("# t\n\n## Real stack, Soft-RoCE in the guest\n\ntimes\n"
                                        "\n## Real stack, instructions counted in the guest\n"),
                        text[:300])
        self.assertIn("| audit | 50000 | 9000 | 1.000 | 1000 | 1.000 |", text)

    def test_own_memory_per_id_beside_vmrss(self):
        rc, out, err = main_of(["--only", "own", "--own", "1000"])
        self.assertEqual(rc, 0, err)
        self.assertIn("## Real stack, the preload's own memory", out)
        self.assertNotIn("### Time", out)
        # tables: (3200 - 3002) KiB over 990 ids; copies (200 - 101) KiB; pages (4234 - 4224).
        page = os.sysconf("SC_PAGE_SIZE")
        self.assertIn("| safe | acked | 1000 | +100 | 205 | 102 | 0 | 307 |", out)
        self.assertIn("| audit | held | 1000 | +41 | 205 | 0 | %.0f | %.0f |"
                      % (10 * page / 990, 198 * 1024 / 990 + 10 * page / 990), out)
        self.assertIn("| api | acked | 1000 | +0 | - | - | - | - |", out)

    def test_a_preload_run_without_its_own_memory_line_is_named(self):
        with open(self.bin) as f:
            text = f.read()
        with open(self.bin, "w") as f:
            f.write(text.replace("own memory at its most", "summary"))
        rc, _, err = main_of(["--only", "own", "--own", "1000"])
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: audit live 10: no \"own memory\" line in the exit summary",
                      err)

    def test_the_tables_not_run_again_are_kept_and_said(self):
        res = os.path.join(self.dir, "scale.md")
        with open(res, "w") as f:
            f.write("# t\n\n## Real stack, Soft-RoCE in the guest\n\n`scripts/scale-live --runs 2` "
                    "in the guest; times are the least of 2 runs, each size over 10.\n\n"
                    "### Time, one event channel, each held id's ADDR_RESOLVED acked\n\nold acked\n"
                    "\n### Time, 16 threads running the lives, each on a channel of its own\n\n"
                    "| old | threads |\n\n## Next\n\nnext\n")
        rc, _, err = main_of(["--variants", "acked", "--sizes", "10", "--runs", "1", "--pending",
                              "0", "--limit", "5", "--setup", "0", "--counts", "0",
                              "--conn-counts", "0", "--out", res])
        self.assertEqual(rc, 0, err)
        with open(res) as f:
            text = f.read()
        self.assertNotIn("old acked", text)
        self.assertIn("### Time, 16 threads running the lives, each on a channel of its own\n\n"
                      "Not run again: as `scripts/scale-live --runs 2` left it (its times the "
                      "least of 2 runs).\n\n| old | threads |\n\n## Next\n\nnext\n", text)

    def test_only_time_keeps_the_rest_of_the_section(self):
        res = os.path.join(self.dir, "scale.md")
        with open(res, "w") as f:
            f.write("# t\n\n## Real stack, Soft-RoCE in the guest\n\n`scripts/scale-live --runs 3` "
                    "in the guest; times are the median of 3 runs.\n\n![a](scale-event.svg)\n\n"
                    "### Time, one event channel, each held id's ADDR_RESOLVED acked\n\nacked\n\n"
                    "### Memory per live id\n\nmemory\n\n### Time, 16 threads running the lives, "
                    "each on a channel of its own\n\nold threads\n")
        rc, _, err = main_of(["--only", "time", "--variants", "threads", "--sizes", "10",
                              "--runs", "1", "--out", res])
        self.assertEqual(rc, 0, err)
        with open(res) as f:
            text = f.read()
        self.assertNotIn("old threads", text)
        self.assertIn("| safe | 10 | 1.0 | 1.00 | 0.1 | 2.00 | 1.00 | 1.00 | 5 |", text)
        self.assertIn("\n![a](scale-event.svg)\n", text)
        self.assertIn("### Memory per live id\n\nNot run again: as `scripts/scale-live --runs 3` "
                      "left it (its times the median of 3 runs).\n\nmemory", text)
        self.assertIn("acked\n", text)
        self.assertNotIn("### Past librdmacm", text)
        self.assertIn("`scripts/scale-live --m 1000 --warm 2100 --runs 1 --only time --variants "
                      "threads` in the Soft-RoCE guest", text)
        # A second run of the same kind: the parts kept once keep their one line.
        rc, _, err = main_of(["--only", "time", "--variants", "acked", "--sizes", "10",
                              "--runs", "1", "--out", res])
        self.assertEqual(rc, 0, err)
        with open(res) as f:
            text = f.read()
        self.assertEqual(text.count("Not run again"), 2, text)
        self.assertIn("### Memory per live id\n\nNot run again: as `scripts/scale-live --runs 3` "
                      "left it (its times the median of 3 runs).\n\nmemory", text)
        self.assertIn("### Time, 16 threads running the lives, each on a channel of its own\n\n"
                      "Not run again: as `scripts/scale-live --m 1000 --warm 2100 --runs 1 --only "
                      "time --variants threads` left it", text)

    def test_a_profile_without_every_event_is_named(self):
        os.environ["CALLS"] = "399"
        rc, _, err = self.counted()
        self.assertEqual(rc, 1)
        self.assertIn("scale-live: raw live 10 200 under callgrind: [1800000] instructions "
                      "counted, 399 calls of scale_event (want at least 400)", err)

    def test_plots_and_the_section_are_written(self):
        res = os.path.join(self.dir, "scale.md")
        with open(res, "w") as f:
            f.write("# t\n\n## Host, stand-in librdmacm (not the real stack)\n\nhost\n")
        rc, _, err = main_of(["--sizes", "10,1000", "--runs", "2", "--variants", "acked",
                              "--pending", "0,10", "--limit", "5", "--setup", "0", "--counts",
                              "0", "--conn-counts", "0", "--out", res, "--plots", self.dir])
        self.assertEqual(rc, 0, err)
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
    def section(self, script: str, mimic: bool, max_qp: int = 65536) -> list[str]:
        """setup_section over 2,000 connections with SCRIPT as cmtime (and a device of MAX_QP
        QPs, as ibv_devinfo -v says it)."""
        d = tempfile.mkdtemp(prefix="scale-live-cmtime-")
        for name, text in (("cmtime", script),
                           ("ibv_devinfo", "#!/bin/sh\nprintf '\\tmax_mr:\\t\\t\\t1\\n"
                                           "\\tmax_qp:\\t\\t\\t%d\\n'\n" % max_qp)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(d, name), stat.S_IRWXU)
        old = (os.environ["PATH"], os.environ.get("RXE_ADDR"), scale_live.cm_setup.SERVER_START,
               scale_live.cm_setup.OUT)
        os.environ["PATH"] = d + os.pathsep + old[0]
        os.environ["RXE_ADDR"] = "192.0.2.1"
        scale_live.cm_setup.SERVER_START = 0
        scale_live.cm_setup.OUT = os.path.join(d, "logs")
        try:
            o = scale_live.Options(runs=1)
            with contextlib.redirect_stderr(io.StringIO()):
                return scale_live.setup_section(o, [2000], mimic)
        finally:
            os.environ["PATH"] = old[0]
            scale_live.cm_setup.SERVER_START, scale_live.cm_setup.OUT = old[2], old[3]
            if old[1] is None:
                os.environ.pop("RXE_ADDR")
            else:
                os.environ["RXE_ADDR"] = old[1]

    def test_cmtimes_steps_side_by_side(self):
        rows = self.section(CMTIME, False)
        self.assertIn("#### 2,000 connections", rows)
        self.assertIn("| create id | 10.0 | 20.0 | 2.00 | 30.0 | 3.00 |", rows)
        self.assertIn("| total | 70.0 | 140.0 | 2.00 | 210.0 | 3.00 |", rows)
        self.assertIn("| connections per second | 28571 | 14286 |  | 9524 |  |", rows)

    def test_mimic_mode_is_asked_of_both_sides(self):
        # Each side fails unless it was given -m 0; the client's steps are then CMTIME's.
        script = CMTIME.replace("#!/bin/sh\n", "#!/bin/sh\ncase \" $* \" in *\" -m 0 \"*) ;; "
                                "*) exit 3;; esac\n", 1)
        rows = self.section(script, True)
        self.assertEqual(rows[0], "### Connection setup at scale: cmtime's mimic mode")
        self.assertIn("-c N -m 0`", rows[2])
        self.assertIn("This device allows 65536 QPs (ibv_devinfo's max_qp); cmtime without "
                      "mimic mode makes two a connection on one address (the client's and the "
                      "server's), so its QPs run out past 32768 connections.", rows[2])

        self.assertIn("| total | 70.0 | 140.0 | 2.00 | 210.0 | 3.00 |", rows)

    def test_a_device_whose_qps_outlast_librdmacms_ids(self):
        rows = self.section(CMTIME, True, 1048560)
        self.assertIn("so its QPs run out past 524280 connections, past librdmacm's 65535 ids a "
                      "process: here the ids run out first, and mimic mode times the CM without "
                      "QPs' costs.", rows[2])


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
        self.assertEqual((o.sizes, o.m, o.runs, o.variants, o.pending, o.limit, o.counts),
                         ([10, 5000], 300, 1, ["acked"], [1000], 70000, []))


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
