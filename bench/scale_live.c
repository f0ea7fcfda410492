/* scale_live: cost and memory as live cm_ids grow, on the real stack (Soft-RoCE in the guest,
 * $RXE_ADDR): the host benchmark's shape (tests/host/programs/scale.c) with the kernel's rdma_cm
 * under it. scripts/scale-live runs it raw, through the API, and under the preload in audit and
 * safe mode, and puts the figures side by side.
 *
 *   scale_live live FETCH N[,N...] M WARM HOLD CHANNELS THREADS
 *     First the warm-up, which brings the preload's bounded tables and cmsafe's pools to their
 *     steady state: WARM id lives (below) on the first channel (audit's quarantine of acked
 *     pages, the destroyed ids remembered), then 2 * WARM ids resolved and acked and kept
 *     alive (safe mode's kept copies, which an id's destroy releases: 4,096 of them); those are
 *     destroyed once the first N ids' memory is read, before the timed lives. Then N ids held
 *     live, spread round robin over CHANNELS event channels, each resolved (its ADDR_RESOLVED
 *     got, then acked when HOLD is "acked", held unacked to the end when "held");
 *     then M id lives split over THREADS threads, each on an event channel of its own (the
 *     first thread on the held ids' first channel): rdma_create_id, rdma_resolve_addr and its
 *     ADDR_RESOLVED, rdma_resolve_route and its ROUTE_RESOLVED, rdma_destroy_id. Prints
 *       live n=N m=M threads=T life_ns=L event_ns=E event_median_ns=D reference_median_ns=R
 *         over_reference=Q cpu_us=C rss_kb=B,I slab_kb=B,I fault_waits=W
 *     L: wall time of the loop over M; E: time inside the get and ack (or release) of each
 *     event, over the 2M events, each timed once its channel's fd was readable (the wait for
 *     the kernel's resolution is not in it); D: the median of those 2M times (under emulation
 *     a few events take a hundred times the rest, and move the mean); R: the median time of
 *     the reference, a fixed piece of work timed just before each event when the last
 *     argument is "reference" (else 0; see reference_ns); Q: the median over the events of
 *     each one's time over the reference's just before it (0 without); C: the process's CPU
 *     time over the loop; B and I: VmRSS (and the kernel's Slab, /proc/meminfo) after the
 *     warm-up and after the N ids were made; W: the waits of audit's userfaultfd thread over the
 *     loop (one per fault it answered alone; -1 without the thread). Given several sizes, one
 *     process takes them in turn: ids made (or the last made destroyed) to reach each, then the
 *     lives, a line each. (Only the first size's memory stands alone: the warm-up's ids, freed
 *     after it, leave memory the later ids reuse.)
 *     Under emulation the guest's speed moves between two states, one about twice the other,
 *     for seconds at a time, within a run as much as between runs: the reference moves with
 *     it, so Q is the event's time with that move taken out (on a guest of one vCPU; with two,
 *     each vCPU has its state, and the reference and the event need not share one).
 *
 *   scale_live conns FETCH N[,N...] M WARM
 *     Connections with no QP (the QP numbers of rdma_connect's and rdma_accept's parameters
 *     made up, each once, as cmtime's mimic mode does; the CM alone is at work), one process
 *     both sides: a listen id on $RXE_ADDR, the clients on one event channel and the server's
 *     ids on another. First WARM connection lives (below); then N connections held established
 *     beside M connection lives: the client's id created, its address and route resolved, then
 *     connected; the server's CONNECT_REQUEST got and accepted; the client's CONNECT_RESPONSE
 *     got (with no QP that is its side's event) and rdma_establish called; the server's
 *     ESTABLISHED; the client disconnects; DISCONNECTED at the server, which disconnects
 *     too, then at the client; both ids destroyed: seven events, each got and released once
 *     its fd was readable. Sizes in turn as in live. Prints
 *       conns n=N m=M life_ns=L event_ns=E event_median_ns=D reference_median_ns=R
 *         over_reference=Q cpu_us=C
 *     as live does (E over the 7M events).
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
#include <ctype.h>
#include <dirent.h>
#include <cmsafe.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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

/* The next event of CH got and released. Neither inlined nor cloned under another name: under
 * callgrind (scripts/scale-live --counts) the inclusive instructions of each call of this are
 * one event's get and release. */
__attribute__((noinline, noclone)) static struct got scale_event(struct rdma_event_channel *ch)
{
    struct got g = get(ch);
    release(&g);
    return g;
}

/* The reference: a fixed piece of work (two system calls and a loop over a small array), the
 * same in every mode (nothing of librdmacm or cmsafe in it), timed just before each timed event
 * when asked for. */
static int reference;

static long long reference_ns(void)
{
    static volatile unsigned spin[64];
    long long t0 = now_ns();
    (void)syscall(SYS_getppid);
    for (unsigned i = 0; i < 2048; i++)
        spin[i % 64] = spin[(i * 7) % 64] * 1103515245u + 12345u;
    (void)syscall(SYS_getppid);
    return now_ns() - t0;
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
    long long *times; /* each event's time, when not NULL: room for 2 * lives */
    long long *refs; /* the reference's time beside each */
    long timed;
};

static int by_value(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The median of the N times at T (reordered); 0 for none. */
static long long median_ns(long long *t, long n)
{
    if (!n)
        return 0;
    qsort(t, (size_t)n, sizeof *t, by_value);
    return t[(n - 1) / 2];
}

static int by_ratio(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median over the N events of each one's time over its reference's (the two share the
 * guest's speed of that moment); 0 without the reference. Before the medians: it reads T and R
 * in their order. */
static double median_over_reference(const long long *t, const long long *r, long n)
{
    double *q = calloc((size_t)n + 1, sizeof *q);
    if (!q)
        die("calloc");
    long k = 0;
    for (long i = 0; i < n; i++)
        if (r[i] > 0)
            q[k++] = (double)t[i] / (double)r[i];
    qsort(q, (size_t)k, sizeof *q, by_ratio);
    double m = k ? q[(k - 1) / 2] : 0;
    free(q);
    return m;
}

/* The next event of CH, which must be of TYPE (and ID's, unless ID is NULL), got and released
 * once the fd is readable (the reference timed just before it when asked for), its time and the
 * reference's kept in L; its id. */
static struct rdma_cm_id *timed_event(struct loop *l, struct rdma_event_channel *ch,
                                      struct rdma_cm_id *id, int type)
{
    wait_readable(ch);
    long long ref = reference ? reference_ns() : 0, t0 = now_ns();
    struct got g = scale_event(ch);
    long long t = now_ns() - t0;
    want(&g, id ? id : g.id, type);
    l->event_ns += t;
    if (l->times)
        l->refs[l->timed] = ref, l->times[l->timed++] = t;
    return g.id;
}

static void *run_lives(void *arg)
{
    struct loop *l = arg;
    for (long i = 0; i < l->lives; i++) {
        struct rdma_cm_id *id;
        if (rdma_create_id(l->ch, &id, NULL, RDMA_PS_TCP))
            die("rdma_create_id");
        if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
            die("rdma_resolve_addr");
        timed_event(l, l->ch, id, RDMA_CM_EVENT_ADDR_RESOLVED);
        if (rdma_resolve_route(id, 2000))
            die("rdma_resolve_route");
        timed_event(l, l->ch, id, RDMA_CM_EVENT_ROUTE_RESOLVED);
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

/* The voluntary context switches of the preload's userfaultfd thread (audit mode's fault thread,
 * named cmsafe-uffd): each is a wait for the next fault, so over a loop they count the faults
 * it answered one at a time. -1 when the process has no such thread. */
static long fault_thread_waits(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    long waits = -1;
    struct dirent *e;
    while (waits < 0 && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        long tid = strtol(e->d_name, NULL, 10);
        char path[64], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int named = fgets(comm, sizeof comm, f) && strcmp(comm, "cmsafe-uffd\n") == 0;
        fclose(f);
        if (named) {
            snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
            waits = kb(path, "voluntary_ctxt_switches:");
        }
    }
    closedir(d);
    return waits;
}

static long long cpu_us(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (long long)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000 + r.ru_utime.tv_usec +
           r.ru_stime.tv_usec;
}

/* The held ids' state as the sizes are taken in turn. */
struct held_ids {
    struct rdma_event_channel **ch;
    long channels;
    int hold;
    struct rdma_cm_id **ids;
    struct got *held;
    long live;
};

/* Ids made, or the last made released and destroyed, until N are live. */
static void hold_to(struct held_ids *h, long n)
{
    for (; h->live < n; h->live++) {
        long i = h->live;
        h->ids[i] = resolved(h->ch[i % h->channels], &h->held[i]);
        if (!h->hold)
            release(&h->held[i]);
    }
    for (; h->live > n; h->live--) {
        long i = h->live - 1;
        release(&h->held[i]);
        if (rdma_destroy_id(h->ids[i]))
            die("rdma_destroy_id");
    }
}

/* The sizes a process takes in turn ("N[,N...]"), and the largest. */
struct sizes {
    long at[16];
    long count, most;
};

static int live(const struct sizes *sizes, long m, long warmup, int hold, long channels,
                long threads)
{
    long most = sizes->most;
    struct rdma_event_channel **ch = calloc((size_t)channels, sizeof *ch);
    struct held_ids h = {.ch = ch, .channels = channels, .hold = hold};
    h.ids = calloc((size_t)most + 1, sizeof *h.ids);
    h.held = calloc((size_t)most + 1, sizeof *h.held);
    struct loop *loops = calloc((size_t)threads, sizeof *loops);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    long long *times = calloc((size_t)(2 * m) + 1, sizeof *times);
    long long *refs = calloc((size_t)(2 * m) + 1, sizeof *refs);
    if (!ch || !h.ids || !h.held || !loops || !tids || !times || !refs)
        die("calloc");
    for (long c = 0; c < channels; c++)
        if (!(ch[c] = rdma_create_event_channel()))
            die("rdma_create_event_channel");
    for (long t = 0; t < threads; t++) {
        loops[t].ch = t == 0 ? ch[0] : rdma_create_event_channel();
        if (!loops[t].ch)
            die("rdma_create_event_channel");
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
    for (long s = 0; s < sizes->count; s++) {
        long n = sizes->at[s];
        hold_to(&h, n);
        long rss1 = kb("/proc/self/status", "VmRSS:"), slab1 = kb("/proc/meminfo", "Slab:");
        for (long i = 0; i < nwarm; i++)
            if (rdma_destroy_id(warm_ids[i]))
                die("rdma_destroy_id");
        nwarm = 0;

        for (long t = 0, at = 0; t < threads; t++) {
            loops[t].lives = m / threads + (t < m % threads), loops[t].event_ns = 0;
            loops[t].times = times + at, loops[t].refs = refs + at, loops[t].timed = 0;
            at += 2 * loops[t].lives;
        }
        long waits0 = fault_thread_waits();
        long long cpu0 = cpu_us(), t0 = now_ns();
        for (long t = 0; t < threads; t++)
            if ((errno = pthread_create(&tids[t], NULL, measure, &loops[t])))
                die("pthread_create");
        long long event_ns = 0;
        long timed = 0;
        for (long t = 0; t < threads; t++) {
            if ((errno = pthread_join(tids[t], NULL)))
                die("pthread_join");
            event_ns += loops[t].event_ns;
            timed += loops[t].timed;
        }
        long long wall = now_ns() - t0, cpu = cpu_us() - cpu0;
        /* Each thread's times are contiguous from its start: all 2M filled. */
        long waits = waits0 < 0 ? -1 : fault_thread_waits() - waits0;
        double over = median_over_reference(times, refs, timed);
        printf("live n=%ld m=%ld threads=%ld life_ns=%lld event_ns=%lld event_median_ns=%lld "
               "reference_median_ns=%lld over_reference=%.4f cpu_us=%lld rss_kb=%ld,%ld "
               "slab_kb=%ld,%ld fault_waits=%ld\n",
               n, m, threads, m ? wall / m : 0, m ? event_ns / (2 * m) : 0,
               median_ns(times, timed), median_ns(refs, timed), over, cpu, rss0, rss1, slab0,
               slab1, waits);
    }
    free(warm_ids);

    hold_to(&h, 0);
    for (long t = 1; t < threads; t++)
        rdma_destroy_event_channel(loops[t].ch);
    for (long c = 0; c < channels; c++)
        rdma_destroy_event_channel(ch[c]);
    free(refs), free(times), free(tids), free(loops), free(h.held), free(h.ids), free(ch);
    return 0;
}

/* Both sides of the connections: the listen id, and the clients' and the server's channels. */
struct conns {
    struct rdma_event_channel *client, *server;
    struct rdma_cm_id *listen;
    unsigned qp_num; /* the next made-up QP number: each once, or the CM calls it stale */
    struct loop timed; /* its channel unused: the events' times */
};

/* No QP: the CM takes the QP number from the parameters. */
static struct rdma_conn_param made_up(struct conns *c)
{
    struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1,
                                .retry_count = 7, .rnr_retry_count = 7};
    p.qp_num = c->qp_num++ & 0xffffff;
    return p;
}

/* One connection set up, both sides; the client's id, and the server's in *SERVER. */
static struct rdma_cm_id *connected(struct conns *c, struct rdma_cm_id **server)
{
    struct rdma_cm_id *id;
    if (rdma_create_id(c->client, &id, NULL, RDMA_PS_TCP))
        die("rdma_create_id");
    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
        die("rdma_resolve_addr");
    timed_event(&c->timed, c->client, id, RDMA_CM_EVENT_ADDR_RESOLVED);
    if (rdma_resolve_route(id, 2000))
        die("rdma_resolve_route");
    timed_event(&c->timed, c->client, id, RDMA_CM_EVENT_ROUTE_RESOLVED);
    struct rdma_conn_param p = made_up(c);
    if (rdma_connect(id, &p))
        die("rdma_connect");
    *server = timed_event(&c->timed, c->server, NULL, RDMA_CM_EVENT_CONNECT_REQUEST);
    p = made_up(c);
    if (rdma_accept(*server, &p))
        die("rdma_accept");
    /* With no QP the client's side is CONNECT_RESPONSE, and rdma_establish sends the RTU. */
    timed_event(&c->timed, c->client, id, RDMA_CM_EVENT_CONNECT_RESPONSE);
    if (rdma_establish(id))
        die("rdma_establish");
    timed_event(&c->timed, c->server, *server, RDMA_CM_EVENT_ESTABLISHED);
    return id;
}

static void disconnected(struct conns *c, struct rdma_cm_id *id, struct rdma_cm_id *server)
{
    if (rdma_disconnect(id))
        die("rdma_disconnect");
    timed_event(&c->timed, c->server, server, RDMA_CM_EVENT_DISCONNECTED);
    if (rdma_disconnect(server))
        die("rdma_disconnect");
    timed_event(&c->timed, c->client, id, RDMA_CM_EVENT_DISCONNECTED);
    if (rdma_destroy_id(server) || rdma_destroy_id(id))
        die("rdma_destroy_id");
}

static void conn_lives(struct conns *c, long m)
{
    for (long i = 0; i < m; i++) {
        struct rdma_cm_id *server;
        struct rdma_cm_id *id = connected(c, &server);
        disconnected(c, id, server);
    }
}

/* The timed connection lives: callgrind collects inside this only. */
__attribute__((noinline, noclone)) static void measure_conns(struct conns *c, long m)
{
    conn_lives(c, m);
}

static int conns(const struct sizes *sizes, long m, long warmup)
{
    long most = sizes->most;
    struct conns c = {.qp_num = 1000};
    struct rdma_cm_id **ids = calloc((size_t)most + 1, sizeof *ids);
    struct rdma_cm_id **servers = calloc((size_t)most + 1, sizeof *servers);
    long long *times = calloc((size_t)(7 * m) + 1, sizeof *times);
    long long *refs = calloc((size_t)(7 * m) + 1, sizeof *refs);
    if (!ids || !servers || !times || !refs || !(c.client = rdma_create_event_channel()) ||
        !(c.server = rdma_create_event_channel()))
        die("setup");
    if (rdma_create_id(c.server, &c.listen, NULL, RDMA_PS_TCP))
        die("rdma_create_id");
    if (rdma_bind_addr(c.listen, (struct sockaddr *)&dst))
        die("rdma_bind_addr");
    if (rdma_listen(c.listen, 1024))
        die("rdma_listen");
    conn_lives(&c, warmup);
    long live = 0;
    for (long s = 0; s < sizes->count; s++) {
        for (; live < sizes->at[s]; live++)
            ids[live] = connected(&c, &servers[live]);
        for (; live > sizes->at[s]; live--)
            disconnected(&c, ids[live - 1], servers[live - 1]);
        c.timed = (struct loop){.times = times, .refs = refs};
        long long cpu0 = cpu_us(), t0 = now_ns();
        measure_conns(&c, m);
        long long wall = now_ns() - t0, cpu = cpu_us() - cpu0;
        double over = median_over_reference(times, refs, c.timed.timed);
        printf("conns n=%ld m=%ld life_ns=%lld event_ns=%lld event_median_ns=%lld "
               "reference_median_ns=%lld over_reference=%.4f cpu_us=%lld\n",
               live, m, m ? wall / m : 0, m ? c.timed.event_ns / (7 * m) : 0,
               median_ns(times, c.timed.timed), median_ns(refs, c.timed.timed), over, cpu);
        c.timed.times = NULL;
    }
    for (; live > 0; live--)
        disconnected(&c, ids[live - 1], servers[live - 1]);
    if (rdma_destroy_id(c.listen))
        die("rdma_destroy_id");
    rdma_destroy_event_channel(c.server);
    rdma_destroy_event_channel(c.client);
    free(refs), free(times), free(servers), free(ids);
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

/* The sizes of "N[,N...]", each at least 0. */
static struct sizes size_list(const char *arg)
{
    struct sizes s = {.count = 0};
    long max = (long)(sizeof s.at / sizeof s.at[0]);
    char buf[256];
    if (strlen(arg) >= sizeof buf) {
        fprintf(stderr, "scale_live: %s: too long a list of sizes\n", arg);
        exit(2);
    }
    strcpy(buf, arg);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (s.count == max) {
            fprintf(stderr, "scale_live: %s: at most %ld sizes\n", arg, max);
            exit(2);
        }
        long n = s.at[s.count++] = number(tok, 0);
        s.most = n > s.most ? n : s.most;
    }
    if (!s.count) {
        fprintf(stderr, "scale_live: %s: no size\n", arg);
        exit(2);
    }
    return s;
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
    fprintf(stderr, "usage: scale_live live raw|api N[,N...] M WARM acked|held CHANNELS THREADS "
                    "[reference]\n"
                    "       scale_live conns raw|api N[,N...] M WARM [reference]\n"
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
    if (strcmp(argv[argc - 1], "reference") == 0)
        reference = 1, argc--;
    if (strcmp(argv[1], "live") == 0 && argc == 9) {
        if (strcmp(argv[6], "acked") && strcmp(argv[6], "held"))
            return usage();
        struct sizes sizes = size_list(argv[3]);
        return live(&sizes, number(argv[4], 0), number(argv[5], 0),
                    strcmp(argv[6], "held") == 0, number(argv[7], 1), number(argv[8], 1));
    }
    if (strcmp(argv[1], "conns") == 0 && argc == 6) {
        struct sizes sizes = size_list(argv[3]);
        return conns(&sizes, number(argv[4], 0), number(argv[5], 0));
    }
    if (strcmp(argv[1], "pending") == 0 && argc == 5)
        return pending(number(argv[3], 0), number(argv[4], 1));
    if (strcmp(argv[1], "limit") == 0 && argc == 5)
        return limit(number(argv[3], 1), number(argv[4], 0));
    return usage();
}
