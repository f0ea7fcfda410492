# cmsafe-audit (bin/cmsafe-audit), the launcher, on the host: its options and their refusals, the
# environment and files it gives the program, the reports it converts with --timeline, and
# signals: the program's dispositions and mask exactly those of a run without the launcher, and
# a signal that ends a run passed on to it. The preload is a stand-in (standin_preload.c, built
# here with cc: it writes one report record per process at exit), the programs are sh, cat and
# Python one-liners: no RDMA device, no guest. Standard library only: make audit-check
# (python3 -m unittest discover -s tests/audit).

import importlib.machinery
import importlib.util
import json
import os
import pty
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AUDIT = os.path.join(ROOT, "bin", "cmsafe-audit")
TIMEOUT = 30


def load_converter():
    loader = importlib.machinery.SourceFileLoader(
        "cmsafe_timeline", os.path.join(ROOT, "bin", "cmsafe-timeline"))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(mod)
    return mod


tl = load_converter()
BUILT = tempfile.TemporaryDirectory(prefix="cmsafe-audit-test.")
STANDIN = os.path.join(BUILT.name, "libstandin.so")
OTHER = os.path.join(BUILT.name, "libother.so")  # a preload of the caller's: an empty library


def setUpModule():
    subprocess.run(["cc", "-shared", "-fPIC", "-Wall", "-Werror", "-o", STANDIN,
                    os.path.join(HERE, "standin_preload.c")], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", OTHER, "-x", "c", os.devnull], check=True)


def tearDownModule():
    BUILT.cleanup()


# Programs that write a report (the stand-in's, at a normal exit: dash's own ends in _exit):
# one that says its pid, one that changes its directory first.
ECHO_PID = ["sh", "-c", "echo $$; exec cat /dev/null"]
CD_SUB = ["sh", "-c", "cd sub && exec cat /dev/null"]


def default_dispositions():
    """Every signal's action the default, none blocked: what a test's caller does not set is
    not inherited from whatever ran the tests (nohup ignores SIGHUP, a CI runner may ignore
    SIGINT), so a test sees only the dispositions it gives."""
    for s in signal.valid_signals():
        if s not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(s, signal.SIG_DFL)
            except (OSError, ValueError):
                pass  # a real-time signal glibc keeps for itself
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def no_core():
    """A program ended by SIGQUIT here dumps no core; its dispositions the defaults."""
    default_dispositions()
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))


def status_lines(text):
    """The signal lines of a /proc/PID/status: {"SigIgn": hex, "SigBlk": hex}."""
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())
            if k in ("SigIgn", "SigBlk")}


def events_of(trace):
    """The cm_ids of a trace's event slices, sorted."""
    return sorted(m["args"]["cm_id"] for m in trace["traceEvents"]
                  if m["ph"] == "b" and m["cat"] == "cm_event")


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cmsafe-audit-case.")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.tmp = self.path("tmp")  # the launcher's TMPDIR: empty again after each run
        os.mkdir(self.tmp)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def env(self, **extra):
        env = dict(os.environ, CMSAFE_PRELOAD_LIB=STANDIN, TMPDIR=self.tmp)
        env.pop("CMSAFE_REPORT", None)
        env.update(extra)
        return env

    def audit(self, *argv, env=None, cwd=None, program=AUDIT, **kw):
        """cmsafe-audit ARGV, waited for: (status, stdout, stderr)."""
        done = subprocess.run([program] + list(argv), capture_output=True, text=True,
                              env=env or self.env(), cwd=cwd or self.dir, timeout=TIMEOUT,
                              check=False, **kw)
        return done.returncode, done.stdout, done.stderr

    def trace(self, path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def assert_tmp_clean(self):
        self.assertEqual(os.listdir(self.tmp), [], "the launcher's temporary directory is left")


class Options(Case):
    def test_usage_errors_run_nothing(self):
        # An unknown option or a --late-ack-ms that is no number is a usage error, exit 2,
        # before any program runs (the program would write MARK).
        mark = self.path("ran")
        for argv, said in ((["--bogus"], "unknown option '--bogus'"),
                           (["--late-ack-ms", "abc"], "not 'abc'"),
                           (["--late-ack-ms", "-5"], "not '-5'"),
                           (["--late-ack-ms", "+5"], "not '+5'"),
                           (["--late-ack-ms", " 5"], "not ' 5'"),
                           (["--late-ack-ms", ""], "not ''"),
                           (["--late-ack-ms", "18446744073709551616"],
                            "not '18446744073709551616'"),
                           (["--late-ack-ms", "9" * 400], "at most 18446744073709551615"),
                           (["--late-ack-ms", "9" * 5000], "at most 18446744073709551615")):
            status, _, err = self.audit(*argv, "--", "touch", mark)
            self.assertEqual(status, 2, argv)
            self.assertIn(said, err)
            self.assertIn("usage: cmsafe-audit", err)
            self.assertFalse(os.path.exists(mark), argv)
        self.assertEqual(self.audit("--timeline")[0], 2)
        self.assertEqual(self.audit("--safe")[0], 2)
        status, out, _ = self.audit("--help")
        self.assertEqual(status, 0)
        self.assertTrue(out.startswith("cmsafe-audit: run an unmodified RDMA program"), out)

    def test_the_largest_late_ack_the_preload_takes(self):
        for value in ("18446744073709551615", "0", "0001000"):
            status, out, err = self.audit("--late-ack-ms", value, "--", "env")
            self.assertEqual(status, 0, err)
            self.assertIn("CMSAFE_LATE_ACK_MS=%s" % value, out.splitlines())

    def test_the_environment(self):
        env = self.env(LD_PRELOAD=OTHER, CMSAFE_REPORT="ignored")
        status, out, err = self.audit("--safe", "--report", "r-%p.json", "--", "env", env=env)
        self.assertEqual((status, err), (0, ""))
        got = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        self.assertEqual(got["LD_PRELOAD"], STANDIN + ":" + OTHER)
        self.assertEqual(got["CMSAFE_MODE"], "safe")
        self.assertEqual(got["CMSAFE_REPORT"], self.path("r-%p.json"))
        # What the sh lines hand Python is not the program's.
        self.assertNotIn("CMSAFE_AUDIT_SIGIGN", got)
        self.assertNotIn("CMSAFE_LATE_ACK_MS", got)

    def test_a_program_not_found_or_not_runnable(self):
        script = self.path("noexec")
        with open(script, "w") as f:
            f.write("echo no\n")
        for timeline in ([], ["--timeline", self.path("t.json")]):
            status, _, err = self.audit(*timeline, "--", "no-such-program-here")
            self.assertEqual((status, err), (127, "cmsafe-audit: no-such-program-here: not "
                                                  "found\n"), timeline)
            status, _, err = self.audit(*timeline, "--", script)
            self.assertEqual((status, err), (126, "cmsafe-audit: %s: cannot run: Permission "
                                                  "denied\n" % script), timeline)
            self.assert_tmp_clean()

    def test_a_script_without_its_interpreter_line_runs_under_sh(self):
        script = self.path("plain")
        with open(script, "w") as f:
            f.write("echo plain \"$1\"\n")
        os.chmod(script, 0o755)
        for timeline in ([], ["--timeline", self.path("t.json")]):
            status, out, err = self.audit(*timeline, "--", script, "x")
            self.assertEqual((status, out), (0, "plain x\n"), err)

    def test_cdpath_changes_nothing(self):
        # Run by a relative name, with CDPATH naming another directory that has a bin: a cd in
        # the launcher would go there (and print it), and find no cmsafe-timeline beside it.
        os.makedirs(self.path("elsewhere", "bin"))
        env = self.env(CDPATH=self.path("elsewhere"))
        status, out, err = self.audit("--timeline", self.path("t.json"), "--", "echo", "hi",
                                      env=env, cwd=ROOT, program="bin/cmsafe-audit")
        self.assertEqual((status, out), (0, "hi\n"), err)
        self.assertEqual(len(events_of(self.trace(self.path("t.json")))), 1)


class PreloadPath(Case):
    """A library LD_PRELOAD cannot name is refused: the program would run unaudited."""

    def refused(self, lib, needle):
        mark = self.path("ran")
        for timeline in ([], ["--timeline", self.path("t.json")]):
            status, _, err = self.audit(*timeline, "--", "touch", mark,
                                        env=self.env(CMSAFE_PRELOAD_LIB=lib))
            self.assertEqual(status, 127, err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith("cmsafe-audit: CMSAFE_PRELOAD_LIB=%s: " % lib), err)
            self.assertIn(needle, err)
            self.assertFalse(os.path.exists(mark), (lib, timeline))
            self.assert_tmp_clean()

    def copy(self, directory):
        os.makedirs(self.path(directory))
        lib = self.path(directory, "libcmsafe_preload.so")
        shutil.copy(STANDIN, lib)
        return lib

    def test_a_space(self):
        self.refused(self.copy("with space"), "LD_PRELOAD cannot name")

    def test_a_colon(self):
        self.refused(self.copy("a:b"), "LD_PRELOAD cannot name")

    def test_a_dollar(self):
        # ld.so expands $ORIGIN, $LIB and $PLATFORM in LD_PRELOAD.
        self.refused(self.copy("$LIB"), "LD_PRELOAD cannot name")

    def test_not_a_shared_object(self):
        lib = self.path("lib.so")
        with open(lib, "w") as f:
            f.write("not ELF\n")
        self.refused(lib, "not a shared object")

    def test_elf_that_ld_so_leaves_out(self):
        # An object file (the library's own bytes, e_type made ET_REL) and an executable built
        # as PIE: ELF both, and ld.so would ignore either with a warning.
        lib = self.path("lib.so")
        with open(STANDIN, "rb") as f:
            elf = bytearray(f.read())
        elf[16:18] = (1).to_bytes(2, "little")
        with open(lib, "wb") as f:
            f.write(elf)
        self.refused(lib, "ld.so cannot preload it (only ET_DYN and ET_EXEC can be loaded)")
        self.refused(os.path.realpath(shutil.which("true")),
                     "ld.so cannot preload it (cannot dynamically load position-independent "
                     "executable)")

    def test_a_name_with_a_newline_is_one_line(self):
        lib = self.path("a\nb.so")
        status, _, err = self.audit("--", "true", env=self.env(CMSAFE_PRELOAD_LIB=lib))
        self.assertEqual((status, err), (127, "cmsafe-audit: CMSAFE_PRELOAD_LIB=%s: no such "
                                              "file\n" % lib.replace("\n", "?")))

    def test_missing(self):
        lib = self.path("none.so")
        status, _, err = self.audit("--", "true", env=self.env(CMSAFE_PRELOAD_LIB=lib))
        self.assertEqual((status, err), (127, "cmsafe-audit: CMSAFE_PRELOAD_LIB=%s: no such "
                                              "file\n" % lib))

    def test_a_relative_library_is_named_absolutely(self):
        # A program that changes its directory, then runs another: ld.so finds the library
        # where cmsafe-audit did, and the report is written.
        shutil.copy(STANDIN, self.path("lib.so"))
        os.mkdir(self.path("sub"))
        status, _, err = self.audit(
            "--report", self.path("r-%p.json"), "--", *CD_SUB,
            env=self.env(CMSAFE_PRELOAD_LIB="lib.so"))
        self.assertEqual((status, err), (0, ""))
        self.assertEqual(len([f for f in os.listdir(self.dir) if f.startswith("r-")]), 1)


class Reports(Case):
    def test_a_relative_report_is_where_it_was_named(self):
        os.mkdir(self.path("sub"))
        status, _, err = self.audit("--report", "r-%p.json", "--", *CD_SUB)
        self.assertEqual((status, err), (0, ""))
        self.assertEqual([f for f in os.listdir(self.path("sub"))], [])
        self.assertEqual(len([f for f in os.listdir(self.dir) if f.startswith("r-")]), 1)

    def test_the_timeline_never_replaces_the_report(self):
        # The same file by another spelling, or through a symbolic link: refused before the
        # program runs, the report left as it was.
        mark = self.path("ran")
        with open(self.path("r.json"), "w") as f:
            f.write("kept\n")
        os.symlink("r.json", self.path("link.json"))
        for timeline in ("r.json", "./r.json", "sub/../r.json", "link.json"):
            status, _, err = self.audit("--report", "r.json", "--timeline", timeline, "--",
                                        "touch", mark)
            self.assertEqual(status, 2, timeline)
            self.assertIn("--report and --timeline name the same file", err)
            self.assertFalse(os.path.exists(mark), timeline)
        with open(self.path("r.json")) as f:
            self.assertEqual(f.read(), "kept\n")

    def test_a_relative_report_makes_the_timeline(self):
        os.mkdir(self.path("sub"))
        status, _, err = self.audit("--report", "r-%p.json", "--timeline", "t.json", "--",
                                    *CD_SUB)
        self.assertEqual((status, err), (0, ""))
        self.assertEqual(len(events_of(self.trace(self.path("t.json")))), 1)

    def stale(self):
        """Two reports of an earlier run, of pids 11 and 12."""
        for pid in (11, 12):
            with open(self.path("report-%d.json" % pid), "w") as f:
                f.write(json.dumps({"record": "event", "seq": 1, "type": "ESTABLISHED",
                                    "status": 0, "id": hex(pid), "listen_id": None,
                                    "thread": pid, "get_ns": 5, "ack_ns": 6,
                                    "private_data_len": 0, "internal": False}) + "\n")

    def test_only_this_runs_reports_are_converted(self):
        self.stale()
        status, out, err = self.audit("--report", "report-%p.json", "--timeline", "t.json",
                                      "--", *ECHO_PID)
        self.assertEqual(status, 0, err)
        pid = int(out)
        self.assertEqual(events_of(self.trace(self.path("t.json"))), [hex(pid)])
        self.assertEqual(err, "cmsafe-timeline: %s: 2 files from before this run left out\n"
                         % self.path("report-%p.json"))

    def test_a_run_that_wrote_none_converts_none(self):
        self.stale()
        # A program the preload never gets into (env execs sh without it, before its own exit
        # would write a report): as one that never touched librdmacm.
        status, _, err = self.audit("--report", "report-%p.json", "--timeline", "t.json",
                                    "--", "env", "-u", "LD_PRELOAD", "sh", "-c", ":")
        self.assertEqual(status, 0, err)
        self.assertEqual(self.trace(self.path("t.json"))["traceEvents"], [])
        self.assertIn("no report (no process touched librdmacm)", err)

    def test_a_report_without_pid_left_from_before(self):
        self.stale()
        status, _, err = self.audit("--report", "report-11.json", "--timeline", "t.json",
                                    "--", "env", "-u", "LD_PRELOAD", "true")
        self.assertEqual(status, 0, err)
        self.assertEqual(self.trace(self.path("t.json"))["traceEvents"], [])
        template = self.path("report-11.json")
        self.assertEqual(err.splitlines(), [
            "cmsafe-timeline: %s: no report (no process touched librdmacm)" % template,
            "cmsafe-timeline: %s: 1 file from before this run left out" % template])

    def test_a_name_taken_is_the_name_and_a_pid(self):
        # Two processes, one report name without %p: the second finds the name taken and
        # writes NAME.<pid> (as the preload does), and both are in the timeline.
        status, out, err = self.audit("--report", "r.json", "--timeline", "t.json", "--", "sh",
                                      "-c", "cat /dev/null; echo $$; exec cat /dev/null")
        self.assertEqual((status, err), (0, ""))
        self.assertEqual(sorted(os.listdir(self.dir)),
                         sorted(["r.json", "r.json.%s" % out.strip(), "t.json", "tmp"]))
        trace = self.trace(self.path("t.json"))
        self.assertEqual(len(events_of(trace)), 2)
        tracks = [m["args"]["name"] for m in trace["traceEvents"] if m["name"] == "process_name"]
        self.assertEqual([t.split(" - ")[-1] for t in tracks],
                         ["r.json", "pid %s (r.json.%s)" % (out.strip(), out.strip())])

    def test_the_temporary_reports(self):
        status, out, err = self.audit("--timeline", "t.json", "--", *ECHO_PID)
        self.assertEqual((status, err), (0, ""))
        self.assertEqual(events_of(self.trace(self.path("t.json"))), [hex(int(out))])
        self.assert_tmp_clean()

    def test_from_takes_every_name_after_it_as_a_report(self):
        # Reports named like the converter's options, in the current directory.
        self.stale()
        for old, new in (("report-11.json", "--svg"), ("report-12.json", "pic.svg")):
            os.rename(self.path(old), self.path(new))
        with open(self.path("pic.svg"), "rb") as f:
            before = f.read()
        status, _, err = self.audit("--timeline", "t.json", "--from", "--svg", "pic.svg")
        self.assertEqual((status, err), (0, ""))
        self.assertEqual(events_of(self.trace(self.path("t.json"))), ["0xb", "0xc"])
        with open(self.path("pic.svg"), "rb") as f:
            self.assertEqual(f.read(), before)
        status, _, err = self.audit("--timeline", "t.json", "--from", "-o", "x")
        self.assertEqual(status, 1)
        self.assertIn("-o: cannot read", err)

    def test_from_reports_by_pid(self):
        template = os.path.join(ROOT, "tests", "timeline", "data", "multi", "report-%p.json")
        status, _, err = self.audit("--timeline", "t.json", "--from", template)
        self.assertEqual((status, err), (0, ""))
        trace = self.trace(self.path("t.json"))
        self.assertEqual(tl.validate(trace, tl.read_reports([template])), [])
        self.assertEqual(trace["otherData"]["reports"], ["report-4101.json", "report-4102.json"])

    def test_from_needs_a_timeline_and_a_report(self):
        self.assertEqual(self.audit("--from", "r.json")[0], 2)
        self.assertEqual(self.audit("--timeline", "t.json", "--from")[0], 2)

    def test_the_programs_status_and_a_timeline_that_cannot_be_made(self):
        status, _, _ = self.audit("--timeline", "t.json", "--", "sh", "-c", "exit 7")
        self.assertEqual(status, 7)
        with open(self.path("report-1.json"), "w") as f:
            f.write("not a report\n")
        status, _, err = self.audit("--report", "report-1.json", "--timeline", "t.json", "--",
                                    "sh", "-c", "echo >> report-1.json")
        self.assertEqual(status, 1)
        self.assertEqual(err, "cmsafe-timeline: %s:1: not JSON (Expecting value, column 1)\n"
                         % self.path("report-1.json"))


# The signal tests' program: SIGHUP, SIGINT, SIGQUIT and SIGTERM taken one by one, each with
# who sent it ("count": then exit 3), or left at their defaults ("die", SIGINT's too); READY
# written once they are. GOT: a line per signal taken, "SIGNO CODE PID", written as it is
# taken, until none came for 0.5 s (one passed on after another would be there by then, unless
# it came while the other was still pending: two of one signal pending are one).
PROGRAM = r"""
import os, signal, sys, time
d, mode = sys.argv[1], sys.argv[2]
sigs = {signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM}
if mode == "count":
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
else:
    for s in sigs:
        signal.signal(s, signal.SIG_DFL)
open(os.path.join(d, "ready"), "w").close()
if mode == "die":
    time.sleep(20)
    sys.exit(3)
info = signal.sigtimedwait(sigs, 20)
with open(os.path.join(d, "got"), "w") as f:
    while info is not None:
        f.write("%d %d %d\n" % (info.si_signo, info.si_code, info.si_pid))
        f.flush()
        info = signal.sigtimedwait(sigs, 0.5)
sys.exit(3)
"""
SI_USER, SI_KERNEL = 0, 0x80


class Signals(Case):
    def start(self, mode, *options, **kw):
        """cmsafe-audit --timeline running PROGRAM in MODE, in a session of its own, once the
        program is ready: its Popen."""
        p = subprocess.Popen([AUDIT, "--timeline", self.path("t.json")] + list(options)
                             + ["--", sys.executable, "-c", PROGRAM, self.dir, mode],
                             env=self.env(), cwd=self.dir, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=no_core, **kw)
        self.addCleanup(self.end, p)
        self.wait_for("ready", p)
        return p

    def end(self, p):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()

    def wait_for(self, name, p=None):
        end = time.monotonic() + TIMEOUT
        while not os.path.exists(self.path(name)):
            if time.monotonic() > end or (p is not None and p.poll() is not None):
                self.fail("no %s from the program" % name)
            time.sleep(0.01)

    def fresh(self):
        """No file of the last run's program left."""
        for name in ("ready", "got", "t.json"):
            if os.path.exists(self.path(name)):
                os.unlink(self.path(name))

    def taken(self):
        """How many signals the program took so far."""
        try:
            with open(self.path("got")) as f:
                return f.read().count("\n")
        except FileNotFoundError:
            return 0

    def got(self):
        """The signals the program took: [(signo, si_code, si_pid)]."""
        with open(self.path("got")) as f:
            return [tuple(int(w) for w in line.split()) for line in f]

    def signalled(self, mode, sig):
        """A fresh run of the program in MODE, SIG sent to cmsafe-audit alone once it is
        ready: (its Popen, ended; its stderr)."""
        self.fresh()
        p = self.start(mode)
        os.kill(p.pid, sig)
        return p, p.communicate(timeout=TIMEOUT)[1]

    def test_a_signal_to_the_launcher_is_passed_on_once(self):
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            p, err = self.signalled("count", sig)
            # The program took it, from cmsafe-audit, and exited 3: that is the status, and its
            # report (it exited) is in the timeline.
            self.assertEqual((p.returncode, self.got()), (3, [(sig, SI_USER, p.pid)]), err)
            self.assertEqual(len(events_of(self.trace(self.path("t.json")))), 1)
            self.assert_tmp_clean()

    def test_a_program_ended_by_it(self):
        # cmsafe-audit ends by the signal that ended the program, once the timeline is made.
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            p, err = self.signalled("die", sig)
            self.assertEqual(p.returncode, -sig, err)
            self.assertFalse(os.path.exists(self.path("got")))
            # Ended by a signal, it wrote no report: an empty timeline, made all the same.
            self.assertEqual(self.trace(self.path("t.json"))["traceEvents"], [])
            self.assert_tmp_clean()

    def test_a_shell_says_128_and_the_signal(self):
        status, out, _ = self.audit("-c", '"$0" --timeline t.json -- sh -c \'kill -TERM $$\'; '
                                    'echo $?', AUDIT, program="sh")
        self.assertEqual((status, out), (0, "143\n"))

    def test_the_process_group_s_signal(self):
        # kill -INT -PGID, as a shell's job control sends it: the program gets its own. The
        # launcher, told by nothing that the program got one too, passes its own on: a second
        # (one, when it came while the first was pending). A terminal's Ctrl-C, the kernel's,
        # is never passed on (below).
        p = self.start("count")
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=TIMEOUT)
        got = self.got()
        self.assertEqual((p.returncode, got[0]), (3, (signal.SIGINT, SI_USER, os.getpid())), err)
        self.assertIn(got[1:], ([], [(signal.SIGINT, SI_USER, p.pid)]))
        self.assert_tmp_clean()

    def test_ctrl_c_on_a_terminal_reaches_the_program_once(self):
        # Ten presses, each once the program took the last: one passed on by the launcher
        # would come after the terminal's, often enough once the program took that one.
        pid, master = pty.fork()
        if pid == 0:  # the child: cmsafe-audit, its session's leader on the terminal
            try:
                os.execve(AUDIT, [AUDIT, "--timeline", self.path("t.json"), "--",
                                  sys.executable, "-c", PROGRAM, self.dir, "count"], self.env())
            finally:
                os._exit(126)
        output = []

        def drain(until):
            while time.monotonic() < until:
                ready, _, _ = select.select([master], [], [], 0.05)
                if ready:
                    try:
                        data = os.read(master, 4096)
                    except OSError:  # the terminal's last process exited
                        return
                    if not data:
                        return
                    output.append(data)
                elif os.waitpid(pid, os.WNOHANG)[0] == pid:
                    raise AssertionError("cmsafe-audit exited early: %r" % output)
        try:
            end = time.monotonic() + TIMEOUT
            while not os.path.exists(self.path("ready")) and time.monotonic() < end:
                drain(time.monotonic() + 0.05)
            for n in range(1, 11):
                os.write(master, b"\x03")  # the terminal's interrupt character
                while self.taken() < n:
                    drain(time.monotonic() + 0.005)
            drain(time.monotonic() + TIMEOUT)
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(master)
        self.assertEqual((os.waitstatus_to_exitcode(status), self.got()),
                         (3, [(signal.SIGINT, SI_KERNEL, 0)] * 10), output)
        self.assert_tmp_clean()


class Dispositions(Case):
    """The program's SigIgn and SigBlk (/proc/PID/status) under cmsafe-audit, with and without
    --timeline, are those of the same program run directly by the same caller."""

    CALLERS = {
        "a shell's": {},
        "nohup's (SIGHUP ignored)": {"ignore": [signal.SIGHUP]},
        "SIGINT and SIGQUIT ignored": {"ignore": [signal.SIGINT, signal.SIGQUIT]},
        "SIGTERM ignored": {"ignore": [signal.SIGTERM]},
        "SIGPIPE and SIGXFSZ ignored": {"ignore": [signal.SIGPIPE, signal.SIGXFSZ]},
        "SIGCHLD ignored": {"ignore": [signal.SIGCHLD]},
        "SIGUSR1, SIGINT and SIGTERM blocked": {
            "block": [signal.SIGUSR1, signal.SIGINT, signal.SIGTERM]},
    }

    def status_of(self, argv, caller):
        def as_caller():
            default_dispositions()
            for s in caller.get("ignore", []):
                signal.signal(s, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_SETMASK, caller.get("block", []))
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env(),
                              cwd=self.dir, timeout=TIMEOUT, check=False,
                              restore_signals=True, preexec_fn=as_caller)
        self.assertEqual(done.returncode, 0, done.stderr)
        return status_lines(done.stdout)

    def test_as_run_directly(self):
        program = ["cat", "/proc/self/status"]
        for name, caller in self.CALLERS.items():
            direct = self.status_of(program, caller)
            self.assertEqual(sorted(direct), ["SigBlk", "SigIgn"])
            for options in ([], ["--timeline", self.path("t.json")], ["--safe"]):
                under = self.status_of([AUDIT] + options + ["--"] + program, caller)
                self.assertEqual(under, direct, (name, options))
            self.assert_tmp_clean()
        # The callers differ: the test sees what it compares.
        ign = {int(self.status_of(program, c)["SigIgn"], 16) for c in self.CALLERS.values()}
        self.assertEqual(len(ign), 6)


if __name__ == "__main__":
    unittest.main()
