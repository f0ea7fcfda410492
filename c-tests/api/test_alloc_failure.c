/* Nothing is lost when an allocation fails (cmsafe_debug_fail_alloc). The allocations of a fetch
 * are, in order: the channel's state (first fetch on a channel only), the event (one slot that
 * holds its private data too). For each site, and for an event with and without private data: the fetch fails with -1/ENOMEM,
 * *out untouched, alloc_failures grows by one, nothing is fetched, acked or left live; the next
 * fetch returns that same event (type, id, private data bytes); then acked == fetched, and
 * rdma_destroy_id of the id the event counts against returns (it would block on an unacked event).
 *
 * pending: an event librdmacm handed out and cmsafe could not copy is 1 pending. A failure of the
 * channel state comes before anything is taken from librdmacm: the event is still in the
 * kernel's queue (the fd stays readable) and pending stays 0 ("events fetched but not yet
 * copied", include/cmsafe.h).
 *
 * Also for cmsafe_get_events: a failure at the first event fails the batch (-1/ENOMEM); a failure
 * at a later event ends the batch early; either way the next batch returns every event, each
 * exactly once. */
#define _GNU_SOURCE
#include <errno.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT_STATE = 7740, PORT_BUF = 7741, PORT_EVENT = 7742, PORT_BATCH = 7743, CLIENTS = 3 };

static cmsafe_event *const SENTINEL = (cmsafe_event *)(uintptr_t)0x5e7;
static struct rdma_event_channel *cch;

struct conn {
    struct rdma_cm_id *client, *child;
    unsigned char pdata[40];
};

/* Connects `n` clients to `port` with distinct private data; waits until their requests are
 * queued on `sch` (not fetched). */
static void connect_clients(struct rdma_event_channel *sch, unsigned short port, struct conn *c,
                            int n, unsigned char seed)
{
    for (int i = 0; i < n; i++) {
        cm_fill(c[i].pdata, sizeof c[i].pdata, (unsigned char)(seed + 31 * i));
        c[i].client = cm_client(cch, port);
        c[i].child = NULL;
        cm_connect(c[i].client, c[i].pdata, sizeof c[i].pdata);
    }
    REQUIRE(cm_wait_readable(sch, 3000), "no CONNECT_REQUEST queued");
    usleep(500 * 1000); /* all of them */
}

/* Which of `c` sent the CONNECT_REQUEST `ev` (its bytes, then zeros to the length the request's
 * transport gives: 56 on IB/RoCE, as sent on iWARP); -1 if none. */
static int sender(const cmsafe_event *ev, struct conn *c, int n)
{
    const cmsafe_buf *b = cmsafe_event_private_data(ev);
    size_t want = cm_req_len(cm_transport(cmsafe_event_id(ev)), sizeof c[0].pdata);
    for (int i = 0; i < n; i++)
        if (cm_bytes_are(cmsafe_buf_data(b), cmsafe_buf_len(b), c[i].pdata, sizeof c[i].pdata,
                         want))
            return i;
    return -1;
}

/* Rejects every child, takes the clients' REJECTED, destroys them all. */
static void finish(struct conn *c, int n)
{
    for (int i = 0; i < n; i++) {
        if (c[i].child) {
            cm_reject(c[i].child, NULL, 0);
            cmsafe_event_release(cm_expect_within(cch, RDMA_CM_EVENT_REJECTED, 5000));
            CHECK(rdma_destroy_id(c[i].child) == 0, "rdma_destroy_id(child)");
        }
        rdma_destroy_qp(c[i].client);
        CHECK(rdma_destroy_id(c[i].client) == 0, "rdma_destroy_id(client)");
    }
}

/* Arms a failure after `skip` allocations; one fetch on `ch` must fail with ENOMEM as described
 * at the top. Returns the stats from before. */
static cmsafe_stats fail_one(struct rdma_event_channel *ch, int64_t skip, uint64_t want_pending,
                             const char *what)
{
    cmsafe_stats a = cm_stats();
    cmsafe_event *ev = SENTINEL;
    cmsafe_debug_fail_alloc(skip);
    errno = 0;
    int rc = cmsafe_get_event(ch, &ev);
    int e = errno;
    cmsafe_debug_fail_alloc(-1);
    cmsafe_stats b = cm_stats();
    CHECK(rc == -1 && e == ENOMEM, "%s: cmsafe_get_event returned %d (%s), want -1/ENOMEM", what,
          rc, strerror(e));
    CHECK(ev == SENTINEL, "%s: *out written on ENOMEM", what);
    if (rc == 0 && ev != SENTINEL)
        cmsafe_event_release(ev);
    CHECK(b.alloc_failures - a.alloc_failures == 1, "%s: alloc_failures +%llu, want +1", what,
          (unsigned long long)(b.alloc_failures - a.alloc_failures));
    CHECK(b.pending == want_pending, "%s: pending %llu, want %llu", what,
          (unsigned long long)b.pending, (unsigned long long)want_pending);
    CHECK(b.fetched == a.fetched && b.acked == a.acked, "%s: fetched/acked moved on ENOMEM", what);
    CHECK(b.live_events == a.live_events && b.live_buffers == a.live_buffers,
          "%s: live events %llu -> %llu, buffers %llu -> %llu", what,
          (unsigned long long)a.live_events, (unsigned long long)b.live_events,
          (unsigned long long)a.live_buffers, (unsigned long long)b.live_buffers);
    return a;
}

/* The fetch after the failure: the same CONNECT_REQUEST, copied and acked. */
static void retry_request(struct rdma_event_channel *sch, struct conn *c, int timeout_ms,
                          cmsafe_stats before, const char *what)
{
    cmsafe_event *ev = cm_expect_within(sch, RDMA_CM_EVENT_CONNECT_REQUEST, timeout_ms);
    CHECK(sender(ev, c, 1) == 0, "%s: the retried CONNECT_REQUEST is not the same request "
                                 "(private data differs)", what);
    c->child = cmsafe_event_id(ev);
    cmsafe_event_release(ev);
    cmsafe_stats s = cm_stats();
    CHECK_EQ_INT(s.pending, 0);
    CHECK_EQ_INT(s.fetched - before.fetched, 1);
    CHECK_EQ_INT(s.acked - before.acked, 1);
    CHECK_EQ_INT(s.fetched, s.acked);
    CHECK_EQ_INT(s.live_events, before.live_events);
    CHECK_EQ_INT(s.live_buffers, before.live_buffers);
}

static void site_channel_state(void)
{
    STEP("site 1: the channel's state, at the first fetch on a new channel");
    struct rdma_event_channel *sch = rdma_create_event_channel();
    REQUIRE(sch, "rdma_create_event_channel");
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT_STATE);
    struct conn c;
    connect_clients(sch, PORT_STATE, &c, 1, 11);
    cmsafe_stats before = fail_one(sch, 0, 0, "channel state");
    CHECK(cm_wait_readable(sch, 0), "channel state: the request left the kernel's queue");
    retry_request(sch, &c, 5000, before, "channel state");
    STEP("site 1: rdma_destroy_id(listener) returns: the request was acked");
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    finish(&c, 1);
    rdma_destroy_event_channel(sch);
}

static void site_event_with_private_data(struct rdma_event_channel *sch)
{
    STEP("site 2: the event, with its private data");
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT_BUF);
    struct conn c;
    connect_clients(sch, PORT_BUF, &c, 1, 22);
    cmsafe_stats before = fail_one(sch, 0, 1, "event (with private data)");
    /* The event is cmsafe's now, not the kernel's: a fetch that does not wait still gets it. */
    CHECK(!cm_wait_readable(sch, 0), "event (with private data): the fd is still readable");
    retry_request(sch, &c, 0, before, "event (with private data)");
    STEP("site 2: rdma_destroy_id(listener) returns: the request was acked");
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    finish(&c, 1);
}

static void site_event(void)
{
    STEP("site 2: the event, no private data (ADDR_RESOLVED)");
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(PORT_EVENT);
    REQUIRE(rdma_create_id(cch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr");
    REQUIRE(cm_wait_readable(cch, 3000), "no ADDR_RESOLVED queued");
    cmsafe_stats before = fail_one(cch, 0, 1, "event (no private data)");
    cmsafe_event *ev = cm_expect_within(cch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
    CHECK(cmsafe_event_id(ev) == id, "the retried ADDR_RESOLVED is for the same id");
    CHECK_EQ_INT(cmsafe_event_status(ev), 0);
    CHECK(cmsafe_event_private_data(ev) == NULL, "ADDR_RESOLVED grew private data");
    cmsafe_event_release(ev);
    cmsafe_stats s = cm_stats();
    CHECK_EQ_INT(s.pending, 0);
    CHECK_EQ_INT(s.fetched - before.fetched, 1);
    CHECK_EQ_INT(s.acked - before.acked, 1);
    STEP("site 2: rdma_destroy_id returns: ADDR_RESOLVED was acked");
    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

/* One batch scenario: CLIENTS requests queued; the allocation after `skip` fails in the first
 * cmsafe_get_events; `first` is what it must return (-1 for ENOMEM); the next returns the rest. */
static void batch(struct rdma_event_channel *sch, int64_t skip, int first, unsigned char seed,
                  const char *what)
{
    STEP("cmsafe_get_events: %s", what);
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT_BATCH);
    struct conn c[CLIENTS];
    connect_clients(sch, PORT_BATCH, c, CLIENTS, seed);
    int seen[CLIENTS] = {0};
    cmsafe_stats a = cm_stats();
    cmsafe_event *evs[8];
    for (int i = 0; i < 8; i++)
        evs[i] = SENTINEL;
    cmsafe_debug_fail_alloc(skip);
    errno = 0;
    int n = cmsafe_get_events(sch, evs, 8, 0);
    int e = errno;
    cmsafe_debug_fail_alloc(-1);
    cmsafe_stats b = cm_stats();
    CHECK(n == first, "%s: first batch returned %d (%s), want %d", what, n, strerror(e), first);
    if (first < 0)
        CHECK(e == ENOMEM, "%s: errno %s, want ENOMEM", what, strerror(e));
    CHECK(evs[n > 0 ? n : 0] == SENTINEL, "%s: entry past the count written", what);
    CHECK_EQ_INT(b.alloc_failures - a.alloc_failures, 1);
    CHECK_EQ_INT(b.pending, 1);
    CHECK_EQ_INT(b.fetched - a.fetched, n > 0 ? n : 0);
    CHECK_EQ_INT(b.acked - a.acked, n > 0 ? n : 0);
    uint64_t last = 0;
    int total = 0;
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            for (int i = 0; i < 8; i++)
                evs[i] = SENTINEL;
            n = cmsafe_get_events(sch, evs, 8, 0);
            int want = CLIENTS - (first > 0 ? first : 0);
            CHECK(n == want, "%s: second batch returned %d, want %d", what, n, want);
        }
        for (int i = 0; i < n; i++) {
            CHECK_EQ_INT(cmsafe_event_type(evs[i]), RDMA_CM_EVENT_CONNECT_REQUEST);
            int k = sender(evs[i], c, CLIENTS);
            CHECK(k >= 0, "%s: a request with nobody's private data", what);
            if (k >= 0) {
                seen[k]++;
                c[k].child = cmsafe_event_id(evs[i]);
            }
            CHECK(cmsafe_event_seq(evs[i]) > last, "%s: not in fetch order", what);
            last = cmsafe_event_seq(evs[i]);
            cmsafe_event_release(evs[i]);
            total++;
        }
    }
    for (int k = 0; k < CLIENTS; k++)
        CHECK(seen[k] == 1, "%s: client %d's request seen %d times", what, k, seen[k]);
    CHECK_EQ_INT(cmsafe_get_events(sch, evs, 8, 0), 0);
    cmsafe_stats s = cm_stats();
    CHECK_EQ_INT(total, CLIENTS);
    CHECK_EQ_INT(s.pending, 0);
    CHECK_EQ_INT(s.fetched - a.fetched, CLIENTS);
    CHECK_EQ_INT(s.acked - a.acked, CLIENTS);
    CHECK(rdma_destroy_id(listen_id) == 0, "%s: rdma_destroy_id(listen)", what);
    finish(c, CLIENTS);
}

int main(void)
{
    harness_watchdog(50);
    cch = rdma_create_event_channel();
    struct rdma_event_channel *sch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    cmsafe_stats s0 = cm_stats();

    site_channel_state();
    /* sch gets its state here (a fetch that works), so that later failures hit the others. */
    STEP("a first fetch on the server channel");
    cmsafe_event *ev = SENTINEL;
    CHECK(cmsafe_get_event_timeout(sch, &ev, 0) == -1 && errno == ETIMEDOUT, "idle channel");
    site_event_with_private_data(sch);
    site_event();
    /* One allocation per event, its private data included. */
    batch(sch, 0, -1, 44, "the first event fails: -1/ENOMEM, then all 3");
    batch(sch, 1, 1, 66, "the second event fails: 1, then 2");
    batch(sch, 2, 2, 77, "the third event fails: 2, then 1");

    /* Disarmed: nothing fails any more. */
    cmsafe_stats s1 = cm_stats();
    CHECK_EQ_INT(s1.alloc_failures - s0.alloc_failures, 3 + 3);
    CHECK_EQ_INT(s1.fetched, s1.acked);
    CHECK_EQ_INT(s1.live_events, 0);
    CHECK_EQ_INT(s1.live_buffers, 0);
    CHECK_EQ_INT(s1.pending, 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
