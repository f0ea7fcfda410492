/* Order and uniqueness: a server thread accepts every connection and disconnects it at once
 * (the moment its ESTABLISHED arrives); the client sees, per connection, exactly ADDR_RESOLVED,
 * ROUTE_RESOLVED, ESTABLISHED, DISCONNECTED in that order, each once, and after rdma_destroy_id
 * nothing more. The server sees exactly CONNECT_REQUEST, ESTABLISHED, DISCONNECTED per connection.
 * Sequence numbers strictly increase on each channel, and all of them together are distinct and
 * contiguous, as many as the counters say were fetched.
 *
 * Why the server waits for its ESTABLISHED: an rdma_disconnect right after rdma_accept, before
 * the client's RTU arrives, is dropped by the kernel's IB CM (no DREQ in state REP_SENT: measured
 * here, the client then never sees DISCONNECTED). "At once" is therefore "the moment the
 * connection is established on the server". */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7715, CYCLES = 12, MAX_EVENTS = 16 * CYCLES };

static struct rdma_event_channel *sch, *cch;
static atomic_int stop;

/* What the server thread saw, in order. */
static int server_types[MAX_EVENTS];
static struct rdma_cm_id *server_ids[MAX_EVENTS];
static uint64_t server_seqs[MAX_EVENTS];
static int n_server;
static int server_errors;

static void *server(void *arg)
{
    struct rdma_cm_id *listen_id = arg;
    while (!atomic_load(&stop)) {
        cmsafe_event *ev = NULL;
        if (cmsafe_get_event_timeout(sch, &ev, 100) != 0) {
            if (errno != ETIMEDOUT) {
                fprintf(stderr, "server: cmsafe_get_event_timeout: %s\n", strerror(errno));
                server_errors++;
            }
            continue;
        }
        int type = cmsafe_event_type(ev);
        struct rdma_cm_id *id = cmsafe_event_id(ev);
        if (n_server < MAX_EVENTS) {
            server_types[n_server] = type;
            server_ids[n_server] = id;
            server_seqs[n_server] = cmsafe_event_seq(ev);
            n_server++;
        }
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST && cmsafe_event_listen_id(ev) == listen_id) {
            if (cm_try_create_qp(id) != 0 || cm_try_accept(id, "welcome", 7) != 0)
                server_errors++;
        } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
            /* At once: before even releasing the event. */
            if (rdma_disconnect(id) != 0) {
                fprintf(stderr, "server: rdma_disconnect: %s\n", strerror(errno));
                server_errors++;
            }
        } else if (type == RDMA_CM_EVENT_DISCONNECTED) {
            rdma_destroy_qp(id);
            if (rdma_destroy_id(id) != 0)
                server_errors++;
        }
        cmsafe_event_release(ev);
    }
    return NULL;
}

/* The client's next event: of type `want`, for `client`, its seq above `*last` (recorded). */
static void take(struct rdma_cm_id *client, enum rdma_cm_event_type want, uint64_t *seqs, int *n,
                 uint64_t *last)
{
    cmsafe_event *ev = cm_expect_within(cch, want, 5000);
    CHECK(cmsafe_event_id(ev) == client, "%s is for this client", rdma_event_str(want));
    CHECK(cmsafe_event_seq(ev) > *last, "client seq not increasing");
    *last = cmsafe_event_seq(ev);
    if (*n < MAX_EVENTS)
        seqs[(*n)++] = *last;
    cmsafe_event_release(ev);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    harness_watchdog(50);
    sch = rdma_create_event_channel();
    cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    cmsafe_stats s0 = cm_stats();
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    pthread_t thr;
    REQUIRE(pthread_create(&thr, NULL, server, listen_id) == 0, "pthread_create");

    uint64_t client_seqs[MAX_EVENTS];
    int n_client = 0;
    uint64_t last = 0;
    for (int c = 0; c < CYCLES; c++) {
        STEP("connection %d", c);
        struct rdma_cm_id *client = NULL;
        struct sockaddr_in dst = rxe_addr(PORT);
        REQUIRE(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
        REQUIRE(rdma_resolve_addr(client, NULL, (struct sockaddr *)&dst, 2000) == 0,
                "rdma_resolve_addr: %s", strerror(errno));
        take(client, RDMA_CM_EVENT_ADDR_RESOLVED, client_seqs, &n_client, &last);
        REQUIRE(rdma_resolve_route(client, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
        take(client, RDMA_CM_EVENT_ROUTE_RESOLVED, client_seqs, &n_client, &last);
        rxe_create_qp(client);
        char hello[24];
        snprintf(hello, sizeof hello, "hello %d", c);
        cm_connect(client, hello, (unsigned char)strlen(hello));

        take(client, RDMA_CM_EVENT_ESTABLISHED, client_seqs, &n_client, &last);

        /* Let the server's disconnect, and anything else, queue up; then take all of it. */
        CHECK(cm_wait_readable(cch, 5000), "connection %d: no event after ESTABLISHED", c);
        usleep(50 * 1000);
        cmsafe_event *evs[8];
        int n = cmsafe_get_events(cch, evs, 8, 0);
        CHECK(n == 1, "connection %d: %d events queued after ESTABLISHED, want exactly 1", c, n);
        for (int i = 0; i < n; i++) {
            CHECK(cmsafe_event_type(evs[i]) == RDMA_CM_EVENT_DISCONNECTED,
                  "connection %d: event %d after ESTABLISHED is %s, want DISCONNECTED", c, i,
                  rdma_event_str((enum rdma_cm_event_type)cmsafe_event_type(evs[i])));
            CHECK(cmsafe_event_id(evs[i]) == client, "DISCONNECTED is for this client");
            CHECK(cmsafe_event_seq(evs[i]) > last, "client seq not increasing");
            last = cmsafe_event_seq(evs[i]);
            if (n_client < MAX_EVENTS)
                client_seqs[n_client++] = last;
            cmsafe_event_release(evs[i]);
        }
        /* The DREP that completes the server's disconnect, then the end of this id. */
        REQUIRE(rdma_disconnect(client) == 0, "rdma_disconnect: %s", strerror(errno));
        rdma_destroy_qp(client);
        CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(client)");
        cm_quiet(cch, 150);
    }

    STEP("after the last destroy: nothing more, not even TIMEWAIT_EXIT (about 2.2 s)");
    cm_quiet(cch, 3000);
    atomic_store(&stop, 1);
    pthread_join(thr, NULL);
    CHECK_EQ_INT(server_errors, 0);

    /* The server's events: CONNECT_REQUEST, ESTABLISHED, DISCONNECTED per connection, in order,
     * all three for the same child id, a new child each time. */
    CHECK_EQ_INT(n_server, 3 * CYCLES);
    for (int i = 0; i + 2 < n_server; i += 3) {
        CHECK(server_types[i] == RDMA_CM_EVENT_CONNECT_REQUEST &&
                  server_types[i + 1] == RDMA_CM_EVENT_ESTABLISHED &&
                  server_types[i + 2] == RDMA_CM_EVENT_DISCONNECTED,
              "server events %d..%d: %s, %s, %s", i, i + 2,
              rdma_event_str((enum rdma_cm_event_type)server_types[i]),
              rdma_event_str((enum rdma_cm_event_type)server_types[i + 1]),
              rdma_event_str((enum rdma_cm_event_type)server_types[i + 2]));
        CHECK(server_ids[i] == server_ids[i + 1] && server_ids[i] == server_ids[i + 2],
              "server events %d..%d are not for one child", i, i + 2);
    }
    for (int i = 1; i < n_server; i++)
        CHECK(server_seqs[i] > server_seqs[i - 1], "server seq %d not increasing", i);

    /* All sequence numbers: distinct and contiguous, as many as were fetched. */
    cmsafe_stats s1 = cm_stats();
    uint64_t fetched = s1.fetched - s0.fetched;
    /* Client: ADDR_RESOLVED, ROUTE_RESOLVED, ESTABLISHED, DISCONNECTED per cycle. */
    CHECK_EQ_INT(n_client, 4 * CYCLES);
    CHECK_EQ_INT(fetched, 4 * CYCLES + 3 * CYCLES);
    CHECK_EQ_INT(s1.by_type[RDMA_CM_EVENT_ESTABLISHED] - s0.by_type[RDMA_CM_EVENT_ESTABLISHED],
                 2 * CYCLES);
    CHECK_EQ_INT(s1.by_type[RDMA_CM_EVENT_DISCONNECTED] - s0.by_type[RDMA_CM_EVENT_DISCONNECTED],
                 2 * CYCLES);
    CHECK_EQ_INT(s1.by_type[RDMA_CM_EVENT_TIMEWAIT_EXIT] - s0.by_type[RDMA_CM_EVENT_TIMEWAIT_EXIT],
                 0);
    uint64_t all[2 * MAX_EVENTS];
    int n_all = 0;
    for (int i = 0; i < n_client; i++)
        all[n_all++] = client_seqs[i];
    for (int i = 0; i < n_server; i++)
        all[n_all++] = server_seqs[i];
    qsort(all, (size_t)n_all, sizeof all[0], cmp_u64);
    int dups = 0;
    for (int i = 1; i < n_all; i++)
        dups += all[i] == all[i - 1];
    CHECK_EQ_INT(dups, 0);
    CHECK_EQ_INT(n_all, fetched);
    CHECK(n_all > 0 && all[n_all - 1] - all[0] + 1 == (uint64_t)n_all,
          "sequence numbers span %llu..%llu: not the %d contiguous numbers fetched",
          (unsigned long long)all[0], (unsigned long long)all[n_all - 1], n_all);

    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    CHECK_EQ_INT(s1.acked - s0.acked, fetched);
    CHECK_EQ_INT(s1.live_events, 0);
    CHECK_EQ_INT(s1.live_buffers, 0);
    CHECK_EQ_INT(s1.pending, 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
