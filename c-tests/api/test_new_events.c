/* The event types of rdma-core 60 (librdmacm's RDMACM_1.4) on the real stack: USER events
 * written with rdma_write_cm_event(3) arrive with their status and `param.arg` intact, and
 * rdma_resolve_addrinfo(3) works asynchronously (ADDRINFO_RESOLVED on the channel) and
 * synchronously (an id without a channel), with rdma_query_addrinfo(3) giving the address.
 *
 *   test_new_events api   events fetched with cmsafe_get_event (the arg read with
 *                         cmsafe_event_arg, the type counted in its own slot)
 *   test_new_events raw   plain rdma_get_cm_event/rdma_ack_cm_event: run as it is, and under
 *                         the preload in audit and safe mode (c-tests/new-events), where the
 *                         copy safe mode hands out must keep the arg
 *
 * The RDMACM_1.4 functions are looked up at run time (dlvsym), so the program builds against
 * every rdma-core's header and runs on every librdmacm: without RDMACM_1.4 (rdma-core before
 * 60) it says so and exits 77, which the runner counts apart. Needs RXE_ADDR (the guest's
 * address), as the other c-tests. librdmacm/cma.c (rdma_get_cm_event, rdma_write_cm_event,
 * rdma_resolve_addrinfo, ucma_complete) is the source of every expectation below. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "cm_util.h"
#include "harness.h"

#define SKIP_STATUS 77
/* enum rdma_cm_event_type from rdma-core 60: spelled here, since older headers lack them. */
#define EV_ADDRINFO_RESOLVED 16
#define EV_USER 18

typedef int (*write_cm_event_fn)(struct rdma_cm_id *, int, int, uint64_t);
typedef int (*resolve_addrinfo_fn)(struct rdma_cm_id *, const char *, const char *,
                                   const struct rdma_addrinfo *);
typedef int (*query_addrinfo_fn)(struct rdma_cm_id *, struct rdma_addrinfo **);

static write_cm_event_fn write_cm_event;
static resolve_addrinfo_fn resolve_addrinfo;
static query_addrinfo_fn query_addrinfo;
static int api;

/* What one event showed, read before its ack (raw) or from cmsafe's copy (api). */
struct seen {
    int type;
    int status;
    uint64_t arg;
    int arg_rc;    /* api: cmsafe_event_arg's return; raw: 0 */
    int arg_errno; /* api: errno after a failed cmsafe_event_arg */
    int has_pdata;
    char line[256]; /* api: cmsafe_event_describe */
};

static struct seen next_event(struct rdma_event_channel *ch)
{
    struct seen s;
    memset(&s, 0, sizeof s);
    if (api) {
        cmsafe_event *ev = NULL;
        REQUIRE(cmsafe_get_event(ch, &ev) == 0 && ev, "cmsafe_get_event: %s", strerror(errno));
        s.type = cmsafe_event_type(ev);
        s.status = cmsafe_event_status(ev);
        errno = 0;
        s.arg_rc = cmsafe_event_arg(ev, &s.arg);
        s.arg_errno = errno;
        s.has_pdata = cmsafe_event_private_data(ev) != NULL;
        cmsafe_event_describe(ev, s.line, sizeof s.line);
        cmsafe_event_release(ev);
    } else {
        struct rdma_cm_event *e = NULL;
        REQUIRE(rdma_get_cm_event(ch, &e) == 0 && e, "rdma_get_cm_event: %s", strerror(errno));
        s.type = (int)e->event;
        s.status = e->status;
        /* param.arg is the union's first 8 bytes (rdma-core 60's header); read as bytes so the
         * program builds against older headers too. */
        memcpy(&s.arg, &e->param, sizeof s.arg);
        REQUIRE(rdma_ack_cm_event(e) == 0, "rdma_ack_cm_event: %s", strerror(errno));
    }
    return s;
}

/* No event within 100 ms: poll(2) on the channel's fd, so raw mode fetches nothing. */
static int quiet(struct rdma_event_channel *ch)
{
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    int rc = poll(&p, 1, 100);
    CHECK(rc == 0, "poll on a channel that must stay quiet: %d (revents %#x)", rc, p.revents);
    return rc == 0;
}

/* The address rdma_query_addrinfo gives must be RXE_ADDR:port. */
static void check_resolved(struct rdma_cm_id *id, const char *what, unsigned short port)
{
    struct rdma_addrinfo *info = NULL;
    int rc = query_addrinfo(id, &info);
    CHECK(rc == 0 && info, "%s: rdma_query_addrinfo: %d (%s)", what, rc, strerror(errno));
    if (rc != 0 || !info)
        return;
    struct sockaddr_in want = rxe_addr(port);
    const struct sockaddr_in *dst = (const struct sockaddr_in *)info->ai_dst_addr;
    CHECK(dst && dst->sin_family == AF_INET, "%s: ai_dst_addr family %d", what,
          dst ? dst->sin_family : -1);
    if (dst && dst->sin_family == AF_INET) {
        CHECK_EQ_INT(ntohs(dst->sin_port), port);
        CHECK(dst->sin_addr.s_addr == want.sin_addr.s_addr, "%s: ai_dst_addr is not RXE_ADDR",
              what);
    }
    rdma_freeaddrinfo(info);
    /* Taken once: a second query finds nothing (librdmacm clears resolving_ai). */
    errno = 0;
    CHECK(query_addrinfo(id, &info) == -1 && errno == ENOENT,
          "%s: a second rdma_query_addrinfo gave errno %d, want ENOENT", what, errno);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "api") != 0 && strcmp(argv[1], "raw") != 0)) {
        fprintf(stderr, "usage: test_new_events api|raw\n");
        return 2;
    }
    api = strcmp(argv[1], "api") == 0;
    harness_watchdog(60);

    void *rdmacm = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(rdmacm, "librdmacm.so.1 is not loaded: %s", dlerror());
    /* ISO C has no cast from an object pointer to a function pointer: copy the bytes, as
     * dlsym(3)'s own example does through a pointer to the function pointer. */
    void *p = dlvsym(rdmacm, "rdma_write_cm_event", "RDMACM_1.4");
    memcpy(&write_cm_event, &p, sizeof p);
    p = dlvsym(rdmacm, "rdma_resolve_addrinfo", "RDMACM_1.4");
    memcpy(&resolve_addrinfo, &p, sizeof p);
    p = dlvsym(rdmacm, "rdma_query_addrinfo", "RDMACM_1.4");
    memcpy(&query_addrinfo, &p, sizeof p);
    if (!write_cm_event || !resolve_addrinfo || !query_addrinfo) {
        printf("skip: this librdmacm has no RDMACM_1.4 (rdma_write_cm_event, "
               "rdma_resolve_addrinfo: rdma-core 60 and later)\n");
        return SKIP_STATUS;
    }

    struct rdma_event_channel *ch = rdma_create_event_channel();
    REQUIRE(ch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *id = NULL;
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
            strerror(errno));

    STEP("USER events: status and arg as written");
    static const struct {
        int status;
        uint64_t arg;
    } users[] = {{7, 0x1122334455667788ULL}, {0, 0}, {-5, UINT64_MAX}, {1, 0x10}};
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++)
        REQUIRE(write_cm_event(id, EV_USER, users[i].status, users[i].arg) == 0,
                "rdma_write_cm_event: %s", strerror(errno));
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++) {
        struct seen s = next_event(ch);
        CHECK_EQ_INT(s.type, EV_USER);
        CHECK_EQ_INT(s.status, users[i].status);
        CHECK(s.arg == users[i].arg, "USER %zu: arg %#llx, want %#llx", i,
              (unsigned long long)s.arg, (unsigned long long)users[i].arg);
        if (api) {
            CHECK_EQ_INT(s.arg_rc, 0);
            CHECK(!s.has_pdata, "USER %zu: a private data buffer", i);
            char want[64];
            snprintf(want, sizeof want, " USER status=%d", users[i].status);
            CHECK(strstr(s.line, want) != NULL, "describe: %s", s.line);
            CHECK(i != 0 || strstr(s.line, " arg=0x1122334455667788") != NULL, "describe: %s",
                  s.line);
        }
    }
    /* Only USER is accepted (rdma_write_cm_event(3)). */
    errno = 0;
    CHECK(write_cm_event(id, EV_ADDRINFO_RESOLVED, 0, 1) == -1 && errno == EINVAL,
          "writing ADDRINFO_RESOLVED gave errno %d, want EINVAL", errno);
    CHECK(quiet(ch), "an event after the refused write");

    STEP("rdma_resolve_addrinfo, asynchronous: ADDRINFO_RESOLVED on the channel");
    const char *node = getenv("RXE_ADDR");
    REQUIRE(resolve_addrinfo(id, node, "7471", NULL) == 0, "rdma_resolve_addrinfo: %s",
            strerror(errno));
    /* One resolution at a time per id, until its result is queried. */
    errno = 0;
    CHECK(resolve_addrinfo(id, node, "7471", NULL) == -1 && errno == EBUSY,
          "a second rdma_resolve_addrinfo gave errno %d, want EBUSY", errno);
    struct seen s = next_event(ch);
    CHECK_EQ_INT(s.type, EV_ADDRINFO_RESOLVED);
    CHECK_EQ_INT(s.status, 0);
    if (api) {
        CHECK(s.arg_rc == -1 && s.arg_errno == ENOMSG,
              "cmsafe_event_arg on ADDRINFO_RESOLVED: %d, errno %d, want -1 and ENOMSG", s.arg_rc,
              s.arg_errno);
        CHECK(strstr(s.line, " ADDRINFO_RESOLVED status=0") != NULL, "describe: %s", s.line);
    }
    check_resolved(id, "asynchronous", 7471);

    STEP("rdma_resolve_addrinfo, a name that does not resolve: the error at once, no event");
    errno = 0;
    CHECK(resolve_addrinfo(id, "no-such-host.invalid", "7471", NULL) == -1,
          "resolving no-such-host.invalid succeeded");
    CHECK(quiet(ch), "an event after the failed resolution");
    /* The failed call left no resolution behind: the next one is accepted. */
    REQUIRE(resolve_addrinfo(id, node, "7472", NULL) == 0, "rdma_resolve_addrinfo again: %s",
            strerror(errno));
    s = next_event(ch);
    CHECK_EQ_INT(s.type, EV_ADDRINFO_RESOLVED);
    check_resolved(id, "after a failure", 7472);

    STEP("rdma_resolve_addrinfo, synchronous (an id without a channel)");
    struct rdma_cm_id *sync_id = NULL;
    REQUIRE(rdma_create_id(NULL, &sync_id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id (sync): %s",
            strerror(errno));
    CHECK(resolve_addrinfo(sync_id, node, "7473", NULL) == 0,
          "rdma_resolve_addrinfo (sync): %s", strerror(errno));
    check_resolved(sync_id, "synchronous", 7473);
    /* librdmacm holds the sync id's last event until the next call or the destroy, which acks
     * it: the destroy must come back. */
    CHECK(rdma_destroy_id(sync_id) == 0, "rdma_destroy_id (sync): %s", strerror(errno));

    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id: %s", strerror(errno));
    rdma_destroy_event_channel(ch);

    if (api) {
        cmsafe_stats st = cm_stats();
        CHECK_EQ_INT(st.by_type[EV_USER], 4);
        CHECK_EQ_INT(st.by_type[EV_ADDRINFO_RESOLVED], 2);
        CHECK_EQ_INT(st.by_type[CMSAFE_EVENT_TYPE_SLOTS - 1], 0);
        CHECK_EQ_INT(st.fetched, 6);
        CHECK_EQ_INT(st.acked, st.fetched);
        CHECK_EQ_INT(st.live_events, 0);
        CHECK_EQ_INT(st.live_buffers, 0);
        cmsafe_event *none = NULL;
        uint64_t a = 0;
        errno = 0;
        CHECK(cmsafe_event_arg(none, &a) == -1 && errno == EINVAL, "cmsafe_event_arg(NULL)");
    }
    return harness_exit();
}
