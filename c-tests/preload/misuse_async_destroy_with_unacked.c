/* Misuse: async-destroy-with-unacked. An async-event thread fetches the QP's async event
 * (raw_qp_event: SQ_DRAINED on IB/RoCE, QP_FATAL on iWARP) with ibv_get_async_event and returns
 * without acking it (as an event thread's error path does); the main thread then destroys the QP
 * with rdma_destroy_qp, which calls ibv_destroy_qp. libibverbs' ibv_destroy_qp waits until the
 * QP's acked async events equal those the kernel handed out: for good. The program acks the event after the destroy, as code that acks "when the handler
 * returns" would.
 *   CM events: seq 1..5 (the connected pair), all acked. Async events: 1, of the QP printed as
 *   "qp 0x...", got by the thread printed as "async thread <tid>".
 * Raw libibverbs: blocks in rdma_destroy_qp. Audit: async-destroy-with-unacked (the QP, its 1
 * event, got by the async thread) before it blocks, then blocks. Safe: the same finding,
 * rdma_destroy_qp returns, and the late ack is an async-ack-after-destroy, kept from the freed
 * QP.
 * With the argument "cq", the same with a CQ: a CQ of 1 entry overflows (4 flushed receives of
 * another QP), the async thread gets its CQ_ERR (printed "cq 0x..."), the main thread destroys
 * that QP, then the CQ with ibv_destroy_cq (which waits for async acks as well as completion
 * acks): the same findings about the CQ and CQ_ERR, the destroy returning 0 in safe mode. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7461 };

static struct raw_pair p;
static struct ibv_async_event ev;
static enum ibv_event_type want;

static void *async_thread(void *arg)
{
    (void)arg;
    printf("async thread %d\n", gettid());
    ev = raw_async_event(p.client->verbs, want);
    STEP("the async thread got %s and returns without acking it", ibv_event_type_str(want));
    return NULL;
}

static void get_in_thread(enum ibv_event_type type)
{
    want = type;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, async_thread, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
}

static int cq_case(void)
{
    struct ibv_qp *qp;
    struct ibv_cq *cq = raw_cq_overflow(p.client->pd, &qp);
    printf("cq %p\n", (void *)cq);
    get_in_thread(IBV_EVENT_CQ_ERR);
    REQUIRE(ev.element.cq == cq, "the event is about cq %p", (void *)ev.element.cq);
    raw_destroy_qp(qp, "qp");
    raw_destroy_cq(cq, "cq");
    STEP("acking the event after the destroy");
    ibv_ack_async_event(&ev);
    STEP("ibv_ack_async_event after the destroy returned");
    return harness_exit();
}

int main(int argc, char **argv)
{
    harness_watchdog(90);
    raw_pair_connect(&p, PORT, NULL); /* CM seq 1..5 */
    if (argc > 1 && strcmp(argv[1], "cq") == 0)
        return cq_case();
    struct ibv_qp *qp = p.client->qp;
    printf("qp %p\n", (void *)qp);
    get_in_thread(raw_qp_event(qp));
    REQUIRE(ev.element.qp == qp, "the event is about qp %p, not %p", (void *)ev.element.qp,
            (void *)qp);

    STEP("calling rdma_destroy_qp(client) with 1 async event of its QP unacked");
    rdma_destroy_qp(p.client);
    STEP("rdma_destroy_qp(client) returned");
    STEP("acking the event after the destroy");
    ibv_ack_async_event(&ev);
    STEP("ibv_ack_async_event after the destroy returned");
    return harness_exit();
}
