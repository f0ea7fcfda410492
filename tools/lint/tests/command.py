"""Running one of bin/'s commands as a user does, for the command-line tests, and the small
handler they share."""

import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

# A handler with one finding: its error branch returns without the ack (line 8).
LEAK = """#include <rdma/rdma_cma.h>
int f(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    if (ev->status)
        return 1;
    return rdma_ack_cm_event(ev);
}
"""


def run(command, *args, cwd=None, env=None):
    """bin/COMMAND ARGS in CWD: (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bin", command), *args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                       env=env, timeout=300)
    return p.returncode, p.stdout, p.stderr
