/* Threads cancelled inside each call the preload wraps. Programs cancel their CM threads
 * (libiscsi at every disconnect, rping at exit); the preload must never abort or unwind halfway
 * because of it, and a call must be exactly as cancellable as it is raw: where librdmacm has a
 * cancellation point (write(2) to the channel's fd, close(2), pthread_cond_wait) the thread is
 * cancelled inside the call, where it has none (rdma_ack_cm_event) the call returns and the
 * cancel acts at the program's next cancellation point.
 *
 * Each case runs the call in a thread of its own and prints one line: whether the thread was
 * cancelled, and where (inside the call, or after it at pthread_testcancel). A case is either
 * "cancel pending" (the cancel is sent before the call, with cancellation disabled, then
 * enabled just before the call) or "cancelled while blocked" (sent 300 ms into the call). The
 * runner compares the lines with the run without the preload, under audit and safe mode, with
 * and without a report. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7431 };

struct job {
    const char *call;
    void (*fn)(struct job *);
    struct rdma_event_channel *ch, *ch2;
    struct rdma_cm_id *id;
    struct rdma_cm_event *ev;
    int pending;
    sem_t ready, go;
};

/* Where the thread was when it ended: set by its cleanup handlers. */
static const char *volatile where;

static void mark(void *what)
{
    where = what;
}

static void *runner(void *arg)
{
    struct job *j = arg;
    int old;
    if (j->pending)
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    sem_post(&j->ready);
    if (j->pending) {
        sem_wait(&j->go);
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    }
    pthread_cleanup_push(mark, "inside the call");
    j->fn(j);
    pthread_cleanup_pop(0);
    pthread_cleanup_push(mark, "after the call, at pthread_testcancel");
    pthread_testcancel();
    pthread_cleanup_pop(0);
    where = "nowhere";
    return NULL;
}

static void run(struct job *j, int pending)
{
    pthread_t t;
    void *ret = NULL;
    j->pending = pending;
    where = "?";
    REQUIRE(sem_init(&j->ready, 0, 0) == 0 && sem_init(&j->go, 0, 0) == 0, "sem_init");
    REQUIRE(pthread_create(&t, NULL, runner, j) == 0, "pthread_create");
    sem_wait(&j->ready);
    if (pending) {
        pthread_cancel(t);
        sem_post(&j->go);
    } else {
        usleep(300 * 1000);
        pthread_cancel(t);
    }
    REQUIRE(pthread_join(t, &ret) == 0, "pthread_join");
    printf("%s, %s: %s, %s\n", j->call, pending ? "cancel pending" : "cancelled while blocked",
           ret == PTHREAD_CANCELED ? "cancelled" : "not cancelled", where);
    fflush(stdout);
}

static void do_get(struct job *j)
{
    rdma_get_cm_event(j->ch, &j->ev);
}
static void do_ack(struct job *j)
{
    rdma_ack_cm_event(j->ev);
}
static void do_destroy_id(struct job *j)
{
    rdma_destroy_id(j->id);
}
static void do_migrate(struct job *j)
{
    rdma_migrate_id(j->id, j->ch2);
}
static void do_destroy_qp(struct job *j)
{
    rdma_destroy_qp(j->id);
}
static void do_destroy_channel(struct job *j)
{
    rdma_destroy_event_channel(j->ch);
}

int main(void)
{
    struct rdma_event_channel *ch = raw_channel();
    struct job j = {.ch = ch};

    /* rdma_get_cm_event with an event queued: raw, write(2) acts on the cancel before it reads,
     * so the event stays queued for the next reader. */
    struct rdma_cm_id *a = raw_addr_queued(ch, PORT);
    j.call = "rdma_get_cm_event";
    j.fn = do_get;
    run(&j, 1);
    struct rdma_cm_event *ev = raw_get(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    printf("the event stayed queued: %s\n", rdma_event_str(ev->event));

    /* rdma_ack_cm_event has no cancellation point: it returns, and the ack happened. */
    j.call = "rdma_ack_cm_event";
    j.fn = do_ack;
    j.ev = ev;
    run(&j, 1);

    /* A reader blocked on an empty channel, cancelled: the channel still works after. */
    j.call = "rdma_get_cm_event";
    j.fn = do_get;
    run(&j, 0);
    struct rdma_cm_id *b = raw_addr_queued(ch, PORT);
    raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    printf("the channel still works after the cancelled reader\n");

    j.call = "rdma_destroy_id";
    j.fn = do_destroy_id;
    j.id = a;
    run(&j, 1);

    struct rdma_event_channel *ch2 = raw_channel();
    j.call = "rdma_migrate_id";
    j.fn = do_migrate;
    j.id = b;
    j.ch2 = ch2;
    run(&j, 1);

    struct rdma_cm_id *q = raw_client(ch, PORT, 1);
    j.call = "rdma_destroy_qp";
    j.fn = do_destroy_qp;
    j.id = q;
    run(&j, 1);

    struct rdma_event_channel *ch3 = raw_channel();
    j.call = "rdma_destroy_event_channel";
    j.fn = do_destroy_channel;
    j.ch = ch3;
    run(&j, 1);

    /* rdma_destroy_id while this thread holds the id's event unacked: raw, it blocks in
     * librdmacm's pthread_cond_wait and is cancelled there (leaving the id's lock held: the
     * event can never be acked after, so this case comes last). Under the preload it first
     * waits CMSAFE_LATE_ACK_MS for the ack (uncancellable), then enters librdmacm. */
    struct rdma_cm_id *c = raw_addr_queued(ch, PORT);
    struct rdma_cm_event *held = raw_get(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    j.ch = ch;
    j.call = "rdma_destroy_id (its event held by another thread)";
    j.fn = do_destroy_id;
    j.id = c;
    run(&j, 0);
    (void)held;
    return harness_exit();
}
