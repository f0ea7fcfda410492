/* Misuse: a DISCONNECTED handler that destroys the QP, then the id, and acks the event only when
 * the handler returns (seen in the field). Two misuses of one event, each named at its own call:
 * qp-destroy-before-ack at rdma_destroy_qp, then destroy-in-own-handler at rdma_destroy_id, which
 * waits for this very thread's ack forever. A finding at the first call must not hide the second.
 *   Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (client), 3 CONNECT_REQUEST, 4 ESTABLISHED
 *   (client), 5 ESTABLISHED (child), the client disconnects, 6 DISCONNECTED (child: held while
 *   the handler replies with rdma_disconnect, destroys the QP and the id), then acked; 7
 *   DISCONNECTED (client).
 * Raw librdmacm: blocks for good in rdma_destroy_id(child). */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7491 };

int main(void)
{
    harness_watchdog(60);
    struct raw_pair p;
    raw_pair_connect(&p, PORT, NULL); /* seq 1..5 */

    REQUIRE(rdma_disconnect(p.client) == 0, "rdma_disconnect: %s", strerror(errno));
    struct rdma_cm_event *disc = raw_get(p.sch, RDMA_CM_EVENT_DISCONNECTED); /* seq 6 */
    /* The handler. */
    REQUIRE(rdma_disconnect(p.child) == 0, "rdma_disconnect: %s", strerror(errno));
    STEP("calling rdma_destroy_qp(child) in the DISCONNECTED handler");
    rdma_destroy_qp(p.child);
    STEP("calling rdma_destroy_id(child) in the DISCONNECTED handler");
    CHECK_EQ_INT(rdma_destroy_id(p.child), 0);
    STEP("rdma_destroy_id(child) returned");
    /* The handler returned: now the ack. */
    raw_ack(disc);

    raw_get_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED); /* seq 7 */
    rdma_destroy_qp(p.client);
    CHECK_EQ_INT(rdma_destroy_id(p.client), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.listen), 0);
    rdma_destroy_event_channel(p.cch);
    rdma_destroy_event_channel(p.sch);
    return harness_exit();
}
