/* Misuse: cq-ack-wrong-cq. Two CQs on one completion channel (the client QP's send CQ and its
 * receive CQ); a completion event of the send CQ is acked against the receive CQ (seen in the
 * field: a CQ thread that acks "its" CQ whatever CQ the event came from). The send CQ's
 * ibv_destroy_cq then waits for good (the receive CQ's would too: acked 1, got 0).
 *   CM events: seq 1..5, all acked. Completion events: 1, from the CQ printed as "cq 0x...",
 *   got by "main thread <tid>"; the other CQ printed as "other cq 0x...".
 * Raw libibverbs: blocks in ibv_destroy_cq(cq). Audit: cq-ack-wrong-cq at the ack (naming both
 * CQs), cq-destroy-with-unacked before the destroy blocks, then blocks. Safe: the same findings,
 * the wrong ack kept from libibverbs, both destroys return 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7493 };

int main(void)
{
    harness_watchdog(90);
    struct raw_cq_pair p;
    struct ibv_cq *cq = raw_cq_main_event(&p, PORT, 2), *other = p.cqs[1];
    printf("other cq %p\n", (void *)other);
    fflush(stdout);

    STEP("acking the event against the other CQ");
    ibv_ack_cq_events(other, 1);
    STEP("ibv_ack_cq_events(other) returned");
    rdma_destroy_qp(p.pair.client);
    raw_destroy_cq(cq, "cq");
    raw_destroy_cq(other, "other");
    return harness_exit();
}
