"""What the guest says of itself: scripts/rxe-vm exports RXE_ADDR, RXE_DEV, RXE_TIME_SCALE."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

# The kernel's enum rdma_node_type, as /sys/class/infiniband/DEV/node_type prints it:
# "4: RNIC" is an iWARP device, "1: CA" IB or RoCE.
_RNIC = "4:"


def die(prog: str, message: str, status: int = 2) -> None:
    """A harness that cannot start: one line on stderr, the usage error's status."""
    print("%s: %s" % (prog, message), file=sys.stderr)
    sys.exit(status)


@dataclass(frozen=True)
class Guest:
    addr: str
    dev: str
    transport: str  # "ib" (IB and RoCE) or "iwarp"
    time_scale: int  # 1 on x86_64; the arm64 guest's emulation is slower (scripts/rxe-vm --help)

    @property
    def transport_name(self) -> str:
        return "iWARP" if self.transport == "iwarp" else "IB/RoCE"


def transport_of(node_type: str) -> str:
    return "iwarp" if node_type.strip().startswith(_RNIC) else "ib"


def time_scale_of(value: str | None) -> int:
    """RXE_TIME_SCALE: 1 to 99; anything else is 1, as the bash harnesses read it."""
    if value and value.isdigit() and value[0] != "0" and len(value) <= 2:
        return int(value)
    return 1


def from_env(prog: str, sys_root: str = "/sys/class/infiniband") -> Guest:
    """The guest this harness runs in, or exit 2 saying it must run inside scripts/rxe-vm."""
    addr = os.environ.get("RXE_ADDR")
    dev = os.environ.get("RXE_DEV")
    if not addr or not dev:
        die(prog, "run this inside scripts/rxe-vm")
    path = os.path.join(sys_root, dev, "node_type")
    try:
        with open(path) as f:
            node_type = f.readline()
    except OSError:
        die(prog, "no node type for %s" % dev)
    return Guest(addr, dev, transport_of(node_type), time_scale_of(os.environ.get("RXE_TIME_SCALE")))


def project_root() -> str:
    """The work tree: this file is tests/harness/cmsafe_harness/guest.py."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.dirname(os.path.dirname(here)))


def installed_preload() -> tuple[str, str] | None:
    """The installed cmsafe-audit and libcmsafe_preload.so that scripts/deb-test's guest runs
    the programs through (CMSAFE_TEST_AUDIT and CMSAFE_TEST_PRELOAD, both set), instead of this
    tree's build; None when they are not set."""
    audit = os.environ.get("CMSAFE_TEST_AUDIT")
    lib = os.environ.get("CMSAFE_TEST_PRELOAD")
    return (audit, lib) if audit and lib else None
