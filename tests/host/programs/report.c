/* Events for the preload's report (CMSAFE_REPORT):
 *   report events N  N DISCONNECTED events of one id, each got and acked, then the id and its
 *                    channel destroyed: N event records and a destroy record
 *   report fork      an ESTABLISHED got and acked, then fork(2): the child gets and acks one and
 *                    exits 0; the parent waits for it, gets and acks one more, prints
 *                    "child PID" and destroys its id and channel
 *   report closeall FILE keep|unlink
 *                    a DISCONNECTED got and acked; then, as a service that reloads, every
 *                    descriptor above the channel's closed (the preload's report among them), FILE
 *                    created and "program data" written to it (it may get the report's old
 *                    number); with unlink, the report (CMSAFE_REPORT) removed first; then two
 *                    more DISCONNECTED, FILE closed, the id and channel destroyed
 * Exit 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
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

static int closeall(char **args)
{
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_round(id, RDMA_CM_EVENT_DISCONNECTED);
    if (strcmp(args[1], "unlink") == 0)
        REQUIRE(unlink(getenv("CMSAFE_REPORT")) == 0, "unlink the report");
    /* Every descriptor above the channel's (made before the report was opened). */
    REQUIRE(syscall(SYS_close_range, (unsigned)ch->fd + 1, ~0U, 0) == 0, "close_range");
    int fd = open(args[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0, "open %s", args[0]);
    REQUIRE(write(fd, "program data\n", 13) == 13, "write");
    host_round(id, RDMA_CM_EVENT_DISCONNECTED);
    host_round(id, RDMA_CM_EVENT_DISCONNECTED);
    REQUIRE(close(fd) == 0, "close");
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    printf("file at %d\n", fd);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct host_case cases[] = {
        {"events", 1, events},
        {"fork", 0, forked},
        {"closeall", 2, closeall},
    };
    return host_main(argc, argv, cases, sizeof cases / sizeof cases[0],
                     "report events N | fork | closeall FILE keep|unlink");
}
