/* Misuse: migrate-with-unacked. The server moves a connected child id to a new event channel
 * while the child's ESTABLISHED is still unacked: rdma_migrate_id waits for that ack forever
 * (raw librdmacm).
 *   Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (client), 3 CONNECT_REQUEST, 4 ESTABLISHED
 *   (client), 5 ESTABLISHED (child, held), then rdma_migrate_id(child, new channel). Expected:
 *   migrate-with-unacked seq=5 type=ESTABLISHED.
 * When the call returns (safe mode) the program acks the ESTABLISHED, disconnects cleanly (6
 * DISCONNECTED on the child's new channel, 7 DISCONNECTED on the client) and exits 0. On
 * stderr: "step: calling rdma_migrate_id(child)" and "step: rdma_migrate_id(child) returned". */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7486 };

int main(void)
{
    struct raw_pair p;
    struct rdma_cm_event *est = NULL;
    raw_pair_connect(&p, PORT, &est); /* seq 1..5, the child's ESTABLISHED (5) held */
    struct rdma_event_channel *nch = raw_channel();

    STEP("calling rdma_migrate_id(child) with its ESTABLISHED unacked");
    int rc = rdma_migrate_id(p.child, nch);
    STEP("rdma_migrate_id(child) returned %d", rc);
    CHECK_EQ_INT(rc, 0);
    raw_ack(est);

    harness_watchdog(60);
    REQUIRE(rdma_disconnect(p.client) == 0, "rdma_disconnect: %s", strerror(errno));
    raw_get_ack(nch, RDMA_CM_EVENT_DISCONNECTED);  /* seq 6 */
    REQUIRE(rdma_disconnect(p.child) == 0, "rdma_disconnect: %s", strerror(errno));
    raw_get_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED); /* seq 7 */
    rdma_destroy_qp(p.child);
    rdma_destroy_qp(p.client);
    CHECK_EQ_INT(rdma_destroy_id(p.child), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.client), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.listen), 0);
    rdma_destroy_event_channel(nch);
    rdma_destroy_event_channel(p.cch);
    rdma_destroy_event_channel(p.sch);
    return harness_exit();
}
