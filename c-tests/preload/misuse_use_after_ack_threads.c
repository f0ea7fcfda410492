/* Misuse: use-after-ack by two threads at once. The program holds two events, acks both, then
 * two threads, released together by a barrier, each read one of them: under the audit, two
 * faults on two guarded pages at the same moment, each handled by its own thread's SIGSEGV
 * handler. On raw librdmacm; two ids on one channel.
 *   Events, in fetch order: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (id a, held), 3 ADDR_RESOLVED,
 *   4 ROUTE_RESOLVED (id b, held). Expected findings: use-after-ack seq=2 and seq=4, both
 *   type=ROUTE_RESOLVED, each with the thread that read it.
 * Prints on stdout "reader N read: type T" for each thread (under the preload T is 2, the
 * ROUTE_RESOLVED of the intact copy; raw, the bytes of freed heap memory). Otherwise
 * well-behaved: every other event is acked at once and every id destroyed. Exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7482 };

struct reader {
    int n;
    struct rdma_cm_event *ev;
    pthread_barrier_t *go;
    int type;
};

static void *read_acked(void *arg)
{
    struct reader *r = arg;
    pthread_barrier_wait(r->go);
    r->type = *(volatile enum rdma_cm_event_type *)&r->ev->event; /* the misuse */
    return NULL;
}

int main(void)
{
    harness_watchdog(60);
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *a = NULL, *b = NULL;
    struct rdma_cm_event *ea = raw_route_unacked(ch, PORT, &a); /* seq 1, 2 */
    struct rdma_cm_event *eb = raw_route_unacked(ch, PORT, &b); /* seq 3, 4 */

    pthread_barrier_t go;
    REQUIRE(pthread_barrier_init(&go, NULL, 3) == 0, "pthread_barrier_init");
    struct reader readers[2] = {{.n = 1, .ev = ea, .go = &go}, {.n = 2, .ev = eb, .go = &go}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&threads[i], NULL, read_acked, &readers[i]) == 0,
                "pthread_create");
    STEP("acking both ROUTE_RESOLVED events, then two threads read them at once");
    raw_ack(ea);
    raw_ack(eb);
    pthread_barrier_wait(&go);
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_join(threads[i], NULL) == 0, "pthread_join");
    STEP("reads done");
    for (int i = 0; i < 2; i++)
        printf("reader %d read: type %d\n", readers[i].n, readers[i].type);
    pthread_barrier_destroy(&go);

    rdma_destroy_id(a);
    rdma_destroy_id(b);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
