/* Misuse: qp-destroy-before-ack. On DISCONNECTED the server destroys the child's QP before acking
 * the event.
 *   Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (client), 3 CONNECT_REQUEST, 4 ESTABLISHED
 *   (client), 5 ESTABLISHED (child), the client disconnects, 6 DISCONNECTED (child: held while
 *   the server replies with rdma_disconnect and calls rdma_destroy_qp, then acked), 7
 *   DISCONNECTED (client). Expected: qp-destroy-before-ack seq=6 type=DISCONNECTED.
 * Raw librdmacm: runs to the end (rdma_destroy_qp does not wait), exit 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7489 };

int main(void)
{
    harness_watchdog(60);
    struct raw_pair p;
    raw_pair_connect(&p, PORT, NULL); /* seq 1..5 */

    REQUIRE(rdma_disconnect(p.client) == 0, "rdma_disconnect: %s", strerror(errno));
    struct rdma_cm_event *disc = raw_get(p.sch, RDMA_CM_EVENT_DISCONNECTED); /* seq 6 */
    REQUIRE(rdma_disconnect(p.child) == 0, "rdma_disconnect: %s", strerror(errno));
    STEP("calling rdma_destroy_qp(child) with its DISCONNECTED unacked");
    rdma_destroy_qp(p.child); /* the misuse */
    STEP("rdma_destroy_qp(child) returned");
    raw_ack(disc);

    raw_get_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED); /* seq 7 */
    rdma_destroy_qp(p.client);
    CHECK_EQ_INT(rdma_destroy_id(p.child), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.client), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.listen), 0);
    rdma_destroy_event_channel(p.cch);
    rdma_destroy_event_channel(p.sch);
    return harness_exit();
}
