/* syscall_loop: one event loop per mode, for counting the system calls each makes per event
 * (scripts/syscall-count runs it under strace in the guest). Every event is the ADDR_RESOLVED of
 * a cm_id resolving $RXE_ADDR: N ids are created first, then each iteration resolves one and
 * fetches its event, raw or through cmsafe. The measured loop is framed by two marker calls,
 * write(-1, "syscall_loop: begin"...) and write(-1, "syscall_loop: end"...) (they fail with EBADF
 * and do nothing), after WARMUP iterations of the same loop that fill cmsafe's pools and learn
 * the channel's mode: the counter counts only between the markers.
 *
 *   syscall_loop MODE EVENTS WARMUP
 *
 * Modes (blocking channel unless "nb"; O_NONBLOCK loops poll(2) the fd themselves first):
 *   raw            rdma_get_cm_event + rdma_ack_cm_event
 *   raw-nb         poll, then rdma_get_cm_event + ack until EAGAIN
 *   api            cmsafe_get_event + cmsafe_event_release
 *   api-forever    cmsafe_get_event_timeout(-1)
 *   api-timed      cmsafe_get_event_timeout(10000)
 *   api-batch      cmsafe_get_events(64, 10000)
 *   api-nb         poll, then cmsafe_get_event until EAGAIN
 *   api-nb-batch   poll, then cmsafe_get_events(64, 0) until it returns fewer than 64
 *   api-nb-batch0  poll, then cmsafe_get_events(64, 0) until it returns 0
 * A mode with "-life" after it (raw-life, api-life) runs the whole life of an id per iteration
 * instead, fetching the way the mode before "-life" says: rdma_create_id, rdma_resolve_addr and
 * its ADDR_RESOLVED, rdma_resolve_route and its ROUTE_RESOLVED, rdma_destroy_id; EVENTS and
 * WARMUP then count ids (two events each), and "events N" counts ids too.
 * Prints "events N" on success; exits 1 with a message otherwise. The ADDR_RESOLVED loops also
 * print "window cpu_us=C minflt=F csw=S": the process's CPU time, minor page faults and context
 * switches between the markers (getrusage(2), called just outside them: scripts/event-cpu).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cmsafe.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "syscall_loop: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void mark(const char *what)
{
    /* A call that does nothing and that strace shows with its text: the window's frame. */
    ssize_t rc = write(-1, what, strlen(what));
    (void)rc;
}

static int nonblocking_mode(const char *m)
{
    return strncmp(m, "raw-nb", 6) == 0 || strncmp(m, "api-nb", 6) == 0;
}

static void wait_readable(struct rdma_event_channel *ch)
{
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    if (poll(&p, 1, -1) != 1)
        die("poll");
}

/* Fetches the one event `id`'s resolution queued, the way `mode` says; returns how many events
 * it took (always 1 here: one resolution in flight at a time). */
static int fetch(const char *m, struct rdma_event_channel *ch)
{
    int got = 0;
    if (strcmp(m, "raw") == 0) {
        struct rdma_cm_event *e;
        if (rdma_get_cm_event(ch, &e))
            die("rdma_get_cm_event");
        rdma_ack_cm_event(e);
        return 1;
    }
    if (strcmp(m, "raw-nb") == 0) {
        struct rdma_cm_event *e;
        wait_readable(ch);
        while (rdma_get_cm_event(ch, &e) == 0) {
            rdma_ack_cm_event(e);
            got++;
        }
        if (errno != EAGAIN)
            die("rdma_get_cm_event");
        return got;
    }
    cmsafe_event *ev, *evs[64];
    if (strcmp(m, "api") == 0 || strcmp(m, "api-forever") == 0 || strcmp(m, "api-timed") == 0) {
        int rc = strcmp(m, "api") == 0           ? cmsafe_get_event(ch, &ev)
                 : strcmp(m, "api-forever") == 0 ? cmsafe_get_event_timeout(ch, &ev, -1)
                                                 : cmsafe_get_event_timeout(ch, &ev, 10000);
        if (rc)
            die(m);
        cmsafe_event_release(ev);
        return 1;
    }
    if (strcmp(m, "api-batch") == 0) {
        int n = cmsafe_get_events(ch, evs, 64, 10000);
        if (n <= 0)
            die("cmsafe_get_events");
        for (int i = 0; i < n; i++)
            cmsafe_event_release(evs[i]);
        return n;
    }
    if (strcmp(m, "api-nb") == 0) {
        wait_readable(ch);
        while (cmsafe_get_event(ch, &ev) == 0) {
            cmsafe_event_release(ev);
            got++;
        }
        if (errno != EAGAIN)
            die("cmsafe_get_event");
        return got;
    }
    if (strcmp(m, "api-nb-batch") == 0 || strcmp(m, "api-nb-batch0") == 0) {
        int until_zero = strcmp(m, "api-nb-batch0") == 0, n;
        wait_readable(ch);
        do {
            n = cmsafe_get_events(ch, evs, 64, 0);
            if (n < 0)
                die("cmsafe_get_events");
            for (int i = 0; i < n; i++)
                cmsafe_event_release(evs[i]);
            got += n;
        } while (until_zero ? n > 0 : n == 64);
        return got;
    }
    fprintf(stderr, "syscall_loop: unknown mode %s\n", m);
    exit(2);
}

/* Neither inlined nor cloned under another name: scripts/insn-count counts the instructions of
 * each call by its name. */
__attribute__((noinline, noclone)) static void fetch_one(const char *m, struct rdma_event_channel *ch)
{
    int n = fetch(m, ch);
    if (n != 1) {
        fprintf(stderr, "syscall_loop: %s took %d events for one resolution\n", m, n);
        exit(1);
    }
}

/* One id's whole life: created, address and route resolved (an event each), destroyed. */
__attribute__((noinline, noclone)) static void id_life(const char *m, struct rdma_event_channel *ch,
                                                        struct sockaddr_in *dst)
{
    struct rdma_cm_id *id;
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
        die("rdma_create_id");
    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000))
        die("rdma_resolve_addr");
    fetch_one(m, ch);
    if (rdma_resolve_route(id, 2000))
        die("rdma_resolve_route");
    fetch_one(m, ch);
    if (rdma_destroy_id(id))
        die("rdma_destroy_id");
}

/* The process's CPU time (user + system, every thread), in microseconds. */
static long long cpu_us(const struct rusage *r)
{
    return (long long)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1000000 + r->ru_utime.tv_usec +
           r->ru_stime.tv_usec;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: syscall_loop MODE EVENTS WARMUP\n");
        return 2;
    }
    const char *mode = argv[1];
    int events = atoi(argv[2]), warmup = atoi(argv[3]), total = events + warmup;
    const char *a = getenv("RXE_ADDR");
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(7999)};
    if (!a || inet_pton(AF_INET, a, &dst.sin_addr) != 1) {
        fprintf(stderr, "syscall_loop: set RXE_ADDR to an RDMA-capable IPv4 address\n");
        return 2;
    }
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        die("rdma_create_event_channel");
    if (nonblocking_mode(mode) && fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK))
        die("fcntl");
    size_t len = strlen(mode);
    if (len > 5 && strcmp(mode + len - 5, "-life") == 0) {
        char fetch_mode[32];
        snprintf(fetch_mode, sizeof fetch_mode, "%.*s", (int)(len - 5), mode);
        for (int i = 0; i < total; i++) {
            if (i == warmup)
                mark("syscall_loop: begin");
            id_life(fetch_mode, ch, &dst);
        }
        mark("syscall_loop: end");
        rdma_destroy_event_channel(ch);
        printf("events %d\n", events);
        return 0;
    }
    struct rdma_cm_id **ids = calloc((size_t)total, sizeof *ids);
    for (int i = 0; i < total; i++)
        if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP))
            die("rdma_create_id");
    int got = 0;
    struct rusage before, after;
    for (int i = 0; i < total; i++) {
        if (i == warmup) {
            getrusage(RUSAGE_SELF, &before);
            mark("syscall_loop: begin");
        }
        if (rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 2000))
            die("rdma_resolve_addr");
        fetch_one(mode, ch);
        if (i >= warmup)
            got++;
    }
    mark("syscall_loop: end");
    getrusage(RUSAGE_SELF, &after);
    printf("window cpu_us=%lld minflt=%ld csw=%ld\n", cpu_us(&after) - cpu_us(&before),
           after.ru_minflt - before.ru_minflt,
           (after.ru_nvcsw + after.ru_nivcsw) - (before.ru_nvcsw + before.ru_nivcsw));
    for (int i = 0; i < total; i++)
        rdma_destroy_id(ids[i]);
    rdma_destroy_event_channel(ch);
    free(ids);
    printf("events %d\n", got);
    return 0;
}
