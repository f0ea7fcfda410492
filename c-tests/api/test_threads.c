/* Four threads fetch from one server channel (cmsafe_get_event_timeout in a loop) while the main
 * thread drives 200 connect/disconnect cycles from its own channel. The fetchers hand each event
 * to one handler thread through a queue (a cmsafe_event_retain'd reference; the fetcher releases
 * its own), and keep a reference to every CONNECT_REQUEST's private data buffer
 * (cmsafe_buf_retain) long after its event is gone; at the end each fetcher checks those bytes.
 *
 * The handler accepts each request, answers each DISCONNECTED with the DREP (rdma_disconnect)
 * and destroys each child once it has handled all of the child's events: through TIMEWAIT_EXIT
 * on IB/RoCE, through ESTABLISHED and DISCONNECTED on iWARP (no timewait); so no id is destroyed
 * while an event for it may still be in flight between a fetcher and the handler. Destroying
 * them there also keeps the live QPs few, as siw needs (its mapping keys: about 36 QPs with
 * their own CQs alive in a process). The client disconnects once the handler has seen the
 * server's ESTABLISHED (server_established).
 *
 * Private data lengths are the transport's (c-tests/transport.h): the REQ's 56 and the REP's
 * 196 bytes on IB/RoCE, the bytes sent on iWARP.
 *
 * Checked: every sequence number seen exactly once, all of them contiguous and as many as were
 * fetched; every event of every cycle delivered exactly once; every retained buffer still holding
 * its client's bytes; the counters balanced at the end (nothing live, nothing pending).
 *
 * Also built with -fsanitize=thread as test_threads_tsan. Only this file is instrumented:
 * libcmsafe (Rust) and librdmacm are not, so TSan cannot see their synchronization (Rust's
 * OnceCell and futex mutexes; the channel lock cmsafe holds around rdma_get_cm_event and
 * rdma_ack_cm_event) yet still sees their memcpy/calloc/pthread calls through its interceptors,
 * and reports races between accesses those locks order (measured: pool slot writes against the
 * arena's mmap; rdma_ack_cm_event against the calloc of a CONNECT_REQUEST's new id in another
 * thread). ignore_noninstrumented_modules=1 makes TSan judge only instrumented code, this
 * test's own threads, queue and counters. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cm_util.h"
#include "harness.h"

enum { CYCLES = 200, FETCHERS = 4, PDATA = 48, REPLY = 16, PER_THREAD = 4 * CYCLES + 64 };

static struct rdma_event_channel *sch, *cch;
static struct rdma_cm_id *listen_id;
/* The transport of the listen id's device: set before any thread starts, read-only after. */
static enum cm_transport tr;
static unsigned char pdata[CYCLES][PDATA];
static uint64_t nonce;
static atomic_int stop;
static atomic_int errors;

/* ---- the queue from the fetchers to the handler ---- */
static cmsafe_event *queue[4 * CYCLES + 64];
static size_t q_head, q_tail;
static int q_closed;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;

static void push(cmsafe_event *ev)
{
    pthread_mutex_lock(&q_lock);
    if (q_tail - q_head < sizeof queue / sizeof queue[0]) {
        queue[q_tail++ % (sizeof queue / sizeof queue[0])] = ev;
    } else {
        fprintf(stderr, "queue full\n");
        atomic_fetch_add(&errors, 1);
        cmsafe_event_release(ev);
    }
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
}

static cmsafe_event *pop(void)
{
    pthread_mutex_lock(&q_lock);
    while (q_head == q_tail && !q_closed)
        pthread_cond_wait(&q_cond, &q_lock);
    cmsafe_event *ev = NULL;
    if (q_head != q_tail)
        ev = queue[q_head++ % (sizeof queue / sizeof queue[0])];
    pthread_mutex_unlock(&q_lock);
    return ev;
}

/* ---- the fetchers ---- */
struct fetcher {
    pthread_t thread;
    uint64_t seqs[PER_THREAD];
    int n_seqs;
    const cmsafe_buf *kept[PER_THREAD];
    int n_kept;
    int bad_bufs;
    int cycles_seen[CYCLES];
};
static struct fetcher fetchers[FETCHERS];
static atomic_int buf_seen[CYCLES];

static int cycle_of(const unsigned char *p, size_t len)
{
    size_t want = cm_req_len(tr, PDATA);
    if (!p || len != want)
        return -1;
    int c = p[0] << 8 | p[1];
    return c < CYCLES && cm_bytes_are(p, len, pdata[c], PDATA, want) ? c : -1;
}

static void *fetch_loop(void *arg)
{
    struct fetcher *f = arg;
    while (!atomic_load(&stop)) {
        cmsafe_event *ev = NULL;
        if (cmsafe_get_event_timeout(sch, &ev, 50) != 0) {
            if (errno != ETIMEDOUT) {
                fprintf(stderr, "fetcher: %s\n", strerror(errno));
                atomic_fetch_add(&errors, 1);
            }
            continue;
        }
        if (f->n_seqs < PER_THREAD)
            f->seqs[f->n_seqs++] = cmsafe_event_seq(ev);
        if (cmsafe_event_type(ev) == RDMA_CM_EVENT_CONNECT_REQUEST && f->n_kept < PER_THREAD) {
            const cmsafe_buf *b = cmsafe_event_private_data(ev);
            f->kept[f->n_kept++] = cmsafe_buf_retain(b);
        }
        /* The handler gets its own reference; this thread drops the one it fetched. */
        push(cmsafe_event_retain(ev));
        cmsafe_event_release(ev);
    }
    /* Every event is released by now (the handler is done with the cycles): the kept buffers
     * must still hold their clients' bytes. */
    for (int i = 0; i < f->n_kept; i++) {
        int c = cycle_of(cmsafe_buf_data(f->kept[i]), cmsafe_buf_len(f->kept[i]));
        if (c < 0)
            f->bad_bufs++;
        else
            atomic_fetch_add(&buf_seen[c], 1);
        cmsafe_buf_release(f->kept[i]);
    }
    return NULL;
}

/* ---- the handler ---- */
static struct rdma_cm_id *children[CYCLES];
static int creq_seen[CYCLES], sest_seen[CYCLES], sdisc_seen[CYCLES], tw_seen[CYCLES];
/* Children destroyed, each after all of its events (destroy_child_when_done). */
static atomic_int destroyed_total;
/* Set once the handler has seen the server child's ESTABLISHED: the client disconnects only
 * then. Otherwise a DREQ can overtake an RTU the IB CM has to send again (a MAD lost on a loaded
 * Soft-RoCE), and the kernel then ends the child with DISCONNECTED and no ESTABLISHED
 * (drivers/infiniband/core/cm.c, cm_dreq_handler in REP_SENT; cma.c, IB_CM_DREQ_RECEIVED in
 * RDMA_CM_CONNECT): a legal outcome of the stack, seen once in 200 cycles on trixie, which
 * the exact counts below could not tell from a lost event. */
static atomic_int server_established[CYCLES];
static int unexpected;

static int child_cycle(struct rdma_cm_id *id)
{
    for (int c = 0; c < CYCLES; c++)
        if (children[c] == id)
            return c;
    return -1;
}

/* Destroys child `c` once the handler has seen every event it gets (ESTABLISHED, DISCONNECTED
 * and, where the transport has one, TIMEWAIT_EXIT): nothing more can come for it. */
static void destroy_child_when_done(struct rdma_cm_id *id, int c)
{
    if (!sest_seen[c] || !sdisc_seen[c] || (cm_has_timewait(tr) && !tw_seen[c]))
        return;
    rdma_destroy_qp(id);
    if (rdma_destroy_id(id) != 0)
        atomic_fetch_add(&errors, 1);
    children[c] = (struct rdma_cm_id *)(uintptr_t)1; /* destroyed */
    atomic_fetch_add(&destroyed_total, 1);
}

static void *handle_loop(void *arg)
{
    (void)arg;
    cmsafe_event *ev;
    while ((ev = pop()) != NULL) {
        int type = cmsafe_event_type(ev);
        struct rdma_cm_id *id = cmsafe_event_id(ev);
        int before = unexpected;
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            const cmsafe_buf *b = cmsafe_event_private_data(ev);
            int c = cycle_of(cmsafe_buf_data(b), cmsafe_buf_len(b));
            if (c < 0 || cmsafe_event_listen_id(ev) != listen_id || children[c] != NULL) {
                unexpected++;
            } else {
                creq_seen[c]++;
                children[c] = id;
                if (cm_try_create_qp(id) != 0 || cm_try_accept(id, pdata[c], REPLY) != 0)
                    atomic_fetch_add(&errors, 1);
            }
        } else {
            int c = child_cycle(id);
            if (c < 0) {
                unexpected++;
            } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
                sest_seen[c]++;
                atomic_store(&server_established[c], 1);
                destroy_child_when_done(id, c);
            } else if (type == RDMA_CM_EVENT_DISCONNECTED) {
                sdisc_seen[c]++;
                if (rdma_disconnect(id) != 0)
                    atomic_fetch_add(&errors, 1);
                destroy_child_when_done(id, c);
            } else if (type == RDMA_CM_EVENT_TIMEWAIT_EXIT && cm_has_timewait(tr)) {
                tw_seen[c]++;
                destroy_child_when_done(id, c);
            } else {
                unexpected++;
            }
        }
        if (unexpected != before) {
            char line[256];
            cmsafe_event_describe(ev, line, sizeof line);
            fprintf(stderr, "handler: unexpected event %s\n", line);
        }
        cmsafe_event_release(ev);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void exactly_n(const int *a, int n, const char *what)
{
    int bad = 0;
    for (int c = 0; c < CYCLES; c++)
        if (a[c] != n && bad++ < 5)
            fprintf(stderr, "cycle %d: %s %d times, want %d\n", c, what, a[c], n);
    CHECK(bad == 0, "%d cycles did not see %s exactly %d times", bad, what, n);
}

static void exactly_once(const int *a, const char *what)
{
    exactly_n(a, 1, what);
}

/* The client's next event: `want`, for `id`; its seq recorded. */
static cmsafe_event *client_take(struct rdma_cm_id *id, enum rdma_cm_event_type want,
                                 uint64_t *seqs, int *n)
{
    cmsafe_event *ev = cm_expect_within(cch, want, 10000);
    CHECK(cmsafe_event_id(ev) == id, "%s is for this client", rdma_event_str(want));
    if (*n < PER_THREAD)
        seqs[(*n)++] = cmsafe_event_seq(ev);
    return ev;
}

int main(void)
{
    int tsan = strstr(program_invocation_short_name, "tsan") != NULL;
    unsigned short port = tsan ? 7726 : 7725;
    harness_watchdog(tsan ? 58 : 50);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    nonce = cm_now_ns() ^ ((uint64_t)getpid() << 32);
    for (int c = 0; c < CYCLES; c++) {
        pdata[c][0] = (unsigned char)(c >> 8);
        pdata[c][1] = (unsigned char)c;
        memcpy(&pdata[c][2], &nonce, sizeof nonce);
        cm_fill(&pdata[c][10], PDATA - 10, (unsigned char)(c * 29));
    }
    sch = rdma_create_event_channel();
    cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    cmsafe_stats s0 = cm_stats();
    listen_id = rxe_listen(sch, port, RDMA_PS_TCP, 64);
    tr = cm_transport(listen_id);
    STEP("transport %s", cm_transport_name(tr));

    pthread_t handler;
    REQUIRE(pthread_create(&handler, NULL, handle_loop, NULL) == 0, "pthread_create");
    for (int i = 0; i < FETCHERS; i++)
        REQUIRE(pthread_create(&fetchers[i].thread, NULL, fetch_loop, &fetchers[i]) == 0,
                "pthread_create");

    STEP("%d connect/disconnect cycles", CYCLES);
    static uint64_t client_seqs[PER_THREAD];
    int n_client = 0;
    uint64_t t0 = cm_now_ns();
    struct sockaddr_in dst = rxe_addr(port);
    for (int c = 0; c < CYCLES; c++) {
        struct rdma_cm_id *id = NULL;
        REQUIRE(rdma_create_id(cch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
        REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 5000) == 0,
                "rdma_resolve_addr: %s", strerror(errno));
        cmsafe_event_release(client_take(id, RDMA_CM_EVENT_ADDR_RESOLVED, client_seqs, &n_client));
        REQUIRE(rdma_resolve_route(id, 5000) == 0, "rdma_resolve_route: %s", strerror(errno));
        cmsafe_event_release(client_take(id, RDMA_CM_EVENT_ROUTE_RESOLVED, client_seqs, &n_client));
        rxe_create_qp(id);
        cm_connect(id, pdata[c], PDATA);
        cmsafe_event *est = client_take(id, RDMA_CM_EVENT_ESTABLISHED, client_seqs, &n_client);
        const cmsafe_buf *b = cmsafe_event_private_data(est);
        CHECK(cm_bytes_are(cmsafe_buf_data(b), cmsafe_buf_len(b), pdata[c], REPLY,
                           cm_rep_len(tr, REPLY)),
              "cycle %d: ESTABLISHED does not carry the reply", c);
        cmsafe_event_release(est);
        uint64_t until = cm_now_ns() + 10000000000u;
        while (!atomic_load(&server_established[c]) && cm_now_ns() < until)
            usleep(100);
        REQUIRE(atomic_load(&server_established[c]), "cycle %d: the server's ESTABLISHED did not come in 10 s", c);
        REQUIRE(rdma_disconnect(id) == 0, "rdma_disconnect: %s", strerror(errno));
        cmsafe_event_release(client_take(id, RDMA_CM_EVENT_DISCONNECTED, client_seqs, &n_client));
        rdma_destroy_qp(id);
        CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id(client %d)", c);
    }
    fprintf(stderr, "%d cycles in %.0f ms\n", CYCLES, cm_ms_since(t0));

    STEP("wait for every child's last event (%s)",
         cm_has_timewait(tr) ? "TIMEWAIT_EXIT" : "DISCONNECTED: no timewait on iWARP");
    uint64_t deadline = cm_now_ns() + 15000000000u;
    while (atomic_load(&destroyed_total) < CYCLES && cm_now_ns() < deadline)
        usleep(20 * 1000);
    CHECK_EQ_INT(atomic_load(&destroyed_total), CYCLES);
    cm_quiet(cch, 100); /* the clients were destroyed before their timewait ended */
    atomic_store(&stop, 1);
    for (int i = 0; i < FETCHERS; i++)
        pthread_join(fetchers[i].thread, NULL);
    pthread_mutex_lock(&q_lock);
    q_closed = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    pthread_join(handler, NULL);

    STEP("checks");
    CHECK_EQ_INT(atomic_load(&errors), 0);
    CHECK_EQ_INT(unexpected, 0);
    exactly_once(creq_seen, "CONNECT_REQUEST (so its child accepted)");
    exactly_once(sest_seen, "ESTABLISHED (server)");
    exactly_once(sdisc_seen, "DISCONNECTED (server)");
    /* None at all on iWARP: one would be an unexpected event, counted above too. */
    exactly_n(tw_seen, cm_has_timewait(tr) ? 1 : 0, "TIMEWAIT_EXIT (server)");
    int bad_bufs = 0, seen[CYCLES];
    for (int i = 0; i < FETCHERS; i++) {
        bad_bufs += fetchers[i].bad_bufs;
        fprintf(stderr, "fetcher %d: %d events, kept %d buffers\n", i, fetchers[i].n_seqs,
                fetchers[i].n_kept);
    }
    CHECK_EQ_INT(bad_bufs, 0);
    for (int c = 0; c < CYCLES; c++)
        seen[c] = atomic_load(&buf_seen[c]);
    exactly_once(seen, "its retained buffer checked");

    /* Every sequence number exactly once, contiguous, as many as were fetched. */
    cmsafe_stats s1 = cm_stats();
    uint64_t fetched = s1.fetched - s0.fetched;
    static uint64_t all[PER_THREAD * (FETCHERS + 1)];
    int n_all = 0;
    for (int i = 0; i < n_client; i++)
        all[n_all++] = client_seqs[i];
    for (int f = 0; f < FETCHERS; f++)
        for (int i = 0; i < fetchers[f].n_seqs; i++)
            all[n_all++] = fetchers[f].seqs[i];
    qsort(all, (size_t)n_all, sizeof all[0], cmp_u64);
    int dups = 0;
    for (int i = 1; i < n_all; i++)
        dups += all[i] == all[i - 1];
    CHECK_EQ_INT(dups, 0);
    CHECK_EQ_INT(n_client, 4 * CYCLES);
    /* The server's CONNECT_REQUEST, ESTABLISHED, DISCONNECTED and TIMEWAIT_EXIT (none on
     * iWARP), after the client's four. */
    CHECK_EQ_INT(n_all, (cm_has_timewait(tr) ? 8 : 7) * CYCLES);
    CHECK_EQ_INT(fetched, (uint64_t)n_all);
    CHECK(n_all > 0 && all[n_all - 1] - all[0] + 1 == (uint64_t)n_all,
          "sequence numbers span %llu..%llu: not %d contiguous numbers",
          (unsigned long long)all[0], (unsigned long long)all[n_all - 1], n_all);

    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    uint64_t want[CMSAFE_EVENT_TYPE_SLOTS] = {0};
    want[RDMA_CM_EVENT_ADDR_RESOLVED] = CYCLES;
    want[RDMA_CM_EVENT_ROUTE_RESOLVED] = CYCLES;
    want[RDMA_CM_EVENT_CONNECT_REQUEST] = CYCLES;
    want[RDMA_CM_EVENT_ESTABLISHED] = 2 * CYCLES;
    want[RDMA_CM_EVENT_DISCONNECTED] = 2 * CYCLES;
    want[RDMA_CM_EVENT_TIMEWAIT_EXIT] = cm_has_timewait(tr) ? CYCLES : 0;
    for (int t = 0; t < CMSAFE_EVENT_TYPE_SLOTS; t++)
        CHECK(s1.by_type[t] - s0.by_type[t] == want[t], "by_type[%d] (%s): %llu, want %llu", t,
              rdma_event_str((enum rdma_cm_event_type)t),
              (unsigned long long)(s1.by_type[t] - s0.by_type[t]), (unsigned long long)want[t]);
    CHECK_EQ_INT(s1.acked - s0.acked, fetched);
    CHECK_EQ_INT(s1.released - s0.released, fetched);
    CHECK_EQ_INT(s1.live_events, 0);
    CHECK_EQ_INT(s1.live_buffers, 0);
    CHECK_EQ_INT(s1.pending, 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
