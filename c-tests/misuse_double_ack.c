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
    struct sockaddr_in dst = raw_addr(PORT);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED); /* seq 1 */
    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    struct rdma_cm_event *ev = raw_get(ch, RDMA_CM_EVENT_ROUTE_RESOLVED); /* seq 2 */
    raw_ack(ev);
    STEP("acking ROUTE_RESOLVED a second time");
    int rc = rdma_ack_cm_event(ev); /* the misuse */
    STEP("second rdma_ack_cm_event returned %d", rc);

    CHECK_EQ_INT(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
