/* 128 clients connect at once (as many as the device's address handles allow) to one server,
 * in one process: clients spread over 4 channels,
 * the server on its own. Every event is delivered exactly once: each client's ADDR_RESOLVED,
 * ROUTE_RESOLVED, ESTABLISHED and DISCONNECTED; each CONNECT_REQUEST (a distinct child id, the
 * client's unique private data seen exactly once), so each child is accepted exactly once; each
 * child's ESTABLISHED and DISCONNECTED. Batches (cmsafe_get_events) drain the channels.
 * At the end the counters balance: fetched == acked, nothing live or pending, and the per-type
 * counts are exactly the events above.
 *
 * Each id is destroyed at its DISCONNECTED, but on IB/RoCE its timewait may end before that: the
 * kernel then queues its TIMEWAIT_EXIT, which arrives in the batch that holds the DISCONNECTED,
 * after it, naming an id the handler has just destroyed. Seen with kernel 6.12 in the emulated
 * arm64 guest, where the drain loop is slow (19 to 77 of the 128 came so, in three runs); the
 * 6.1 guests have not shown it. Such an event is counted for the id it names (found by its
 * address among the destroyed ones, never read through it), at most one per id, and in the
 * per-type counts.
 *
 * iWARP (Soft-iWARP) cannot hold 128 connections' 256 QPs in one process: siw's mapping keys
 * allow about 36 live QPs with their own CQs (docs/stacks.md). There the clients go in groups
 * of IWARP_GROUP connections, each group connected, checked and torn down (its QPs destroyed)
 * before the next is made; the same events are expected of every client. The private data
 * lengths are the transport's (c-tests/transport.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7720, CLIENTS = 128, CHANNELS = 4, PDATA = 48, REPLY = 12 };
/* Connections alive at once on iWARP: 2 QPs each, 4 siw mappings a QP, under siw's 144. */
enum { IWARP_GROUP = 16 };

/* The transport of the listen id's device, set before the first connect. */
static enum cm_transport tr;

static struct rdma_event_channel *sch, *cch[CHANNELS];
static struct rdma_cm_id *listen_id, *clients[CLIENTS], *children[CLIENTS];
static unsigned char pdata[CLIENTS][PDATA];
static uint64_t nonce;

/* Per client: how often each of its events was seen. */
static int addr_seen[CLIENTS], route_seen[CLIENTS], cest_seen[CLIENTS], cdisc_seen[CLIENTS];
static int creq_seen[CLIENTS], accepted[CLIENTS], sest_seen[CLIENTS], sdisc_seen[CLIENTS];
/* Ids destroyed at their DISCONNECTED, and the TIMEWAIT_EXITs that came for them after it. */
static struct rdma_cm_id *gone_clients[CLIENTS], *gone_children[CLIENTS];
static int ctw_seen[CLIENTS], stw_seen[CLIENTS];
static int unexpected;
static uint64_t fetched_here;

/* The index of a live client id, which carries it in its context (index + 1). Found by the
 * pointer first: an event fetched in the same batch as its id's DISCONNECTED names an id the
 * handler has destroyed since, whose memory must not be read. */
static int client_index(struct rdma_cm_id *id)
{
    for (int i = 0; i < CLIENTS; i++)
        if (clients[i] == id)
            return (intptr_t)id->context == i + 1 ? i : -1;
    return -1;
}

static int child_index(struct rdma_cm_id *id)
{
    for (int i = 0; i < CLIENTS; i++)
        if (children[i] == id)
            return i;
    return -1;
}

/* A TIMEWAIT_EXIT for an id destroyed at its DISCONNECTED (the header says when): counted for
 * that id. Whether `ev` was one. */
static int late_timewait(const cmsafe_event *ev, struct rdma_cm_id *const *gone, int *seen)
{
    if (cmsafe_event_type(ev) != RDMA_CM_EVENT_TIMEWAIT_EXIT)
        return 0;
    struct rdma_cm_id *id = cmsafe_event_id(ev);
    for (int i = 0; i < CLIENTS; i++)
        if (gone[i] == id) {
            seen[i]++;
            return 1;
        }
    return 0;
}

static void make_pdata(int i)
{
    /* index, a per-run nonce, then a pattern: unique per client and per run. */
    pdata[i][0] = (unsigned char)(i >> 8);
    pdata[i][1] = (unsigned char)i;
    memcpy(&pdata[i][2], &nonce, sizeof nonce);
    cm_fill(&pdata[i][10], PDATA - 10, (unsigned char)(i * 13));
}

static void unexpected_event(const cmsafe_event *ev, const char *why)
{
    char line[256];
    cmsafe_event_describe(ev, line, sizeof line);
    if (unexpected++ < 5)
        fprintf(stderr, "unexpected event (%s): %s\n", why, line);
}

/* A server event: CONNECT_REQUEST (check, accept), ESTABLISHED, DISCONNECTED (DREP, destroy). */
static void server_event(cmsafe_event *ev)
{
    int type = cmsafe_event_type(ev);
    struct rdma_cm_id *id = cmsafe_event_id(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        CHECK(cmsafe_event_listen_id(ev) == listen_id, "CONNECT_REQUEST on another listener");
        CHECK(child_index(id) < 0, "CONNECT_REQUEST child id %p delivered twice", (void *)id);
        const cmsafe_buf *buf = cmsafe_event_private_data(ev);
        const unsigned char *p = cmsafe_buf_data(buf);
        int i = p ? (p[0] << 8 | p[1]) : -1;
        if (i < 0 || i >= CLIENTS ||
            !cm_bytes_are(p, cmsafe_buf_len(buf), pdata[i], PDATA, cm_req_len(tr, PDATA))) {
            unexpected_event(ev, "private data of no client");
            return;
        }
        creq_seen[i]++;
        if (children[i] == NULL)
            children[i] = id;
        rxe_create_qp(id);
        unsigned char reply[REPLY];
        memcpy(reply, pdata[i], REPLY);
        cm_accept(id, reply, REPLY);
        accepted[i]++;
        return;
    }
    int i = child_index(id);
    if (i < 0) {
        if (!late_timewait(ev, gone_children, stw_seen))
            unexpected_event(ev, "not a child");
    } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
        sest_seen[i]++;
    } else if (type == RDMA_CM_EVENT_DISCONNECTED) {
        sdisc_seen[i]++;
        CHECK(rdma_disconnect(id) == 0, "rdma_disconnect(child %d): %s", i, strerror(errno));
        rdma_destroy_qp(id);
        CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id(child %d)", i);
        gone_children[i] = id;
        children[i] = (struct rdma_cm_id *)(uintptr_t)1; /* destroyed; never a real id */
    } else {
        unexpected_event(ev, "server");
    }
}

static void client_event(cmsafe_event *ev)
{
    int type = cmsafe_event_type(ev);
    struct rdma_cm_id *id = cmsafe_event_id(ev);
    int i = client_index(id);
    if (i < 0) {
        if (!late_timewait(ev, gone_clients, ctw_seen))
            unexpected_event(ev, "not a client");
        return;
    }
    switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        addr_seen[i]++;
        break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
        route_seen[i]++;
        break;
    case RDMA_CM_EVENT_ESTABLISHED: {
        cest_seen[i]++;
        const cmsafe_buf *buf = cmsafe_event_private_data(ev);
        CHECK(cm_bytes_are(cmsafe_buf_data(buf), cmsafe_buf_len(buf), pdata[i], REPLY,
                           cm_rep_len(tr, REPLY)),
              "client %d: ESTABLISHED does not carry its reply", i);
        break;
    }
    case RDMA_CM_EVENT_DISCONNECTED:
        cdisc_seen[i]++;
        rdma_destroy_qp(id);
        CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id(client %d)", i);
        gone_clients[i] = id;
        clients[i] = NULL; /* destroyed */
        break;
    default:
        unexpected_event(ev, "client");
    }
}

/* Drains every channel in turn, in batches, until `done` holds or `seconds` pass. */
static int drain(int (*done)(void), int seconds, const char *what)
{
    uint64_t deadline = cm_now_ns() + (uint64_t)seconds * 1000000000u;
    while (!done()) {
        if (cm_now_ns() > deadline) {
            CHECK(0, "%s: not done after %d s", what, seconds);
            return 0;
        }
        cmsafe_event *evs[32];
        int n = cmsafe_get_events(sch, evs, 32, 1);
        if (n < 0) /* counted as a check only when it fails: this loop spins */
            CHECK(0, "cmsafe_get_events(server): %s", strerror(errno));
        for (int k = 0; k < n; k++) {
            fetched_here++;
            server_event(evs[k]);
            cmsafe_event_release(evs[k]);
        }
        for (int c = 0; c < CHANNELS; c++) {
            n = cmsafe_get_events(cch[c], evs, 32, 0);
            if (n < 0)
                CHECK(0, "cmsafe_get_events(client %d): %s", c, strerror(errno));
            for (int k = 0; k < n; k++) {
                fetched_here++;
                client_event(evs[k]);
                cmsafe_event_release(evs[k]);
            }
        }
    }
    return 1;
}

static int sum(const int *a)
{
    int s = 0;
    for (int i = 0; i < CLIENTS; i++)
        s += a[i];
    return s;
}
static int addrs_done(void) { return sum(addr_seen) >= CLIENTS; }
static int routes_done(void) { return sum(route_seen) >= CLIENTS; }
/* How many connections the current wave brings to ESTABLISHED on both sides. */
static int wave_end;
static int established(void) { return sum(cest_seen) >= wave_end && sum(sest_seen) >= wave_end; }
static int disconnected(void) { return sum(cdisc_seen) >= wave_end && sum(sdisc_seen) >= wave_end; }

/* None of the 128 saw `what` more than once. */
static void at_most_once(const int *a, const char *what)
{
    int bad = 0;
    for (int i = 0; i < CLIENTS; i++)
        if (a[i] > 1 && bad++ < 5)
            fprintf(stderr, "client %d: %s %d times\n", i, what, a[i]);
    CHECK(bad == 0, "%d clients saw %s more than once", bad, what);
}

/* Each of the 128 saw `what` exactly once. */
static void exactly_once(const int *a, const char *what)
{
    int bad = 0;
    for (int i = 0; i < CLIENTS; i++)
        if (a[i] != 1) {
            if (bad++ < 5)
                fprintf(stderr, "client %d: %s %d times\n", i, what, a[i]);
        }
    CHECK(bad == 0, "%d clients did not see %s exactly once", bad, what);
}

int main(void)
{
    harness_watchdog(55);
    /* 256 QPs with librdmacm's default CQs: two completion channels (fds) each. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    nonce = cm_now_ns() ^ ((uint64_t)getpid() << 32);
    cmsafe_stats s0 = cm_stats();
    sch = rdma_create_event_channel();
    REQUIRE(sch, "rdma_create_event_channel: %s", strerror(errno));
    for (int c = 0; c < CHANNELS; c++) {
        cch[c] = rdma_create_event_channel();
        REQUIRE(cch[c], "rdma_create_event_channel: %s", strerror(errno));
    }
    listen_id = rxe_listen(sch, PORT, RDMA_PS_TCP, 256);
    tr = cm_transport(listen_id);
    STEP("transport %s", cm_transport_name(tr));

    STEP("resolve %d addresses and routes", CLIENTS);
    struct sockaddr_in dst = rxe_addr(PORT);
    for (int i = 0; i < CLIENTS; i++) {
        make_pdata(i);
        REQUIRE(rdma_create_id(cch[i % CHANNELS], &clients[i], (void *)(intptr_t)(i + 1),
                               RDMA_PS_TCP) == 0,
                "rdma_create_id %d: %s", i, strerror(errno));
        REQUIRE(rdma_resolve_addr(clients[i], NULL, (struct sockaddr *)&dst, 5000) == 0,
                "rdma_resolve_addr %d: %s", i, strerror(errno));
    }
    REQUIRE(drain(addrs_done, 20, "ADDR_RESOLVED"), "resolution failed");
    for (int i = 0; i < CLIENTS; i++)
        REQUIRE(rdma_resolve_route(clients[i], 5000) == 0, "rdma_resolve_route %d: %s", i,
                strerror(errno));
    REQUIRE(drain(routes_done, 20, "ROUTE_RESOLVED"), "route resolution failed");
    exactly_once(addr_seen, "ADDR_RESOLVED");
    exactly_once(route_seen, "ROUTE_RESOLVED");

    /* Every connect in flight holds address handles in the kernel's IB CM: its REQ's until
     * the REP arrives, the child's REP until the RTU does (cm_alloc_msg creates one per MAD).
     * Soft-RoCE in Linux 5.10 allows 100 per device (drivers/infiniband/sw/rxe/rxe_param.h,
     * RXE_MAX_AH; later kernels allow far more, docs/stacks.md), and rdma_connect fails with
     * EINVAL once they are used up (the AH pool refuses the REQ's handle). So as many connect
     * at once as the device's max_ah allows, two handles each and a few spare, in waves: all
     * 128 at once where max_ah allows it. The disconnects go in the same waves.
     * iWARP has no address handles (siw's max_ah is 0) and its CM sends no MADs: there the
     * group of connections alive at once (IWARP_GROUP, siw's QP limit) is the wave. */
    int wave, group;
    if (tr == CM_TRANSPORT_IWARP) {
        wave = group = IWARP_GROUP;
        STEP("connect %d, %d at once, in groups torn down before the next (siw's QP limit)",
             CLIENTS, wave);
    } else {
        struct ibv_device_attr dev;
        REQUIRE(ibv_query_device(clients[0]->verbs, &dev) == 0, "ibv_query_device: %s",
                strerror(errno));
        wave = (dev.max_ah - 8) / 2;
        if (wave > CLIENTS)
            wave = CLIENTS;
        REQUIRE(wave >= 16, "the device allows %d address handles: too few for this test",
                dev.max_ah);
        group = CLIENTS;
        STEP("connect %d, %d at once (device max_ah %d), accept each", CLIENTS, wave, dev.max_ah);
    }
    uint64_t t0 = cm_now_ns();
    for (int gfirst = 0; gfirst < CLIENTS; gfirst += group) {
        int gend = gfirst + group < CLIENTS ? gfirst + group : CLIENTS;
        for (int i = gfirst; i < gend; i++)
            rxe_create_qp(clients[i]);
        for (int first = gfirst; first < gend; first += wave) {
            wave_end = first + wave < gend ? first + wave : gend;
            for (int i = first; i < wave_end; i++)
                cm_connect(clients[i], pdata[i], PDATA);
            REQUIRE(drain(established, 40, "ESTABLISHED"),
                    "not all connections were established");
        }
        if (gend == CLIENTS)
            fprintf(stderr, "%d connections established in %.0f ms, %d at once\n", CLIENTS,
                    cm_ms_since(t0), wave);
        /* Before the group's children are destroyed (a freed id's address may come back). */
        int distinct = 1;
        for (int i = gfirst; i < gend; i++)
            for (int j = i + 1; j < gend; j++)
                distinct &= children[i] != children[j];
        CHECK(distinct, "two CONNECT_REQUESTs share a child id");
        if (gend == CLIENTS) {
            exactly_once(creq_seen, "its CONNECT_REQUEST");
            exactly_once(accepted, "its child accepted");
            exactly_once(cest_seen, "ESTABLISHED (client)");
            exactly_once(sest_seen, "ESTABLISHED (child)");
        }
        if (group == CLIENTS)
            STEP("disconnect all; destroy each id at its DISCONNECTED");
        /* A DREQ holds an address handle until its DREP: the same waves. */
        for (int first = gfirst; first < gend; first += wave) {
            wave_end = first + wave < gend ? first + wave : gend;
            for (int i = first; i < wave_end; i++)
                CHECK(rdma_disconnect(clients[i]) == 0, "rdma_disconnect %d: %s", i,
                      strerror(errno));
            REQUIRE(drain(disconnected, 40, "DISCONNECTED"),
                    "not all connections were torn down");
        }
    }
    exactly_once(cdisc_seen, "DISCONNECTED (client)");
    exactly_once(sdisc_seen, "DISCONNECTED (child)");
    /* Nothing else, on any channel (the ids are gone before their timewait ends). */
    cm_quiet(sch, 200);
    for (int c = 0; c < CHANNELS; c++)
        cm_quiet(cch[c], 50);
    CHECK_EQ_INT(unexpected, 0);
    at_most_once(ctw_seen, "TIMEWAIT_EXIT after its DISCONNECTED (client)");
    at_most_once(stw_seen, "TIMEWAIT_EXIT after its DISCONNECTED (child)");
    if (sum(ctw_seen) + sum(stw_seen) > 0)
        fprintf(stderr, "TIMEWAIT_EXIT before the destroy: %d clients, %d children\n",
                sum(ctw_seen), sum(stw_seen));
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");

    STEP("counters");
    cmsafe_stats s1 = cm_stats();
    uint64_t want[CMSAFE_EVENT_TYPE_SLOTS] = {0};
    want[RDMA_CM_EVENT_ADDR_RESOLVED] = CLIENTS;
    want[RDMA_CM_EVENT_ROUTE_RESOLVED] = CLIENTS;
    want[RDMA_CM_EVENT_CONNECT_REQUEST] = CLIENTS;
    want[RDMA_CM_EVENT_ESTABLISHED] = 2 * CLIENTS;
    want[RDMA_CM_EVENT_DISCONNECTED] = 2 * CLIENTS;
    want[RDMA_CM_EVENT_TIMEWAIT_EXIT] = (uint64_t)(sum(ctw_seen) + sum(stw_seen));
    uint64_t total = 0;
    for (int t = 0; t < CMSAFE_EVENT_TYPE_SLOTS; t++) {
        CHECK(s1.by_type[t] - s0.by_type[t] == want[t], "by_type[%d] (%s): %llu, want %llu", t,
              rdma_event_str((enum rdma_cm_event_type)t),
              (unsigned long long)(s1.by_type[t] - s0.by_type[t]), (unsigned long long)want[t]);
        total += want[t];
    }
    CHECK_EQ_INT(fetched_here, total);
    CHECK_EQ_INT(s1.fetched - s0.fetched, total);
    CHECK_EQ_INT(s1.acked - s0.acked, total);
    CHECK_EQ_INT(s1.fetched, s1.acked);
    CHECK_EQ_INT(s1.released - s0.released, total);
    CHECK_EQ_INT(s1.live_events, 0);
    CHECK_EQ_INT(s1.live_buffers, 0);
    CHECK_EQ_INT(s1.pending, 0);
    CHECK_EQ_INT(s1.alloc_failures - s0.alloc_failures, 0);

    for (int c = 0; c < CHANNELS; c++)
        rdma_destroy_event_channel(cch[c]);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
