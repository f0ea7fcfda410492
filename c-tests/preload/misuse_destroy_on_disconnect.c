/* Misuse: destroy-in-own-handler, by the last reference (the pattern of cocalele/PureFlash #52:
 * the DISCONNECTED handler dropped the connection's last reference, and the connection's
 * destructor called rdma_destroy_id before the event thread acked the event: the event thread
 * hung in rdma_destroy_id for ever).
 *   A connected pair (1 ADDR_RESOLVED, 2 ROUTE_RESOLVED, 3 CONNECT_REQUEST, 4 and 5
 *   ESTABLISHED, each acked); the server disconnects, and the client's event thread gets
 *   6 DISCONNECTED: its handler puts the connection's reference, the last, and the connection's
 *   destructor destroys its id. The dispatcher acks after the handler returns. Expected:
 *   destroy-in-own-handler seq=6 type=DISCONNECTED.
 * On stderr: "step: calling rdma_destroy_id(client) from the DISCONNECTED handler" before the
 * call and "step: rdma_destroy_id(client) returned" after it. When the call returns (safe mode)
 * the dispatcher acks the event and the program exits 0; raw or in audit mode it blocks. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7438 };

struct conn {
    struct rdma_cm_id *id;
    int refs;
};

/* The destructor's part under test: the id's destroy. Its QP is left to the process's exit: a
 * destroy of the QP first, with the DISCONNECTED held, is a finding of its own
 * (qp-destroy-before-ack, misuse_qp_destroy_before_ack.c). */
static void conn_destroy(struct conn *c)
{
    STEP("calling rdma_destroy_id(client) from the DISCONNECTED handler");
    int rc = rdma_destroy_id(c->id);
    STEP("rdma_destroy_id(client) returned %d", rc);
    CHECK_EQ_INT(rc, 0);
}

static void conn_put(struct conn *c)
{
    if (--c->refs == 0)
        conn_destroy(c);
}

static void handle(struct rdma_cm_event *ev, struct conn *c)
{
    if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
        conn_put(c); /* the connection's own reference, taken when it was established */
}

int main(void)
{
    struct raw_pair p;
    raw_pair_connect(&p, PORT, NULL); /* seq 1..5 */
    struct conn c = {.id = p.client, .refs = 1};

    CHECK_EQ_INT(rdma_disconnect(p.child), 0);
    struct rdma_cm_event *ev = raw_get(p.cch, RDMA_CM_EVENT_DISCONNECTED); /* seq 6 */
    handle(ev, &c);
    raw_ack(ev); /* the dispatcher acks once the handler returns */

    CHECK_EQ_INT(raw_destroy_id(p.child), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.listen), 0);
    rdma_destroy_event_channel(p.cch);
    rdma_destroy_event_channel(p.sch);
    return harness_exit();
}
