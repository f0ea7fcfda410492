/* Misuse: double-ack, on an accept's error path (the pattern of pmem/rpma #1702: the connection
 * request's accept acked its CONNECT_REQUEST; when setting up the connection then failed, the
 * request's delete path rejected it and acked the same event again).
 *   One process: the client resolves and connects (1 ADDR_RESOLVED, 2 ROUTE_RESOLVED, acked);
 *   the server gets 3 CONNECT_REQUEST, accepts the request's id and acks the event; its next
 *   setup step fails (here on purpose), and the error path rejects the id and acks the event a
 *   second time. Expected: double-ack seq=3 type=CONNECT_REQUEST, said before the second ack
 *   reaches librdmacm (if it does).
 * On stderr: "step: acking CONNECT_REQUEST a second time" before the second ack and "step:
 * second rdma_ack_cm_event returned" after it. Raw librdmacm: the second rdma_ack_cm_event reads
 * the freed event and frees it again, and glibc aborts ("free(): double free detected"). If the
 * second ack returns, the program goes on cleanly and exits 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7437 };

/* The connection's setup after the accept: fails, as a memory registration or a CQ might. */
static int set_up_connection(struct rdma_cm_id *id)
{
    (void)id;
    errno = ENOMEM;
    return -1;
}

int main(void)
{
    struct rdma_event_channel *sch = raw_channel(), *cch = raw_channel();
    struct rdma_cm_id *listener = raw_listen(sch, PORT);
    struct rdma_cm_id *client = raw_client(cch, PORT, 0); /* seq 1, 2 */
    raw_connect(client, RAW_TOKEN, sizeof RAW_TOKEN);

    struct rdma_cm_event *req = raw_get(sch, RDMA_CM_EVENT_CONNECT_REQUEST); /* seq 3 */
    struct rdma_cm_id *child = req->id;
    raw_accept(child, RAW_TOKEN, sizeof RAW_TOKEN);
    raw_ack(req); /* the accept's ack */

    if (set_up_connection(child) != 0) {
        STEP("setting up the connection failed (%s): rejecting the request", strerror(errno));
        rdma_reject(child, NULL, 0); /* after the accept it may fail: the path goes on */
        STEP("acking CONNECT_REQUEST a second time");
        int rc = rdma_ack_cm_event(req); /* the misuse */
        STEP("second rdma_ack_cm_event returned %d", rc);
        CHECK_EQ_INT(rc, 0);
    }

    CHECK_EQ_INT(raw_destroy_id(child), 0);
    CHECK_EQ_INT(raw_destroy_id(client), 0);
    CHECK_EQ_INT(rdma_destroy_id(listener), 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
