"""Running one of bin/'s commands as a user does, for the command-line tests."""

import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def run(command, *args, cwd=None, env=None):
    """bin/COMMAND ARGS in CWD: (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bin", command), *args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                       env=env, timeout=300)
    return p.returncode, p.stdout, p.stderr
