"""Running Coccinelle's spatch: one place for its options, its time limit and its failures.

The rules print their results as lines `PREFIX <json>` on stdout (a rule's python script); every
other line spatch prints is its own business. A run that fails (spatch missing, a rule it
cannot compile, a crash) raises SpatchError with spatch's own last words, never a traceback.
"""

import json
import shutil
import subprocess


class SpatchError(Exception):
    pass


# Options of every run:
#   --no-includes   headers are not parsed: the rules need no type of the program's own, and a
#                   project's headers (generated ones, config.h) need not exist
#   --very-quiet    nothing but what the rules print
#   --timeout       seconds per file, so that a pathological function cannot hang a whole run
BASE_OPTIONS = ["--no-includes", "--very-quiet"]
# And of the lint's (not cmsafe-migrate's): its rules match paths and change nothing, so a
# match on some paths of a statement and not others is no inconsistency to refuse.
MATCH_OPTIONS = ["--allow-inconsistent-paths"]
TIMEOUT_PER_FILE = 120


def spatch_path():
    exe = shutil.which("spatch")
    if not exe:
        raise SpatchError("spatch (Coccinelle) is not installed: scripts/setup-deps --lint, "
                          "or apt-get install coccinelle")
    return exe


def _spatch(args, timeout):
    """Runs spatch with ARGS; its completed process, or SpatchError with its last words."""
    cmd = [spatch_path(), *BASE_OPTIONS, "--timeout", str(TIMEOUT_PER_FILE), *args]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              errors="replace", stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SpatchError("spatch did not finish within its time limit") from None
    except OSError as e:
        raise SpatchError("cannot run spatch: %s" % e.strerror) from None
    if proc.returncode != 0:
        last = [l for l in proc.stderr.splitlines() if l.strip()][-3:]
        raise SpatchError("spatch failed (exit status %d)%s" % (
            proc.returncode, ": " + " / ".join(last) if last else ""))
    return proc


def run(cocci_file, files, prefix, extra=()):
    """Runs spatch with `cocci_file` over `files`; returns the parsed JSON of its `prefix` lines."""
    if not files:
        return []
    proc = _spatch([*MATCH_OPTIONS, *extra, "--sp-file", cocci_file, *files],
                   TIMEOUT_PER_FILE * max(1, len(files)) + 60)
    out = []
    for line in proc.stdout.splitlines():
        if line.startswith(prefix + " "):
            try:
                out.append(json.loads(line[len(prefix) + 1:]))
            except ValueError:
                raise SpatchError("spatch printed a malformed record: %.200s" % line) from None
    return out


def patch(cocci_file, path, out, extra=()):
    """Applies a semantic patch to `path`, writing the result to `out` (left absent when the
    patch changes nothing)."""
    _spatch([*extra, "--sp-file", cocci_file, path, "-o", out], TIMEOUT_PER_FILE + 60)
