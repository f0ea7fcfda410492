#!/usr/bin/env python3
"""The instructions the preload executed in one process, from a callgrind profile of the whole
process (its uses: tests/harness/cmsafe_harness/callgrind.py).

    scripts/preload-insns.py PROFILE PRELOAD [TOP]
    scripts/preload-insns.py --per N PROFILE PROFILE2 PRELOAD TOP
    scripts/preload-insns.py --reads PROFILE PRELOAD

A Python file, not a shell wrapper, so that `python3 scripts/preload-insns.py` goes on working.
"""
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the shared work tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness"))
from cmsafe_harness import callgrind  # noqa: E402

sys.exit(callgrind.main(sys.argv[1:]))
