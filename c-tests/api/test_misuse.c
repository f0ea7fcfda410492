/* Misuse of handles aborts with a message naming the handle; NULL arguments get their documented
 * neutral answers. Each misuse runs in a forked child (after the parent fetched real events), its
 * stderr captured through a pipe; the child must die of SIGABRT and have printed the message:
 *   a double cmsafe_event_release           "cmsafe_event_release(<%p>): ... already released"
 *   a double cmsafe_buf_release              "cmsafe_buf_release(<%p>): ... already released"
 *   release of a stack variable, a malloc'd block, a pointer into an event, a buffer handle:
 *                                             "...(<%p>): not a cmsafe_event cmsafe returned"
 *   cmsafe_buf_release of an event handle    "cmsafe_buf_release(<%p>): not a cmsafe_buf ..."
 * A control child that uses the handles correctly must exit 0 and print nothing.
 *
 * Last, the quarantine: a released handle stays detectable while 100 newer events are fetched
 * and held (the header promises at least 128 per thread before a slot is handed out again; a
 * handle is a pointer, so a release through it after its slot was reused cannot be told from
 * the new owner's). */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/wait.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7750 };

static cmsafe_event *addr_ev; /* ADDR_RESOLVED: no private data */
static cmsafe_event *creq;    /* CONNECT_REQUEST: private data, creq_len bytes */
/* The CONNECT_REQUEST's private data length for the 6 bytes sent: 56 on IB/RoCE (the REQ's
 * room), 6 on iWARP (as sent). Set from the listen id's transport before the first child. */
static size_t creq_len;

/* Runs `fn` in a child with stderr on a pipe; returns its wait status, its stderr in `out`. */
static int in_child(void (*fn)(void), char *out, size_t outlen)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        close(p[1]);
        fn();
        _exit(0); /* no abort: the parent sees exit 0 */
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < outlen && (r = read(p[0], out + n, outlen - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    char sink[256];
    while (read(p[0], sink, sizeof sink) > 0) {
    }
    close(p[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    return status;
}

/* The child died of SIGABRT and said `needle` (with "%p" replaced by `handle`). */
static void expect_abort(const char *what, void (*fn)(void), const void *handle,
                         const char *fmt)
{
    char err[4096], needle[256];
    snprintf(needle, sizeof needle, fmt, handle);
    int status = in_child(fn, err, sizeof err);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
          "%s: the child was not killed by SIGABRT (status %#x; stderr: %s)", what, status, err);
    CHECK(strstr(err, needle) != NULL, "%s: stderr lacks \"%s\"; it was: %s", what, needle, err);
    fprintf(stderr, "%s: %s", what, err);
}

/* ---- the misuses, each run in a child ---- */
static void double_release(void)
{
    cmsafe_event_release(addr_ev);
    cmsafe_event_release(addr_ev);
}

/* Says which address it passes (the parent cannot know the child's stack). */
static void release_stack(void)
{
    static void *volatile escape;
    long local[8] = {0};
    escape = local;
    fprintf(stderr, "stack handle %p\n", escape);
    cmsafe_event_release((cmsafe_event *)escape);
}

static void *malloced;
static void release_malloc(void)
{
    cmsafe_event_release((cmsafe_event *)malloced);
}

static void release_inside(void)
{
    cmsafe_event_release((cmsafe_event *)((char *)addr_ev + 8));
}

static void release_buf_as_event(void)
{
    cmsafe_event_release((cmsafe_event *)cmsafe_event_private_data(creq));
}

static void buf_release_event(void)
{
    cmsafe_buf_release((const cmsafe_buf *)addr_ev);
}

static void double_buf_release(void)
{
    const cmsafe_buf *b = cmsafe_buf_retain(cmsafe_event_private_data(creq));
    cmsafe_event_release(creq); /* the buffer's last reference is now b */
    cmsafe_buf_release(b);      /* frees it */
    cmsafe_buf_release(b);
}

/* Correct use: retain and release in pairs, then the last reference. */
static void control(void)
{
    cmsafe_event *again = cmsafe_event_retain(creq);
    const cmsafe_buf *b = cmsafe_buf_retain(cmsafe_event_private_data(again));
    cmsafe_event_release(again);
    cmsafe_event_release(creq);
    if (cmsafe_buf_len(b) != creq_len)
        _exit(7);
    cmsafe_buf_release(b);
    cmsafe_event_release(addr_ev);
}

static void misuse(void)
{
    malloced = malloc(256);
    REQUIRE(malloced, "malloc");
    memset(malloced, 0, 256);

    STEP("misuse, each in a child");
    char out[4096];
    int status = in_child(control, out, sizeof out);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "control child: status %#x, want exit 0 (stderr: %s)", status, out);
    CHECK(out[0] == '\0', "control child printed: %s", out);

    expect_abort("double cmsafe_event_release", double_release, addr_ev,
                 "cmsafe_event_release(%p): this cmsafe_event was already released");
    expect_abort("release of a malloc'd block", release_malloc, malloced,
                 "cmsafe_event_release(%p): not a cmsafe_event cmsafe returned");
    expect_abort("release of a pointer into an event", release_inside, (char *)addr_ev + 8,
                 "cmsafe_event_release(%p): not a cmsafe_event cmsafe returned");
    expect_abort("cmsafe_event_release of a buffer",
                 release_buf_as_event, cmsafe_event_private_data(creq),
                 "cmsafe_event_release(%p): not a cmsafe_event cmsafe returned");
    expect_abort("cmsafe_buf_release of an event", buf_release_event, addr_ev,
                 "cmsafe_buf_release(%p): not a cmsafe_buf cmsafe returned");
    expect_abort("double cmsafe_buf_release", double_buf_release,
                 cmsafe_event_private_data(creq),
                 "cmsafe_buf_release(%p): this cmsafe_buf was already released");
    free(malloced);

    /* The children's releases were their own: the parent's handles are intact. */
    CHECK_EQ_INT(cmsafe_event_type(addr_ev), RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK_EQ_INT(cmsafe_buf_len(cmsafe_event_private_data(creq)), creq_len);
}

/* A stack address: the child prints the address it passes, the message must name it. */
static void stack_address(void)
{
    char out[4096], needle[256];
    int status = in_child(release_stack, out, sizeof out);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
          "release of a stack address: status %#x, want SIGABRT (stderr: %s)", status, out);
    const char *at = strstr(out, "stack handle ");
    char addr[40] = "";
    REQUIRE(at && sscanf(at, "stack handle %39s", addr) == 1, "no address printed: %s", out);
    snprintf(needle, sizeof needle, "cmsafe_event_release(%s): not a cmsafe_event cmsafe returned",
             addr);
    CHECK(strstr(out, needle) != NULL, "release of a stack address: stderr lacks \"%s\": %s",
          needle, out);
    fprintf(stderr, "release of a stack address: %s", out);
}

static void nulls(struct rdma_event_channel *ch, struct rdma_cm_id *id)
{
    STEP("NULL arguments");
    cmsafe_event *ev = (cmsafe_event *)(uintptr_t)0x5e7;
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_event(NULL, &ev), -1);
    CHECK_EQ_INT(errno, EINVAL);
    CHECK(ev == (cmsafe_event *)(uintptr_t)0x5e7, "*out written on EINVAL");

    /* With an event queued: (ch, NULL) fails and must not consume it. */
    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    REQUIRE(cm_wait_readable(ch, 3000), "no ROUTE_RESOLVED queued");
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_event(ch, NULL), -1);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK_EQ_INT(cmsafe_get_event_timeout(ch, NULL, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
    cmsafe_event *route = cm_expect_within(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    CHECK(cmsafe_event_id(route) == id, "the queued event survived the EINVAL calls");
    cmsafe_event_release(route);

    cmsafe_event_release(NULL);
    cmsafe_buf_release(NULL);
    CHECK(cmsafe_event_retain(NULL) == NULL, "cmsafe_event_retain(NULL)");
    CHECK(cmsafe_buf_retain(NULL) == NULL, "cmsafe_buf_retain(NULL)");
    CHECK(cmsafe_event_cm(NULL) == NULL, "cmsafe_event_cm(NULL)");
    CHECK_EQ_INT(cmsafe_event_type(NULL), -1);
    errno = 0;
    CHECK_EQ_INT(cmsafe_event_status(NULL), 0);
    CHECK_EQ_INT(errno, EINVAL);
    CHECK_EQ_INT(cmsafe_event_status_kind(NULL), CMSAFE_STATUS_KIND_OTHER);
    CHECK(cmsafe_event_id(NULL) == NULL, "cmsafe_event_id(NULL)");
    CHECK(cmsafe_event_listen_id(NULL) == NULL, "cmsafe_event_listen_id(NULL)");
    CHECK_EQ_INT(cmsafe_event_seq(NULL), 0);
    CHECK_EQ_INT(cmsafe_event_time_ns(NULL), 0);
    CHECK(cmsafe_event_src_addr(NULL) == NULL, "cmsafe_event_src_addr(NULL)");
    CHECK(cmsafe_event_dst_addr(NULL) == NULL, "cmsafe_event_dst_addr(NULL)");
    CHECK(cmsafe_event_private_data(NULL) == NULL, "cmsafe_event_private_data(NULL)");
    CHECK(cmsafe_buf_data(NULL) == NULL, "cmsafe_buf_data(NULL)");
    CHECK_EQ_INT(cmsafe_buf_len(NULL), 0);
    char line[64];
    errno = 0;
    CHECK_EQ_INT(cmsafe_event_describe(NULL, line, sizeof line), -1);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK_EQ_INT(cmsafe_event_describe(NULL, NULL, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK_EQ_INT(cmsafe_stats_get(NULL), -1);
    CHECK_EQ_INT(errno, EINVAL);

    /* Reject reason names: the documented ones, and NULL/EINVAL for numbers naming none. */
    static const struct {
        int reason;
        const char *name;
    } names[] = {{1, "IB_CM_REJ_NO_QP"},
                 {8, "IB_CM_REJ_INVALID_SERVICE_ID"},
                 {12, "IB_CM_REJ_INVALID_GID"},
                 {28, "IB_CM_REJ_CONSUMER_DEFINED"},
                 {35, "IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *s = cmsafe_reject_reason_str(names[i].reason);
        CHECK(s && strcmp(s, names[i].name) == 0, "reason %d: %s, want %s", names[i].reason,
              s ? s : "(null)", names[i].name);
    }
    static const int none[] = {0, 34, 36, -1, -28, 1000};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        errno = 0;
        const char *s = cmsafe_reject_reason_str(none[i]);
        CHECK(s == NULL && errno == EINVAL, "reason %d: %s (errno %d), want NULL/EINVAL", none[i],
              s ? s : "(null)", errno);
    }
}

/* Retain/release pairs keep an event alive exactly as long as its references. */
static void refcounts(void)
{
    STEP("retain and release");
    cmsafe_stats a = cm_stats();
    cmsafe_event *r1 = cmsafe_event_retain(addr_ev);
    cmsafe_event *r2 = cmsafe_event_retain(addr_ev);
    CHECK(r1 == addr_ev && r2 == addr_ev, "cmsafe_event_retain returns its argument");
    cmsafe_event_release(r1);
    cmsafe_event_release(r2);
    cmsafe_stats b = cm_stats();
    CHECK_EQ_INT(b.live_events, a.live_events);
    CHECK_EQ_INT(b.released, a.released);
    CHECK_EQ_INT(cmsafe_event_type(addr_ev), RDMA_CM_EVENT_ADDR_RESOLVED);
}

/* ---- a stale handle, while its slot is in quarantine ---- */
static cmsafe_event *stale;
static void release_stale(void)
{
    cmsafe_event_release(stale);
}

static void stale_in_quarantine(struct rdma_event_channel *ch)
{
    STEP("a released handle, while 100 newer events are held");
    enum { IDS = 101 };
    static struct rdma_cm_id *ids[IDS];
    static cmsafe_event *held[IDS];
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_create_id(ch, &ids[0], NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    REQUIRE(rdma_resolve_addr(ids[0], NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve");
    stale = cm_expect_within(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
    cmsafe_event_release(stale); /* `stale` is now a released handle */
    for (int i = 1; i < IDS; i++) {
        REQUIRE(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
        REQUIRE(rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 5000) == 0, "resolve");
    }
    int n = 1, reused_at = -1;
    uint64_t deadline = cm_now_ns() + 20000000000u;
    while (n < IDS && cm_now_ns() < deadline) {
        int got = cmsafe_get_events(ch, held + n, (size_t)(IDS - n), 100);
        if (got < 0) /* a check only when it fails: the number of rounds varies */
            REQUIRE(0, "cmsafe_get_events: %s", strerror(errno));
        for (int k = n; k < n + got; k++)
            if (held[k] == stale && reused_at < 0)
                reused_at = k;
        n += got;
    }
    CHECK_EQ_INT(n, IDS);
    CHECK(reused_at < 0, "the released handle %p was handed out again to the %d-th later event",
          (void *)stale, reused_at);
    expect_abort("double cmsafe_event_release while its slot is in quarantine", release_stale, stale,
                 "cmsafe_event_release(%p): this cmsafe_event was already released");
    for (int k = 1; k < n; k++)
        cmsafe_event_release(held[k]);
    for (int i = 0; i < IDS; i++)
        CHECK(rdma_destroy_id(ids[i]) == 0, "rdma_destroy_id");
}

int main(void)
{
    harness_watchdog(50);
    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    creq_len = cm_req_len(cm_transport(listen_id), 6);

    /* The parent's own events, which the children misuse. */
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_create_id(cch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr");
    addr_ev = cm_expect_within(cch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
    struct rdma_cm_id *client = cm_client(cch, PORT);
    cm_connect(client, "misuse", 6);
    creq = cm_expect_within(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
    struct rdma_cm_id *child = cmsafe_event_id(creq);

    misuse();
    stack_address();
    refcounts();
    nulls(cch, id);
    stale_in_quarantine(cch);

    cm_reject(child, NULL, 0);
    cmsafe_event_release(cm_expect_within(cch, RDMA_CM_EVENT_REJECTED, 5000));
    cmsafe_event_release(creq);
    cmsafe_event_release(addr_ev);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(child)");
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(client)");
    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id(id)");
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    cmsafe_stats s = cm_stats();
    CHECK_EQ_INT(s.fetched, s.acked);
    CHECK_EQ_INT(s.live_events, 0);
    CHECK_EQ_INT(s.live_buffers, 0);
    CHECK_EQ_INT(s.pending, 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
