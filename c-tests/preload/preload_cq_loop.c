/* Completion events used correctly: each round arms the CQ, sends, gets the event with
 * ibv_get_cq_event, polls the completions and acks with ibv_ack_cq_events(cq, 1); at the end the
 * QP and the CQ are destroyed. Under the preload: no finding, and the summary counts every
 * completion event got and acked. scripts/syscall-count counts the system calls of the N rounds
 * between the two marker writes (after WARMUP rounds): the preload must add none per event.
 *   preload_cq_loop [N [WARMUP]]   (default 100 0); prints "events N".
 *   CM events: seq 1..5, all acked. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7497 };

static void rounds(struct raw_cq_pair *p, int n)
{
    for (int i = 0; i < n; i++)
        ibv_ack_cq_events(raw_cq_event(p), 1);
}

/* A write strace shows and nothing else sees. */
static void marker(const char *m)
{
    if (write(-1, m, strlen(m)) >= 0)
        fprintf(stderr, "write(-1) succeeded\n");
}

int main(int argc, char **argv)
{
    harness_watchdog(300);
    int n = argc > 1 ? atoi(argv[1]) : 100, warmup = argc > 2 ? atoi(argv[2]) : 0;
    struct raw_cq_pair p;
    raw_cq_pair_connect(&p, PORT, 1); /* CM seq 1..5 */
    rounds(&p, warmup);
    marker("cq_loop: begin");
    rounds(&p, n);
    marker("cq_loop: end");
    printf("events %d\n", n);
    rdma_destroy_qp(p.pair.client);
    raw_destroy_cq(p.cqs[0], "cq");
    return harness_exit();
}
