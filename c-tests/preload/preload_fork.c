/* The preload across fork().
 *   preload_fork [after]   (default) The process forks after its first event, then parent and
 *     child each do CM work of their own.
 *     Before the fork: 1 ADDR_RESOLVED (the parent's client id, acked).
 *     Child: a new channel and a listener on $RXE_ADDR:7490; fetches CONNECT_REQUEST, rejects and
 *     acks it, destroys its ids and channel, exits 0.
 *     Parent: ROUTE_RESOLVED, connects to the child's listener, REJECTED; all acked; destroys its
 *     id and channel, waits for the child.
 *   preload_fork before   The process forks before touching librdmacm at all (as qperf's server
 *     does per test): the parent never touches it and only waits; the child resolves an address
 *     and a route (ADDR_RESOLVED, ROUTE_RESOLVED, acked), destroys its id and channel, exits 0.
 * Every event is acked at once: no finding in any process. Prints on stdout
 * "preload_fork: parent <pid> child <pid>" (the runner looks for one report file per process
 * that touched librdmacm) and the harness line. Exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/wait.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7490 };

static void child_main(int ready_fd)
{
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *listen_id = raw_listen(ch, PORT);
    REQUIRE(write(ready_fd, "r", 1) == 1, "write: %s", strerror(errno));
    close(ready_fd);
    struct rdma_cm_event *req = raw_get(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    struct rdma_cm_id *conn = req->id;
    raw_reject(conn);
    raw_ack(req);
    CHECK_EQ_INT(rdma_destroy_id(conn), 0);
    CHECK_EQ_INT(rdma_destroy_id(listen_id), 0);
    rdma_destroy_event_channel(ch);
    fprintf(stderr, "step: child %d done, %d passed, %d failed\n", (int)getpid(), harness_passed,
            harness_failed);
    exit(harness_failed ? 1 : 0); /* exit(), not _exit(): the child's atexit handlers run */
}

/* The "before" case: the parent forks first and never touches librdmacm. */
static int fork_before(void)
{
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        struct rdma_event_channel *ch = raw_channel();
        struct rdma_cm_id *id = raw_client(ch, PORT, 0); /* ADDR_RESOLVED, ROUTE_RESOLVED */
        CHECK_EQ_INT(rdma_destroy_id(id), 0);
        rdma_destroy_event_channel(ch);
        fprintf(stderr, "step: child %d done, %d passed, %d failed\n", (int)getpid(),
                harness_passed, harness_failed);
        exit(harness_failed ? 1 : 0);
    }
    printf("preload_fork: parent %d child %d\n", (int)getpid(), (int)pid);
    fflush(stdout);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status 0x%x", status);
    return harness_exit();
}

int main(int argc, char **argv)
{
    int before = argc > 1 && strcmp(argv[1], "before") == 0;
    REQUIRE(argc < 2 || before || strcmp(argv[1], "after") == 0, "usage: preload_fork [after|before]");
    harness_watchdog(60);
    if (before)
        return fork_before();
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED); /* the process's first event */

    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(pipefd[0]);
        child_main(pipefd[1]);
    }
    close(pipefd[1]);
    printf("preload_fork: parent %d child %d\n", (int)getpid(), (int)pid);
    fflush(stdout);
    char c;
    REQUIRE(read(pipefd[0], &c, 1) == 1, "the child never listened");
    close(pipefd[0]);

    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    /* The child only rejects: no QP of the program's (raw_connect makes the one iWARP needs). */
    raw_connect(id, RAW_TOKEN, sizeof RAW_TOKEN);
    raw_get_ack(ch, RDMA_CM_EVENT_REJECTED);
    CHECK_EQ_INT(raw_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);

    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status 0x%x", status);
    return harness_exit();
}
