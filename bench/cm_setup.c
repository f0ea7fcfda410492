/* cm_setup: connection setup timed step by step, like rdma-core's cmtime, with the events
 * fetched either raw (rdma_get_cm_event, then rdma_ack_cm_event) or through cmsafe
 * (cmsafe_get_events, batches of copies acked at once). Same program, same steps, so the ratio
 * between the two runs is the cost of cmsafe on the connection path.
 *
 *   cm_setup raw|cmsafe ADDR PORT CONNECTIONS
 *
 * One process: a server thread on its own event channel accepts, and tears down on DISCONNECTED;
 * the main thread runs the client steps for all connections at once, as cmtime does, and prints
 * one line per step: "step <name> <ms>", then "total <ms>".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cmsafe.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int use_cmsafe;
static struct sockaddr_in addr;
static int nconn;

static void die(const char *what)
{
    fprintf(stderr, "cm_setup: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* One event: its type, status and id, whichever way it was fetched. */
struct ev {
    enum rdma_cm_event_type type;
    int status;
    struct rdma_cm_id *id;
};

/* Up to `max` events from `ch` (blocking for the first). */
static int get_events(struct rdma_event_channel *ch, struct ev *out, int max)
{
    if (use_cmsafe) {
        cmsafe_event *evs[64];
        int n = cmsafe_get_events(ch, evs, (size_t)(max < 64 ? max : 64), -1);
        if (n < 0)
            die("cmsafe_get_events");
        for (int i = 0; i < n; i++) {
            const struct rdma_cm_event *cm = cmsafe_event_cm(evs[i]);
            out[i] = (struct ev){cm->event, cm->status, cm->id};
            cmsafe_event_release(evs[i]);
        }
        return n;
    }
    struct rdma_cm_event *e;
    if (rdma_get_cm_event(ch, &e))
        die("rdma_get_cm_event");
    out[0] = (struct ev){e->event, e->status, e->id};
    rdma_ack_cm_event(e);
    return 1;
}

static void create_qp(struct rdma_cm_id *id)
{
    struct ibv_qp_init_attr attr = {
        .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (rdma_create_qp(id, NULL, &attr))
        die("rdma_create_qp");
}

static struct rdma_conn_param param = {.responder_resources = 1, .initiator_depth = 1,
                                       .retry_count = 7, .rnr_retry_count = 7};

static void *server(void *arg)
{
    struct rdma_event_channel *ch = arg;
    int closed = 0;
    struct ev evs[64];
    while (closed < nconn) {
        int n = get_events(ch, evs, 64);
        for (int i = 0; i < n; i++) {
            switch (evs[i].type) {
            case RDMA_CM_EVENT_CONNECT_REQUEST:
                create_qp(evs[i].id);
                if (rdma_accept(evs[i].id, &param))
                    die("rdma_accept");
                break;
            case RDMA_CM_EVENT_DISCONNECTED:
                rdma_disconnect(evs[i].id);
                rdma_destroy_qp(evs[i].id);
                rdma_destroy_id(evs[i].id);
                closed++;
                break;
            case RDMA_CM_EVENT_ESTABLISHED:
            case RDMA_CM_EVENT_TIMEWAIT_EXIT:
                break;
            default:
                fprintf(stderr, "cm_setup: server got %s (%d)\n", rdma_event_str(evs[i].type),
                        evs[i].status);
                exit(1);
            }
        }
    }
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Waits for `count` events of type `want` on the client channel. */
static void wait_for(struct rdma_event_channel *ch, enum rdma_cm_event_type want, int count)
{
    struct ev evs[64];
    while (count > 0) {
        int n = get_events(ch, evs, count < 64 ? count : 64);
        for (int i = 0; i < n; i++) {
            if (evs[i].type != want) {
                fprintf(stderr, "cm_setup: client got %s (%d), wanted %s\n",
                        rdma_event_str(evs[i].type), evs[i].status, rdma_event_str(want));
                exit(1);
            }
        }
        count -= n;
    }
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "raw") && strcmp(argv[1], "cmsafe"))) {
        fprintf(stderr, "usage: cm_setup raw|cmsafe ADDR PORT CONNECTIONS\n");
        return 2;
    }
    use_cmsafe = strcmp(argv[1], "cmsafe") == 0;
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(argv[3]));
    if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1)
        die("address");
    nconn = atoi(argv[4]);
    alarm(300);

    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    struct rdma_cm_id *listen_id;
    if (!sch || !cch || rdma_create_id(sch, &listen_id, NULL, RDMA_PS_TCP) ||
        rdma_bind_addr(listen_id, (struct sockaddr *)&addr) || rdma_listen(listen_id, 1024))
        die("listen");
    pthread_t t;
    pthread_create(&t, NULL, server, sch);

    struct rdma_cm_id **ids = calloc((size_t)nconn, sizeof *ids);
    double start = now_ms(), t0 = start, t1;
#define STEP(name)                                                                               \
    do {                                                                                         \
        t1 = now_ms();                                                                           \
        printf("step %-14s %10.2f\n", name, t1 - t0);                                           \
        t0 = t1;                                                                                 \
    } while (0)

    for (int i = 0; i < nconn; i++)
        if (rdma_create_id(cch, &ids[i], NULL, RDMA_PS_TCP))
            die("rdma_create_id");
    STEP("create id");
    for (int i = 0; i < nconn; i++)
        if (rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&addr, 2000))
            die("rdma_resolve_addr");
    wait_for(cch, RDMA_CM_EVENT_ADDR_RESOLVED, nconn);
    STEP("resolve addr");
    for (int i = 0; i < nconn; i++)
        if (rdma_resolve_route(ids[i], 2000))
            die("rdma_resolve_route");
    wait_for(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, nconn);
    STEP("resolve route");
    for (int i = 0; i < nconn; i++)
        create_qp(ids[i]);
    STEP("create qp");
    for (int i = 0; i < nconn; i++)
        if (rdma_connect(ids[i], &param))
            die("rdma_connect");
    wait_for(cch, RDMA_CM_EVENT_ESTABLISHED, nconn);
    STEP("connect");
    for (int i = 0; i < nconn; i++)
        if (rdma_disconnect(ids[i]))
            die("rdma_disconnect");
    wait_for(cch, RDMA_CM_EVENT_DISCONNECTED, nconn);
    STEP("disconnect");
    for (int i = 0; i < nconn; i++) {
        rdma_destroy_qp(ids[i]);
        if (rdma_destroy_id(ids[i]))
            die("rdma_destroy_id");
    }
    STEP("destroy");
    printf("total %10.2f\n", now_ms() - start);
    pthread_join(t, NULL);
    rdma_destroy_id(listen_id);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    free(ids);
    return 0;
}
