/* Misuse: use-after-destroy-channel. A CM thread fetches and acks an event, then, between two
 * rdma_get_cm_event calls, the main thread destroys the event channel (rping's teardown has this
 * race); the CM thread's next rdma_get_cm_event reads the freed channel (librdmacm frees it and
 * closes its fd in rdma_destroy_event_channel). Events: 1 ADDR_RESOLVED (CM thread, acked).
 * On stderr: "step: calling rdma_get_cm_event on the destroyed channel" before that call and
 * "step: rdma_get_cm_event on the destroyed channel returned R (errno E)" after it: raw it reads
 * a stale fd number from freed memory (the result depends on what malloc left there); the safe
 * preload refuses it with -1 and EBADF. Exit 0 either way. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "harness.h"
#include "raw_util.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: the CM thread acked its event; 2: the main thread destroyed the channel */

static void wait_stage(int want)
{
    pthread_mutex_lock(&lock);
    while (stage < want)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void set_stage(int s)
{
    pthread_mutex_lock(&lock);
    stage = s;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void *cm_thread(void *arg)
{
    struct rdma_event_channel *ch = arg;
    raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED); /* seq 1 */
    set_stage(1);
    wait_stage(2);
    STEP("calling rdma_get_cm_event on the destroyed channel");
    struct rdma_cm_event *ev = NULL;
    int rc = rdma_get_cm_event(ch, &ev);
    int err = errno;
    STEP("rdma_get_cm_event on the destroyed channel returned %d (errno %s)", rc,
         rc ? strerrorname_np(err) : "-");
    return NULL;
}

int main(void)
{
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *id;
    struct sockaddr_in dst = rxe_addr(RAW_NO_LISTENER_PORT);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, cm_thread, ch) == 0, "pthread_create failed");
    wait_stage(1);
    CHECK_EQ_INT(rdma_destroy_id(id), 0);
    STEP("destroying the event channel while the CM thread is between two gets");
    rdma_destroy_event_channel(ch);
    set_stage(2);
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join failed");
    return harness_exit();
}
