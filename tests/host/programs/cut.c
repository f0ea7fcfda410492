/* Reads of rdma_get_cm_event left without returning, on an empty channel (nothing is lost: the
 * read is interrupted before any event):
 *   cut longjmp N  N times: alarm by setitimer(2) 50 ms on, a SIGALRM handler that siglongjmps
 *                  out of the blocked rdma_get_cm_event, "timeout I"; then one ESTABLISHED got
 *                  and acked, "got ESTABLISHED"
 *   cut cancel N   N threads each blocked in rdma_get_cm_event, cancelled and joined,
 *                  "cancelled I"; then one ESTABLISHED got and acked, "got ESTABLISHED"
 * Then the id and the channel destroyed; exit 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/time.h>

#include "host.h"

static struct rdma_event_channel *ch;
static sigjmp_buf timed_out;

static void on_alarm(int sig)
{
    (void)sig;
    siglongjmp(timed_out, 1);
}

static void *reader(void *arg)
{
    (void)arg;
    struct rdma_cm_event *ev = NULL;
    rdma_get_cm_event(ch, &ev);
    printf("unexpected event\n");
    return NULL;
}

static void one_event(struct rdma_cm_id *id)
{
    host_round(id, RDMA_CM_EVENT_ESTABLISHED);
    printf("got ESTABLISHED\n");
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
}

static int by_longjmp(char **args)
{
    int n = atoi(args[0]);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    for (volatile int i = 1; i <= n; i++) {
        if (sigsetjmp(timed_out, 1) == 0) {
            struct itimerval t = {.it_value = {.tv_usec = 50000}};
            REQUIRE(setitimer(ITIMER_REAL, &t, NULL) == 0, "setitimer");
            struct rdma_cm_event *ev = NULL;
            rdma_get_cm_event(ch, &ev);
            printf("unexpected event\n");
            return 1;
        }
        printf("timeout %d\n", i);
    }
    one_event(id);
    return 0;
}

static int by_cancel(char **args)
{
    int n = atoi(args[0]);
    ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    for (int i = 1; i <= n; i++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, reader, NULL) == 0, "pthread_create");
        usleep(50000); /* blocked in the read by then */
        REQUIRE(pthread_cancel(t) == 0, "pthread_cancel");
        void *ret = NULL;
        REQUIRE(pthread_join(t, &ret) == 0, "pthread_join");
        REQUIRE(ret == PTHREAD_CANCELED, "the thread was not cancelled");
        printf("cancelled %d\n", i);
    }
    one_event(id);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct host_case cases[] = {
        {"longjmp", 1, by_longjmp},
        {"cancel", 1, by_cancel},
    };
    return host_main(argc, argv, cases, sizeof cases / sizeof cases[0],
                     "cut longjmp N | cancel N");
}
