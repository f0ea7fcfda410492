/* Misuse: destroy-with-unacked. An event thread fetches an event and forgets to ack it; the main
 * thread then calls rdma_destroy_id, which waits for that ack forever (raw librdmacm).
 *   misuse_destroy_with_unacked [client]   (default)
 *     The client connects to a port no RDMA peer listens on (raw_connect_unanswered). Events:
 *     1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (main thread, acked), 3 REJECTED (event thread, never
 *     acked). Then rdma_destroy_id(client). Expected: destroy-with-unacked seq=3 type=REJECTED.
 *   misuse_destroy_with_unacked listener
 *     A listener and a client in one process. Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED
 *     (client), 3 CONNECT_REQUEST (event thread, rejected, never acked), 4 REJECTED (client,
 *     acked). rdma_destroy_id(child) must return (a CONNECT_REQUEST counts against the
 *     listener), then rdma_destroy_id(listener) waits forever. Expected: destroy-with-unacked
 *     seq=3 type=CONNECT_REQUEST, and only when the listener is destroyed.
 * On stderr: "step: calling rdma_destroy_id(...)" before the blocking call and "step:
 * rdma_destroy_id(...) returned" after it. When the call returns (the preload's safe mode) the
 * program finishes normally, exit 0; raw or in audit mode it blocks: the runner kills it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7485 };

struct fetch {
    struct rdma_event_channel *ch;
    enum rdma_cm_event_type want;
    struct rdma_cm_event *ev;
};

/* The event thread: fetches one event and returns without acking it. */
static void *event_thread(void *arg)
{
    struct fetch *f = arg;
    f->ev = raw_get(f->ch, f->want);
    return NULL;
}

static struct rdma_cm_event *fetch_in_thread(struct rdma_event_channel *ch,
                                             enum rdma_cm_event_type want)
{
    struct fetch f = {.ch = ch, .want = want};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, event_thread, &f) == 0, "pthread_create failed");
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join failed");
    return f.ev;
}

static void client_case(void)
{
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *client = raw_client(ch, RAW_NO_LISTENER_PORT, 0); /* seq 1, 2 */
    raw_connect_unanswered(client, RAW_TOKEN, sizeof RAW_TOKEN);
    struct rdma_cm_event *rej = fetch_in_thread(ch, RDMA_CM_EVENT_REJECTED); /* seq 3 */
    /* Forgotten by the event thread; read here, still unacked. */
    CHECK_EQ_INT(rej->status, raw_unanswered_status(raw_transport(client)));

    STEP("calling rdma_destroy_id(client) with its REJECTED unacked");
    int rc = rdma_destroy_id(client);
    STEP("rdma_destroy_id(client) returned %d", rc);
    CHECK_EQ_INT(rc, 0);
    rdma_destroy_event_channel(ch);
}

static void listener_case(void)
{
    struct rdma_event_channel *sch = raw_channel(), *cch = raw_channel();
    struct rdma_cm_id *listen_id = raw_listen(sch, PORT);
    struct rdma_cm_id *client = raw_client(cch, PORT, 0); /* seq 1, 2 */
    raw_connect(client, RAW_TOKEN, sizeof RAW_TOKEN);
    struct rdma_cm_event *req = fetch_in_thread(sch, RDMA_CM_EVENT_CONNECT_REQUEST); /* seq 3 */
    struct rdma_cm_id *child = req->id;
    raw_reject(child);
    raw_get_ack(cch, RDMA_CM_EVENT_REJECTED); /* seq 4 */
    CHECK_EQ_INT(raw_destroy_id(client), 0);

    STEP("calling rdma_destroy_id(child) with the CONNECT_REQUEST unacked (must return)");
    CHECK_EQ_INT(rdma_destroy_id(child), 0);
    STEP("rdma_destroy_id(child) returned");

    STEP("calling rdma_destroy_id(listener) with the CONNECT_REQUEST unacked");
    int rc = rdma_destroy_id(listen_id);
    STEP("rdma_destroy_id(listener) returned %d", rc);
    CHECK_EQ_INT(rc, 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
}

int main(int argc, char **argv)
{
    int listener = argc > 1 && strcmp(argv[1], "listener") == 0;
    REQUIRE(argc < 2 || listener || strcmp(argv[1], "client") == 0,
            "usage: misuse_destroy_with_unacked [client|listener]");
    if (listener)
        listener_case();
    else
        client_case();
    return harness_exit();
}
