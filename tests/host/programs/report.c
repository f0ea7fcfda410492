/* Events for the preload's report (CMSAFE_REPORT):
 *   report events N  N DISCONNECTED events of one id, each got and acked, then the id and its
 *                    channel destroyed: N event records and a destroy record
 *   report fork      an ESTABLISHED got and acked, then fork(2): the child gets and acks one and
 *                    exits 0; the parent waits for it, gets and acks one more, prints
 *                    "child PID" and destroys its id and channel
 * Exit 0. */
#define _GNU_SOURCE
#include <sys/wait.h>

#include "host.h"

static int events(char **args)
{
    int n = atoi(args[0]);
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    for (int i = 0; i < n; i++)
        host_round(id, RDMA_CM_EVENT_DISCONNECTED);
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    printf("%d events\n", n);
    return 0;
}

static int forked(char **args)
{
    (void)args;
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_round(id, RDMA_CM_EVENT_ESTABLISHED);
    pid_t child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        host_round(id, RDMA_CM_EVENT_ESTABLISHED);
        exit(0);
    }
    int status;
    REQUIRE(waitpid(child, &status, 0) == child, "waitpid");
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's status %#x", status);
    host_round(id, RDMA_CM_EVENT_ESTABLISHED);
    printf("child %d\n", (int)child);
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct host_case cases[] = {
        {"events", 1, events},
        {"fork", 0, forked},
    };
    return host_main(argc, argv, cases, sizeof cases / sizeof cases[0],
                     "report events N | fork");
}
