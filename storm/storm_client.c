/* storm_client: opens COUNT connections to a storm server and holds them until it is killed.
 *
 *   storm_client ADDR PORT SEED WAVE BASE COUNT [WINDOW [TIMEOUT_S]]
 *
 * Connection i (BASE <= i < BASE + COUNT) carries storm_token(SEED, WAVE, i) in its
 * CONNECT_REQUEST private data and checks the server's accept reply ("ok:<i>"). Up to WINDOW
 * connections (default 16) are being set up at once. Once all COUNT are established it prints
 * "STORM-CLIENT established ..." and waits, doing nothing, for the driver's SIGKILL: the
 * connections are never disconnected by this process. Any failure before that exits non-zero.
 *
 * A correct raw librdmacm program (get, read, ack), so the servers are what is under test.
 * All QPs share one PD and one CQ: no per-connection file descriptors. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storm.h"

enum { RESOLVE_MS = 5000 };

static struct rdma_event_channel *ch;
static struct sockaddr_in dst;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static uint64_t seed;
static unsigned wave, base, count, started, established;
static struct rdma_cm_id **ids;

static void on_timeout(int sig)
{
    (void)sig;
    static const char msg[] = "storm_client: FAIL: not every connection was established in time\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(2);
}

static void start_one(void)
{
    unsigned i = started++;
    if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP))
        storm_die("rdma_create_id: %s", strerror(errno));
    ids[i]->context = &ids[i];
    if (rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, RESOLVE_MS))
        storm_die("rdma_resolve_addr: %s", strerror(errno));
}

static void connect_one(struct rdma_cm_id *id)
{
    if (!pd) {
        pd = ibv_alloc_pd(id->verbs);
        cq = pd ? ibv_create_cq(id->verbs, 64, NULL, NULL, 0) : NULL;
        if (!cq)
            storm_die("ibv_alloc_pd/ibv_create_cq: %s", strerror(errno));
    }
    struct ibv_qp_init_attr attr = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (rdma_create_qp(id, pd, &attr))
        storm_die("rdma_create_qp: %s", strerror(errno));
    unsigned index = base + (unsigned)((struct rdma_cm_id **)id->context - ids);
    char token[STORM_TOKEN_MAX];
    storm_token(token, seed, wave, index);
    struct rdma_conn_param param = {
        .private_data = token,
        .private_data_len = (uint8_t)(strlen(token) + 1),
        .responder_resources = 1,
        .initiator_depth = 1,
        .retry_count = 7,
        .rnr_retry_count = 7,
    };
    if (rdma_connect(id, &param))
        storm_die("rdma_connect: %s", strerror(errno));
}

int main(int argc, char **argv)
{
    storm_prog = "storm_client";
    if (argc < 7 || argc > 9)
        storm_die("usage: storm_client ADDR PORT SEED WAVE BASE COUNT [WINDOW [TIMEOUT_S]]");
    dst.sin_family = AF_INET;
    if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1)
        storm_die("not an IPv4 address: %s", argv[1]);
    dst.sin_port = htons((uint16_t)storm_number(argv[2], "PORT"));
    seed = storm_number(argv[3], "SEED");
    wave = (unsigned)storm_number(argv[4], "WAVE");
    base = (unsigned)storm_number(argv[5], "BASE");
    count = (unsigned)storm_number(argv[6], "COUNT");
    unsigned window = argc > 7 ? (unsigned)storm_number(argv[7], "WINDOW") : 16;
    unsigned timeout_s = argc > 8 ? (unsigned)storm_number(argv[8], "TIMEOUT_S") : 300;
    if (count < 1 || count > STORM_MAX_CONNS || window < 1)
        storm_die("COUNT must be 1..%d and WINDOW at least 1", STORM_MAX_CONNS);

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_timeout);
    alarm(timeout_s);

    ids = calloc(count, sizeof *ids);
    ch = rdma_create_event_channel();
    if (!ids || !ch)
        storm_die("rdma_create_event_channel: %s", strerror(errno));
    while (started < count && started < window)
        start_one();

    while (established < count) {
        struct rdma_cm_event *ev = NULL;
        if (rdma_get_cm_event(ch, &ev))
            storm_die("rdma_get_cm_event: %s", strerror(errno));
        struct rdma_cm_id *id = ev->id;
        unsigned index = base + (unsigned)((struct rdma_cm_id **)id->context - ids);
        switch (ev->event) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (rdma_resolve_route(id, RESOLVE_MS))
                storm_die("rdma_resolve_route: %s", strerror(errno));
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED:
            connect_one(id);
            break;
        case RDMA_CM_EVENT_ESTABLISHED: {
            /* Read the server's reply before the ack frees it. */
            char want[STORM_REPLY_LEN];
            storm_reply(want, index);
            const char *got = ev->param.conn.private_data;
            if (!got || ev->param.conn.private_data_len < STORM_REPLY_LEN ||
                memcmp(got, want, STORM_REPLY_LEN) != 0)
                storm_die("connection %u: the server's reply is not \"%s\"", index, want);
            established++;
            if (started < count)
                start_one();
            break;
        }
        default:
            storm_die("connection %u: %s (status %d) while connecting", index,
                      rdma_event_str(ev->event), ev->status);
        }
        if (rdma_ack_cm_event(ev))
            storm_die("rdma_ack_cm_event: %s", strerror(errno));
    }
    alarm(0);
    printf("STORM-CLIENT established wave=%u base=%u count=%u pid=%ld\n", wave, base, count,
           (long)getpid());
    fflush(stdout);
    for (;;)
        pause(); /* hold every connection until SIGKILL */
}
