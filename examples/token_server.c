/* token_server: an RDMA CM server built on cmsafe.
 *
 *   token_server ADDR PORT SEED [CLIENTS]
 *
 * Listens on ADDR:PORT and serves CLIENTS connections (default 50). Each client sends a token in
 * its CONNECT_REQUEST private data, "tok:<index>:<32 hex digits>", the hex digits derived from
 * SEED and the index (token_client does the same). For every request the server
 *   - reads the token from the event's private data, AFTER librdmacm's event was acked:
 *     cmsafe_get_event acks the original before it returns and hands out a copy it owns;
 *   - verifies it: well formed, index in range and not seen before, and equal to the token it
 *     recomputes from SEED;
 *   - accepts with the token as its own private data (the client checks the echo), or rejects.
 * When a client disconnects, the server disconnects too and frees the connection's QP and id.
 * It exits 0 when all CLIENTS connections were verified, accepted, established and disconnected.
 *
 * It runs on RoCE and on iWARP alike: each QP exists before rdma_accept, responder resources and
 * initiator depth are 1 (iWARP refuses 0), the token is read up to its NUL whatever the length
 * of the private data, and no TIMEWAIT_EXIT is awaited. All QPs share one CQ: see shared_cq().
 *
 * Build: cc -std=c11 token_server.c $(pkg-config --cflags --libs cmsafe libibverbs)
 * (libibverbs for the shared CQ, created and destroyed here with ibv_create_cq/ibv_destroy_cq)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cmsafe.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_CLIENTS = 1024, TIMEOUT_SECONDS = 60, TOKEN_MAX = 56 };

/* ---- the token: must match token_client.c ---------------------------------------------- */

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

/* ---- the server ---------------------------------------------------------------------------- */

struct conn {
    struct rdma_cm_id *id; /* NULL once closed */
    bool seen;
};

static struct conn conns[MAX_CLIENTS];
static unsigned long long seed;
static unsigned nclients;
static unsigned verified, accepted, rejected, established, disconnected, failed;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("token_server: FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void on_timeout(int sig)
{
    (void)sig;
    static const char msg[] = "token_server: FAIL: timed out waiting for clients\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(2);
}

enum { SEND_WR = 4, RECV_WR = 4 };

/* The one CQ every QP of this server uses (no work request is ever posted: the connections
 * only carry private data), created on the device of the first request.
 * Not one CQ pair per QP, as rdma_create_qp makes when given none: on Soft-iWARP every CQ and
 * every send or receive queue is a memory mapping of the verbs context, and the 145th live
 * one gets the key 0x90000, which siw (kernel and libsiw alike) also uses as "no mapping"
 * (SIW_INVAL_UOBJ_KEY): libsiw then fails the CQ or QP with a stale errno. With two CQs per
 * QP that is the 37th connection; with a shared CQ, the 72nd. */
static struct ibv_cq *cq;

static struct ibv_cq *shared_cq(struct rdma_cm_id *id)
{
    if (!cq) {
        cq = ibv_create_cq(id->verbs, (int)(nclients * (SEND_WR + RECV_WR)), NULL, NULL, 0);
        if (!cq)
            die("ibv_create_cq: %s", strerror(errno));
    }
    return cq;
}

/* Checks a token from a CONNECT_REQUEST. Returns its client index, or -1 and says why. */
static int verify_token(const unsigned char *pdata, unsigned len)
{
    /* RoCE pads the private data with zeroes to 56 bytes, iWARP delivers the bytes sent: either
     * way the token ends at the first NUL. */
    if (!pdata || !memchr(pdata, '\0', len)) {
        fprintf(stderr, "token_server: FAIL: private data holds no NUL-terminated token\n");
        return -1;
    }
    const char *token = (const char *)pdata;
    char *end = NULL;
    errno = 0;
    unsigned long index = strncmp(token, "tok:", 4) == 0 ? strtoul(token + 4, &end, 10) : 0;
    if (!end || end == token + 4 || *end != ':' || errno) {
        fprintf(stderr, "token_server: FAIL: malformed token \"%s\"\n", token);
        return -1;
    }
    if (index >= nclients) {
        fprintf(stderr, "token_server: FAIL: client index %lu out of range (%u clients)\n", index,
                nclients);
        return -1;
    }
    if (conns[index].seen) {
        fprintf(stderr, "token_server: FAIL: client %lu connected twice\n", index);
        return -1;
    }
    char want[TOKEN_MAX];
    make_token(want, seed, (unsigned)index);
    if (strcmp(token, want) != 0) {
        fprintf(stderr, "token_server: FAIL: client %lu sent \"%s\", want \"%s\"\n", index, token,
                want);
        return -1;
    }
    if (verified == 0)
        printf("token_server: first token: client %lu sent \"%s\": verified\n", index, token);
    return (int)index;
}

static void on_connect_request(struct rdma_cm_id *id, const struct rdma_conn_param *conn)
{
    /* `conn->private_data` is cmsafe's copy: librdmacm's event is already acked, and reading
     * it here is safe. With rdma_get_cm_event this read must come before rdma_ack_cm_event. */
    int index = verify_token(conn->private_data, conn->private_data_len);
    if (index < 0) {
        failed++;
        rejected++;
        if (rdma_reject(id, NULL, 0))
            perror("token_server: rdma_reject");
        rdma_destroy_id(id);
        return;
    }
    verified++;

    struct conn *c = &conns[index];
    c->seen = true;
    c->id = id;
    id->context = c;

    struct ibv_cq *qp_cq = shared_cq(id);
    struct ibv_qp_init_attr qp_attr = {
        .send_cq = qp_cq,
        .recv_cq = qp_cq,
        .cap = {.max_send_wr = SEND_WR, .max_recv_wr = RECV_WR, .max_send_sge = 1,
                .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (rdma_create_qp(id, NULL, &qp_attr)) /* NULL: librdmacm's default PD */
        die("rdma_create_qp: %s", strerror(errno));

    /* Echo the token back (up to its NUL) so the client can check what the server read. */
    const char *token = conn->private_data;
    struct rdma_conn_param accept_param = {
        .private_data = token,
        .private_data_len = (uint8_t)(strlen(token) + 1),
        .responder_resources = 1,
        .initiator_depth = 1,
    };
    if (rdma_accept(id, &accept_param))
        die("rdma_accept: %s", strerror(errno));
    accepted++;
}

static void close_conn(struct conn *c)
{
    rdma_destroy_qp(c->id); /* every QP before its id */
    rdma_destroy_id(c->id); /* does not wait: cmsafe acked every event of this id already */
    c->id = NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5)
        die("usage: token_server ADDR PORT SEED [CLIENTS]");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1)
        die("not an IPv4 address: %s", argv[1]);
    seed = strtoull(argv[3], NULL, 0);
    nclients = argc > 4 ? (unsigned)atoi(argv[4]) : 50;
    if (nclients < 1 || nclients > MAX_CLIENTS)
        die("CLIENTS must be 1..%d", MAX_CLIENTS);

    signal(SIGALRM, on_timeout); /* never hang: give up after TIMEOUT_SECONDS */
    alarm(TIMEOUT_SECONDS);

    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id *listen_id = NULL;
    if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
        die("rdma_create_id: %s", strerror(errno));
    if (rdma_bind_addr(listen_id, (struct sockaddr *)&addr))
        die("rdma_bind_addr %s: %s", argv[1], strerror(errno));
    if (rdma_listen(listen_id, 128))
        die("rdma_listen: %s", strerror(errno));
    printf("token_server: listening on %s:%s for %u clients\n", argv[1], argv[2], nclients);
    fflush(stdout);

    /* One loop for every event: requests, established connections and disconnects. */
    while (disconnected + rejected < nclients) {
        cmsafe_event *ev = NULL;
        if (cmsafe_get_event(ch, &ev))
            die("cmsafe_get_event: %s", strerror(errno));
        const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
        struct conn *c = cm->id->context;

        switch (cm->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST:
            on_connect_request(cm->id, &cm->param.conn);
            break;
        case RDMA_CM_EVENT_ESTABLISHED:
            established++;
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            /* The client disconnected first: answer with our own disconnect, then free. */
            rdma_disconnect(c->id);
            close_conn(c);
            disconnected++;
            break;
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
            fprintf(stderr, "token_server: FAIL: %s (status %d)\n", rdma_event_str(cm->event),
                    cm->status);
            failed++;
            rejected++;
            if (c && c->id)
                close_conn(c);
            break;
        default: /* e.g. TIMEWAIT_EXIT (RoCE only): nothing to do */
            break;
        }
        cmsafe_event_release(ev); /* `cm` and its private data are not used past this point */
    }

    /* The CQ after every QP on it (each connection's was destroyed with it). */
    if (cq && ibv_destroy_cq(cq))
        die("ibv_destroy_cq: %s", strerror(errno));
    rdma_destroy_id(listen_id);
    rdma_destroy_event_channel(ch);

    printf("token_server: verified %u/%u tokens (each read after its CONNECT_REQUEST was acked), "
           "%u accepted, %u established, %u disconnected\n",
           verified, nclients, accepted, established, disconnected);
    bool ok = !failed && verified == nclients && accepted == nclients &&
              established == nclients && disconnected == nclients;
    if (!ok)
        fprintf(stderr, "token_server: FAIL: not every client was verified and served\n");
    return ok ? 0 : 1;
}
