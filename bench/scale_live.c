/* scale_live: cost and memory as live cm_ids grow, on the real stack (Soft-RoCE in the guest,
 * $RXE_ADDR): the host benchmark's shape (tests/host/programs/scale.c) with the kernel's rdma_cm
 * under it. scripts/scale-live runs it raw, through the API, and under the preload in audit and
 * safe mode, and puts the figures side by side.
 *
 *   scale_live live FETCH N M WARM HOLD CHANNELS THREADS
 *     First the warm-up, which brings the preload's bounded tables and cmsafe's pools to their
 *     steady state: WARM id lives (below) on the first channel (audit's quarantine of acked
 *     pages, the destroyed ids remembered), then 2 * WARM ids resolved and acked and kept
 *     alive (safe mode's kept copies, which an id's destroy releases: 4,096 of them); those are
 *     destroyed once the N ids' memory is read, before the timed lives. Then N ids held live,
 *     spread round robin over CHANNELS event channels, each resolved (its ADDR_RESOLVED got,
 *     then acked when HOLD is "acked", held unacked to the end when "held");
 *     then M id lives split over THREADS threads, each on an event channel of its own (the
 *     first thread on the held ids' first channel): rdma_create_id, rdma_resolve_addr and its
 *     ADDR_RESOLVED, rdma_resolve_route and its ROUTE_RESOLVED, rdma_destroy_id. Prints
 *       live n=N m=M threads=T life_ns=L event_ns=E cpu_us=C rss_kb=B,I slab_kb=B,I
 *     L: wall time of the loop over M; E: time inside the get and ack (or release) of each
 *     event, over the 2M events, each timed once its channel's fd was readable (the wait for
 *     the kernel's resolution is not in it); C: the process's CPU time over the loop; B and I:
 *     VmRSS (and the kernel's Slab, /proc/meminfo) before and after the N ids were made.
 *
 *   scale_live pending FETCH P K
 *     P ids on one event channel resolved and their events left unread, pending in the kernel;
 *     then K ids created on that channel and destroyed, each destroy timed. Prints
 *       pending p=P k=K destroy_ns=D got=G
 *     D: mean time of rdma_destroy_id; G: the events read afterwards without blocking (P when
 *     all were pending).
 *
 *   scale_live limit FETCH MAX SAMPLE
 *     rdma_create_id until it fails or MAX ids live; then the SAMPLE ids made first and the
 *     SAMPLE made last resolved on their channel, each event checked to name its own id. Prints
 *       limit made=X errno=NAME resolved=S wrong=W
 *
 * FETCH: "raw" (rdma_get_cm_event, rdma_ack_cm_event; the preload's modes run it under
 * LD_PRELOAD) or "api" (cmsafe_get_event, cmsafe_event_release). Exits 1 with a message on any
 * failure, 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cmsafe.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int api;
static struct sockaddr_in dst;

static void die(const char *what)
{
    fprintf(stderr, "scale_live: %s: %s\n", what, strerror(errno));
    exit(1);
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* One event got from CH, raw or through the API; its id and type. */
struct got {
    struct rdma_cm_event *event;
    cmsafe_event *copy;
    struct rdma_cm_id *id;
    int type;
};

static struct got get(struct rdma_event_channel *ch)
{
    struct got g = {0};
    if (api) {
        if (cmsafe_get_event(ch, &g.copy))
            die("cmsafe_get_event");
        g.id = cmsafe_event_id(g.copy);
        g.type = cmsafe_event_type(g.copy);
    } else {
        if (rdma_get_cm_event(ch, &g.event))
            die("rdma_get_cm_event");
        g.id = g.event->id;
        g.type = g.event->event;
    }
    return g;
}

static void release(struct got *g)
{
    if (g->copy)
        cmsafe_event_release(g->copy);
    if (g->event && rdma_ack_cm_event(g->event))
        die("rdma_ack_cm_event");
    g->copy = NULL, g->event = NULL;
}

static void wait_readable(struct rdma_event_channel *ch)
{
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    while (poll(&p, 1, -1) != 1)
        if (errno != EINTR)
            die("poll");
}

static void want(const struct got *g, struct rdma_cm_id *id, int type)
{
    if (g->id != id || g->type != type) {
        fprintf(stderr, "scale_live: got %s of id %p, want %s of id %p\n", rdma_event_str(g->type),
                (void *)g->id, rdma_event_str(type), (void *)id);
        exit(1);
    }
}

/* The next event of CH, which must be ID's of TYPE, got and released once the fd is readable;
 * the nanoseconds the get and the release took. */
/* Neither inlined nor cloned under another name: under callgrind (scripts/scale-live --count)
 * the inclusive instructions of each call of this are one event's get and release. */
__attribute__((noinline, noclone)) static struct got scale_event(struct rdma_event_channel *ch)
{
    struct got g = get(ch);
    release(&g);
    return g;
}

static long long timed_event(struct rdma_event_channel *ch, struct rdma_cm_id *id, int type)
{
    wait_readable(ch);
    long long t0 = now_ns();
    struct got g = scale_event(ch);
    long long t = now_ns() - t0;
    want(&g, id, type);
    return t;
}

static struct rdma_cm_id *resolved(struct rdma_event_channel *ch, struct got *g)
{
    struct rdma_cm_id *id;
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
        die("rdma_create_id");
    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
        die("rdma_resolve_addr");
    *g = get(ch);
    want(g, id, RDMA_CM_EVENT_ADDR_RESOLVED);
    return id;
}

/* The value of KEY ("VmRSS:", "Slab:") in FILE, in kB. */
static long kb(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    if (!f)
        die(file);
    char buf[256];
    long v = -1;
    size_t n = strlen(key);
    while (fgets(buf, sizeof buf, f))
        if (strncmp(buf, key, n) == 0) {
            v = strtol(buf + n, NULL, 10);
            break;
        }
    fclose(f);
    if (v < 0) {
        fprintf(stderr, "scale_live: no %s in %s\n", key, file);
        exit(1);
    }
    return v;
}

static long number(const char *s, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !*s || *end || v < min) {
        fprintf(stderr, "scale_live: %s is not a whole number of at least %ld\n", s, min);
        exit(2);
    }
    return v;
}

struct loop {
    struct rdma_event_channel *ch;
    long lives;
    long long event_ns;
};

static void *run_lives(void *arg)
{
    struct loop *l = arg;
    for (long i = 0; i < l->lives; i++) {
        struct rdma_cm_id *id;
        if (rdma_create_id(l->ch, &id, NULL, RDMA_PS_TCP))
            die("rdma_create_id");
        if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
            die("rdma_resolve_addr");
        l->event_ns += timed_event(l->ch, id, RDMA_CM_EVENT_ADDR_RESOLVED);
        if (rdma_resolve_route(id, 2000))
            die("rdma_resolve_route");
        l->event_ns += timed_event(l->ch, id, RDMA_CM_EVENT_ROUTE_RESOLVED);
        if (rdma_destroy_id(id))
            die("rdma_destroy_id");
    }
    return NULL;
}

/* The timed lives of one thread: callgrind collects inside this only (the warm-up runs
 * run_lives directly). */
__attribute__((noinline, noclone)) static void *measure(void *arg)
{
    return run_lives(arg);
}

static long long cpu_us(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (long long)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000 + r.ru_utime.tv_usec +
           r.ru_stime.tv_usec;
}

static int live(long n, long m, long warmup, int hold, long channels, long threads)
{
    struct rdma_event_channel **ch = calloc((size_t)channels, sizeof *ch);
    struct rdma_cm_id **ids = calloc((size_t)n + 1, sizeof *ids);
    struct got *held = calloc((size_t)n + 1, sizeof *held);
    struct loop *loops = calloc((size_t)threads, sizeof *loops);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!ch || !ids || !held || !loops || !tids)
        die("calloc");
    for (long c = 0; c < channels; c++)
        if (!(ch[c] = rdma_create_event_channel()))
            die("rdma_create_event_channel");
    for (long t = 0; t < threads; t++) {
        loops[t].ch = t == 0 ? ch[0] : rdma_create_event_channel();
        if (!loops[t].ch)
            die("rdma_create_event_channel");
        loops[t].lives = m / threads + (t < m % threads);
    }
    struct loop warm = {.ch = ch[0], .lives = warmup};
    run_lives(&warm);
    long nwarm = 2 * warmup;
    struct rdma_cm_id **warm_ids = calloc((size_t)nwarm + 1, sizeof *warm_ids);
    if (!warm_ids)
        die("calloc");
    for (long i = 0; i < nwarm; i++) {
        struct got g;
        warm_ids[i] = resolved(ch[0], &g);
        release(&g);
    }

    long rss0 = kb("/proc/self/status", "VmRSS:"), slab0 = kb("/proc/meminfo", "Slab:");
    for (long i = 0; i < n; i++) {
        ids[i] = resolved(ch[i % channels], &held[i]);
        if (!hold)
            release(&held[i]);
    }
    long rss1 = kb("/proc/self/status", "VmRSS:"), slab1 = kb("/proc/meminfo", "Slab:");
    for (long i = 0; i < nwarm; i++)
        if (rdma_destroy_id(warm_ids[i]))
            die("rdma_destroy_id");
    free(warm_ids);

    long long cpu0 = cpu_us(), t0 = now_ns();
    for (long t = 0; t < threads; t++)
        if ((errno = pthread_create(&tids[t], NULL, measure, &loops[t])))
            die("pthread_create");
    long long event_ns = 0;
    for (long t = 0; t < threads; t++) {
        if ((errno = pthread_join(tids[t], NULL)))
            die("pthread_join");
        event_ns += loops[t].event_ns;
    }
    long long wall = now_ns() - t0, cpu = cpu_us() - cpu0;

    for (long i = 0; i < n; i++) {
        release(&held[i]);
        if (rdma_destroy_id(ids[i]))
            die("rdma_destroy_id");
    }
    for (long t = 1; t < threads; t++)
        rdma_destroy_event_channel(loops[t].ch);
    for (long c = 0; c < channels; c++)
        rdma_destroy_event_channel(ch[c]);
    printf("live n=%ld m=%ld threads=%ld life_ns=%lld event_ns=%lld cpu_us=%lld rss_kb=%ld,%ld "
           "slab_kb=%ld,%ld\n",
           n, m, threads, m ? wall / m : 0, m ? event_ns / (2 * m) : 0, cpu, rss0, rss1, slab0,
           slab1);
    free(tids), free(loops), free(held), free(ids), free(ch);
    return 0;
}

/* K ids made on CH and destroyed, each destroy timed; their nanoseconds in all. Neither inlined
 * nor cloned: under callgrind (--toggle-collect=timed_destroys) these are the destroys counted,
 * not the cleanup's. */
__attribute__((noinline, noclone)) static long long timed_destroys(struct rdma_event_channel *ch,
                                                                   long k)
{
    long long spent = 0;
    for (long i = 0; i < k; i++) {
        struct rdma_cm_id *id;
        if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
            die("rdma_create_id");
        long long t0 = now_ns();
        if (rdma_destroy_id(id))
            die("rdma_destroy_id");
        spent += now_ns() - t0;
    }
    return spent;
}

static int pending(long p, long k)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id **ids = calloc((size_t)p + 1, sizeof *ids);
    if (!ch || !ids)
        die("setup");
    for (long i = 0; i < p; i++) {
        if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP))
            die("rdma_create_id");
        if (rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 2000))
            die("rdma_resolve_addr");
    }
    /* Address resolution of a local address completes in the kernel's work queue within
     * milliseconds; the count read afterwards says whether every event was there. */
    if (p)
        wait_readable(ch);
    usleep(200000 + (useconds_t)p * 50);
    long long spent = timed_destroys(ch, k);
    if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK))
        die("fcntl");
    long got = 0;
    for (;;) {
        struct got g = {0};
        int rc = api ? cmsafe_get_event(ch, &g.copy) : rdma_get_cm_event(ch, &g.event);
        if (rc) {
            if (errno != EAGAIN)
                die("get");
            break;
        }
        release(&g);
        got++;
    }
    for (long i = 0; i < p; i++)
        if (rdma_destroy_id(ids[i]))
            die("rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    printf("pending p=%ld k=%ld destroy_ns=%lld got=%ld\n", p, k, k ? spent / k : 0, got);
    free(ids);
    return got == p ? 0 : 1;
}

static const char *errno_name(int e)
{
    switch (e) {
    case ENOMEM: return "ENOMEM";
    case ENOSPC: return "ENOSPC";
    case EMFILE: return "EMFILE";
    case EINVAL: return "EINVAL";
    case 0: return "none";
    default: return "other";
    }
}

static int limit(long max, long sample)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id **ids = calloc((size_t)max + 1, sizeof *ids);
    if (!ch || !ids)
        die("setup");
    long made = 0;
    int err = 0;
    while (made < max) {
        if (rdma_create_id(ch, &ids[made], NULL, RDMA_PS_TCP)) {
            err = errno;
            break;
        }
        made++;
    }
    long resolved_n = 0, wrong = 0;
    for (long i = 0; i < made; i++) {
        if (i >= sample && i < made - sample)
            continue;
        if (rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 2000))
            die("rdma_resolve_addr");
        struct got g = get(ch);
        if (g.id != ids[i] || g.type != RDMA_CM_EVENT_ADDR_RESOLVED)
            wrong++;
        release(&g);
        resolved_n++;
    }
    for (long i = 0; i < made; i++)
        if (rdma_destroy_id(ids[i]))
            die("rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    printf("limit made=%ld errno=%s resolved=%ld wrong=%ld\n", made, errno_name(err), resolved_n,
           wrong);
    free(ids);
    return wrong ? 1 : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: scale_live live raw|api N M WARM acked|held CHANNELS THREADS\n"
                    "       scale_live pending raw|api P K\n"
                    "       scale_live limit raw|api MAX SAMPLE\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[2], "raw") && strcmp(argv[2], "api")))
        return usage();
    api = strcmp(argv[2], "api") == 0;
    const char *a = getenv("RXE_ADDR");
    dst.sin_family = AF_INET;
    dst.sin_port = htons(7999);
    if (!a || inet_pton(AF_INET, a, &dst.sin_addr) != 1) {
        fprintf(stderr, "scale_live: set RXE_ADDR to an RDMA-capable IPv4 address\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(argv[1], "live") == 0 && argc == 9) {
        if (strcmp(argv[6], "acked") && strcmp(argv[6], "held"))
            return usage();
        return live(number(argv[3], 0), number(argv[4], 0), number(argv[5], 0),
                    strcmp(argv[6], "held") == 0, number(argv[7], 1), number(argv[8], 1));
    }
    if (strcmp(argv[1], "pending") == 0 && argc == 5)
        return pending(number(argv[3], 0), number(argv[4], 1));
    if (strcmp(argv[1], "limit") == 0 && argc == 5)
        return limit(number(argv[3], 1), number(argv[4], 0));
    return usage();
}
