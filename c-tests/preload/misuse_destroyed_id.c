/* Misuse: use-after-destroy-id. A CONNECT_REQUEST handler's error path destroys the request's
 * new id, and its caller then rejects that id (seen in the field): rdma_reject reads the id that
 * rdma_destroy_id freed. A listener and a client in one process. Events: 1 ADDR_RESOLVED,
 * 2 ROUTE_RESOLVED (client), 3 CONNECT_REQUEST (listener, acked), then rdma_destroy_id(child),
 * then rdma_reject(child); 4: the client's answer (the kernel rejects the request when its id is
 * destroyed), acked. On stderr: "step: calling rdma_reject on the destroyed id" before the
 * misuse and "step: rdma_reject on the destroyed id returned R (errno E)" after it: raw,
 * librdmacm reads the freed id; the safe preload refuses the call with -1 and EINVAL. Exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7487 };

int main(void)
{
    struct rdma_event_channel *sch = raw_channel(), *cch = raw_channel();
    struct rdma_cm_id *listen_id = raw_listen(sch, PORT);
    struct rdma_cm_id *client = raw_client(cch, PORT, 0); /* seq 1, 2 */
    raw_connect(client, RAW_TOKEN, sizeof RAW_TOKEN);
    struct rdma_cm_event *req = raw_get(sch, RDMA_CM_EVENT_CONNECT_REQUEST); /* seq 3 */
    struct rdma_cm_id *child = req->id;
    raw_ack(req);

    /* The handler's error path. */
    CHECK_EQ_INT(rdma_destroy_id(child), 0);
    /* Its caller, not knowing. */
    STEP("calling rdma_reject on the destroyed id");
    int rc = rdma_reject(child, NULL, 0);
    int err = errno;
    STEP("rdma_reject on the destroyed id returned %d (errno %s)", rc,
         rc ? strerrorname_np(err) : "-");

    struct rdma_cm_event *ev;
    REQUIRE(rdma_get_cm_event(cch, &ev) == 0, "rdma_get_cm_event: %s", strerror(errno)); /* 4 */
    printf("client: %s\n", rdma_event_str(ev->event));
    raw_ack(ev);
    CHECK_EQ_INT(raw_destroy_id(client), 0);
    CHECK_EQ_INT(rdma_destroy_id(listen_id), 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
