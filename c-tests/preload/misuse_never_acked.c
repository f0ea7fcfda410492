/* Misuse: never-acked. The server fetches a CONNECT_REQUEST, rejects it and forgets to ack it.
 * The child id is destroyed (it does not wait: a CONNECT_REQUEST counts against the listener),
 * the listener is left alone (destroying it would hang) and the program exits normally.
 *   Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (client), 3 CONNECT_REQUEST (never acked),
 *   4 REJECTED (client). Expected finding, at exit: never-acked seq=3 type=CONNECT_REQUEST.
 * Raw librdmacm: runs to the end, exit 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7482 };

int main(void)
{
    harness_watchdog(60);
    struct rdma_event_channel *sch = raw_channel(), *cch = raw_channel();
    struct rdma_cm_id *listen_id = raw_listen(sch, PORT);
    struct rdma_cm_id *client = raw_client(cch, PORT, 0); /* seq 1, 2 */
    raw_connect(client, RAW_TOKEN, sizeof RAW_TOKEN);

    struct rdma_cm_event *req = raw_get(sch, RDMA_CM_EVENT_CONNECT_REQUEST); /* seq 3 */
    struct rdma_cm_id *child = req->id;
    raw_reject(child);
    STEP("CONNECT_REQUEST rejected and never acked");
    raw_get_ack(cch, RDMA_CM_EVENT_REJECTED); /* seq 4 */

    CHECK_EQ_INT(rdma_destroy_id(child), 0);
    CHECK_EQ_INT(raw_destroy_id(client), 0);
    rdma_destroy_event_channel(cch);
    STEP("exiting with the CONNECT_REQUEST unacked (listen id %p kept)", (void *)listen_id);
    return harness_exit();
}
