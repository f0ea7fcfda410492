/* The cancelled-read race, modelled on libiscsi 1.19's iSER initiator (lib/iser.c) against a
 * target in another process. The initiator runs a CM thread that loops rdma_get_cm_event,
 * handles, acks, and exits after DISCONNECTED; at disconnect the main thread calls
 * rdma_disconnect, rdma_destroy_qp, pthread_cancel(CM thread), then rdma_destroy_id. When the
 * cancel lands just as the kernel hands the CM thread the DISCONNECTED (glibc before 2.41 acts on
 * it after the read returned), that event is lost and rdma_destroy_id waits forever.
 *   race_cancelled_read target N      accepts N connections; on DISCONNECTED replies with
 *                                     rdma_disconnect and destroys the connection
 *   race_cancelled_read initiator N   N connect/disconnect rounds as above; a rdma_destroy_id
 *                                     that has not returned after 3 s counts as a hang (the id
 *                                     and its channel are abandoned), and the run goes on
 * The initiator prints "rounds R, hangs H, cancelled inside rdma_get_cm_event C" (C: the CM
 * thread's cleanup handler ran inside the call). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7435 };

static int target(int n)
{
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *listen = raw_listen(ch, PORT);
    printf("target: listening\n");
    fflush(stdout);
    int done = 0;
    while (done < n) {
        struct rdma_cm_event *ev;
        REQUIRE(rdma_get_cm_event(ch, &ev) == 0, "rdma_get_cm_event: %s", strerror(errno));
        struct rdma_cm_id *id = ev->id;
        enum rdma_cm_event_type type = ev->event;
        REQUIRE(rdma_ack_cm_event(ev) == 0, "rdma_ack_cm_event: %s", strerror(errno));
        switch (type) {
        case RDMA_CM_EVENT_CONNECT_REQUEST:
            rxe_create_qp(id);
            raw_accept(id, NULL, 0);
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            rdma_disconnect(id);
            rdma_destroy_qp(id);
            REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id: %s", strerror(errno));
            done++;
            break;
        default:
            break;
        }
    }
    rdma_destroy_id(listen);
    rdma_destroy_event_channel(ch);
    printf("target: %d connections served\n", done);
    return 0;
}

struct conn {
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id;
    sem_t state;
    int established;
};

static volatile int cancelled_inside;

static void inside(void *arg)
{
    (void)arg;
    cancelled_inside++;
}

static void *cm_thread(void *arg)
{
    struct conn *c = arg;
    for (;;) {
        struct rdma_cm_event *ev, copy;
        int r;
        pthread_cleanup_push(inside, NULL);
        r = rdma_get_cm_event(c->ch, &ev);
        pthread_cleanup_pop(0);
        if (r)
            pthread_exit(NULL);
        memcpy(&copy, ev, sizeof copy);
        int ret = 0;
        switch (copy.event) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            ret = rdma_resolve_route(c->id, 1000);
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED:
            rxe_create_qp(c->id);
            raw_connect(c->id, NULL, 0);
            break;
        case RDMA_CM_EVENT_ESTABLISHED:
            c->established = 1;
            sem_post(&c->state);
            break;
        default:
            ret = -1;
            sem_post(&c->state);
            break;
        }
        rdma_ack_cm_event(ev);
        if (ret)
            pthread_exit(NULL);
    }
}

static void *destroyer(void *arg)
{
    rdma_destroy_id(arg);
    return NULL;
}

/* rdma_destroy_id in a thread of its own, joined within `secs`: 0 when it returned. */
static int destroy_within(struct rdma_cm_id *id, int secs)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, destroyer, id) == 0, "pthread_create");
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += secs;
    if (pthread_timedjoin_np(t, NULL, &dl) == 0)
        return 0;
    pthread_detach(t);
    return -1;
}

static int initiator(int n)
{
    int hangs = 0;
    for (int i = 0; i < n; i++) {
        struct conn *c = calloc(1, sizeof *c);
        REQUIRE(c, "calloc");
        c->ch = raw_channel();
        sem_init(&c->state, 0, 0);
        REQUIRE(rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
                strerror(errno));
        pthread_t cm;
        REQUIRE(pthread_create(&cm, NULL, cm_thread, c) == 0, "pthread_create");
        struct sockaddr_in dst = rxe_addr(PORT);
        REQUIRE(rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, 2000) == 0,
                "rdma_resolve_addr: %s", strerror(errno));
        sem_wait(&c->state);
        REQUIRE(c->established, "round %d: the connection was not established", i);
        rdma_disconnect(c->id);
        rdma_destroy_qp(c->id);
        pthread_cancel(cm);
        pthread_join(cm, NULL);
        if (destroy_within(c->id, 3) != 0) {
            hangs++;
            fprintf(stderr, "round %d: rdma_destroy_id hangs\n", i);
            continue; /* the id, its channel and `c` are abandoned */
        }
        rdma_destroy_event_channel(c->ch);
        free(c);
    }
    printf("initiator: rounds %d, hangs %d, cancelled inside rdma_get_cm_event %d\n", n, hangs,
           cancelled_inside);
    fflush(stdout);
    /* Abandoned ids hold their channels' destroy: leave without running exit handlers' waits. */
    return 0;
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 3, "usage: race_cancelled_read target|initiator N");
    int n = atoi(argv[2]);
    if (!strcmp(argv[1], "target"))
        return target(n);
    return initiator(n);
}
