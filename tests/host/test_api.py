"""libcmsafe's misuse abort on the stand-in (tests/host/programs/api_abort.c: a cmsafe_event
released twice): it says the misuse and dumps the flight recorder on stderr, then aborts. A
stderr that cannot take the lines (a pipe nobody drains) does not stop the abort: a crash stays
a crash, never a hang."""

from __future__ import annotations

import fcntl
import json
import os
import resource
import signal
import subprocess

from hostrun import HostTest, environment, program, run



def no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class MisuseAbort(HostTest):
    def test_said_and_dumped_on_stderr_then_aborted(self):
        r = run([program("api_abort")])
        self.assertStatus(r, -signal.SIGABRT)
        self.assertEqual(r.out_lines, ["released once"], r)
        said = [line for line in r.err_lines if line.startswith("cmsafe: cmsafe_event_release(")]
        self.assertEqual(len(said), 1, r)
        self.assertTrue(said[0].endswith("this cmsafe_event was already released (double "
                                         "release or use after release); aborting"), r)
        flight = [json.loads(line) for line in r.err_lines if line.startswith('{"record"')]
        self.assertEqual([(f["record"], f["seq"], f["type"]) for f in flight],
                         [("flight", 1, "ESTABLISHED")], r)

    def test_said_on_the_stderr_the_program_chose(self):
        # A daemon points its stderr at its log after libcmsafe is loaded: that is where the
        # program wants the library's lines, as glibc's own abort messages go to fd 2.
        log = os.path.join(self.tmpdir(), "log")
        r = run([program("api_abort"), log])
        self.assertStatus(r, -signal.SIGABRT)
        self.assertEqual(r.out_lines, ["released once"], r)
        with open(log) as f:
            lines = f.read().splitlines()
        said = [line for line in lines if line.startswith("cmsafe: cmsafe_event_release(")]
        self.assertEqual(len(said), 1, lines)
        flight = [json.loads(line) for line in lines if line.startswith('{"record"')]
        self.assertEqual([(f["record"], f["seq"], f["type"]) for f in flight],
                         [("flight", 1, "ESTABLISHED")], lines)

    def test_a_full_stderr_pipe_does_not_stop_the_abort(self):
        # The pipe is full before the program starts and nobody reads it: each write to it would
        # wait forever.
        read_end, write_end = os.pipe()
        self.addCleanup(os.close, read_end)
        fcntl.fcntl(write_end, fcntl.F_SETFL, os.O_NONBLOCK)
        try:
            while True:
                os.write(write_end, b"x" * 65536)
        except BlockingIOError:
            pass
        fcntl.fcntl(write_end, fcntl.F_SETFL, 0)
        p = subprocess.Popen([program("api_abort")], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=write_end, env=environment("raw"),
                             start_new_session=True, preexec_fn=no_core)
        os.close(write_end)
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            self.fail("hung on its full stderr; stdout: %r" % out)
        self.assertEqual((p.returncode, out.decode().splitlines()),
                         (-signal.SIGABRT, ["released once"]))
