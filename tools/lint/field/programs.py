"""The programs `make lint-field` lints, as data: each a name, its source package (a directory
tools/lint/field/fetch-sources made), the paths read (files, or directories for their *.c
files that call an event function), and the #defines spatch needs for the project's own
macros (tools/lint/field/macros/), if any.

The rdma-core rows are the librdmacm and libibverbs examples one by one (the synchronous ones,
rdma_server and the like, call no event function of their own: librdmacm gets and acks for
them) and librdmacm itself; the others are the parts of each project that handle CM,
completion or async events.
"""

from collections import namedtuple

Program = namedtuple("Program", "name package paths macros")

_RDMACM = "librdmacm/examples/"
_VERBS = "libibverbs/examples/"

PROGRAMS = [
    Program("rping", "rdma-core", [_RDMACM + "rping.c"], None),
    Program("cmatose (ucmatose)", "rdma-core", [_RDMACM + "cmatose.c"], None),
    Program("udaddy", "rdma-core", [_RDMACM + "udaddy.c"], None),
    Program("mckey", "rdma-core", [_RDMACM + "mckey.c"], None),
    Program("cmtime", "rdma-core", [_RDMACM + "cmtime.c"], None),
    Program("rdma_server", "rdma-core", [_RDMACM + "rdma_server.c"], None),
    Program("rdma_client", "rdma-core", [_RDMACM + "rdma_client.c"], None),
    Program("rdma_xserver", "rdma-core", [_RDMACM + "rdma_xserver.c"], None),
    Program("rdma_xclient", "rdma-core", [_RDMACM + "rdma_xclient.c"], None),
    Program("rstream", "rdma-core", [_RDMACM + "rstream.c", _RDMACM + "common.c"], None),
    Program("riostream", "rdma-core", [_RDMACM + "riostream.c", _RDMACM + "common.c"], None),
    Program("rcopy", "rdma-core", [_RDMACM + "rcopy.c"], None),
    Program("udpong", "rdma-core", [_RDMACM + "udpong.c", _RDMACM + "common.c"], None),
    Program("librdmacm (cma.c, rsocket.c, preload.c, acm.c, addrinfo.c)", "rdma-core",
            ["librdmacm/cma.c", "librdmacm/rsocket.c", "librdmacm/preload.c",
             "librdmacm/acm.c", "librdmacm/addrinfo.c"], None),
    Program("rc_pingpong", "rdma-core", [_VERBS + "rc_pingpong.c", _VERBS + "pingpong.c"], None),
    Program("srq_pingpong", "rdma-core", [_VERBS + "srq_pingpong.c", _VERBS + "pingpong.c"],
            None),
    Program("uc_pingpong", "rdma-core", [_VERBS + "uc_pingpong.c", _VERBS + "pingpong.c"], None),
    Program("ud_pingpong", "rdma-core", [_VERBS + "ud_pingpong.c", _VERBS + "pingpong.c"], None),
    Program("xsrq_pingpong", "rdma-core", [_VERBS + "xsrq_pingpong.c", _VERBS + "pingpong.c"],
            None),
    Program("asyncwatch", "rdma-core", [_VERBS + "asyncwatch.c"], None),
    Program("perftest", "perftest", ["src"], None),
    Program("qperf", "qperf", ["src"], None),
    Program("libfabric verbs provider", "libfabric", ["prov/verbs/src/fi_verbs.c",
            "prov/verbs/src/verbs_cm.c", "prov/verbs/src/verbs_cm_xrc.c",
            "prov/verbs/src/verbs_cq.c", "prov/verbs/src/verbs_domain.c",
            "prov/verbs/src/verbs_domain_xrc.c", "prov/verbs/src/verbs_ep.c",
            "prov/verbs/src/verbs_eq.c", "prov/verbs/src/verbs_msg.c"], None),
    Program("UCX rdmacm transport", "ucx", ["src/uct/ib/rdmacm"], "ucx.h"),
    Program("UCX ib transports (completion and async events)", "ucx",
            ["src/uct/ib/base", "src/uct/ib/rc", "src/uct/ib/ud", "src/uct/ib/dc"], "ucx.h"),
    Program("tgt iSER target", "tgt", ["usr/iscsi/iser.c"], None),
    Program("libiscsi iSER initiator", "libiscsi", ["lib/iser.c"], None),
    # Not in Debian: the bug log's case (its deadlock report; v23.05 is the last release before
    # the fix, in v23.09),
    # with the files its path from the CM handler to rdma_destroy_id crosses.
    Program("SPDK nvmf target (rdma.c, nvmf.c, ctrlr.c, transport.c)", "spdk",
            ["lib/nvmf/rdma.c", "lib/nvmf/nvmf.c", "lib/nvmf/ctrlr.c", "lib/nvmf/transport.c"],
            None),
]
