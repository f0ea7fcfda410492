/* Misuse: cq-destroy-with-unacked. A CQ thread fetches a completion event with ibv_get_cq_event
 * and returns without acking it (as a CQ thread's error path does); the main thread then destroys
 * the QP and the CQ. libibverbs' ibv_destroy_cq waits until the CQ's acked count reaches the
 * count of events got: for good. The program acks the event after the destroy, as code that acks
 * "when the handler returns" would.
 *   CM events: seq 1..5 (the connected pair), all acked. Completion events: 1, from the CQ
 *   printed as "cq 0x...", got by the thread printed as "cq thread <tid>".
 * Raw libibverbs: blocks in ibv_destroy_cq. Audit: cq-destroy-with-unacked (1 event, got by the
 * CQ thread) before it blocks, then blocks. Safe: the same finding, ibv_destroy_cq returns 0,
 * and the late ack is a cq-ack-after-destroy, kept from the freed CQ. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7492 };

static struct raw_cq_pair p;
static struct ibv_cq *got;

static void *cq_thread(void *arg)
{
    (void)arg;
    printf("cq thread %d\n", gettid());
    got = raw_cq_event(&p);
    STEP("the CQ thread got a completion event and returns without acking it");
    return NULL;
}

int main(void)
{
    harness_watchdog(90);
    raw_cq_pair_connect(&p, PORT, 1); /* CM seq 1..5 */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, cq_thread, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    printf("cq %p\n", (void *)got);
    fflush(stdout);

    rdma_destroy_qp(p.pair.client);
    STEP("destroying the CQ with 1 completion event unacked");
    raw_destroy_cq(got, "cq");
    STEP("acking the event after ibv_destroy_cq");
    ibv_ack_cq_events(got, 1);
    STEP("ibv_ack_cq_events after the destroy returned");
    return harness_exit();
}
