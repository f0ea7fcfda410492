/* Misuse: async-double-ack. The QP's async event (raw_qp_event: SQ_DRAINED on IB/RoCE, QP_FATAL
 * on iWARP) is fetched and acked twice (an event handler acks, and so does its caller).
 * libibverbs counts every ack against the QP, so its acked count passes the count the kernel
 * handed out, and ibv_destroy_qp, which waits until the two are equal, waits for good.
 *   CM events: seq 1..5, all acked. Async events: 1, of the QP printed as "qp 0x...", got by the
 *   thread printed as "main thread <tid>".
 * Raw libibverbs: blocks in ibv_destroy_qp. Audit: async-double-ack at the second ack, and again
 * at ibv_destroy_qp (2 acked for 1 got) before it blocks, then blocks. Safe: async-double-ack
 * at the second ack, kept from libibverbs; ibv_destroy_qp returns 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7462 };

int main(void)
{
    harness_watchdog(90);
    struct raw_pair p;
    raw_pair_connect(&p, PORT, NULL); /* CM seq 1..5 */
    struct ibv_qp *qp = p.client->qp;
    printf("main thread %d\nqp %p\n", gettid(), (void *)qp);
    struct ibv_async_event ev = raw_async_event(p.client->verbs, raw_qp_event(qp));
    ibv_ack_async_event(&ev);
    STEP("acking the event a second time");
    ibv_ack_async_event(&ev);
    STEP("the second ibv_ack_async_event returned");
    raw_destroy_qp(qp, "qp");
    return harness_exit();
}
