/* Misuse: double-ack. The client acks its ROUTE_RESOLVED twice.
 *   Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (acked twice). Expected finding: double-ack seq=2
 *   type=ROUTE_RESOLVED, printed before the second ack reaches librdmacm (if it does).
 * Raw librdmacm: the second rdma_ack_cm_event frees the block again and glibc aborts
 * ("free(): double free detected"). If the second ack returns, the program goes on cleanly and
 * exits 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7483 };

int main(void)
{
    harness_watchdog(60);
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *id = NULL;
    struct rdma_cm_event *ev = raw_route_unacked(ch, PORT, &id); /* seq 1 acked, seq 2 held */
    raw_ack(ev);
    STEP("acking ROUTE_RESOLVED a second time");
    int rc = rdma_ack_cm_event(ev); /* the misuse */
    STEP("second rdma_ack_cm_event returned %d", rc);

    CHECK_EQ_INT(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
