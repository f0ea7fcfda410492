/* How cmsafe waits, with exact counts and measured times:
 *   cmsafe_get_event_timeout: -1/ETIMEDOUT on an idle channel after at least the timeout; 0 does
 *     not wait; *out untouched on failure.
 *   cmsafe_get_events: exactly the N events queued (or max, the rest on the next call), 0 on
 *     timeout, -1/EINVAL for max == 0 and NULL arguments; entries past the count untouched.
 *   O_NONBLOCK channel: cmsafe_get_event fails with EAGAIN at once when nothing is queued, and
 *     returns what is queued.
 *   EINTR: a signal (handler installed without SA_RESTART, sent with pthread_kill) ends a wait of
 *     cmsafe_get_event_timeout(..., 5000), cmsafe_get_event and cmsafe_get_events early.
 * The events queued are ADDR_RESOLVED of ids resolving $RXE_ADDR (no listener needed). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7730, N = 5, MAXB = 16 };

static cmsafe_event *const SENTINEL = (cmsafe_event *)(uintptr_t)0x5e7;

/* `n` ids on `ch`, each resolving $RXE_ADDR; returns once all their events are surely queued. */
static void resolve_ids(struct rdma_event_channel *ch, struct rdma_cm_id **ids, int n)
{
    struct sockaddr_in dst = rxe_addr(PORT);
    for (int i = 0; i < n; i++) {
        REQUIRE(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
                strerror(errno));
        REQUIRE(rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 2000) == 0,
                "rdma_resolve_addr: %s", strerror(errno));
    }
    /* A local address resolves in well under a millisecond; leave them ample time to queue. */
    REQUIRE(cm_wait_readable(ch, 2000), "no event queued");
    usleep(500 * 1000);
}

static int index_of(struct rdma_cm_id *const *ids, int n, struct rdma_cm_id *id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return i;
    return -1;
}

static void timeouts(struct rdma_event_channel *idle)
{
    STEP("timeouts on an idle channel");
    cmsafe_event *ev = SENTINEL;
    uint64_t t0 = cm_now_ns();
    errno = 0;
    int rc = cmsafe_get_event_timeout(idle, &ev, 300);
    int e = errno;
    double ms = cm_ms_since(t0);
    CHECK_EQ_INT(rc, -1);
    CHECK_EQ_INT(e, ETIMEDOUT);
    CHECK(ms >= 300 && ms < 2000, "timeout 300 returned after %.1f ms", ms);
    CHECK(ev == SENTINEL, "*out written on failure");

    /* "At once": the fastest of 3 tries, so that one stall of the emulated guest (150 ms seen
     * in its kernel log) does not fail the test. */
    double fastest = 1e9;
    for (int i = 0; i < 3; i++) {
        t0 = cm_now_ns();
        errno = 0;
        rc = cmsafe_get_event_timeout(idle, &ev, 0);
        e = errno;
        ms = cm_ms_since(t0);
        fastest = ms < fastest ? ms : fastest;
        CHECK_EQ_INT(rc, -1);
        CHECK_EQ_INT(e, ETIMEDOUT);
    }
    CHECK(fastest < 50, "timeout 0 took %.1f ms", fastest);
    CHECK(ev == SENTINEL, "*out written on failure");

    t0 = cm_now_ns();
    rc = cmsafe_get_event_timeout(idle, &ev, 1);
    ms = cm_ms_since(t0);
    CHECK(rc == -1 && ms >= 1, "timeout 1: rc %d after %.2f ms", rc, ms);

    cmsafe_event *evs[MAXB];
    for (int i = 0; i < MAXB; i++)
        evs[i] = SENTINEL;
    t0 = cm_now_ns();
    rc = cmsafe_get_events(idle, evs, MAXB, 250);
    ms = cm_ms_since(t0);
    CHECK_EQ_INT(rc, 0);
    CHECK(ms >= 250 && ms < 2000, "batch timeout 250 returned after %.1f ms", ms);
    fastest = 1e9;
    for (int i = 0; i < 3; i++) {
        t0 = cm_now_ns();
        rc = cmsafe_get_events(idle, evs, MAXB, 0);
        ms = cm_ms_since(t0);
        fastest = ms < fastest ? ms : fastest;
        CHECK_EQ_INT(rc, 0);
    }
    CHECK(fastest < 50, "batch timeout 0 took %.1f ms", fastest);
    int untouched = 1;
    for (int i = 0; i < MAXB; i++)
        untouched &= evs[i] == SENTINEL;
    CHECK(untouched, "a batch that returned 0 wrote into evs");
}

static void batches(struct rdma_event_channel *ch)
{
    STEP("a batch takes exactly the %d queued events", N);
    struct rdma_cm_id *ids[N];
    int seen[N] = {0};
    cmsafe_stats s0 = cm_stats();
    resolve_ids(ch, ids, N);
    cmsafe_event *evs[MAXB];
    for (int i = 0; i < MAXB; i++)
        evs[i] = SENTINEL;
    int n = cmsafe_get_events(ch, evs, MAXB, 0);
    CHECK_EQ_INT(n, N);
    int untouched = 1;
    for (int i = n > 0 ? n : 0; i < MAXB; i++)
        untouched &= evs[i] == SENTINEL;
    CHECK(untouched, "entries past the count were written");
    uint64_t last = 0;
    for (int i = 0; i < n && i < MAXB; i++) {
        CHECK_EQ_INT(cmsafe_event_type(evs[i]), RDMA_CM_EVENT_ADDR_RESOLVED);
        int k = index_of(ids, N, cmsafe_event_id(evs[i]));
        CHECK(k >= 0, "event %d is for none of the ids", i);
        if (k >= 0)
            seen[k]++;
        CHECK(cmsafe_event_seq(evs[i]) > last, "batch not in fetch order");
        last = cmsafe_event_seq(evs[i]);
        cmsafe_event_release(evs[i]);
    }
    for (int k = 0; k < N; k++)
        CHECK(seen[k] == 1, "id %d: ADDR_RESOLVED seen %d times", k, seen[k]);
    CHECK_EQ_INT(cmsafe_get_events(ch, evs, MAXB, 0), 0);
    cmsafe_stats s1 = cm_stats();
    CHECK_EQ_INT(s1.fetched - s0.fetched, N);
    CHECK_EQ_INT(s1.acked - s0.acked, N);

    STEP("max 3 of %d queued, then the rest", N);
    for (int k = 0; k < N; k++) {
        seen[k] = 0;
        REQUIRE(rdma_resolve_route(ids[k], 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    }
    REQUIRE(cm_wait_readable(ch, 2000), "no ROUTE_RESOLVED queued");
    usleep(500 * 1000);
    for (int i = 0; i < MAXB; i++)
        evs[i] = SENTINEL;
    n = cmsafe_get_events(ch, evs, 3, 1000);
    CHECK_EQ_INT(n, 3);
    CHECK(evs[3] == SENTINEL, "entry 3 written with max 3");
    n = n < 0 ? 0 : n;
    int m = cmsafe_get_events(ch, evs + n, (size_t)(MAXB - n), 0);
    CHECK_EQ_INT(m, N - 3);
    m = m < 0 ? 0 : m;
    for (int i = 0; i < n + m && i < MAXB; i++) {
        CHECK_EQ_INT(cmsafe_event_type(evs[i]), RDMA_CM_EVENT_ROUTE_RESOLVED);
        int k = index_of(ids, N, cmsafe_event_id(evs[i]));
        if (k >= 0)
            seen[k]++;
        CHECK(cmsafe_event_seq(evs[i]) > last, "batches not in fetch order");
        last = cmsafe_event_seq(evs[i]);
        cmsafe_event_release(evs[i]);
    }
    for (int k = 0; k < N; k++)
        CHECK(seen[k] == 1, "id %d: ROUTE_RESOLVED seen %d times", k, seen[k]);
    CHECK_EQ_INT(cmsafe_get_events(ch, evs, MAXB, 0), 0);

    STEP("a batch waits for the first event, then takes only what is queued");
    struct rdma_cm_id *one;
    REQUIRE(rdma_create_id(ch, &one, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_resolve_addr(one, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr");
    uint64_t t0 = cm_now_ns();
    n = cmsafe_get_events(ch, evs, MAXB, 3000);
    double ms = cm_ms_since(t0);
    CHECK_EQ_INT(n, 1);
    CHECK(ms < 2000, "the batch took %.0f ms with an event arriving at once", ms);
    if (n == 1) {
        CHECK(cmsafe_event_id(evs[0]) == one, "the batch's event is for the new id");
        cmsafe_event_release(evs[0]);
    }

    STEP("EINVAL");
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_events(ch, evs, 0, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_events(NULL, evs, MAXB, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_events(ch, NULL, MAXB, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
    cmsafe_event *ev = SENTINEL;
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_event_timeout(NULL, &ev, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_event_timeout(ch, NULL, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
    CHECK(ev == SENTINEL, "*out written on EINVAL");

    for (int k = 0; k < N; k++)
        CHECK(rdma_destroy_id(ids[k]) == 0, "rdma_destroy_id");
    CHECK(rdma_destroy_id(one) == 0, "rdma_destroy_id");
}

static void nonblocking(void)
{
    STEP("O_NONBLOCK channel");
    struct rdma_event_channel *nb = rdma_create_event_channel();
    REQUIRE(nb, "rdma_create_event_channel: %s", strerror(errno));
    int fl = fcntl(nb->fd, F_GETFL);
    REQUIRE(fl >= 0 && fcntl(nb->fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl: %s",
            strerror(errno));
    cmsafe_event *ev = SENTINEL;
    double fastest = 1e9;
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = cm_now_ns();
        errno = 0;
        rc = cmsafe_get_event(nb, &ev);
        int e = errno;
        double ms = cm_ms_since(t0);
        fastest = ms < fastest ? ms : fastest;
        CHECK_EQ_INT(rc, -1);
        CHECK_EQ_INT(e, EAGAIN);
    }
    CHECK(fastest < 50, "non-blocking fetch took %.1f ms", fastest);
    CHECK(ev == SENTINEL, "*out written on EAGAIN");

    struct rdma_cm_id *id;
    resolve_ids(nb, &id, 1);
    rc = cmsafe_get_event(nb, &ev);
    CHECK(rc == 0, "non-blocking fetch of a queued event: %s", strerror(errno));
    if (rc == 0) {
        CHECK_EQ_INT(cmsafe_event_type(ev), RDMA_CM_EVENT_ADDR_RESOLVED);
        CHECK(cmsafe_event_id(ev) == id, "the queued event is for the id");
        cmsafe_event_release(ev);
    }
    ev = SENTINEL;
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_event(nb, &ev), -1);
    CHECK_EQ_INT(errno, EAGAIN);
    CHECK(ev == SENTINEL, "*out written on EAGAIN");
    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(nb);
}

/* ---- EINTR ---- */
static volatile sig_atomic_t signals;
static void on_usr1(int sig)
{
    (void)sig;
    signals++;
}

struct kicker {
    pthread_t target;
    struct rdma_event_channel *ch;
    struct rdma_cm_id *unblock; /* resolved only if the wait was not interrupted */
    atomic_int returned;
    int unblocked;
};

/* Sends SIGUSR1 to the waiting thread after 300 ms; if it has not returned 3 s later, queues an
 * event so that a library that resumed the wait fails the test instead of hanging it. */
static void *kick(void *arg)
{
    struct kicker *k = arg;
    usleep(300 * 1000);
    pthread_kill(k->target, SIGUSR1);
    for (int i = 0; i < 300 && !atomic_load(&k->returned); i++)
        usleep(10 * 1000);
    if (!atomic_load(&k->returned)) {
        struct sockaddr_in dst = rxe_addr(PORT);
        k->unblocked = rdma_resolve_addr(k->unblock, NULL, (struct sockaddr *)&dst, 2000) == 0;
    }
    return NULL;
}

/* mode 0: cmsafe_get_event_timeout(5000); 1: cmsafe_get_event; 2: cmsafe_get_events(5000). */
static void interrupted(int mode, const char *what)
{
    STEP("EINTR: %s", what);
    struct kicker k = {.target = pthread_self()};
    k.ch = rdma_create_event_channel();
    REQUIRE(k.ch, "rdma_create_event_channel");
    REQUIRE(rdma_create_id(k.ch, &k.unblock, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    sig_atomic_t before = signals;
    pthread_t thr;
    REQUIRE(pthread_create(&thr, NULL, kick, &k) == 0, "pthread_create");
    cmsafe_event *ev = SENTINEL, *evs[4] = {SENTINEL, SENTINEL, SENTINEL, SENTINEL};
    uint64_t t0 = cm_now_ns();
    errno = 0;
    int rc = mode == 0   ? cmsafe_get_event_timeout(k.ch, &ev, 5000)
             : mode == 1 ? cmsafe_get_event(k.ch, &ev)
                         : cmsafe_get_events(k.ch, evs, 4, 5000);
    int e = errno;
    double ms = cm_ms_since(t0);
    atomic_store(&k.returned, 1);
    pthread_join(thr, NULL);
    CHECK_EQ_INT(rc, -1);
    CHECK_EQ_INT(e, EINTR);
    CHECK(ms >= 250 && ms < 3000, "%s returned after %.0f ms; the signal came at 300", what, ms);
    CHECK_EQ_INT(signals - before, 1);
    CHECK(!k.unblocked, "%s did not return at the signal: an event had to be queued", what);
    CHECK(ev == SENTINEL && evs[0] == SENTINEL, "out written on EINTR");
    if (rc == 0 && mode != 2)
        cmsafe_event_release(ev);
    for (int i = 0; mode == 2 && i < rc; i++)
        cmsafe_event_release(evs[i]);
    if (k.unblocked && rc != 0) /* take the event queued to unblock us */
        cmsafe_event_release(cm_expect_within(k.ch, RDMA_CM_EVENT_ADDR_RESOLVED, 3000));
    CHECK(rdma_destroy_id(k.unblock) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(k.ch);
}

int main(void)
{
    harness_watchdog(50);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART */
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");

    struct rdma_event_channel *idle = rdma_create_event_channel();
    struct rdma_event_channel *ch = rdma_create_event_channel();
    REQUIRE(idle && ch, "rdma_create_event_channel: %s", strerror(errno));
    timeouts(idle);
    batches(ch);
    nonblocking();
    interrupted(0, "cmsafe_get_event_timeout(..., 5000)");
    interrupted(1, "cmsafe_get_event (no limit)");
    interrupted(2, "cmsafe_get_events(..., 5000)");

    cmsafe_stats s = cm_stats();
    CHECK_EQ_INT(s.fetched, s.acked);
    CHECK_EQ_INT(s.live_events, 0);
    CHECK_EQ_INT(s.live_buffers, 0);
    CHECK_EQ_INT(s.pending, 0);
    rdma_destroy_event_channel(ch);
    rdma_destroy_event_channel(idle);
    return harness_exit();
}
