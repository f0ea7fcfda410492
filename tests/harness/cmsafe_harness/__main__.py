"""python3 -m cmsafe_harness HARNESS [ARGS...]: runs one harness (scripts/ name each)."""

from __future__ import annotations

import importlib
import sys

# The harnesses: the name scripts/ give, and the module that runs it (its main(argv) -> int).
HARNESSES = {
    "misuse": "cmsafe_harness.misuse",
    "real": "cmsafe_harness.real",
    "storm": "cmsafe_harness.storm",
    "faults": "cmsafe_harness.faults",
    "demo": "cmsafe_harness.demo",
    "stack-suite": "cmsafe_harness.stack_suite",
    "deb-suite": "cmsafe_harness.deb_suite",
    "usdt": "cmsafe_harness.usdt",
    "soak": "cmsafe_harness.soak",
    "race": "cmsafe_harness.race",
    "c-tests": "cmsafe_harness.ctests",
    "new-events": "cmsafe_harness.new_events",
    "api-preload": "cmsafe_harness.api_preload",
    "pages": "cmsafe_harness.pages",
    "syscalls": "cmsafe_harness.syscalls",
    "insns": "cmsafe_harness.insns",
    "preload-insns": "cmsafe_harness.callgrind",
    "cmtime": "cmsafe_harness.cmtime",
    "copy-insns": "cmsafe_harness.copy_insns",
    "event-cpu": "cmsafe_harness.event_cpu",
    "cm-setup": "cmsafe_harness.cm_setup",
    "migrated": "cmsafe_harness.migrated",
    "scale-host": "cmsafe_harness.scale_host",
    "scale-live": "cmsafe_harness.scale_live",
    "record": "cmsafe_harness.record",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in HARNESSES:
        print("usage: python3 -m cmsafe_harness {%s} [ARGS...]" % ",".join(sorted(HARNESSES)),
              file=sys.stderr)
        return 2
    module = importlib.import_module(HARNESSES[argv[0]])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
