/* The classic misuses of CM events, one per case, on the stand-in librdmacm:
 *   events use-after-ack TOKEN  a CONNECT_REQUEST carrying TOKEN as private data, acked, then its
 *                               private data read: prints "before the ack: " and "after the ack: "
 *                               with the bytes read (raw, the second read is of freed memory)
 *   events never-acked          an ESTABLISHED got and never acked, then exit
 *   events double-ack           an ESTABLISHED acked twice (raw, librdmacm frees it twice)
 *   events destroy-unacked      an ESTABLISHED got and never acked, then rdma_destroy_id of its id:
 *                               prints the events librdmacm still counts unacked, then "rdma_destroy_id
 *                               returned", or, still blocked 500 ms later, says so and exits 3
 *   events nonblocking          on an O_NONBLOCK channel fd: rdma_get_cm_event with nothing queued,
 *                               then poll(2), an event queued, poll(2) and rdma_get_cm_event again;
 *                               prints what each returned
 *   events destroy-qp-held MS   an event thread gets a DISCONNECTED and holds it MS ms before its
 *                               ack while the main thread calls rdma_destroy_qp on its id (which
 *                               in librdmacm waits for no ack): prints whether the call returned
 *                               "before the ack" or "after the ack"
 * Exit 0 when the case ran to its end. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/time.h>

#include "host.h"

static int use_after_ack(char **args)
{
    const char *token = args[0];
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *listen = host_id(ch);
    REQUIRE(rdma_listen(listen, 1) == 0, "rdma_listen");
    struct rdma_cm_id *child = host_queue(listen, RDMA_CM_EVENT_CONNECT_REQUEST, token);
    struct rdma_cm_event *req = host_get(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    REQUIRE(req->id == child && req->listen_id == listen, "the request's ids");
    const unsigned char *pdata = req->param.conn.private_data;
    unsigned len = req->param.conn.private_data_len;
    REQUIRE(pdata && len == strlen(token), "private data of %u bytes", len);
    host_print_bytes("before the ack: ", pdata, len);
    host_ack(req);
    unsigned char got[256];
    memcpy(got, pdata, len); /* the misuse: the event's memory after its ack */
    host_print_bytes("after the ack: ", got, len);
    REQUIRE(rdma_destroy_id(child) == 0, "rdma_destroy_id(child)");
    REQUIRE(rdma_destroy_id(listen) == 0, "rdma_destroy_id(listen)");
    rdma_destroy_event_channel(ch);
    return 0;
}

static int never_acked(char **args)
{
    (void)args;
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
    host_get(ch, RDMA_CM_EVENT_ESTABLISHED);
    printf("got ESTABLISHED, never acked\n");
    return 0;
}

static int double_ack(char **args)
{
    (void)args;
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
    struct rdma_cm_event *ev = host_get(ch, RDMA_CM_EVENT_ESTABLISHED);
    host_ack(ev);
    host_ack(ev);
    printf("acked twice\n");
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    return 0;
}

static void still_blocked(int sig)
{
    (void)sig;
    static const char line[] = "rdma_destroy_id still blocked after 500 ms\n";
    (void)!write(1, line, sizeof line - 1);
    _exit(3);
}

static int destroy_unacked(char **args)
{
    (void)args;
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
    host_get(ch, RDMA_CM_EVENT_ESTABLISHED);
    printf("unacked in librdmacm: %u\n", standin_unacked(id));
    struct sigaction sa = {.sa_handler = still_blocked};
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    struct itimerval t = {.it_value = {.tv_usec = 500 * 1000}};
    REQUIRE(setitimer(ITIMER_REAL, &t, NULL) == 0, "setitimer");
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    printf("rdma_destroy_id returned\n");
    rdma_destroy_event_channel(ch);
    return 0;
}

/* The process's resident set, in KiB (/proc/self/status). */
static long resident_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    REQUIRE(f, "fopen /proc/self/status");
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* N ids, each with one event carrying private data that is never acked, each destroyed (raw,
 * the destroy would wait forever: under safe mode only). The resident set after the first 20,000
 * (past the 4,096 records safe mode keeps of released copies, for a late ack) and at the end, in
 * KiB. */
static int destroy_never_acked(char **args)
{
    long n = strtol(args[0], NULL, 10);
    struct rdma_event_channel *ch = host_channel();
    long warm = 0;
    for (long i = 0; i < n; i++) {
        if (i == 20000)
            warm = resident_kib();
        struct rdma_cm_id *id = host_id(ch);
        host_queue(id, RDMA_CM_EVENT_CONNECT_RESPONSE, "never acked, destroyed: 0123456789");
        host_get(ch, RDMA_CM_EVENT_CONNECT_RESPONSE);
        REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    }
    printf("resident after 20000: %ld KiB, after %ld: %ld KiB\n", warm, n, resident_kib());
    rdma_destroy_event_channel(ch);
    return 0;
}

/* An event got, its id destroyed (raw, that waits forever: under safe mode only), then the
 * event acked late: the program's own ack, not a double ack. */
static int ack_after_destroy(char **args)
{
    (void)args;
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_queue(id, RDMA_CM_EVENT_DISCONNECTED, NULL);
    struct rdma_cm_event *ev = host_get(ch, RDMA_CM_EVENT_DISCONNECTED);
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    printf("rdma_destroy_id returned\n");
    host_ack(ev);
    printf("acked after the destroy\n");
    rdma_destroy_event_channel(ch);
    return 0;
}

static int readable(struct rdma_event_channel *ch)
{
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    REQUIRE(n >= 0, "poll");
    return n;
}

static int nonblocking(char **args)
{
    (void)args;
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    REQUIRE(fcntl(ch->fd, F_SETFL, O_NONBLOCK) == 0, "fcntl");
    struct rdma_cm_event *ev = NULL;
    int rc = rdma_get_cm_event(ch, &ev);
    int again = rc == -1 && errno == EAGAIN;
    printf("nothing queued: rdma_get_cm_event %d, %s; poll %d\n", rc,
           again ? "EAGAIN" : "not EAGAIN", readable(ch));
    host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
    printf("one queued: poll %d\n", readable(ch));
    host_ack(host_get(ch, RDMA_CM_EVENT_ESTABLISHED));
    printf("got and acked: poll %d\n", readable(ch));
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    return 0;
}

struct held {
    struct rdma_event_channel *ch;
    unsigned hold_ms;
    atomic_int holding, acked;
};

static void *hold_disconnected(void *arg)
{
    struct held *h = arg;
    struct rdma_cm_event *ev = host_get(h->ch, RDMA_CM_EVENT_DISCONNECTED);
    atomic_store(&h->holding, 1);
    usleep(h->hold_ms * 1000);
    atomic_store(&h->acked, 1);
    host_ack(ev);
    return NULL;
}

static int destroy_qp_held(char **args)
{
    struct held h = {.ch = host_channel(), .hold_ms = (unsigned)atoi(args[0])};
    struct rdma_cm_id *id = host_id(h.ch);
    host_queue(id, RDMA_CM_EVENT_DISCONNECTED, NULL);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, hold_disconnected, &h) == 0, "pthread_create");
    while (!atomic_load(&h.holding))
        usleep(1000);
    rdma_destroy_qp(id);
    printf("rdma_destroy_qp returned %s the ack\n", atomic_load(&h.acked) ? "after" : "before");
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(h.ch);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct host_case cases[] = {
        {"use-after-ack", 1, use_after_ack},
        {"never-acked", 0, never_acked},
        {"double-ack", 0, double_ack},
        {"destroy-unacked", 0, destroy_unacked},
        {"nonblocking", 0, nonblocking},
        {"destroy-never-acked", 1, destroy_never_acked},
        {"ack-after-destroy", 0, ack_after_destroy},
        {"destroy-qp-held", 1, destroy_qp_held},
    };
    return host_main(argc, argv, cases, sizeof cases / sizeof cases[0],
                     "events use-after-ack TOKEN | never-acked | double-ack | destroy-unacked | "
                     "nonblocking | destroy-never-acked N | ack-after-destroy | "
                     "destroy-qp-held MS");
}
