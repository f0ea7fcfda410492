"""Running programs under supervision: every wait has a deadline, every kill is said.

Process creation is slow in the guest (TCG, the root over 9p: about half a second per exec), so
nothing here forks a helper: logs are read by this process, deadlines are the monotonic clock's.
Exit statuses follow the shell's convention (128 + N for death by signal N), which the checks
and the messages of every harness use.

Every program starts with the signals a harness sends at their defaults, whatever this process
inherited (below: `start_defaults`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

POLL = 0.1  # seconds between looks at a running program
KILL_GRACE = 0.5  # seconds between SIGTERM and SIGKILL

# The signals a harness stops its programs with, or sends them in a test. A suite started in the
# background (`nohup make test >log &`, a CI job's script) inherits SIGINT and SIGQUIT ignored
# (and SIGHUP, under nohup), and an ignored signal stays ignored across exec: a program stopped
# with SIGINT would then live on until it was killed after its grace, and a program whose
# handler a test checks would never see the signal.
CHILD_DEFAULTS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM)


def _ignored_here(signum, frame) -> None:
    """What an inherited ignored signal does to this process: nothing, as before."""


def start_defaults() -> None:
    """Each of CHILD_DEFAULTS that this process inherited ignored gets a handler that does
    nothing: here it is still without effect (a harness run under nohup outlives its terminal),
    while every program started from here gets it at its default, as exec resets a handled
    signal and keeps an ignored one. Done when the module is first imported: every harness and
    its tests start their programs through it."""
    for sig in CHILD_DEFAULTS:
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, _ignored_here)


start_defaults()


def read_lines(path: str) -> list[str]:
    """A log's lines as bash's mapfile -t gives them (a last line without newline counts);
    no file yet is no lines. Bytes that are not UTF-8 are replaced, never fatal."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def shell_status(returncode: int) -> int:
    """Popen's returncode (-N for signal N) as the shell says it: 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def environment(changes: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment with CHANGES applied (None removes a name)."""
    env = dict(os.environ)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def secs_text(secs: float) -> str:
    """A duration as the verdict lines print it: seconds with one decimal, truncated."""
    tenths = int(secs * 10)
    return "%d.%d" % (tenths // 10, tenths % 10)


@dataclass
class Run:
    """One program run to its end (or killed as hung): its status and its logs' lines."""

    argv: list[str]
    log: str  # LOG.out and LOG.err hold stdout and stderr (merged: LOG holds both)
    rc: int = 0
    hung: bool = False
    dur: float = 0.0  # seconds
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    pid: int = 0  # the process's id (a preload's report is named after it)
    # Dying at its deadline (not hung: see _dying): the seconds its teardown took after the
    # deadline, and the kernel's stack of it then.
    teardown: float = 0.0
    teardown_stack: list[str] = field(default_factory=list)

    @property
    def dur_text(self) -> str:
        """The duration as the verdict lines print it: seconds with one decimal, truncated."""
        return secs_text(self.dur)


def _start(argv: Sequence[str], out, err, env: Mapping[str, str] | None,
           stdin: int | None = None) -> subprocess.Popen | None:
    """Starts ARGV with its streams in the open files OUT and ERR (ERR subprocess.STDOUT: with
    OUT). A program that is missing or not executable is None, with the reason written where
    its stderr goes, as a shell would say it: its caller reports status 127, a failed case, not
    a traceback that ends the whole harness before its tally."""
    try:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL if stdin is None else stdin,
                                stdout=out, stderr=err,
                                env=dict(env) if env is not None else None)
    except OSError as e:
        (out if err == subprocess.STDOUT else err).write(
            ("%s: %s\n" % (argv[0], e.strerror)).encode())
        return None


def run_to(argv: Sequence[str], out_path: str, err_path: str | None = None,
           env: Mapping[str, str] | None = None, timeout: float | None = None) -> int:
    """Runs ARGV to its end with stdout in OUT_PATH and stderr in ERR_PATH (None: in OUT_PATH
    too, as `>LOG 2>&1` puts them), the file names a harness's readers already know. The shell
    status; a missing program is 127 with the reason in the log, a run past TIMEOUT seconds is
    killed (SIGTERM, then SIGKILL) and 124, as timeout(1) says it."""
    with open(out_path, "wb") as out:
        err = open(err_path, "wb") if err_path is not None else out
        try:
            p = _start(argv, out, err, env)
            if p is None:
                return 127
            try:
                return shell_status(p.wait(timeout))
            except subprocess.TimeoutExpired:
                _kill(p)
                p.wait()
                return 124
        finally:
            if err is not out:
                err.close()


def _first_match(pattern: re.Pattern[str], lines: Sequence[str]) -> bool:
    return any(pattern.search(line) for line in lines)


def _paths(log: str, merged: bool) -> tuple[str, str]:
    """Where stdout and stderr go: LOG.out and LOG.err, or LOG itself for both."""
    return (log, log) if merged else (log + ".out", log + ".err")


def run(
    argv: Sequence[str],
    log: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 40.0,
    marker: str | None = None,
    hang_wait: float | None = None,
    hang_grace: float = 3.0,
    stdin: int | None = None,
    merged: bool = False,
) -> Run:
    """Runs ARGV with stdout in LOG.out and stderr in LOG.err, and waits for its end.

    Without MARKER the program must end within TIMEOUT seconds. With MARKER (a regex on stderr)
    the program is expected to block right after printing it: it gets HANG_WAIT seconds
    (TIMEOUT when None) to print it, then HANG_GRACE seconds more; past its deadline it counts
    as hung and is killed (SIGTERM, then SIGKILL). The old logs go first: the last run's stderr
    could hold this run's marker, a hang "seen" before the program even started. STDIN: an open
    file descriptor for the program's standard input; None: /dev/null, open for reading and
    writing. MERGED: both streams go to LOG itself, in the order written (a shell's >LOG 2>&1,
    for programs whose report and output are read together); Run.out holds its lines, Run.err
    none, and MARKER is looked for in it.
    """
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
    out_path, err_path = _paths(log, merged)
    for path in {out_path, err_path}:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    result = Run(list(argv), log)
    pattern = re.compile(marker) if marker else None
    t0 = time.monotonic()
    with contextlib.ExitStack() as files:
        out = files.enter_context(open(out_path, "wb"))
        err = out if merged else files.enter_context(open(err_path, "wb"))
        proc = _start(argv, out, subprocess.STDOUT if merged else err, env, stdin)
    if proc is None:
        result.rc = 127
        result.out, result.err = _read(out_path, err_path, merged)
        return result
    result.pid = proc.pid
    deadline = t0 + (hang_wait if pattern is not None and hang_wait is not None else timeout)
    seen = False
    dying_at = None
    while proc.poll() is None:
        now = time.monotonic()
        if pattern is not None and not seen and _first_match(pattern, read_lines(err_path)):
            seen = True
            deadline = now + hang_grace
        if now >= deadline:
            if dying_at is None and _dying(proc.pid):
                dying_at = now
                result.teardown_stack = _kernel_stack(proc.pid)
                deadline = now + TEARDOWN_WAIT
                continue
            result.hung = True
            _kill(proc)
            break
        time.sleep(POLL)
    result.rc = shell_status(proc.wait())
    result.dur = time.monotonic() - t0
    if dying_at is not None:
        result.teardown = time.monotonic() - dying_at
    result.out, result.err = _read(out_path, err_path, merged)
    return result


def _read(out_path: str, err_path: str, merged: bool) -> tuple[list[str], list[str]]:
    return read_lines(out_path), [] if merged else read_lines(err_path)


# A process the kernel is already tearing down at its deadline is not hung: it died (by a
# signal, or exit) and what its end waits for is the kernel's, the release of its files (the
# CM's retries of a handshake, with librdmacm's defaults, take up to 16 tries of 4.3 s). Its
# stack is kept for the verdict. Flags of a task in /proc/PID/stat (include/linux/sched.h).
PF_EXITING = 0x4
PF_SIGNALED = 0x400
TEARDOWN_WAIT = 120.0


def _dying(pid: int) -> bool:
    """Every task of PID is exiting, killed by a signal, or a zombie (a main thread that called
    pthread_exit(3) is a zombie while the others run on: the process is not dying)."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return False
    for tid in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] not in ("Z", "X") and int(fields[6]) & (PF_EXITING | PF_SIGNALED) == 0:
            return False
    return True


def _kernel_stack(pid: int) -> list[str]:
    """The kernel's stack of PID (root only), or why not."""
    try:
        with open("/proc/%d/stack" % pid) as f:
            return [line.strip() for line in f if line.strip()]
    except OSError as e:
        return ["(/proc/%d/stack: %s)" % (pid, e.strerror)]


def _kill(proc: subprocess.Popen) -> None:
    """SIGTERM, a short grace, then SIGKILL: a program blocked in the kernel may ignore the first."""
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(KILL_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()


class Background:
    """A server in the background: started, watched for a line, stopped; its logs in LOG.*
    (MERGED: both streams in LOG itself, as run() does; out() holds its lines, err() none, and
    wait_line() looks in it whichever stream it is given).

    The owner must stop() it: a harness that ends leaves no process behind.
    """

    def __init__(self, argv: Sequence[str], log: str, env: Mapping[str, str] | None = None,
                 merged: bool = False):
        self.argv = list(argv)
        self.log = log
        self.merged = merged
        self.out_path, self.err_path = _paths(log, merged)
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        with contextlib.ExitStack() as files:
            out = files.enter_context(open(self.out_path, "wb"))
            err = subprocess.STDOUT if merged else files.enter_context(open(self.err_path, "wb"))
            proc = _start(self.argv, out, err, env)
            # A missing program is a server that said why (_start) and ended with status 127,
            # so its owner's checks fail by name.
            self.proc = proc or subprocess.Popen(["/bin/sh", "-c", "exit 127"],
                                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        self.t0 = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def out(self) -> list[str]:
        return read_lines(self.out_path)

    def err(self) -> list[str]:
        return [] if self.merged else read_lines(self.err_path)

    def wait_line(self, pattern: str, timeout: float, stream: str = "out") -> bool:
        """Waits until a line of STREAM ("out" or "err") matches PATTERN; False at the
        deadline or when the process ended without it."""
        regex = re.compile(pattern)
        path = self.out_path if stream == "out" else self.err_path
        deadline = time.monotonic() + timeout
        while True:
            if _first_match(regex, read_lines(path)):
                return True
            if not self.alive():
                return _first_match(regex, read_lines(path))
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL)

    def wait(self, timeout: float) -> int | None:
        """The shell status once it ends by itself within TIMEOUT seconds, else None."""
        try:
            return shell_status(self.proc.wait(timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Sends SIG (when still running), waits TIMEOUT seconds, then SIGKILL; the status."""
        if self.alive():
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            return shell_status(self.proc.wait(timeout))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return shell_status(self.proc.wait())
