/* Copy path, no kernel: the cost per event of cmsafe's copy and bookkeeping (cmsafe_event_copy,
 * then cmsafe_event_release) against the copy people write by hand today (malloc the struct,
 * malloc and memcpy the private data, free both), on synthetic events of each kind, in the same
 * run. Prints ns per event (median of RUNS runs of BATCH events, in this thread's CPU time,
 * CLOCK_THREAD_CPUTIME_ID, so that time the machine gives to other processes is not counted:
 * these machines are shared) and heap allocations per event,
 * counted by malloc/calloc/realloc defined in this executable (they interpose for every library
 * in the process, libcmsafe.so included).
 *
 * Then memory: the resident bytes each live copy costs, measured by holding HELD copies at once
 * and reading VmRSS before and after (events without private data, then with 56 bytes, the
 * difference being the private data buffer), for cmsafe and for the hand copy.
 *
 *   copy_path [RUNS] [BATCH] [HELD]
 *   copy_path profile N     cmsafe only: N copies of each kind, for perf record
 *   copy_path insns K N     N copies of kind K (0-5) each way after a warm-up, inside
 *                           count_cmsafe and count_hand: for callgrind's --toggle-collect
 *                           (scripts/copy-insns), a count where the times above are noisy
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cmsafe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- counting allocator -------------------------------------------------------------------- */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
static unsigned long long allocs;

void *malloc(size_t n) { allocs++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { allocs++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { allocs++; return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }

/* ---- synthetic events ------------------------------------------------------------------------ */

struct kind {
    const char *name;
    struct rdma_cm_event ev;
};

static unsigned char pdata[256];
static struct ibv_device device;
static struct ibv_context verbs;
static struct rdma_cm_id rc_id, ud_id, listen_id;
static int mcast_context;

static void init_id(struct rdma_cm_id *id, enum ibv_qp_type qp_type)
{
    struct sockaddr_in *src = (struct sockaddr_in *)&id->route.addr.src_addr;
    struct sockaddr_in *dst = (struct sockaddr_in *)&id->route.addr.dst_addr;
    id->verbs = &verbs;
    id->qp_type = qp_type;
    src->sin_family = dst->sin_family = AF_INET;
    src->sin_port = htons(7471);
    dst->sin_port = htons(40123);
    inet_pton(AF_INET, "192.0.2.1", &src->sin_addr);
    inet_pton(AF_INET, "192.0.2.7", &dst->sin_addr);
}

static struct rdma_cm_event conn_event(enum rdma_cm_event_type t, int status, unsigned char len)
{
    struct rdma_cm_event ev;
    memset(&ev, 0, sizeof ev);
    ev.id = &rc_id;
    ev.event = t;
    ev.status = status;
    ev.param.conn.private_data = len ? pdata : NULL;
    ev.param.conn.private_data_len = len;
    return ev;
}

/* ---- the two copies -------------------------------------------------------------------------- */

static void cmsafe_copy(const struct rdma_cm_event *raw)
{
    cmsafe_event *ev;
    if (cmsafe_event_copy(raw, &ev) != 0) {
        perror("cmsafe_event_copy");
        exit(1);
    }
    cmsafe_event_release(ev);
}

/* The hand copy: which member carries the private data, as people write it. */
static void hand_copy(const struct rdma_cm_event *raw)
{
    struct rdma_cm_event *copy = malloc(sizeof *copy);
    *copy = *raw;
    void *p = NULL;
    unsigned char len = raw->param.conn.private_data_len;
    if (raw->event != RDMA_CM_EVENT_MULTICAST_JOIN && raw->param.conn.private_data && len) {
        p = malloc(len);
        memcpy(p, raw->param.conn.private_data, len);
        copy->param.conn.private_data = p;
    }
    __asm__ volatile("" : : "r"(copy), "r"(p) : "memory");
    free(p);
    free(copy);
}

/* The loops scripts/copy-insns counts instructions in, by name (kept out of line for that). */
__attribute__((noinline)) static void count_cmsafe(const struct rdma_cm_event *ev, long n)
{
    for (long i = 0; i < n; i++)
        cmsafe_copy(ev);
}

__attribute__((noinline)) static void count_hand(const struct rdma_cm_event *ev, long n)
{
    for (long i = 0; i < n; i++)
        hand_copy(ev);
}

/* Resident set size, bytes (VmRSS in /proc/self/status). */
static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static double held_bytes_here(int use_cmsafe, const struct rdma_cm_event *ev, int held);

/* Bytes of resident memory per held copy of `ev`, cmsafe or hand-made, measured in a child
 * process so that no earlier measurement's pages are reused. */
static double held_bytes(int use_cmsafe, const struct rdma_cm_event *ev, int held)
{
    int fds[2];
    double result = 0;
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        double b = held_bytes_here(use_cmsafe, ev, held);
        if (write(fds[1], &b, sizeof b) != sizeof b)
            _exit(1);
        _exit(0);
    }
    if (read(fds[0], &result, sizeof result) != sizeof result)
        result = -1;
    waitpid(pid, NULL, 0);
    close(fds[0]);
    close(fds[1]);
    return result;
}

static double held_bytes_here(int use_cmsafe, const struct rdma_cm_event *ev, int held)
{
    void **keep = __libc_malloc(sizeof(void *) * (size_t)held);
    void **pd = __libc_malloc(sizeof(void *) * (size_t)held);
    memset(keep, 0, sizeof(void *) * (size_t)held);
    memset(pd, 0, sizeof(void *) * (size_t)held);
    /* One copy made and freed first, so that the code's own pages (faulted in again after the
     * fork) and first-use set-up are not counted as memory per copy. */
    if (use_cmsafe) {
        cmsafe_event *warm;
        if (cmsafe_event_copy(ev, &warm) == 0)
            cmsafe_event_release(warm);
    } else {
        free(malloc(sizeof *ev));
    }
    long before = rss_bytes();
    for (int i = 0; i < held; i++) {
        if (use_cmsafe) {
            if (cmsafe_event_copy(ev, (cmsafe_event **)&keep[i]) != 0) {
                perror("cmsafe_event_copy");
                exit(1);
            }
        } else {
            struct rdma_cm_event *c = malloc(sizeof *c);
            *c = *ev;
            unsigned char len = ev->param.conn.private_data_len;
            if (len) {
                pd[i] = malloc(len);
                memcpy(pd[i], ev->param.conn.private_data, len);
            }
            keep[i] = c;
        }
    }
    long after = rss_bytes();
    for (int i = 0; i < held; i++) {
        if (use_cmsafe) {
            cmsafe_event_release(keep[i]);
        } else {
            free(pd[i]);
            free(keep[i]);
        }
    }
    __libc_free(keep);
    __libc_free(pd);
    return (double)(after - before) / held;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ns per event over `runs` runs of `batch` copies; allocations per event. */
static void measure(void (*copy)(const struct rdma_cm_event *), const struct rdma_cm_event *ev,
                    int runs, int batch, double *ns, double *allocs_per_event)
{
    double *t = malloc(sizeof(double) * runs);
    for (int i = 0; i < batch; i++) /* warm up: pools, caches */
        copy(ev);
    unsigned long long a0 = allocs;
    for (int r = 0; r < runs; r++) {
        double start = now_ns();
        for (int i = 0; i < batch; i++)
            copy(ev);
        t[r] = (now_ns() - start) / batch;
    }
    *allocs_per_event = (double)(allocs - a0 - 0) / ((double)runs * batch);
    qsort(t, runs, sizeof *t, cmp);
    *ns = t[runs / 2];
    free(t);
}

int main(int argc, char **argv)
{
    int profile = argc > 2 && strcmp(argv[1], "profile") == 0;
    int insns = argc > 1 && strcmp(argv[1], "insns") == 0;
    int runs = argc > 1 && !profile && !insns ? atoi(argv[1]) : 51;
    int batch = argc > 2 ? atoi(argv[2]) : 20000;
    int held = argc > 3 ? atoi(argv[3]) : 100000;
    for (unsigned i = 0; i < sizeof pdata; i++)
        pdata[i] = (unsigned char)(i * 7 + 3);
    device.transport_type = IBV_TRANSPORT_IB;
    verbs.device = &device;
    init_id(&rc_id, IBV_QPT_RC);
    init_id(&ud_id, IBV_QPT_UD);
    init_id(&listen_id, IBV_QPT_RC);

    struct kind kinds[6];
    kinds[0].name = "CONNECT_REQUEST (56 B)";
    kinds[0].ev = conn_event(RDMA_CM_EVENT_CONNECT_REQUEST, 0, 56);
    kinds[0].ev.listen_id = &listen_id;
    kinds[1].name = "ESTABLISHED (196 B)";
    kinds[1].ev = conn_event(RDMA_CM_EVENT_ESTABLISHED, 0, 196);
    kinds[2].name = "REJECTED (148 B)";
    kinds[2].ev = conn_event(RDMA_CM_EVENT_REJECTED, 28, 148);
    kinds[3].name = "DISCONNECTED (none)";
    kinds[3].ev = conn_event(RDMA_CM_EVENT_DISCONNECTED, 0, 0);
    kinds[4].name = "UD CONNECT_REQUEST (20 B)";
    kinds[4].ev = conn_event(RDMA_CM_EVENT_CONNECT_REQUEST, 0, 0);
    kinds[4].ev.id = &ud_id;
    kinds[4].ev.param.ud.private_data = pdata;
    kinds[4].ev.param.ud.private_data_len = 20;
    kinds[4].ev.param.ud.qp_num = 0x1234;
    kinds[4].ev.param.ud.qkey = 0x11111111;
    kinds[5].name = "MULTICAST_JOIN (context)";
    kinds[5].ev = conn_event(RDMA_CM_EVENT_MULTICAST_JOIN, 0, 0);
    kinds[5].ev.id = &ud_id;
    kinds[5].ev.param.ud.private_data = &mcast_context;

    if (insns) {
        int k = argc > 3 ? atoi(argv[2]) : -1;
        long n = argc > 3 ? atol(argv[3]) : 0;
        if (k < 0 || k > 5 || n <= 0) {
            fprintf(stderr, "copy_path insns: K is 0-5, N > 0\n");
            return 2;
        }
        /* Warm-up outside the counted loops: the pool's first slots, the thread's block. */
        for (int i = 0; i < 1000; i++) {
            cmsafe_copy(&kinds[k].ev);
            hand_copy(&kinds[k].ev);
        }
        count_cmsafe(&kinds[k].ev, n);
        count_hand(&kinds[k].ev, n);
        printf("%s\n", kinds[k].name);
        return 0;
    }
    if (profile) {
        long n = atol(argv[2]);
        for (int k = 0; k < 6; k++)
            for (long i = 0; i < n; i++)
                cmsafe_copy(&kinds[k].ev);
        return 0;
    }
    printf("copy path, no kernel: median of %d runs of %d events each, ns of thread CPU time\n\n", runs,
           batch);
    printf("| event | cmsafe ns/event | hand copy ns/event | hand / cmsafe | cmsafe allocs/event | hand allocs/event | <= 25 ns and <= hand |\n");
    printf("|---|---:|---:|---:|---:|---:|---|\n");
    double worst_ns = 0, worst_ratio = 1e9, worst_allocs = 0;
    for (int k = 0; k < 6; k++) {
        double c_ns, c_allocs, h_ns, h_allocs;
        /* Alternate the two, so drift in the machine hits both. */
        measure(cmsafe_copy, &kinds[k].ev, runs, batch, &c_ns, &c_allocs);
        measure(hand_copy, &kinds[k].ev, runs, batch, &h_ns, &h_allocs);
        printf("| %s | %.1f | %.1f | %.2fx | %.3f | %.3f | %s |\n", kinds[k].name, c_ns, h_ns, h_ns / c_ns,
               c_allocs, h_allocs, c_ns <= 25 && c_ns <= h_ns ? "met" : "NOT met");
        if (c_ns > worst_ns) worst_ns = c_ns;
        if (h_ns / c_ns < worst_ratio) worst_ratio = h_ns / c_ns;
        if (c_allocs > worst_allocs) worst_allocs = c_allocs;
    }
    printf("\ntargets: every event <= 25 ns: %s (worst %.1f); no slower than the hand copy: %s (worst hand/cmsafe %.2fx); "
           "zero allocations per event: %s (worst %.3f)\n",
           worst_ns <= 25 ? "met" : "NOT met", worst_ns, worst_ratio >= 1 ? "met" : "NOT met", worst_ratio,
           worst_allocs == 0 ? "met" : "NOT met", worst_allocs);

    /* Memory: each measured in its own child process. */
    double c_ev = held_bytes(1, &kinds[3].ev, held), h_ev = held_bytes(0, &kinds[3].ev, held);
    double c_pd = held_bytes(1, &kinds[0].ev, held) - c_ev, h_pd = held_bytes(0, &kinds[0].ev, held) - h_ev;
    printf("\nmemory, %d copies held at once (VmRSS delta / copies):\n\n", held);
    printf("| bytes per live | cmsafe | hand copy | cmsafe / hand | target <= 1.5x |\n|---|---:|---:|---:|---|\n");
    printf("| event (no private data, IPv4 addresses) | %.1f | %.1f | %.3fx | %s |\n", c_ev, h_ev, c_ev / h_ev,
           c_ev <= 1.5 * h_ev ? "met" : "NOT met");
    printf("| private data buffer (56 B) | %.1f | %.1f | %.3fx | %s |\n", c_pd, h_pd, c_pd / h_pd,
           c_pd <= 1.5 * h_pd ? "met" : "NOT met");
    printf("\nA cmsafe copy is one pooled slot: librdmacm's struct, sequence number, fetch time, the "
           "buffer's own refcount and flags, then the private data bytes and the id's two addresses at "
           "their family's length (IPv4: 16 bytes each); a hand copy of the hand kind above holds neither "
           "addresses nor sequence number nor time.\n");
    return 0;
}
