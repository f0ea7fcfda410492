"""The instruction budgets of bench/budgets.tsv: the ceilings insn-count, cmtime-insns and
copy-insns hold their counts to, per architecture.

One row a line, tab-separated: architecture (uname -m), script, row, budget; '#' begins a
comment line. A count depends on the C library's choices per architecture (which memcpy, poll or
ppoll), so each architecture has rows of its own, and one without rows has nothing to hold the
counts to: said on stderr, and under --check a failure (exit 1), since a check that holds
nothing would pass whatever the build did. bench/README.md, "Instruction budgets", says how
each ceiling was set and which regressions it catches.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable

PATH = os.path.join("bench", "budgets.tsv")


def parse(lines: Iterable[str], script: str, arch: str) -> dict[str, int]:
    """SCRIPT's rows for ARCH: row name -> budget."""
    out: dict[str, int] = {}
    for line in lines:
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t", 3)
        if len(fields) == 4 and fields[0] == arch and fields[1] == script:
            out[fields[2]] = int(fields[3])
    return out


def load(script: str, check: bool, root: str = ".", arch: str | None = None) -> dict[str, int]:
    """This machine's rows for SCRIPT (the name its messages begin with). None there: says so
    on stderr, exits 1 when CHECK, else an empty dict (the counts print without budgets)."""
    arch = arch or os.uname().machine
    with open(os.path.join(root, PATH)) as f:
        rows = parse(f, script, arch)
    if not rows:
        print("%s: %s has no budgets for %s" % (script, PATH, arch), file=sys.stderr, flush=True)
        if check:
            sys.exit(1)
    return rows
