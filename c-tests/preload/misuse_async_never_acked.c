/* Misuse: async-never-acked. The SRQ's SRQ_LIMIT_REACHED is got and never acked; the program
 * exits without destroying the SRQ (had it, ibv_destroy_srq would have waited for good).
 *   CM events: seq 1..5, all acked. Async events: 1, SRQ_LIMIT_REACHED of the SRQ printed as
 *   "srq 0x...", got by the thread printed as "main thread <tid>".
 * Raw libibverbs: runs to the end, exit 0. Audit and safe: async-never-acked at exit. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7463 };

int main(void)
{
    harness_watchdog(60);
    struct raw_srq_pair p;
    raw_srq_pair_connect(&p, PORT); /* CM seq 1..5 */
    printf("main thread %d\nsrq %p\n", gettid(), (void *)p.srq);
    raw_srq_limit(&p);
    struct ibv_async_event ev = raw_async_event(p.pair.client->verbs, IBV_EVENT_SRQ_LIMIT_REACHED);
    REQUIRE(ev.element.srq == p.srq, "the event is about srq %p", (void *)ev.element.srq);
    STEP("exiting with the async event unacked");
    return harness_exit();
}
