/* The storm's shared code: tokens, clocks, and the server core every storm server runs (see
 * storm.h). The core never fetches or acks an event: each server does that its own way and
 * hands the event's fields to storm_handle. */
#define _GNU_SOURCE
#include "storm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>

const char *storm_prog = "storm";

/* ---- tokens, clocks, messages ----------------------------------------------------------- */

static uint64_t mix64(uint64_t x) /* splitmix64 */
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void storm_token(char out[STORM_TOKEN_MAX], uint64_t seed, unsigned wave, unsigned index)
{
    uint64_t a = mix64(seed ^ ((uint64_t)wave << 40) ^ (2ULL * index + 1)), b = mix64(a);
    snprintf(out, STORM_TOKEN_MAX, "storm:%u:%u:%016llx%016llx", wave, index,
             (unsigned long long)a, (unsigned long long)b);
}

void storm_reply(char out[STORM_REPLY_LEN], unsigned index)
{
    memset(out, 0, STORM_REPLY_LEN);
    snprintf(out, STORM_REPLY_LEN, "ok:%u", index % STORM_MAX_CONNS); /* indexes are below it */
}

static uint64_t clock_us(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t storm_real_us(void) { return clock_us(CLOCK_REALTIME); }
uint64_t storm_mono_us(void) { return clock_us(CLOCK_MONOTONIC); }

/* This process's CPU time so far (user + system), in microseconds. */
static uint64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void storm_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "%s: FAIL: ", storm_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

unsigned long long storm_number(const char *s, const char *what)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || !end || end == s || *end || s[0] == '-')
        storm_die("%s: not a number: \"%s\"", what, s);
    return v;
}

/* ---- the server core -------------------------------------------------------------------- */

/* ---- heartbeats (fault runs): a zero-length SEND each way, receives kept posted ----------- */

/* Every receive's one SGE: a small buffer registered once on the process's one PD. The
 * heartbeats carry no bytes, so every receive may name the same buffer. An SGE, not none:
 * libsiw refuses a receive without one (push_recv_wqe: EINVAL); rxe takes both. */
static char recv_buf[64];
static struct ibv_mr *recv_mr;

/* A provider's error as a positive errno: libsiw returns it negated, rxe positive. */
static int post_error(int rc)
{
    return rc < 0 ? -rc : rc;
}

int storm_post_recv(struct ibv_qp *qp, uint64_t wr_id)
{
    if (!recv_mr) {
        recv_mr = ibv_reg_mr(qp->pd, recv_buf, sizeof recv_buf, IBV_ACCESS_LOCAL_WRITE);
        if (!recv_mr)
            return errno ? errno : ENOMEM;
    }
    struct ibv_sge sge = {.addr = (uintptr_t)recv_buf, .length = sizeof recv_buf,
                          .lkey = recv_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    return post_error(ibv_post_recv(qp, &wr, &bad));
}

void storm_recv_release(void)
{
    if (recv_mr && ibv_dereg_mr(recv_mr))
        storm_die("ibv_dereg_mr: %s", strerror(errno));
    recv_mr = NULL;
}

int storm_post_beat(struct ibv_qp *qp, uint64_t wr_id)
{
    struct ibv_send_wr wr = {.wr_id = wr_id, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    return post_error(ibv_post_send(qp, &wr, &bad));
}

unsigned storm_recvs(struct ibv_context *verbs)
{
    return verbs->device->transport_type == IBV_TRANSPORT_IWARP ? STORM_RECVS_IWARP : STORM_RECVS;
}

void storm_qp_attr(struct ibv_qp_init_attr *attr, struct ibv_cq *cq, unsigned recvs)
{
    *attr = (struct ibv_qp_init_attr){
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 2, .max_recv_wr = recvs, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
}

int storm_cq_size(unsigned conns, unsigned recvs)
{
    unsigned n = 2 * conns * (recvs + 1) + 64;
    return n > 32767 ? 32767 : (int)n;
}

/* ---- the server core -------------------------------------------------------------------- */

/* FREE: a slot with no id. DISCONNECTING: its heartbeat failed, rdma_disconnect was called, the
 * id waits for its DISCONNECTED. */
enum conn_state { FREE, ACCEPTED, ESTABLISHED, DISCONNECTING, CLOSED };

struct conn {
    struct rdma_cm_id *id;
    enum conn_state state;
    unsigned index;
    uint32_t qpn;
    bool send_out;
    bool heard; /* a heartbeat of the client's has arrived */
};

/* One slot per id. A storm wave has one id per connection index; a fault run may have more (a
 * client that retries an index while the server's earlier id for it is still alive). */
enum { SLOTS = 2 * STORM_MAX_CONNS, TALLY_MAX = 64 };
static struct conn conns[SLOTS];
static unsigned free_slots[SLOTS], nfree;
static unsigned char idx_requested[STORM_MAX_CONNS], idx_established[STORM_MAX_CONNS];
static struct rdma_event_channel *channel;
static struct rdma_cm_id *listener;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static uint64_t seed;
static unsigned nconns, nwaves, wave_timeout_s, heartbeat_ms, recvs;
static bool iwarp;
static uint64_t next_beat_us;
static FILE *event_log;

/* This wave's progress; the alarm handler reads these (plain loads of aligned words). */
static volatile unsigned wave, requested, established, destroyed, in_destroy, live, up;
static bool all_established;
static uint64_t first_event_us, last_event_us, last_destroy_us, destroy_max_us;
static uint64_t cpu_start_us, cpu_established_us;
static unsigned disconnected, timewait, other_after, events_wave, beats_failed, stale;
static uint64_t got, acked, events_total;
static unsigned waves_done;

/* This wave's events by type and status. */
struct tally_entry {
    int type, status;
    unsigned count;
};
static struct tally_entry tally[TALLY_MAX];
static unsigned ntally;

void storm_count_get(void) { got++; }
void storm_count_ack(void) { acked++; }

/* Async-signal-safe: appends `v` in decimal to `p`, returns the new end. */
static char *put_uint(char *p, unsigned v)
{
    char digits[12];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = digits[--n];
    return p;
}

static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

/* The wave's bound: if it has not ended in time, say where it stood and fail the run. */
static void on_alarm(int sig)
{
    (void)sig;
    char msg[256], *p = msg;
    p = put_str(p, storm_prog);
    p = put_str(p, ": FAIL: wave ");
    p = put_uint(p, wave);
    p = put_str(p, " did not end within ");
    p = put_uint(p, wave_timeout_s);
    p = put_str(p, " s: requests ");
    p = put_uint(p, requested);
    p = put_str(p, ", established ");
    p = put_uint(p, established);
    p = put_str(p, ", destroyed ");
    p = put_uint(p, destroyed);
    p = put_str(p, " of ");
    p = put_uint(p, nconns);
    p = put_str(p, ", ids alive ");
    p = put_uint(p, live);
    p = put_str(p, in_destroy ? " (blocked inside rdma_destroy_id)\n" : "\n");
    if (write(2, msg, (size_t)(p - msg)) < 0) {
        /* nothing more to do */
    }
    _exit(3);
}

struct rdma_event_channel *storm_server_init(const char *name, int argc, char **argv)
{
    storm_prog = name;
    if (argc != 7 && argc != 8)
        storm_die("usage: %s ADDR PORT SEED CONNS WAVES WAVE_TIMEOUT_S [HEARTBEAT_MS]", name);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1)
        storm_die("not an IPv4 address: %s", argv[1]);
    addr.sin_port = htons((uint16_t)storm_number(argv[2], "PORT"));
    seed = storm_number(argv[3], "SEED");
    nconns = (unsigned)storm_number(argv[4], "CONNS");
    nwaves = (unsigned)storm_number(argv[5], "WAVES");
    wave_timeout_s = (unsigned)storm_number(argv[6], "WAVE_TIMEOUT_S");
    heartbeat_ms = argc > 7 ? (unsigned)storm_number(argv[7], "HEARTBEAT_MS") : 0;
    if (nconns < 1 || nconns > STORM_MAX_CONNS || nwaves < 1 || wave_timeout_s < 1)
        storm_die("CONNS must be 1..%d, WAVES and WAVE_TIMEOUT_S at least 1", STORM_MAX_CONNS);
    const char *log = getenv("STORM_EVENT_LOG");
    if (log && *log) {
        event_log = fopen(log, "w");
        if (!event_log)
            storm_die("STORM_EVENT_LOG %s: %s", log, strerror(errno));
        setvbuf(event_log, NULL, _IOLBF, 0);
    }

    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);

    channel = rdma_create_event_channel();
    if (!channel)
        storm_die("rdma_create_event_channel: %s", strerror(errno));
    if (rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP))
        storm_die("rdma_create_id: %s", strerror(errno));
    if (rdma_bind_addr(listener, (struct sockaddr *)&addr))
        storm_die("rdma_bind_addr %s: %s", argv[1], strerror(errno));
    if (rdma_listen(listener, 1024))
        storm_die("rdma_listen: %s", strerror(errno));
    if (!listener->verbs)
        storm_die("%s is not an RDMA device's address", argv[1]);
    /* One PD and one CQ for every QP: no completion channel (no fd) per connection, so the
     * number of connections is not bounded by RLIMIT_NOFILE. Nothing is posted unless
     * HEARTBEAT_MS is given; then the CQ holds every QP's receives and heartbeat. */
    pd = ibv_alloc_pd(listener->verbs);
    if (!pd)
        storm_die("ibv_alloc_pd: %s", strerror(errno));
    recvs = storm_recvs(listener->verbs);
    iwarp = listener->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
    cq = ibv_create_cq(listener->verbs, heartbeat_ms ? storm_cq_size(nconns, recvs) : 64, NULL, NULL,
                       0);
    if (!cq)
        storm_die("ibv_create_cq: %s", strerror(errno));
    printf("STORM listening server=%s addr=%s port=%s conns=%u waves=%u heartbeat_ms=%u\n", name,
           argv[1], argv[2], nconns, nwaves, heartbeat_ms);
    return channel;
}

void storm_wave_begin(unsigned w)
{
    wave = w;
    requested = established = destroyed = live = up = 0;
    all_established = false;
    first_event_us = last_event_us = last_destroy_us = destroy_max_us = 0;
    disconnected = timewait = other_after = events_wave = beats_failed = stale = 0;
    ntally = 0;
    memset(conns, 0, sizeof conns);
    memset(idx_requested, 0, sizeof idx_requested);
    memset(idx_established, 0, sizeof idx_established);
    for (nfree = 0; nfree < SLOTS; nfree++)
        free_slots[nfree] = SLOTS - 1 - nfree;
    /* The wave's alarm is armed by its first event: a server may wait, idle, for its turn. */
    printf("STORM ready wave=%u us=%llu\n", w, (unsigned long long)storm_real_us());
}

int storm_wave_done(void) { return all_established && live == 0; }

void storm_wave_end(void)
{
    alarm(0);
    uint64_t cpu_end_us = cpu_us();
    printf("STORM wave=%u conns=%u first_event_us=%llu last_event_us=%llu last_destroy_us=%llu "
           "disconnected=%u timewait=%u other=%u destroy_max_us=%llu events=%u "
           "cpu_connect_us=%llu cpu_drain_us=%llu requested=%u destroyed=%u beats_failed=%u "
           "stale=%u\n",
           wave, nconns, (unsigned long long)first_event_us, (unsigned long long)last_event_us,
           (unsigned long long)last_destroy_us, disconnected, timewait, other_after,
           (unsigned long long)destroy_max_us, events_wave,
           (unsigned long long)(cpu_established_us - cpu_start_us),
           (unsigned long long)(cpu_end_us - cpu_established_us), requested, destroyed,
           beats_failed, stale);
    printf("STORM events wave=%u", wave);
    for (unsigned i = 0; i < ntally; i++)
        printf(" %s:%d=%u", rdma_event_str((enum rdma_cm_event_type)tally[i].type),
               tally[i].status, tally[i].count);
    printf("\n");
    waves_done++;
}

/* Verifies a CONNECT_REQUEST's token; returns the connection index. A wrong token is the failure the storm is about (private data read from memory that was not
 * the event's): fatal. */
static int verify_token(const void *pdata, size_t len)
{
    if (!pdata || !len || !memchr(pdata, '\0', len))
        storm_die("wave %u: private data (%zu bytes) holds no NUL-terminated token", wave, len);
    const char *token = pdata;
    unsigned w = 0, index = 0;
    int used = 0;
    if (sscanf(token, "storm:%u:%u:%n", &w, &index, &used) != 2 || used == 0)
        storm_die("wave %u: malformed token \"%s\"", wave, token);
    if (index >= nconns)
        storm_die("wave %u: token \"%s\" is for index %u (%u connections)", wave, token, index,
                  nconns);
    char want[STORM_TOKEN_MAX];
    storm_token(want, seed, w, index);
    if (strcmp(token, want) != 0)
        storm_die("wave %u: connection %u sent \"%s\", want \"%s\"", wave, index, token, want);
    /* A fault run's client moves a connection it lost to the next wave's token, which may
     * reach the server before or after the server's own wave ends: any wave is accepted. */
    if (w != wave && !heartbeat_ms)
        storm_die("wave %u: token \"%s\" is for wave %u", wave, token, w);
    /* A storm client connects each index once; a fault run's client retries failed ones. */
    if (idx_requested[index] && !heartbeat_ms)
        storm_die("wave %u: connection %u requested twice", wave, index);
    return (int)index;
}

const char *storm_wc_name(int status)
{
    static char name[64];
    snprintf(name, sizeof name, "%s", ibv_wc_status_str((enum ibv_wc_status)status));
    for (char *p = name; *p; p++)
        if (*p == ' ')
            *p = '_';
    return name;
}

static void log_line(const char *kind, const char *what, int status, unsigned index)
{
    if (event_log)
        fprintf(event_log, "%s %llu %u %s %d %u\n", kind, (unsigned long long)storm_real_us(),
                wave, what, status, index);
}

static void on_request(struct rdma_cm_id *id, const void *pdata, size_t len)
{
    int index = verify_token(pdata, len);
    if (nfree == 0) { /* more ids alive than twice the connections: refused, counted */
        stale++;
        if (rdma_reject(id, NULL, 0))
            storm_die("wave %u: rdma_reject: %s", wave, strerror(errno));
        if (rdma_destroy_id(id))
            storm_die("wave %u: rdma_destroy_id: %s", wave, strerror(errno));
        return;
    }
    requested++;
    idx_requested[index] = 1;
    struct conn *c = &conns[free_slots[--nfree]];
    c->id = id;
    c->index = (unsigned)index;
    c->state = ACCEPTED;
    c->send_out = false;
    c->heard = false;
    id->context = c;
    live++;

    struct ibv_qp_init_attr attr;
    storm_qp_attr(&attr, cq, recvs);
    if (rdma_create_qp(id, pd, &attr))
        storm_die("wave %u: rdma_create_qp (connection %u of %u): %s", wave, requested, nconns,
                  strerror(errno));
    c->qpn = id->qp->qp_num;
    uint64_t slot = (uint64_t)(c - conns);
    for (unsigned i = 0; heartbeat_ms && i < recvs; i++) {
        int rc = storm_post_recv(id->qp, slot << 1);
        if (rc)
            storm_die("wave %u: ibv_post_recv: %s", wave, strerror(rc));
    }
    char reply[STORM_REPLY_LEN];
    storm_reply(reply, (unsigned)index);
    struct rdma_conn_param param = {
        .private_data = reply,
        .private_data_len = sizeof reply,
        .responder_resources = 1,
        .initiator_depth = 1,
        .rnr_retry_count = 7,
    };
    if (rdma_accept(id, &param))
        storm_die("wave %u: rdma_accept: %s", wave, strerror(errno));
}

static struct conn *conn_of(struct rdma_cm_id *id, int type)
{
    struct conn *c = id ? id->context : NULL;
    if (!c || c < conns || c >= conns + SLOTS || c->id != id)
        storm_die("wave %u: %s for an id that is not one of this wave's connections", wave,
                  rdma_event_str((enum rdma_cm_event_type)type));
    return c;
}

/* Disconnects (answering the peer's DREQ, or sending one), then frees the QP and the id. */
static void close_conn(struct conn *c)
{
    rdma_disconnect(c->id); /* fails harmlessly when the connection is already gone */
    rdma_destroy_qp(c->id); /* every QP before its id */
    uint64_t t0 = storm_mono_us();
    in_destroy = 1;
    if (rdma_destroy_id(c->id))
        storm_die("wave %u: rdma_destroy_id: %s", wave, strerror(errno));
    in_destroy = 0;
    uint64_t dt = storm_mono_us() - t0;
    if (dt > destroy_max_us)
        destroy_max_us = dt;
    if ((c->state == ESTABLISHED || c->state == DISCONNECTING) && --idx_established[c->index] == 0)
        up--;
    c->id = NULL;
    c->state = CLOSED;
    free_slots[nfree++] = (unsigned)(c - conns);
    destroyed++;
    live--;
    last_destroy_us = storm_real_us();
}

/* A heartbeat's failure: the connection is gone as far as this side can tell. Disconnect; the
 * id ends with its DISCONNECTED (the peer's DREP, or the DREQ's timeout). */
static void beat_failed(struct conn *c, int wc_status)
{
    beats_failed++;
    log_line("WC", storm_wc_name(wc_status), wc_status, c->index);
    c->state = DISCONNECTING;
    rdma_disconnect(c->id);
}

int storm_wait_ms(void)
{
    if (!heartbeat_ms)
        return -1;
    uint64_t now = storm_mono_us();
    return now >= next_beat_us ? 0 : (int)((next_beat_us - now + 999) / 1000);
}

void storm_tick(void)
{
    if (!heartbeat_ms)
        return;
    struct ibv_wc wc[32];
    int n;
    while ((n = ibv_poll_cq(cq, 32, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            struct conn *c = &conns[(wc[i].wr_id >> 1) % SLOTS];
            int is_send = (int)(wc[i].wr_id & 1);
            if (!c->id || c->qpn != wc[i].qp_num)
                continue; /* a destroyed QP's flushed work request */
            if (wc[i].status == IBV_WC_SUCCESS) {
                if (is_send)
                    c->send_out = false;
                else {
                    c->heard = true;
                    if (storm_post_recv(c->id->qp, wc[i].wr_id) && c->state == ESTABLISHED)
                        beat_failed(c, IBV_WC_GENERAL_ERR);
                }
            } else {
                if (is_send)
                    c->send_out = false;
                if (c->state == ESTABLISHED)
                    beat_failed(c, wc[i].status);
            }
        }
    }
    if (n < 0)
        storm_die("ibv_poll_cq failed");
    uint64_t now = storm_mono_us();
    if (now < next_beat_us)
        return;
    next_beat_us = now + heartbeat_ms * 1000ull;
    for (unsigned s = 0; s < SLOTS; s++) {
        struct conn *c = &conns[s];
        /* iWARP: the server, MPA's responder, sends its first heartbeat only once the client's
         * first one arrived. siw accepts, and reports ESTABLISHED, as soon as it has sent the
         * MPA reply; a heartbeat right behind the reply reached the client before it was in RDMA
         * mode, and the client's siw failed the connection (CONNECT_ERROR, -EINVAL), even on a
         * clean link. The client sends only after its ESTABLISHED, in RDMA mode. */
        if (c->id && c->state == ESTABLISHED && !c->send_out && (c->heard || !iwarp)) {
            if (storm_post_beat(c->id->qp, ((uint64_t)s << 1) | 1))
                beat_failed(c, IBV_WC_GENERAL_ERR);
            else
                c->send_out = true;
        }
    }
}

int storm_poll_channel(struct rdma_event_channel *ch)
{
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    int rc = poll(&p, 1, storm_wait_ms());
    if (rc < 0 && errno != EINTR)
        storm_die("poll: %s", strerror(errno));
    storm_tick();
    return rc > 0;
}

int storm_closes(int type)
{
    switch (type) {
    case RDMA_CM_EVENT_ADDR_ERROR: /* a client's: the servers never see these two */
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        return 1;
    default:
        return 0;
    }
}

static void count_event(int type, int status)
{
    unsigned i;
    for (i = 0; i < ntally; i++)
        if (tally[i].type == type && tally[i].status == status)
            break;
    if (i == ntally) {
        if (ntally == TALLY_MAX)
            return;
        tally[ntally++] = (struct tally_entry){.type = type, .status = status};
    }
    tally[i].count++;
}

void storm_handle(int type, int status, struct rdma_cm_id *id, const void *pdata,
                  size_t pdata_len)
{
    if (events_wave++ == 0) {
        alarm(wave_timeout_s); /* the wave's bound: from its first event to its last destroy */
        cpu_start_us = cpu_us();
    }
    events_total++;
    count_event(type, status);
    if (all_established) {
        last_event_us = storm_real_us();
        if (!first_event_us)
            first_event_us = last_event_us;
    }
    if (event_log) {
        struct conn *c = id ? id->context : NULL;
        bool ours = c && c >= conns && c < conns + SLOTS && c->id == id;
        log_line("EV", rdma_event_str((enum rdma_cm_event_type)type), status,
                 ours ? c->index : STORM_MAX_CONNS);
    }

    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        if (all_established && !heartbeat_ms)
            storm_die("wave %u: a CONNECT_REQUEST after the wave was established", wave);
        on_request(id, pdata, pdata_len);
        return;
    }
    if (type == RDMA_CM_EVENT_ESTABLISHED) {
        struct conn *c = conn_of(id, type);
        if (c->state != ACCEPTED)
            storm_die("wave %u: ESTABLISHED twice for one connection", wave);
        c->state = ESTABLISHED;
        /* A fault run's client may set up again a connection the server still holds (it has
         * not noticed the loss yet): two ids for one index, until the old one ends. */
        if (idx_established[c->index] && !heartbeat_ms)
            storm_die("wave %u: connection %u established on two ids at once", wave, c->index);
        established++;
        if (idx_established[c->index]++)
            return;
        /* Every connection up at once (a fault run's may have been lost and set up again). */
        if (++up == nconns && !all_established) {
            all_established = true;
            cpu_established_us = cpu_us();
            printf("STORM established wave=%u conns=%u us=%llu\n", wave, nconns,
                   (unsigned long long)storm_real_us());
        }
        return;
    }
    if (storm_closes(type)) {
        struct conn *c = conn_of(id, type);
        if (!all_established && !heartbeat_ms)
            storm_die("wave %u: %s (status %d) before every connection was established "
                      "(%u of %u)", wave, rdma_event_str((enum rdma_cm_event_type)type), status,
                      established, nconns);
        if (type == RDMA_CM_EVENT_DISCONNECTED)
            disconnected++;
        else
            other_after++;
        /* A fault run's index that failed before it was established may be requested again. */
        if (c->state == ACCEPTED && heartbeat_ms)
            idx_requested[c->index] = 0;
        close_conn(c);
        return;
    }
    if (type == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
        timewait++; /* only for an id still alive: the storm servers destroy on DISCONNECTED */
        return;
    }
    other_after++;
    fprintf(stderr, "%s: wave %u: unexpected %s (status %d)\n", storm_prog, wave,
            rdma_event_str((enum rdma_cm_event_type)type), status);
}

int storm_server_finish(void)
{
    int rc = 0;
    if (waves_done != nwaves) {
        fprintf(stderr, "%s: FAIL: %u of %u waves ended\n", storm_prog, waves_done, nwaves);
        rc = 1;
    }
    if (rdma_destroy_id(listener))
        storm_die("rdma_destroy_id(listener): %s", strerror(errno));
    storm_recv_release();
    if (ibv_destroy_cq(cq))
        storm_die("ibv_destroy_cq: %s", strerror(errno));
    if (ibv_dealloc_pd(pd))
        storm_die("ibv_dealloc_pd: %s", strerror(errno));
    rdma_destroy_event_channel(channel);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* ru_maxrss: the peak resident set, in KiB */
    printf("STORM done server=%s waves=%u conns=%u events=%llu got=%llu acked=%llu maxrss_kb=%ld\n",
           storm_prog, waves_done, nconns, (unsigned long long)events_total, (unsigned long long)got,
           (unsigned long long)acked, ru.ru_maxrss);
    if (got != acked) {
        fprintf(stderr, "%s: FAIL: %llu events fetched, %llu acked\n", storm_prog,
                (unsigned long long)got, (unsigned long long)acked);
        rc = 1;
    }
    return rc;
}
