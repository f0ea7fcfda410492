/* Misuse: destroy-in-own-handler. The event handler destroys the event's id before its
 * dispatcher acks the event: the thread calling rdma_destroy_id holds the very event that call
 * waits for (a self-deadlock on raw librdmacm).
 *   The client connects to a port no RDMA peer listens on (raw_connect_unanswered). Events:
 *   1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (acked), 3 REJECTED: its handler calls
 *   rdma_destroy_id(event->id); the dispatcher acks after the handler returns. Expected:
 *   destroy-in-own-handler seq=3 type=REJECTED.
 * On stderr: "step: calling rdma_destroy_id(client) from the REJECTED handler" before the call
 * and "step: rdma_destroy_id(client) returned" after it. When the call returns (safe mode) the
 * dispatcher acks the event and the program exits 0; raw or in audit mode it blocks. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

static void handle(struct rdma_cm_event *ev)
{
    if (ev->event == RDMA_CM_EVENT_REJECTED) {
        STEP("calling rdma_destroy_id(client) from the REJECTED handler");
        int rc = rdma_destroy_id(ev->id);
        STEP("rdma_destroy_id(client) returned %d", rc);
        CHECK_EQ_INT(rc, 0);
    }
}

int main(void)
{
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *client = raw_client(ch, RAW_NO_LISTENER_PORT, 0); /* seq 1, 2 */
    raw_connect_unanswered(client, RAW_TOKEN, sizeof RAW_TOKEN);

    struct rdma_cm_event *ev = raw_get(ch, RDMA_CM_EVENT_REJECTED); /* seq 3 */
    CHECK_EQ_INT(ev->status, raw_unanswered_status(raw_transport(client)));
    handle(ev);
    raw_ack(ev); /* the dispatcher acks once the handler returns */
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
