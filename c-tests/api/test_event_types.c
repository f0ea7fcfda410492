/* Every event type the Soft-RoCE guest can provoke, fetched through cmsafe, with its real status,
 * status kind, private data, addresses and describe line:
 *   ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_REQUEST, ESTABLISHED, DISCONNECTED, TIMEWAIT_EXIT (RC);
 *   REJECTED by the consumer (IB reject reason 28, with data) and by the stack (no listener:
 *   reason 8, no user data); ADDR_ERROR (ARP on, an address nobody has: -110 after the timeout);
 *   a UD exchange in RDMA_PS_UDP (SIDR: CONNECT_REQUEST and ESTABLISHED through param.ud).
 * Every event is also checked for: sequence number strictly increasing, fetch time inside the
 * fetch call, accessors agreeing with cmsafe_event_cm, and by_type counters matching.
 *
 * On iWARP (Soft-iWARP) the same program expects that transport's answers (c-tests/transport.h):
 * private data as sent, no TIMEWAIT_EXIT (an id's last event is DISCONNECTED), the consumer
 * REJECTED as -ECONNRESET, the no-listener case as rdma_connect's own ECONNREFUSED (no event),
 * and no UD: those steps are skipped, each with its reason. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7700, NOLISTEN_PORT = 7701, UD_PORT = 7702, ADDR_ERROR_PORT = 7703 };
#define UNUSED_ADDR "192.0.2.77" /* in the rxe netdev's 192.0.2.0/24; no host has it */

/* A recognizable secret in the private data: describe must never print it. */
static const char TOKEN[] = "TOKEN=q7Zx-bearer-secret-4411";

static struct in_addr guest_addr;
/* The transport of the listen id's device, set in main before the first step. */
static enum cm_transport tr;
static uint64_t last_seq;
static uint64_t seen_by_type[CMSAFE_EVENT_TYPE_SLOTS];

/* Fetches the next event on `ch` (type `want`) and checks what every event must satisfy.
 * `ud`: the id is a UD id, so the private data is in param.ud. */
static cmsafe_event *fetch(struct rdma_event_channel *ch, enum rdma_cm_event_type want, int ud)
{
    uint64_t before = cm_coarse_now_ns();
    cmsafe_event *ev = cm_expect_within(ch, want, 10000);
    uint64_t after = cm_coarse_now_ns();
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    const char *name = rdma_event_str(want);
    REQUIRE(cm != NULL, "%s: cmsafe_event_cm is NULL", name);
    seen_by_type[want]++;

    uint64_t seq = cmsafe_event_seq(ev);
    CHECK(seq > last_seq, "%s: seq %llu after %llu: not strictly increasing", name,
          (unsigned long long)seq, (unsigned long long)last_seq);
    last_seq = seq;
    uint64_t t = cmsafe_event_time_ns(ev);
    CHECK(t >= before && t <= after, "%s: time_ns %llu outside the fetch [%llu, %llu]", name,
          (unsigned long long)t, (unsigned long long)before, (unsigned long long)after);

    CHECK_EQ_INT(cmsafe_event_type(ev), cm->event);
    CHECK_EQ_INT(cmsafe_event_status(ev), cm->status);
    CHECK(cmsafe_event_id(ev) == cm->id && cm->id != NULL, "%s: cmsafe_event_id", name);
    CHECK(cmsafe_event_listen_id(ev) == cm->listen_id, "%s: cmsafe_event_listen_id", name);

    /* The view's private data is the buffer's bytes, or NULL/0 when there is no buffer. */
    const void *vp = ud ? cm->param.ud.private_data : cm->param.conn.private_data;
    unsigned vlen = ud ? cm->param.ud.private_data_len : cm->param.conn.private_data_len;
    const cmsafe_buf *buf = cmsafe_event_private_data(ev);
    if (buf) {
        CHECK(cmsafe_buf_data(buf) == vp, "%s: view's private_data is not the buffer's bytes",
              name);
        CHECK_EQ_INT(cmsafe_buf_len(buf), vlen);
    } else {
        CHECK(vp == NULL && vlen == 0, "%s: no buffer, but the view has %p/%u", name, vp, vlen);
    }
    return ev;
}

/* `sa` is $RXE_ADDR with `port` (any nonzero port when `port` is 0); returns the port. */
static unsigned short check_addr(const struct sockaddr *sa, unsigned short port, const char *what)
{
    struct in_addr a;
    unsigned short p = 0;
    REQUIRE(sa != NULL, "%s: NULL address", what);
    CHECK(cm_sin(sa, &a, &p), "%s: family %d, want AF_INET", what, sa->sa_family);
    CHECK(a.s_addr == guest_addr.s_addr, "%s: address %s, want $RXE_ADDR", what, inet_ntoa(a));
    if (port)
        CHECK(p == port, "%s: port %u, want %u", what, p, port);
    else
        CHECK(p != 0, "%s: port 0", what);
    return p;
}

/* The event's src and dst addresses are $RXE_ADDR:src_port and $RXE_ADDR:dst_port. */
static void check_addrs(const cmsafe_event *ev, unsigned short src_port, unsigned short dst_port,
                        const char *what)
{
    char w[96];
    snprintf(w, sizeof w, "%s src", what);
    check_addr(cmsafe_event_src_addr(ev), src_port, w);
    snprintf(w, sizeof w, "%s dst", what);
    check_addr(cmsafe_event_dst_addr(ev), dst_port, w);
}

static void check_status(const cmsafe_event *ev, int status, cmsafe_status_kind kind,
                         const char *what)
{
    CHECK(cmsafe_event_status(ev) == status, "%s: status %d, want %d", what,
          cmsafe_event_status(ev), status);
    CHECK(cmsafe_event_status_kind(ev) == kind, "%s: status kind %d, want %d", what,
          (int)cmsafe_event_status_kind(ev), (int)kind);
}

/* The private data, through both the view and the buffer: `sent` then zeros, `want_len` long. */
static void check_pdata(const cmsafe_event *ev, int ud, const void *sent, size_t sent_len,
                        size_t want_len, const char *what)
{
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    const unsigned char *vp = ud ? cm->param.ud.private_data : cm->param.conn.private_data;
    size_t vlen = ud ? cm->param.ud.private_data_len : cm->param.conn.private_data_len;
    CHECK(cm_bytes_are(vp, vlen, sent, sent_len, want_len),
          "%s: view private data (len %zu) is not the %zu bytes sent then zeros to %zu", what,
          vlen, sent_len, want_len);
    const cmsafe_buf *buf = cmsafe_event_private_data(ev);
    /* None to hold (iWARP, nothing sent): no buffer, as for an event without private data. */
    if (want_len == 0)
        CHECK(buf == NULL, "%s: a private data buffer of %zu bytes, want none", what,
              cmsafe_buf_len(buf));
    else
        CHECK(buf != NULL, "%s: no private data buffer", what);
    CHECK(cm_bytes_are(cmsafe_buf_data(buf), cmsafe_buf_len(buf), sent, sent_len, want_len),
          "%s: buffer (len %zu) is not the %zu bytes sent then zeros to %zu", what,
          cmsafe_buf_len(buf), sent_len, want_len);
}

static void check_no_pdata(const cmsafe_event *ev, const char *what)
{
    CHECK(cmsafe_event_private_data(ev) == NULL, "%s: has a private data buffer", what);
}

/* The describe line holds `needle`. */
static void check_line_has(const char *line, const char *needle, const char *what)
{
    CHECK(strstr(line, needle) != NULL, "%s: describe line lacks \"%s\": %s", what, needle, line);
}

static void describe(const cmsafe_event *ev, char *line, size_t len)
{
    int n = cmsafe_event_describe(ev, line, len);
    REQUIRE(n > 0 && (size_t)n < len, "cmsafe_event_describe: %d (%s)", n, strerror(errno));
    CHECK_EQ_INT(strlen(line), n);
}

/* Everything cmsafe_event_describe promises, on a CONNECT_REQUEST carrying TOKEN. */
static void check_describe(const cmsafe_event *creq, unsigned short client_port)
{
    char line[512], want[64];
    describe(creq, line, sizeof line);
    fprintf(stderr, "describe: %s\n", line);
    snprintf(want, sizeof want, "seq=%llu ", (unsigned long long)cmsafe_event_seq(creq));
    check_line_has(line, want, "CONNECT_REQUEST");
    check_line_has(line, "CONNECT_REQUEST", "CONNECT_REQUEST");
    check_line_has(line, "status=0 (ok)", "CONNECT_REQUEST");
    snprintf(want, sizeof want, "private_data_len=%u", cm_req_len(tr, 40));
    check_line_has(line, want, "CONNECT_REQUEST");
    snprintf(want, sizeof want, "%s:%u", getenv("RXE_ADDR"), PORT);
    check_line_has(line, want, "CONNECT_REQUEST src");
    snprintf(want, sizeof want, "%s:%u", getenv("RXE_ADDR"), client_port);
    check_line_has(line, want, "CONNECT_REQUEST dst");
    snprintf(want, sizeof want, "%p", (void *)cmsafe_event_id(creq));
    check_line_has(line, want, "CONNECT_REQUEST id");
    snprintf(want, sizeof want, "%p", (void *)cmsafe_event_listen_id(creq));
    check_line_has(line, want, "CONNECT_REQUEST listen id");
    /* Never the bytes: not the token, not a piece of it, not its hex. */
    CHECK(strstr(line, TOKEN) == NULL, "describe printed the private data: %s", line);
    CHECK(strstr(line, "q7Zx") == NULL, "describe printed part of the private data: %s", line);
    char hex[2 * 8 + 1];
    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)TOKEN[i]);
    CHECK(strstr(line, hex) == NULL, "describe printed the private data in hex: %s", line);

    /* snprintf-like: the whole length whatever the buffer, cut and NUL-terminated. */
    int full = (int)strlen(line);
    CHECK_EQ_INT(cmsafe_event_describe(creq, NULL, 0), full);
    char small[24];
    memset(small, 'Z', sizeof small);
    CHECK_EQ_INT(cmsafe_event_describe(creq, small, 10), full);
    CHECK(small[9] == '\0' && memcmp(small, line, 9) == 0,
          "cut to 10: want the first 9 bytes and a NUL, got \"%.10s\"", small);
    int untouched = 1;
    for (size_t i = 10; i < sizeof small; i++)
        untouched &= small[i] == 'Z';
    CHECK(untouched, "describe wrote past the length it was given");
    memset(small, 'Z', sizeof small);
    CHECK_EQ_INT(cmsafe_event_describe(creq, small, 1), full);
    CHECK(small[0] == '\0' && small[1] == 'Z', "len 1: want just the NUL");
    memset(small, 'Z', sizeof small);
    CHECK_EQ_INT(cmsafe_event_describe(creq, small, 0), full);
    CHECK(small[0] == 'Z', "len 0: wrote into the buffer");
    char exact[512];
    CHECK_EQ_INT(cmsafe_event_describe(creq, exact, (size_t)full + 1), full);
    CHECK(strcmp(exact, line) == 0, "len full+1: not the whole line");
    CHECK_EQ_INT(cmsafe_event_describe(creq, exact, (size_t)full), full);
    CHECK(strlen(exact) == (size_t)full - 1 && memcmp(exact, line, (size_t)full - 1) == 0,
          "len full: want the line less its last byte");
    errno = 0;
    CHECK_EQ_INT(cmsafe_event_describe(creq, NULL, 5), -1);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK_EQ_INT(cmsafe_event_describe(NULL, exact, sizeof exact), -1);
    CHECK_EQ_INT(errno, EINVAL);
}

/* A client id on `cch`: address and route resolved (both events checked), an RC QP. */
static struct rdma_cm_id *client_rc(struct rdma_event_channel *cch, unsigned short port,
                                    unsigned short *client_port)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(port);
    REQUIRE(rdma_create_id(cch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
            strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    cmsafe_event *ev = fetch(cch, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    check_status(ev, 0, CMSAFE_STATUS_KIND_OK, "ADDR_RESOLVED");
    CHECK(cmsafe_event_id(ev) == id, "ADDR_RESOLVED is for the client id");
    CHECK(cmsafe_event_listen_id(ev) == NULL, "ADDR_RESOLVED has a listen id");
    check_no_pdata(ev, "ADDR_RESOLVED");
    *client_port = check_addr(cmsafe_event_src_addr(ev), 0, "ADDR_RESOLVED src");
    check_addr(cmsafe_event_dst_addr(ev), port, "ADDR_RESOLVED dst");
    CHECK_EQ_INT(ntohs(rdma_get_src_port(id)), *client_port);
    cmsafe_event_release(ev);

    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    ev = fetch(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    check_status(ev, 0, CMSAFE_STATUS_KIND_OK, "ROUTE_RESOLVED");
    CHECK(cmsafe_event_id(ev) == id, "ROUTE_RESOLVED is for the client id");
    check_no_pdata(ev, "ROUTE_RESOLVED");
    check_addrs(ev, *client_port, port, "ROUTE_RESOLVED");
    cmsafe_event_release(ev);
    rxe_create_qp(id);
    return id;
}

/* RC: CONNECT_REQUEST, ESTABLISHED (both sides), DISCONNECTED, TIMEWAIT_EXIT (IB/RoCE only); the
 * addresses outlive the ids; describe. */
static void rc_connection(struct rdma_event_channel *sch, struct rdma_event_channel *cch,
                          struct rdma_cm_id *listen_id)
{
    STEP("RC: connect with a token, accept with data");
    unsigned char req[40], rep[120];
    memset(req, 0, sizeof req);
    memcpy(req, TOKEN, sizeof TOKEN);
    cm_fill(rep, sizeof rep, 91);
    unsigned short cport = 0;
    struct rdma_cm_id *client = client_rc(cch, PORT, &cport);
    cm_connect(client, req, sizeof req);

    cmsafe_event *creq = fetch(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
    check_status(creq, 0, CMSAFE_STATUS_KIND_OK, "CONNECT_REQUEST");
    struct rdma_cm_id *child = cmsafe_event_id(creq);
    CHECK(cmsafe_event_listen_id(creq) == listen_id, "CONNECT_REQUEST listen_id");
    CHECK(child != listen_id && child != client, "CONNECT_REQUEST id is a new id");
    check_pdata(creq, 0, req, sizeof req, cm_req_len(tr, sizeof req), "CONNECT_REQUEST");
    check_addrs(creq, PORT, cport, "CONNECT_REQUEST");
    check_describe(creq, cport);

    rxe_create_qp(child);
    cm_accept(child, rep, sizeof rep);
    cmsafe_event *cest = fetch(cch, RDMA_CM_EVENT_ESTABLISHED, 0);
    check_status(cest, 0, CMSAFE_STATUS_KIND_OK, "client ESTABLISHED");
    CHECK(cmsafe_event_id(cest) == client, "client ESTABLISHED is for the client id");
    CHECK(cmsafe_event_listen_id(cest) == NULL, "client ESTABLISHED has a listen id");
    check_pdata(cest, 0, rep, sizeof rep, cm_rep_len(tr, sizeof rep), "client ESTABLISHED");
    check_addrs(cest, cport, PORT, "client ESTABLISHED");
    cmsafe_event *sest = fetch(sch, RDMA_CM_EVENT_ESTABLISHED, 0);
    check_status(sest, 0, CMSAFE_STATUS_KIND_OK, "server ESTABLISHED");
    CHECK(cmsafe_event_id(sest) == child, "server ESTABLISHED is for the child id");
    CHECK(cmsafe_event_listen_id(sest) == NULL, "server ESTABLISHED has a listen id");
    check_no_pdata(sest, "server ESTABLISHED"); /* the RTU carries none (observed: len 0) */
    check_addrs(sest, PORT, cport, "server ESTABLISHED");

    STEP("RC: disconnect, then TIMEWAIT_EXIT on both sides (%s)",
         cm_has_timewait(tr) ? "IB/RoCE" : "none on iWARP");
    REQUIRE(rdma_disconnect(client) == 0, "rdma_disconnect: %s", strerror(errno));
    cmsafe_event *sdisc = fetch(sch, RDMA_CM_EVENT_DISCONNECTED, 0);
    check_status(sdisc, 0, CMSAFE_STATUS_KIND_OK, "server DISCONNECTED");
    CHECK(cmsafe_event_id(sdisc) == child, "server DISCONNECTED is for the child id");
    check_no_pdata(sdisc, "server DISCONNECTED");
    check_addrs(sdisc, PORT, cport, "server DISCONNECTED");
    REQUIRE(rdma_disconnect(child) == 0, "rdma_disconnect(child): %s", strerror(errno));
    cmsafe_event *cdisc = fetch(cch, RDMA_CM_EVENT_DISCONNECTED, 0);
    check_status(cdisc, 0, CMSAFE_STATUS_KIND_OK, "client DISCONNECTED");
    CHECK(cmsafe_event_id(cdisc) == client, "client DISCONNECTED is for the client id");
    check_no_pdata(cdisc, "client DISCONNECTED");
    check_addrs(cdisc, cport, PORT, "client DISCONNECTED");
    cmsafe_event *ctw = NULL, *stw = NULL;
    if (cm_has_timewait(tr)) {
        /* Timewait lasts about 2.2 s on this stack (measured). */
        ctw = fetch(cch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
        check_status(ctw, 0, CMSAFE_STATUS_KIND_OK, "client TIMEWAIT_EXIT");
        CHECK(cmsafe_event_id(ctw) == client, "client TIMEWAIT_EXIT is for the client id");
        check_no_pdata(ctw, "client TIMEWAIT_EXIT");
        check_addrs(ctw, cport, PORT, "client TIMEWAIT_EXIT");
        stw = fetch(sch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
        check_status(stw, 0, CMSAFE_STATUS_KIND_OK, "server TIMEWAIT_EXIT");
        CHECK(cmsafe_event_id(stw) == child, "server TIMEWAIT_EXIT is for the child id");
        check_addrs(stw, PORT, cport, "server TIMEWAIT_EXIT");
    } else {
        /* The iWARP CM has no timewait: DISCONNECTED was each id's last event. Longer than
         * RoCE's 2.2 s of timewait, so a TIMEWAIT_EXIT that did come would be seen. */
        cm_quiet(cch, 3000);
        cm_quiet(sch, 100);
    }

    STEP("RC: the copies' addresses after rdma_destroy_id");
    struct sockaddr_storage csrc, cdst;
    memcpy(&csrc, cmsafe_event_src_addr(cest), sizeof csrc);
    memcpy(&cdst, cmsafe_event_dst_addr(cest), sizeof cdst);
    rdma_destroy_qp(child);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(child)");
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(client)");
    /* The ids are freed (ASan would report a read of them): the copies still hold them. */
    check_addrs(cest, cport, PORT, "client ESTABLISHED after destroy");
    if (ctw)
        check_addrs(ctw, cport, PORT, "client TIMEWAIT_EXIT after destroy");
    check_addrs(creq, PORT, cport, "CONNECT_REQUEST after destroy");
    if (stw)
        check_addrs(stw, PORT, cport, "server TIMEWAIT_EXIT after destroy");
    CHECK(memcmp(&csrc, cmsafe_event_src_addr(cest), sizeof csrc) == 0 &&
              memcmp(&cdst, cmsafe_event_dst_addr(cest), sizeof cdst) == 0,
          "addresses changed after rdma_destroy_id");
    check_pdata(creq, 0, req, sizeof req, cm_req_len(tr, sizeof req),
                "CONNECT_REQUEST after destroy");
    cmsafe_event *all[] = {creq, cest, sest, sdisc, cdisc, ctw, stw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            cmsafe_event_release(all[i]);
}

/* REJECTED twice: by the consumer with data (28; iWARP -ECONNRESET), by the stack for lack of a
 * listener (8; on iWARP rdma_connect itself fails with ECONNREFUSED, and no event comes). */
static void rejections(struct rdma_event_channel *sch, struct rdma_event_channel *cch)
{
    STEP("REJECTED by the consumer, with 20 bytes");
    unsigned char rej[20];
    cm_fill(rej, sizeof rej, 201);
    unsigned short cport = 0;
    struct rdma_cm_id *client = client_rc(cch, PORT, &cport);
    cm_connect(client, "reject me", 9);
    cmsafe_event *creq = fetch(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
    check_pdata(creq, 0, "reject me", 9, cm_req_len(tr, 9), "CONNECT_REQUEST to reject");
    struct rdma_cm_id *child = cmsafe_event_id(creq);
    cmsafe_event_release(creq);
    cm_reject(child, rej, sizeof rej);
    cmsafe_event *rejected = fetch(cch, RDMA_CM_EVENT_REJECTED, 0);
    const int iwarp = tr == CM_TRANSPORT_IWARP;
    check_status(rejected, cm_consumer_reject_status(tr),
                 iwarp ? CMSAFE_STATUS_KIND_IWARP_REJECT : CMSAFE_STATUS_KIND_IB_REJECT_REASON,
                 "consumer REJECTED");
    const char *reason = cmsafe_reject_reason_str(cmsafe_event_status(rejected));
    if (iwarp)
        CHECK(reason == NULL, "reason name %s for an iWARP errno", reason);
    else
        CHECK(reason && strcmp(reason, "IB_CM_REJ_CONSUMER_DEFINED") == 0, "reason name %s",
              reason ? reason : "(null)");
    CHECK(cmsafe_event_id(rejected) == client, "REJECTED is for the client id");
    check_pdata(rejected, 0, rej, sizeof rej, cm_rej_len(tr, sizeof rej), "consumer REJECTED");
    check_addrs(rejected, cport, PORT, "consumer REJECTED");
    char line[512], want[64];
    describe(rejected, line, sizeof line);
    check_line_has(line, "REJECTED", "consumer REJECTED");
    check_line_has(line, iwarp ? "-104 (ECONNRESET" : "28 (IB_CM_REJ_CONSUMER_DEFINED)",
                   "consumer REJECTED");
    snprintf(want, sizeof want, "private_data_len=%u", cm_rej_len(tr, sizeof rej));
    check_line_has(line, want, "consumer REJECTED");
    cmsafe_event_release(rejected);
    /* The rejecting side gets no event for it. */
    cm_quiet(sch, 300);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(rejected child)");
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(rejected client)");

    STEP("REJECTED by the stack: no listener on the port");
    client = client_rc(cch, NOLISTEN_PORT, &cport);
    if (iwarp) {
        /* iWARP's CM connects over TCP: the refused connect fails rdma_connect itself. */
        struct rdma_conn_param cp = {.private_data = "anyone there?",
                                     .private_data_len = 13,
                                     .responder_resources = 1,
                                     .initiator_depth = 1};
        errno = 0;
        int rc = rdma_connect(client, &cp);
        int e = errno;
        CHECK(rc == -1 && e == ECONNREFUSED, "no listener: rdma_connect %d (%s), want -1/%s", rc,
              strerrorname_np(e), strerrorname_np(ECONNREFUSED));
        cm_quiet(cch, 300);
        rdma_destroy_qp(client);
        CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(no-listener client)");
        return;
    }
    cm_connect(client, "anyone there?", 13);
    /* The CM's own reject, not a timeout (which would be UNREACHABLE, -ETIMEDOUT): the status
     * and its reason say which, whatever the guest's speed. */
    rejected = fetch(cch, RDMA_CM_EVENT_REJECTED, 0);
    check_status(rejected, 8, CMSAFE_STATUS_KIND_IB_REJECT_REASON, "no-listener REJECTED");
    reason = cmsafe_reject_reason_str(cmsafe_event_status(rejected));
    CHECK(reason && strcmp(reason, "IB_CM_REJ_INVALID_SERVICE_ID") == 0, "reason name %s",
          reason ? reason : "(null)");
    CHECK(cmsafe_event_id(rejected) == client, "no-listener REJECTED is for the client id");
    /* No user data: the REJ's whole 148-byte area, all zero (observed on this stack). */
    check_pdata(rejected, 0, NULL, 0, CM_REJ_ROOM, "no-listener REJECTED");
    check_addrs(rejected, cport, NOLISTEN_PORT, "no-listener REJECTED");
    describe(rejected, line, sizeof line);
    check_line_has(line, "8 (IB_CM_REJ_INVALID_SERVICE_ID)", "no-listener REJECTED");
    cmsafe_event_release(rejected);
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(no-listener client)");
}

/* UD in RDMA_PS_UDP, like udaddy: SIDR REQ/REP through param.ud. */
static void ud_exchange(struct rdma_event_channel *sch, struct rdma_event_channel *cch)
{
    STEP("UD: resolve, connect with 24 bytes, accept with 30 bytes");
    unsigned char req[24], rep[30];
    cm_fill(req, sizeof req, 17);
    cm_fill(rep, sizeof rep, 171);
    struct rdma_cm_id *listen_id = rxe_listen(sch, UD_PORT, RDMA_PS_UDP, 8);
    struct rdma_cm_id *client = NULL;
    struct sockaddr_in dst = rxe_addr(UD_PORT);
    REQUIRE(rdma_create_id(cch, &client, NULL, RDMA_PS_UDP) == 0, "rdma_create_id(UDP): %s",
            strerror(errno));
    CHECK_EQ_INT(client->qp_type, IBV_QPT_UD);
    REQUIRE(rdma_resolve_addr(client, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    cmsafe_event *ev = fetch(cch, RDMA_CM_EVENT_ADDR_RESOLVED, 1);
    check_status(ev, 0, CMSAFE_STATUS_KIND_OK, "UD ADDR_RESOLVED");
    check_no_pdata(ev, "UD ADDR_RESOLVED");
    unsigned short cport = check_addr(cmsafe_event_src_addr(ev), 0, "UD ADDR_RESOLVED src");
    cmsafe_event_release(ev);
    REQUIRE(rdma_resolve_route(client, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    ev = fetch(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, 1);
    check_status(ev, 0, CMSAFE_STATUS_KIND_OK, "UD ROUTE_RESOLVED");
    check_addrs(ev, cport, UD_PORT, "UD ROUTE_RESOLVED");
    cmsafe_event_release(ev);

    struct ibv_qp_init_attr attr = {
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_UD,
    };
    REQUIRE(rdma_create_qp(client, NULL, &attr) == 0, "rdma_create_qp(UD): %s", strerror(errno));
    struct rdma_conn_param cp = {.private_data = req, .private_data_len = sizeof req};
    REQUIRE(rdma_connect(client, &cp) == 0, "rdma_connect(UD): %s", strerror(errno));

    cmsafe_event *creq = fetch(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 1);
    check_status(creq, 0, CMSAFE_STATUS_KIND_OK, "UD CONNECT_REQUEST");
    struct rdma_cm_id *child = cmsafe_event_id(creq);
    CHECK(cmsafe_event_listen_id(creq) == listen_id, "UD CONNECT_REQUEST listen_id");
    CHECK_EQ_INT(child->qp_type, IBV_QPT_UD);
    /* A SIDR REQ's private data area, less the IP CM header: 180 bytes (observed). */
    check_pdata(creq, 1, req, sizeof req, 180, "UD CONNECT_REQUEST");
    check_addrs(creq, UD_PORT, cport, "UD CONNECT_REQUEST");
    cmsafe_event_release(creq);

    REQUIRE(rdma_create_qp(child, NULL, &attr) == 0, "rdma_create_qp(UD child): %s",
            strerror(errno));
    /* rdma_conn_param has no qkey: for RDMA_PS_UDP the kernel answers with RDMA_UDP_QKEY. */
    struct rdma_conn_param ap = {.private_data = rep, .private_data_len = sizeof rep};
    REQUIRE(rdma_accept(child, &ap) == 0, "rdma_accept(UD): %s", strerror(errno));
    cmsafe_event *est = fetch(cch, RDMA_CM_EVENT_ESTABLISHED, 1);
    check_status(est, 0, CMSAFE_STATUS_KIND_OK, "UD ESTABLISHED");
    CHECK(cmsafe_event_id(est) == client, "UD ESTABLISHED is for the client id");
    /* A SIDR REP's private data area: 136 bytes (observed). */
    check_pdata(est, 1, rep, sizeof rep, 136, "UD ESTABLISHED");
    check_addrs(est, cport, UD_PORT, "UD ESTABLISHED");
    /* The server accepts SIDR without an event of its own. */
    cm_quiet(sch, 300);

    STEP("UD: the copy's param.ud after the ids are gone");
    uint32_t child_qpn = child->qp->qp_num;
    rdma_destroy_qp(child);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(UD child)");
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(UD client)");
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(UD listen)");
    const struct rdma_ud_param *ud = &cmsafe_event_cm(est)->param.ud;
    CHECK(ud->qp_num == child_qpn, "UD ESTABLISHED qp_num %u, want the server's %u", ud->qp_num,
          child_qpn);
    CHECK(ud->qkey == RDMA_UDP_QKEY, "UD ESTABLISHED qkey %#x, want %#x", ud->qkey,
          (unsigned)RDMA_UDP_QKEY);
    /* The address handle attributes, held by value: RoCE is global, the dgid the server's
     * IPv4-mapped address. */
    CHECK(ud->ah_attr.is_global == 1, "UD ESTABLISHED ah_attr.is_global %u", ud->ah_attr.is_global);
    const uint8_t *gid = ud->ah_attr.grh.dgid.raw;
    CHECK(gid[10] == 0xff && gid[11] == 0xff && memcmp(gid + 12, &guest_addr.s_addr, 4) == 0,
          "UD ESTABLISHED dgid is not ::ffff:$RXE_ADDR");
    check_pdata(est, 1, rep, sizeof rep, 136, "UD ESTABLISHED after destroy");
    check_addrs(est, cport, UD_PORT, "UD ESTABLISHED after destroy");
    cmsafe_event_release(est);
}

static void set_arp(const char *onoff)
{
    const char *dev = getenv("RXE_NETDEV");
    REQUIRE(dev != NULL, "RXE_NETDEV is not set (run under scripts/rxe-vm)");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ip link set %s arp %s", dev, onoff);
    REQUIRE(system(cmd) == 0, "%s failed", cmd);
}

/* ADDR_ERROR: with ARP on, an address of the subnet nobody has times out. */
static void addr_error(struct rdma_event_channel *cch)
{
    STEP("ADDR_ERROR: ARP on, resolve " UNUSED_ADDR " with a 2000 ms timeout");
    set_arp("on");
    struct rdma_cm_id *id = NULL;
    REQUIRE(rdma_create_id(cch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
            strerror(errno));
    struct sockaddr_in dst = rxe_addr(ADDR_ERROR_PORT);
    REQUIRE(inet_pton(AF_INET, UNUSED_ADDR, &dst.sin_addr) == 1, "inet_pton");
    uint64_t t0 = cm_now_ns();
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    cmsafe_event *ev = fetch(cch, RDMA_CM_EVENT_ADDR_ERROR, 0);
    double ms = cm_ms_since(t0);
    CHECK(ms >= 1900 && ms < 8000, "ADDR_ERROR after %.0f ms, want about 2000", ms);
    check_status(ev, -ETIMEDOUT, CMSAFE_STATUS_KIND_ERRNO, "ADDR_ERROR");
    CHECK(cmsafe_event_id(ev) == id, "ADDR_ERROR is for the id");
    check_no_pdata(ev, "ADDR_ERROR");
    /* No source address was ever bound: AF_UNSPEC. The destination is the one asked for. */
    CHECK_EQ_INT(cmsafe_event_src_addr(ev)->sa_family, AF_UNSPEC);
    struct in_addr a;
    unsigned short p = 0;
    CHECK(cm_sin(cmsafe_event_dst_addr(ev), &a, &p) && a.s_addr == dst.sin_addr.s_addr &&
              p == ADDR_ERROR_PORT,
          "ADDR_ERROR dst is not " UNUSED_ADDR ":%u", ADDR_ERROR_PORT);
    char line[512];
    describe(ev, line, sizeof line);
    check_line_has(line, "ADDR_ERROR", "ADDR_ERROR");
    check_line_has(line, "-110 (ETIMEDOUT", "ADDR_ERROR");
    check_line_has(line, "private_data_len=0", "ADDR_ERROR");
    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id(ADDR_ERROR id)");
    CHECK_EQ_INT(cmsafe_event_src_addr(ev)->sa_family, AF_UNSPEC);
    cmsafe_event_release(ev);
    set_arp("off");
}

int main(void)
{
    harness_watchdog(50);
    struct sockaddr_in me = rxe_addr(0);
    guest_addr = me.sin_addr;
    cmsafe_stats s0 = cm_stats();

    const char *r = cmsafe_reject_reason_str(8);
    CHECK(r && strcmp(r, "IB_CM_REJ_INVALID_SERVICE_ID") == 0, "reason 8: %s", r ? r : "(null)");
    r = cmsafe_reject_reason_str(28);
    CHECK(r && strcmp(r, "IB_CM_REJ_CONSUMER_DEFINED") == 0, "reason 28: %s", r ? r : "(null)");

    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    tr = cm_transport(listen_id);
    STEP("transport %s", cm_transport_name(tr));

    rc_connection(sch, cch, listen_id);
    rejections(sch, cch);
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    if (cm_has_ud(tr))
        ud_exchange(sch, cch);
    else
        cm_skip("UD steps", "no UD on iWARP (siw: rdma_create_qp of a UD QP fails with EOPNOTSUPP)");
    addr_error(cch);

    STEP("counters");
    /* What this program fetched, type by type. iWARP: no UD exchange (one ADDR_RESOLVED,
     * ROUTE_RESOLVED, CONNECT_REQUEST and ESTABLISHED fewer), no TIMEWAIT_EXIT, and no
     * no-listener REJECTED (rdma_connect failed instead). */
    const int ib = tr == CM_TRANSPORT_IB;
    const struct {
        enum rdma_cm_event_type type;
        uint64_t n;
    } want[] = {
        {RDMA_CM_EVENT_ADDR_RESOLVED, ib ? 4 : 3},   {RDMA_CM_EVENT_ROUTE_RESOLVED, ib ? 4 : 3},
        {RDMA_CM_EVENT_CONNECT_REQUEST, ib ? 3 : 2}, {RDMA_CM_EVENT_ESTABLISHED, ib ? 3 : 2},
        {RDMA_CM_EVENT_REJECTED, ib ? 2 : 1},        {RDMA_CM_EVENT_DISCONNECTED, 2},
        {RDMA_CM_EVENT_TIMEWAIT_EXIT, ib ? 2 : 0},   {RDMA_CM_EVENT_ADDR_ERROR, 1},
    };
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(seen_by_type[want[i].type] == want[i].n, "%s: fetched %llu, want %llu",
              rdma_event_str(want[i].type), (unsigned long long)seen_by_type[want[i].type],
              (unsigned long long)want[i].n);
        total += want[i].n;
    }
    cmsafe_stats s1 = cm_stats();
    for (int t = 0; t < CMSAFE_EVENT_TYPE_SLOTS; t++)
        CHECK(s1.by_type[t] - s0.by_type[t] == seen_by_type[t], "by_type[%d]: %llu, want %llu",
              t, (unsigned long long)(s1.by_type[t] - s0.by_type[t]),
              (unsigned long long)seen_by_type[t]);
    CHECK_EQ_INT(s1.fetched - s0.fetched, total);
    CHECK_EQ_INT(s1.acked - s0.acked, total);
    CHECK_EQ_INT(s1.released - s0.released, total);
    CHECK_EQ_INT(s1.live_events, 0);
    CHECK_EQ_INT(s1.live_buffers, 0);
    CHECK_EQ_INT(s1.pending, 0);

    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
