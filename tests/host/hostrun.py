"""Running the host tests' programs raw and under the preload, each with a deadline.

The programs (tests/host/programs, built into target/host-tests by `make host-tests`) are linked
against the stand-in librdmacm (tests/host/standin) with an rpath, so a run needs nothing but
the environment: raw, or with LD_PRELOAD=target/release/libcmsafe_preload.so and CMSAFE_MODE.
Each runs in a process group of its own with core dumps off; one past its deadline is hung, and
its whole group (a forked child too) is killed. A run's description says what was seen: the
wait status, and the tails of stdout and stderr.

The preload's output is read with the guest harnesses' own checks (tests/harness/cmsafe_harness,
audit.py): the finding lines, the summary, the JSON report.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from dataclasses import dataclass
from typing import Mapping, Sequence

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HOST = os.path.join(ROOT, "target", "host-tests")
BIN = os.path.join(HOST, "bin")
LIB = os.path.join(HOST, "lib")
OBJ = os.path.join(HOST, "obj")
STANDIN = os.path.join(LIB, "librdmacm.so.1")
RELEASE = os.path.join(ROOT, "target", "release")
PRELOAD = os.path.join(RELEASE, "libcmsafe_preload.so")
LIBCMSAFE = os.path.join(RELEASE, "libcmsafe.so")

sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
from cmsafe_harness import audit  # noqa: E402  (the path above first)

# A run takes tens of milliseconds; one still running after this is hung.
TIMEOUT = 3.0
# The preload's modes, each compared with the raw run where that is the point. "audit+mprotect"
# is audit with CMSAFE_GUARD=mprotect: acked pages closed by mprotect, faults by its SIGSEGV
# handler, where plain audit (these tests run as root) has userfaultfd and no handler.
MODES = ("audit", "audit+mprotect", "safe")
TAIL = 12  # lines of stdout and stderr a failure shows


def program(name: str) -> str:
    return os.path.join(BIN, name)


@dataclass
class Run:
    """One run: its wait status (Popen's returncode: -N for signal N; None when hung and
    killed), its output, and how long it took."""

    argv: list[str]
    mode: str
    rc: int | None
    seconds: float
    out: str
    err: str
    pid: int

    @property
    def hung(self) -> bool:
        return self.rc is None

    @property
    def out_lines(self) -> list[str]:
        return self.out.splitlines()

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()

    @property
    def status(self) -> str:
        if self.rc is None:
            return "hung: killed after %.1f s" % self.seconds
        return status_text(self.rc)

    def __str__(self) -> str:
        name = " ".join([os.path.basename(self.argv[0])] + self.argv[1:])

        def tail(text: str) -> str:
            lines = text.splitlines()[-TAIL:]
            return "".join("\n    " + line for line in lines) or " (none)"

        return "%s (%s): %s\n  stdout:%s\n  stderr:%s" % (
            name, self.mode, self.status, tail(self.out), tail(self.err))


def status_text(rc: int) -> str:
    """A wait status as Popen gives it, said: "exit N" or "killed by SIGNAME"."""
    return "killed by %s" % signal.Signals(-rc).name if rc < 0 else "exit %d" % rc


def environment(mode: str, changes: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment without any CMSAFE_* or LD_PRELOAD of its own; with the
    preload in MODE ("raw": none), then CHANGES (None removes a name)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CMSAFE_") and k != "LD_PRELOAD"}
    if mode != "raw":
        env["LD_PRELOAD"] = PRELOAD
        env["CMSAFE_MODE"], _, guard = mode.partition("+")
        if guard:
            env["CMSAFE_GUARD"] = guard
    for k, v in (changes or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class _Started:
    """A program started in a process group of its own, its output in temporary files."""

    def __init__(self, argv: Sequence[str], mode: str, env: Mapping[str, str | None] | None,
                 cwd: str | None):
        self.argv = list(argv)
        self.mode = mode
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.out,
                                     stderr=self.err, env=environment(mode, env), cwd=cwd,
                                     start_new_session=True, preexec_fn=_no_core)

    def finish(self, deadline: float) -> Run:
        try:
            rc: int | None = self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc = None
        seconds = time.monotonic() - self.t0
        # The whole group: a forked child, or one left behind by a program that exited.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        text = []
        for f in (self.out, self.err):
            f.seek(0)
            text.append(f.read().decode("utf-8", "replace"))
            f.close()
        return Run(self.argv, self.mode, rc, seconds, text[0], text[1], self.proc.pid)


def run(argv: Sequence[str], mode: str = "raw", env: Mapping[str, str | None] | None = None,
        timeout: float = TIMEOUT, cwd: str | None = None) -> Run:
    """Runs ARGV raw or under the preload in MODE to its end, or kills it TIMEOUT seconds in."""
    return _Started(argv, mode, env, cwd).finish(time.monotonic() + timeout)


def run_all(jobs: Sequence[tuple[Sequence[str], str]],
            env: Mapping[str, str | None] | None = None, timeout: float = TIMEOUT) -> list[Run]:
    """Runs every (ARGV, MODE) of JOBS at once, with one deadline for them all."""
    started = [_Started(argv, mode, env, None) for argv, mode in jobs]
    deadline = time.monotonic() + timeout
    return [s.finish(deadline) for s in started]


def unbuilt() -> list[str]:
    """What `make host-check` builds and the tests need, not built."""
    need = [STANDIN, PRELOAD, LIBCMSAFE]
    need += [program(p) for p in ("events", "signals", "exit", "report", "plugin", "cut",
                                  "api_abort", "scale")]
    need += [os.path.join(OBJ, o) for o in ("secure.o", "secure_api.o")]
    return [p for p in need if not os.path.exists(p)]


class HostTest(unittest.TestCase):
    """A test of programs on the stand-in: what they need built, a temporary directory, and
    assertions that say the run they judged."""

    KINDS: list[str] = []

    @classmethod
    def setUpClass(cls) -> None:
        missing = unbuilt()
        if missing:
            raise AssertionError("not built: %s (make host-check builds them)"
                                 % ", ".join(os.path.relpath(p, ROOT) for p in missing))
        if not HostTest.KINDS:
            HostTest.KINDS = audit.finding_kinds(ROOT)

    def tmpdir(self) -> str:
        d = tempfile.mkdtemp(prefix="cmsafe-host-")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def assertStatus(self, r: Run, rc: int) -> None:
        self.assertEqual(r.rc, rc, "want %s, got:\n%s" % (status_text(rc), r))

    def assertSameStatus(self, r: Run, raw: Run) -> None:
        """R ended as RAW did."""
        self.assertEqual(r.rc, raw.rc, "want %s as raw, got:\n%s" % (raw.status, r))

    def assertLine(self, r: Run, line: str) -> None:
        self.assertIn(line, r.out_lines, "no stdout line %r:\n%s" % (line, r))

    def assertFinding(self, r: Run, kind: str, seq: str, typ: str) -> None:
        """A `==cmsafe== KIND: seq=SEQ type=TYP ...` line on stderr, and no other kind's."""
        problems = audit.check_finding(r.err_lines, kind, seq, typ, "", "", self.KINDS)
        self.assertEqual(problems, [], "\n%s" % r)

    def assertNoFinding(self, r: Run) -> None:
        self.assertEqual(audit.check_no_findings(r.err_lines, self.KINDS), [], "\n%s" % r)

    def assertSummary(self, r: Run, mode: str, events: int, findings: int) -> None:
        """One summary at exit, of MODE, with these counts."""
        problems = audit.check_summary(r.err_lines, str(events), str(findings))
        sums = audit.summary_lines(r.err_lines)
        mode = mode.partition("+")[0]
        if sums and ", mode %s, " % mode not in sums[0]:
            problems.append("the summary is not mode %s: %s" % (mode, sums[0]))
        self.assertEqual(problems, [], "\n%s" % r)

    def assertKindCount(self, r: Run, kind: str, n: int) -> None:
        """The summary's line for KIND: `==cmsafe==   KIND: N (first: ...)`."""
        want = "==cmsafe==   %s: %d (first: " % (kind, n)
        self.assertTrue(any(line.startswith(want) for line in r.err_lines),
                        "no summary line %r...:\n%s" % (want, r))
