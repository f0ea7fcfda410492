"""The reconnect storm's data: the servers, the files a run writes, the sanitizers' settings.

What storm.py (the storm) and faults.py (the network faults) share besides their checks.
"""

from __future__ import annotations

from dataclasses import dataclass

BIN = "target/storm"  # make storm-bins
PRELOAD = "target/release/libcmsafe_preload.so"  # make preload

# What each run needs built; the checked runs are the asan/ builds.
PROGRAMS = ("storm_server_cmsafe", "storm_server_legacy", "storm_server_raw", "storm_client",
            "asan/storm_server_cmsafe", "asan/storm_server_legacy", "asan/storm_server_raw")

# The sanitizers' settings of every run (LSAN_OPTIONS's suppressions get the tree's path).
ASAN_OPTIONS = "detect_leaks=1:halt_on_error=1:color=never"
LSAN_OPTIONS = "suppressions=%s/c-tests/lsan.supp:print_suppressions=0"
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1"

# valgrind runs the legacy server tens of times slower than native: the preload's late-ack
# threshold (CMSAFE_LATE_ACK_MS, 1000 ms by default) is one for native speed, and that run is
# there for the leak check.
VALGRIND_LATE_ACK_MS = "60000"
VALGRIND = ("valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect", "--error-exitcode=99")

PERF_RECORD = ("perf", "record", "-q", "-e", "cpu-clock", "-F", "2000")


@dataclass(frozen=True)
class Server:
    kind: str  # cmsafe, legacy, raw: storm_server_KIND
    title: str  # its name in the tables
    fetch: str  # how it fetches its events (the throughput table)


SERVERS = {
    "cmsafe": Server("cmsafe", "cmsafe API", "cmsafe_get_events batches"),
    "legacy": Server("legacy", "legacy + safe preload",
                     "rdma_get_cm_event + rdma_ack_cm_event, preload safe mode"),
    "raw": Server("raw", "raw baseline", "rdma_get_cm_event + rdma_ack_cm_event"),
}


def title(kind: str) -> str:
    """A server's name in the tables; an unknown one has none (as the tables always printed)."""
    server = SERVERS.get(kind)
    return server.title if server else ""


# storm.tsv: one row per wave of every run.
TSV_COLUMNS = ("server", "variant", "wave", "conns", "kill_first_ms", "kill_last_event_ms",
               "kill_last_ms", "establish_ms", "destroy_max_ms", "events", "disconnected",
               "timewait", "other", "cpu_connect_ms", "cpu_drain_ms", "dreq_tx", "dreq_rx",
               "drep_tx", "dreq_retries")

# The IB CM's message counters of a port (the kernel's ib_cm, in sysfs), in the order the
# table's columns take them: DREQ sent, DREQ received, DREP sent, DREQ resent.
CM_COUNTERS = ("cm_tx_msgs/dreq", "cm_rx_msgs/dreq", "cm_tx_msgs/drep", "cm_tx_retries/dreq")

# siw gives a process 144 queue mappings: 2 per QP (its CQs shared) and 1 for the shared CQ.
IWARP_MAX_CONNS = 71

# The profile's groups of shared objects (perf report --sort dso), in the table's order.
PROFILE_GROUPS = ("kernel", "cmsafe", "preload", "unwind", "libc", "rdma", "prog")
PROFILE_HEADER = ("| server | samples | kernel (syscalls: CM, verbs, rxe) | libcmsafe.so | "
                  "libcmsafe_preload.so | libgcc_s (stack unwinding) | libc + ld.so | "
                  "librdmacm, libibverbs, providers | the program |")


def profile_group(dso: str) -> str:
    if "kernel" in dso:
        return "kernel"
    if dso == "libcmsafe.so":
        return "cmsafe"
    if dso == "libcmsafe_preload.so":
        return "preload"
    if dso.startswith("libgcc_s"):
        return "unwind"
    if dso.startswith("libc.so") or dso.startswith("ld-linux"):
        return "libc"
    if dso.startswith("storm_server"):
        return "prog"
    return "rdma"
