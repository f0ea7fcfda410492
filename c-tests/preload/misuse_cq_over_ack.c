/* Misuse: cq-over-ack. One completion event got, two acked (a batch count kept wrong).
 * libibverbs' ibv_destroy_cq waits until the acked count EQUALS the count of events got: 2 for 1
 * never does.
 *   CM events: seq 1..5, all acked. Completion events: 1, from the CQ printed as "cq 0x...".
 * Raw libibverbs: blocks in ibv_destroy_cq. Audit: cq-over-ack at the ack and again before the
 * destroy blocks, then blocks. Safe: cq-over-ack at the ack (the extra ack kept from
 * libibverbs), ibv_destroy_cq returns 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7494 };

int main(void)
{
    harness_watchdog(90);
    struct raw_cq_pair p;
    struct ibv_cq *cq = raw_cq_main_event(&p, PORT, 1);
    STEP("acking 2 events of 1");
    ibv_ack_cq_events(cq, 2);
    STEP("ibv_ack_cq_events(cq, 2) returned");
    rdma_destroy_qp(p.pair.client);
    raw_destroy_cq(cq, "cq");
    return harness_exit();
}
