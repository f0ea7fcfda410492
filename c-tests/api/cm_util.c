#define _GNU_SOURCE
#include "cm_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "harness.h"

cmsafe_event *cm_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    cmsafe_event *ev = NULL;
    int rc = cmsafe_get_event(ch, &ev);
    REQUIRE(rc == 0 && ev, "cmsafe_get_event: %s", strerror(errno));
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    REQUIRE(cm->event == want, "got %s (status %d), want %s", rdma_event_str(cm->event),
            cm->status, rdma_event_str(want));
    return ev;
}

static void expect_and_release(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    cmsafe_event_release(cm_expect(ch, want));
}

struct rdma_cm_id *cm_listen(struct rdma_event_channel *ch, unsigned short port)
{
    return rxe_listen(ch, port, RDMA_PS_TCP, 128);
}

struct rdma_cm_id *cm_client(struct rdma_event_channel *ch, unsigned short port)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    expect_and_release(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    expect_and_release(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    rxe_create_qp(id);
    return id;
}

void cm_connect(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = rxe_conn_param(pdata, len);
    REQUIRE(rdma_connect(id, &p) == 0, "rdma_connect: %s", strerror(errno));
}

void cm_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = rxe_conn_param(pdata, len);
    REQUIRE(rdma_accept(id, &p) == 0, "rdma_accept: %s", strerror(errno));
}

void cm_reject(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    REQUIRE(rdma_reject(id, pdata, len) == 0, "rdma_reject: %s", strerror(errno));
}

const unsigned char *cm_pdata(const cmsafe_event *ev, unsigned *len)
{
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    *len = cm->param.conn.private_data_len;
    return cm->param.conn.private_data;
}

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cm_now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

uint64_t cm_coarse_now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC_COARSE);
}

double cm_ms_since(uint64_t start_ns)
{
    return (double)(cm_now_ns() - start_ns) / 1e6;
}

void cm_fill(unsigned char *buf, unsigned len, unsigned char seed)
{
    for (unsigned i = 0; i < len; i++)
        buf[i] = (unsigned char)(seed + i * 7u) | 1u;
}

cmsafe_stats cm_stats(void)
{
    cmsafe_stats s;
    memset(&s, 0, sizeof s);
    REQUIRE(cmsafe_stats_get(&s) == 0, "cmsafe_stats_get: %s", strerror(errno));
    return s;
}

cmsafe_event *cm_expect_within(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
                               int timeout_ms)
{
    cmsafe_event *ev = NULL;
    int rc = cmsafe_get_event_timeout(ch, &ev, timeout_ms);
    REQUIRE(rc == 0 && ev, "waiting %d ms for %s: %s", timeout_ms, rdma_event_str(want),
            strerror(errno));
    REQUIRE(cmsafe_event_type(ev) == (int)want, "got %s (status %d), want %s",
            rdma_event_str((enum rdma_cm_event_type)cmsafe_event_type(ev)),
            cmsafe_event_status(ev), rdma_event_str(want));
    return ev;
}

int cm_quiet(struct rdma_event_channel *ch, int ms)
{
    cmsafe_event *ev = NULL;
    int rc = cmsafe_get_event_timeout(ch, &ev, ms);
    int err = errno;
    if (rc == 0) {
        char line[256];
        cmsafe_event_describe(ev, line, sizeof line);
        CHECK(0, "an event arrived on a channel that must stay quiet: %s", line);
        cmsafe_event_release(ev);
        return 0;
    }
    CHECK(err == ETIMEDOUT, "waiting on a quiet channel: %s, want ETIMEDOUT", strerror(err));
    return err == ETIMEDOUT;
}

int cm_wait_readable(struct rdma_event_channel *ch, int timeout_ms)
{
    struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
    return poll(&pfd, 1, timeout_ms) == 1 && (pfd.revents & POLLIN);
}

int cm_bytes_are(const unsigned char *p, size_t len, const void *sent, size_t sent_len,
                 size_t want_len)
{
    if (len != want_len || (len > 0 && p == NULL) || sent_len > len)
        return 0;
    if (sent_len && memcmp(p, sent, sent_len) != 0)
        return 0;
    for (size_t i = sent_len; i < len; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

int cm_sin(const struct sockaddr *sa, struct in_addr *addr, unsigned short *port)
{
    if (!sa || sa->sa_family != AF_INET)
        return 0;
    struct sockaddr_in sin;
    memcpy(&sin, sa, sizeof sin);
    *addr = sin.sin_addr;
    *port = ntohs(sin.sin_port);
    return 1;
}

int cm_try_create_qp(struct rdma_cm_id *id)
{
    struct ibv_qp_init_attr attr = rxe_qp_attr();
    if (rdma_create_qp(id, NULL, &attr) == 0)
        return 0;
    fprintf(stderr, "rdma_create_qp: %s\n", strerror(errno));
    return -1;
}

int cm_try_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = rxe_conn_param(pdata, len);
    if (rdma_accept(id, &p) == 0)
        return 0;
    fprintf(stderr, "rdma_accept: %s\n", strerror(errno));
    return -1;
}

enum cm_transport cm_transport(const struct rdma_cm_id *id)
{
    REQUIRE(id && id->verbs && id->verbs->device,
            "the id has no device yet: its transport is unknown (bind or resolve first)");
    return cm_device_transport(id->verbs);
}

void cm_skip(const char *what, const char *why)
{
    harness_skipped++;
    fprintf(stderr, "skip: %s: %s\n", what, why);
}

#ifdef __SANITIZE_THREAD__
/* The ThreadSanitizer builds of the tests (NAME_tsan): read by the TSan runtime at start-up, so
 * that librdmacm and libibverbs, built without TSan, are not judged; TSAN_OPTIONS can still
 * override. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "ignore_noninstrumented_modules=1";
}
#endif
