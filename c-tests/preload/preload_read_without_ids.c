/* rping's teardown hang, on demand. rping's CM thread polls the event channel's fd (with an
 * eventfd its main thread writes to stop it) and calls rdma_get_cm_event when the fd is
 * readable; its main thread, done with the connection, calls rdma_destroy_id without waiting
 * for the CM thread. When an event (the client's DISCONNECTED) is queued just before the
 * destroy, the poll returns for it, the destroy drops it (the kernel discards a destroyed id's
 * unread events), and rdma_get_cm_event then waits for an event no id can send: the main
 * thread's pthread_join of the CM thread never returns. The race hangs rping's client about
 * once in a hundred runs on Soft-RoCE; this program takes the same steps in that order:
 *   1. an id's ADDR_RESOLVED is queued on the channel; a reader thread polls the fd: readable;
 *   2. the main thread destroys the id (it returns at once: no event of the id was read);
 *   3. the reader calls rdma_get_cm_event: it blocks, raw and preloaded alike.
 * The main thread waits 3 s for it (the runner sets CMSAFE_HANG_MS=1000, so the hang watcher
 * names the blocked read meanwhile), then shows what the finding says: the read returns only
 * once an id is made on the channel and gets an event. It makes one, resolves its address, and
 * the reader returns that ADDR_RESOLVED; everything is then torn down and the program exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7436 };

static struct rdma_event_channel *ch;
static sem_t polled, destroyed;
static struct rdma_cm_event *got;
static int got_rc = -2;

static void *reader(void *arg)
{
    (void)arg;
    struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
    REQUIRE(poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN), "the channel's fd is not readable");
    sem_post(&polled);
    sem_wait(&destroyed);
    got_rc = rdma_get_cm_event(ch, &got);
    return NULL;
}

int main(void)
{
    ch = raw_channel();
    sem_init(&polled, 0, 0);
    sem_init(&destroyed, 0, 0);
    struct rdma_cm_id *id = raw_addr_queued(ch, PORT);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, reader, NULL) == 0, "pthread_create");
    sem_wait(&polled);
    STEP("the reader polled the channel: an event is there; calling rdma_destroy_id");
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id: %s", strerror(errno));
    STEP("rdma_destroy_id returned; the reader calls rdma_get_cm_event");
    sem_post(&destroyed);

    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 3;
    int rc = pthread_timedjoin_np(t, NULL, &until);
    REQUIRE(rc == ETIMEDOUT, "the reader returned (%d, rdma_get_cm_event %d): the event was not dropped",
            rc, got_rc);
    STEP("the reader is still blocked in rdma_get_cm_event after 3 s");

    /* Only an event of a new id on the channel can end the read. */
    struct sockaddr_in dst = rxe_addr(PORT);
    struct rdma_cm_id *again = NULL;
    REQUIRE(rdma_create_id(ch, &again, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(again, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
    REQUIRE(got_rc == 0 && got, "rdma_get_cm_event: %d", got_rc);
    CHECK_EQ_INT(got->event, RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(got->id == again, "the event is not the new id's");
    raw_ack(got);
    STEP("a new id's ADDR_RESOLVED ended the read");
    REQUIRE(rdma_destroy_id(again) == 0, "rdma_destroy_id: %s", strerror(errno));
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
