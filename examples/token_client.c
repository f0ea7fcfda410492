/* token_client: opens CLIENTS RDMA connections to token_server, each carrying its token.
 *
 *   token_client ADDR PORT SEED [CLIENTS]
 *
 * Connection i sends "tok:<i>:<32 hex digits>" (derived from SEED, as token_server recomputes
 * it) in its CONNECT_REQUEST private data, waits for ESTABLISHED and checks that the server's
 * accept private data echoes the token back. Once all are established it disconnects them all,
 * waits for every DISCONNECTED, frees QPs and ids and exits 0.
 *
 * Events come from cmsafe_get_event, so reading the ESTABLISHED event's private data (the
 * server's echo) needs no care about when librdmacm's event is acked.
 *
 * It runs on RoCE and on iWARP alike: each QP exists before rdma_connect (iWARP requires it, and
 * then ESTABLISHED comes without a CONNECT_RESPONSE first), initiator depth and responder
 * resources are 1 (iWARP refuses 0), and the echo is found up to its NUL whatever the length
 * of the private data (RoCE pads it, iWARP delivers the bytes sent). All QPs share one CQ: see
 * shared_cq().
 *
 * Build: cc -std=c11 token_client.c $(pkg-config --cflags --libs cmsafe libibverbs)
 * (libibverbs for the shared CQ, created and destroyed here with ibv_create_cq/ibv_destroy_cq)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cmsafe.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_CLIENTS = 1024, TIMEOUT_SECONDS = 60, TOKEN_MAX = 56, RESOLVE_MS = 2000 };

/* ---- the token: must match token_server.c ---------------------------------------------- */

static unsigned long long mix64(unsigned long long x) /* splitmix64 */
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Client `index`'s token: "tok:<index>:<32 hex digits>", at most 45 bytes with its NUL. */
static void make_token(char out[TOKEN_MAX], unsigned long long seed, unsigned index)
{
    unsigned long long a = mix64(seed ^ (2ULL * index + 1)), b = mix64(a);
    snprintf(out, TOKEN_MAX, "tok:%u:%016llx%016llx", index, a, b);
}

/* ---- the client ---------------------------------------------------------------------------- */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("token_client: FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void on_timeout(int sig)
{
    (void)sig;
    static const char msg[] = "token_client: FAIL: timed out\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(2);
}

/* The next event on `ch`, which must be `want` for `id`. The caller releases it. */
static cmsafe_event *expect(struct rdma_event_channel *ch, struct rdma_cm_id *id,
                            enum rdma_cm_event_type want)
{
    cmsafe_event *ev = NULL;
    if (cmsafe_get_event(ch, &ev))
        die("cmsafe_get_event: %s", strerror(errno));
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    if (cm->event == RDMA_CM_EVENT_REJECTED && want == RDMA_CM_EVENT_ESTABLISHED)
        die("the server rejected the connection (status %d)", cm->status);
    if (cm->event != want || cm->id != id)
        die("got %s (status %d), want %s", rdma_event_str(cm->event), cm->status,
            rdma_event_str(want));
    return ev;
}

enum { SEND_WR = 4, RECV_WR = 4 };

/* The one CQ every QP of this process uses (no work request is ever posted: the connections
 * only carry private data), created on the device of the first resolved id.
 * Not one CQ pair per QP, as rdma_create_qp makes when given none: on Soft-iWARP every CQ and
 * every send or receive queue is a memory mapping of the verbs context, and the 145th live
 * one gets the key 0x90000, which siw (kernel and libsiw alike) also uses as "no mapping"
 * (SIW_INVAL_UOBJ_KEY): libsiw then fails the CQ or QP with a stale errno (ENOSPC here). With
 * two CQs per QP that is the 37th connection; with a shared CQ, the 72nd. */
static struct ibv_cq *cq;

static struct ibv_cq *shared_cq(struct rdma_cm_id *id, unsigned connections)
{
    if (!cq) {
        cq = ibv_create_cq(id->verbs, (int)(connections * (SEND_WR + RECV_WR)), NULL, NULL, 0);
        if (!cq)
            die("ibv_create_cq: %s", strerror(errno));
    }
    return cq;
}

/* Connects a new id on `ch` to `dst` with `token` as private data; returns once ESTABLISHED
 * and the server's echo of the token is checked. */
static struct rdma_cm_id *connect_one(struct rdma_event_channel *ch, struct sockaddr_in *dst,
                                      const char *token, unsigned connections)
{
    struct rdma_cm_id *id = NULL;
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
        die("rdma_create_id: %s", strerror(errno));

    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, RESOLVE_MS))
        die("rdma_resolve_addr: %s", strerror(errno));
    cmsafe_event_release(expect(ch, id, RDMA_CM_EVENT_ADDR_RESOLVED));

    if (rdma_resolve_route(id, RESOLVE_MS))
        die("rdma_resolve_route: %s", strerror(errno));
    cmsafe_event_release(expect(ch, id, RDMA_CM_EVENT_ROUTE_RESOLVED));

    struct ibv_cq *cq = shared_cq(id, connections);
    struct ibv_qp_init_attr qp_attr = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = SEND_WR, .max_recv_wr = RECV_WR, .max_send_sge = 1,
                .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (rdma_create_qp(id, NULL, &qp_attr)) /* NULL: librdmacm's default PD */
        die("rdma_create_qp: %s", strerror(errno));

    /* RoCE carries at most 56 bytes of CONNECT_REQUEST private data (iWARP more); the token
     * fits. */
    struct rdma_conn_param param = {
        .private_data = token,
        .private_data_len = (uint8_t)(strlen(token) + 1),
        .responder_resources = 1,
        .initiator_depth = 1,
        .retry_count = 7,
        .rnr_retry_count = 7,
    };
    if (rdma_connect(id, &param))
        die("rdma_connect: %s", strerror(errno));

    cmsafe_event *ev = expect(ch, id, RDMA_CM_EVENT_ESTABLISHED);
    const struct rdma_conn_param *conn = &cmsafe_event_cm(ev)->param.conn;
    const char *echo = conn->private_data;
    if (!echo || !memchr(echo, '\0', conn->private_data_len) || strcmp(echo, token) != 0)
        die("the server did not echo \"%s\"", token);
    cmsafe_event_release(ev);
    return id;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5)
        die("usage: token_client ADDR PORT SEED [CLIENTS]");
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1)
        die("not an IPv4 address: %s", argv[1]);
    unsigned long long seed = strtoull(argv[3], NULL, 0);
    unsigned n = argc > 4 ? (unsigned)atoi(argv[4]) : 50;
    if (n < 1 || n > MAX_CLIENTS)
        die("CLIENTS must be 1..%d", MAX_CLIENTS);

    signal(SIGALRM, on_timeout); /* never hang: give up after TIMEOUT_SECONDS */
    alarm(TIMEOUT_SECONDS);

    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        die("rdma_create_event_channel: %s", strerror(errno));
    static struct rdma_cm_id *ids[MAX_CLIENTS];

    for (unsigned i = 0; i < n; i++) {
        char token[TOKEN_MAX];
        make_token(token, seed, i);
        ids[i] = connect_one(ch, &dst, token, n);
        ids[i]->context = &ids[i]; /* to find the connection again from its events */
    }
    printf("token_client: %u/%u connections established, each token echoed back by the server\n",
           n, n);

    /* Disconnect all; the server answers each with its own disconnect: then DISCONNECTED. */
    for (unsigned i = 0; i < n; i++)
        if (rdma_disconnect(ids[i]))
            die("rdma_disconnect: %s", strerror(errno));
    unsigned disconnected = 0;
    while (disconnected < n) {
        cmsafe_event *ev = NULL;
        if (cmsafe_get_event(ch, &ev))
            die("cmsafe_get_event: %s", strerror(errno));
        const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
        if (cm->event == RDMA_CM_EVENT_DISCONNECTED) {
            struct rdma_cm_id **slot = cm->id->context;
            rdma_destroy_qp(*slot); /* every QP before its id */
            rdma_destroy_id(*slot);
            *slot = NULL;
            disconnected++;
        } else if (cm->event != RDMA_CM_EVENT_TIMEWAIT_EXIT) { /* RoCE's; iWARP has none */
            die("got %s (status %d) while disconnecting", rdma_event_str(cm->event), cm->status);
        }
        cmsafe_event_release(ev);
    }
    /* The CQ after every QP on it. Its verbs context is librdmacm's and stays open. */
    if (cq && ibv_destroy_cq(cq))
        die("ibv_destroy_cq: %s", strerror(errno));
    rdma_destroy_event_channel(ch);
    printf("token_client: %u/%u disconnected, QPs and ids destroyed\n", disconnected, n);
    return 0;
}
