/* storm_client: opens COUNT connections to a storm server and holds them until it is killed.
 *
 *   storm_client [-H HEARTBEAT_MS [-r]] ADDR PORT SEED WAVE BASE COUNT [WINDOW [TIMEOUT_S]]
 *
 * Connection i (BASE <= i < BASE + COUNT) carries storm_token(SEED, WAVE, i) in its
 * CONNECT_REQUEST private data and checks the server's accept reply ("ok:<i>"). Up to WINDOW
 * connections (default 16) are being set up at once. Once all COUNT are established it prints
 * "STORM-CLIENT established ..." and waits, doing nothing, for the driver's SIGKILL: the
 * connections are never disconnected by this process. Any failure before that exits non-zero
 * (after TIMEOUT_S, default 300, without all established: exit 2).
 *
 * With -H (fault runs, scripts/faults): every connection carries a heartbeat each way every
 * HEARTBEAT_MS (see storm.h), and the client lives through what the network does to it instead
 * of failing. Each event is logged on stdout:
 *   EV <us> <RDMA_CM_EVENT_...> <status> <index>      (CLOCK_REALTIME microseconds)
 *   WC <us> <ibv_wc_status_str, spaces as _> <wc status> <index>   (a heartbeat failed)
 *   CE <us> rdma_connect <-errno> <index>   (the call failed: siw's blocking TCP connect)
 * A connection whose setup ends in an error event (ADDR_ERROR, UNREACHABLE, REJECTED...) is
 * destroyed and counted as failed; an established one that ends (its DISCONNECTED) is destroyed
 * and counted as lost ("STORM-CLIENT lost index=I event=TYPE:STATUS"), and its index moves to
 * the next wave's token. Failed and lost connections are set up again RETRY_MS later once
 * retries are on: from the start with -r, or from the first SIGUSR1. Without retries, when every
 * connection has been tried it prints "STORM-CLIENT settled established=E failed=F lost=L"
 * (E + F + L = COUNT: up now, never set up, set up and lost since). It prints
 * "STORM-CLIENT established ..." each time all COUNT are up at once. TIMEOUT_S does not apply.
 *
 * A correct raw librdmacm program (get, read, ack), so the servers are what is under test.
 * All QPs share one PD and one CQ: no per-connection file descriptors. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storm.h"

enum { RESOLVE_MS = 5000, RETRY_MS = 1000 };

/* IDLE: not tried yet; FAILED: its id is gone, waiting for a retry. */
enum cstate { IDLE, CONNECTING, UP, CLOSING, FAILED };

struct cconn {
    struct rdma_cm_id *id;
    enum cstate state;
    unsigned wave; /* the wave its token names */
    uint32_t qpn;
    bool send_out;
    uint64_t retry_at_us;
};

static struct rdma_event_channel *ch;
static struct sockaddr_in dst;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static uint64_t seed;
static unsigned base, count, window, heartbeat_ms, inflight, established, failed, lost, recvs;
static struct cconn *conns;
static volatile sig_atomic_t retry_on;
static bool settled_said, all_said;
static uint64_t next_beat_us;

static void on_timeout(int sig)
{
    (void)sig;
    static const char msg[] = "storm_client: FAIL: not every connection was established in time\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(2);
}

static void on_usr1(int sig)
{
    (void)sig;
    retry_on = 1;
}

static unsigned index_of(struct rdma_cm_id *id)
{
    return base + (unsigned)((struct cconn *)id->context - conns);
}

static void start_one(struct cconn *c)
{
    if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP))
        storm_die("rdma_create_id: %s", strerror(errno));
    c->id->context = c;
    c->state = CONNECTING;
    c->send_out = false;
    inflight++;
    if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, RESOLVE_MS))
        storm_die("rdma_resolve_addr: %s", strerror(errno));
}

/* Returns 0, or in fault runs rdma_connect's errno (a storm run dies of it). */
static int connect_one(struct cconn *c)
{
    struct rdma_cm_id *id = c->id;
    if (!pd) {
        recvs = storm_recvs(id->verbs);
        pd = ibv_alloc_pd(id->verbs);
        cq = pd ? ibv_create_cq(id->verbs, heartbeat_ms ? storm_cq_size(count, recvs) : 64, NULL,
                                NULL, 0)
                : NULL;
        if (!cq)
            storm_die("ibv_alloc_pd/ibv_create_cq: %s", strerror(errno));
    }
    struct ibv_qp_init_attr attr;
    storm_qp_attr(&attr, cq, recvs);
    if (rdma_create_qp(id, pd, &attr))
        storm_die("rdma_create_qp: %s", strerror(errno));
    c->qpn = id->qp->qp_num;
    for (unsigned i = 0; heartbeat_ms && i < recvs; i++) {
        int rc = storm_post_recv(id->qp, (uint64_t)(c - conns) << 1);
        if (rc)
            storm_die("ibv_post_recv: %s", strerror(rc));
    }
    char token[STORM_TOKEN_MAX];
    storm_token(token, seed, c->wave, index_of(id));
    struct rdma_conn_param param = {
        .private_data = token,
        .private_data_len = (uint8_t)(strlen(token) + 1),
        .responder_resources = 1,
        .initiator_depth = 1,
        /* 6, not 7: rxe retries forever at 7, and a heartbeat to a vanished peer must fail. The
         * server's QP gets the same count from the REQ. */
        .retry_count = 6,
        .rnr_retry_count = 7,
    };
    if (rdma_connect(id, &param)) {
        /* siw (kernel 6.1) connects its TCP socket inside rdma_connect, blocking: across a cut
         * link the call itself fails (EHOSTUNREACH, ETIMEDOUT), with no event to follow. */
        if (heartbeat_ms)
            return errno ? errno : EIO;
        storm_die("rdma_connect: %s", strerror(errno));
    }
    return 0;
}

/* Destroys a connection's QP and id (every event of the id acked before). */
static void drop(struct cconn *c)
{
    if (c->id->qp)
        rdma_destroy_qp(c->id);
    if (rdma_destroy_id(c->id))
        storm_die("rdma_destroy_id: %s", strerror(errno));
    c->id = NULL;
    c->state = FAILED;
    c->retry_at_us = storm_mono_us() + RETRY_MS * 1000ull;
}

/* Fault runs: the end of a connection, as the event that ended it reports. */
static void ended(struct cconn *c, int type, int status)
{
    if (c->state == CONNECTING) {
        inflight--;
        failed++;
    } else {
        established--;
        lost++;
        c->wave++; /* its next connection is the next wave's */
        all_said = false;
        printf("STORM-CLIENT lost index=%u event=%s:%d\n", base + (unsigned)(c - conns),
               rdma_event_str((enum rdma_cm_event_type)type), status);
    }
    drop(c);
}

static void beat_failed(struct cconn *c, int wc_status)
{
    printf("WC %llu %s %d %u\n", (unsigned long long)storm_real_us(), storm_wc_name(wc_status),
           wc_status, base + (unsigned)(c - conns));
    c->state = CLOSING;
    rdma_disconnect(c->id);
}

/* Fault runs: completions, heartbeats, and (re)starting connections within the window. */
static void tick(void)
{
    struct ibv_wc wc[32];
    int n;
    while (cq && (n = ibv_poll_cq(cq, 32, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            struct cconn *c = &conns[(wc[i].wr_id >> 1) % count];
            int is_send = (int)(wc[i].wr_id & 1);
            if (!c->id || c->qpn != wc[i].qp_num)
                continue; /* a destroyed QP's flushed work request */
            if (is_send)
                c->send_out = false;
            if (wc[i].status == IBV_WC_SUCCESS) {
                if (!is_send && storm_post_recv(c->id->qp, wc[i].wr_id) && c->state == UP)
                    beat_failed(c, IBV_WC_GENERAL_ERR);
            } else if (c->state == UP) {
                beat_failed(c, wc[i].status);
            }
        }
    }
    uint64_t now = storm_mono_us();
    if (now >= next_beat_us) {
        next_beat_us = now + heartbeat_ms * 1000ull;
        for (unsigned i = 0; i < count; i++) {
            struct cconn *c = &conns[i];
            if (c->state == UP && !c->send_out) {
                if (storm_post_beat(c->id->qp, ((uint64_t)i << 1) | 1))
                    beat_failed(c, IBV_WC_GENERAL_ERR);
                else
                    c->send_out = true;
            }
        }
    }
    bool waiting = false;
    for (unsigned i = 0; i < count && inflight < window; i++) {
        struct cconn *c = &conns[i];
        if (c->state == IDLE || (c->state == FAILED && retry_on && now >= c->retry_at_us))
            start_one(c);
    }
    for (unsigned i = 0; i < count && !waiting; i++)
        waiting = conns[i].state == IDLE;
    if (!retry_on && !waiting && inflight == 0 && !settled_said) {
        settled_said = true;
        printf("STORM-CLIENT settled established=%u failed=%u lost=%u pid=%ld\n", established,
               failed, lost, (long)getpid());
    }
    if (established == count && !all_said) {
        all_said = true;
        printf("STORM-CLIENT established wave=%u base=%u count=%u pid=%ld lost=%u failed=%u\n",
               conns[0].wave, base, count, (long)getpid(), lost, failed);
    }
}

static void usage(void)
{
    storm_die("usage: storm_client [-H HEARTBEAT_MS [-r]] ADDR PORT SEED WAVE BASE COUNT "
              "[WINDOW [TIMEOUT_S]]");
}

int main(int argc, char **argv)
{
    storm_prog = "storm_client";
    int opt;
    while ((opt = getopt(argc, argv, "+H:r")) != -1) {
        if (opt == 'H')
            heartbeat_ms = (unsigned)storm_number(optarg, "HEARTBEAT_MS");
        else if (opt == 'r')
            retry_on = 1;
        else
            usage();
    }
    argc -= optind - 1;
    argv += optind - 1;
    if (argc < 7 || argc > 9 || (retry_on && !heartbeat_ms))
        usage();
    dst.sin_family = AF_INET;
    if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1)
        storm_die("not an IPv4 address: %s", argv[1]);
    dst.sin_port = htons((uint16_t)storm_number(argv[2], "PORT"));
    seed = storm_number(argv[3], "SEED");
    unsigned wave = (unsigned)storm_number(argv[4], "WAVE");
    base = (unsigned)storm_number(argv[5], "BASE");
    count = (unsigned)storm_number(argv[6], "COUNT");
    window = argc > 7 ? (unsigned)storm_number(argv[7], "WINDOW") : 16;
    unsigned timeout_s = argc > 8 ? (unsigned)storm_number(argv[8], "TIMEOUT_S") : 300;
    if (count < 1 || count > STORM_MAX_CONNS || window < 1)
        storm_die("COUNT must be 1..%d and WINDOW at least 1", STORM_MAX_CONNS);

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (heartbeat_ms) {
        struct sigaction sa = {.sa_handler = on_usr1};
        sigaction(SIGUSR1, &sa, NULL);
    } else {
        signal(SIGALRM, on_timeout);
        alarm(timeout_s);
    }

    conns = calloc(count, sizeof *conns);
    ch = rdma_create_event_channel();
    if (!conns || !ch)
        storm_die("rdma_create_event_channel: %s", strerror(errno));
    for (unsigned i = 0; i < count; i++)
        conns[i].wave = wave;
    unsigned started = 0;
    if (!heartbeat_ms)
        while (started < count && started < window)
            start_one(&conns[started++]);

    while (heartbeat_ms || established < count) {
        if (heartbeat_ms) {
            tick();
            uint64_t now = storm_mono_us();
            int wait = now >= next_beat_us ? 0 : (int)((next_beat_us - now + 999) / 1000);
            struct pollfd p = {.fd = ch->fd, .events = POLLIN};
            int rc = poll(&p, 1, wait < 200 ? wait : 200);
            if (rc < 0 && errno != EINTR)
                storm_die("poll: %s", strerror(errno));
            if (rc <= 0)
                continue;
        }
        struct rdma_cm_event *ev = NULL;
        if (rdma_get_cm_event(ch, &ev))
            storm_die("rdma_get_cm_event: %s", strerror(errno));
        struct rdma_cm_id *id = ev->id;
        struct cconn *c = id->context;
        unsigned index = index_of(id);
        int type = ev->event, status = ev->status;
        if (heartbeat_ms)
            printf("EV %llu %s %d %u\n", (unsigned long long)storm_real_us(),
                   rdma_event_str(ev->event), status, index);
        switch (type) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (rdma_resolve_route(id, RESOLVE_MS))
                storm_die("rdma_resolve_route: %s", strerror(errno));
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: {
            int err = connect_one(c);
            if (!err)
                break;
            /* A fault run's failed connect: logged, acked, then destroyed and retried later. */
            printf("CE %llu rdma_connect %d %u\n", (unsigned long long)storm_real_us(), -err, index);
            if (rdma_ack_cm_event(ev))
                storm_die("rdma_ack_cm_event: %s", strerror(errno));
            ended(c, RDMA_CM_EVENT_CONNECT_ERROR, -err);
            continue;
        }
        case RDMA_CM_EVENT_ESTABLISHED: {
            /* Read the server's reply before the ack frees it. */
            char want[STORM_REPLY_LEN];
            storm_reply(want, index);
            const char *got = ev->param.conn.private_data;
            if (!got || ev->param.conn.private_data_len < STORM_REPLY_LEN ||
                memcmp(got, want, STORM_REPLY_LEN) != 0)
                storm_die("connection %u: the server's reply is not \"%s\"", index, want);
            established++;
            if (heartbeat_ms) {
                inflight--;
                c->state = UP;
            } else if (started < count) {
                start_one(&conns[started++]);
            }
            break;
        }
        case RDMA_CM_EVENT_TIMEWAIT_EXIT:
            if (heartbeat_ms)
                break; /* the id lives on until destroyed: nothing to do */
            /* fallthrough */
        default:
            if (!heartbeat_ms || !storm_closes(type))
                storm_die("connection %u: %s (status %d) while connecting", index,
                          rdma_event_str(ev->event), ev->status);
            /* Ack before the id is destroyed. */
            if (rdma_ack_cm_event(ev))
                storm_die("rdma_ack_cm_event: %s", strerror(errno));
            ended(c, type, status);
            continue;
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
