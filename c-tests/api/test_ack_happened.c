/* The ack really happened: while cmsafe copies of a connection's events are still held,
 * rdma_destroy_id on its child id and on the listen id returns. The same program on raw
 * librdmacm, holding the CONNECT_REQUEST unacked, blocks in rdma_destroy_id: shown first, in a
 * child process, so the test bed is proven to see the hang it guards against. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/wait.h>
#include <time.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7472, RAW_PORT = 7473, HANG_SECONDS = 4 };

/* Raw librdmacm: fetch the CONNECT_REQUEST, never ack it, destroy the listener. */
static void raw_child(void)
{
    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, RAW_PORT);
    struct rdma_cm_id *client = cm_client(cch, RAW_PORT);
    cm_connect(client, "raw", 3);
    struct rdma_cm_event *req = NULL;
    REQUIRE(rdma_get_cm_event(sch, &req) == 0, "rdma_get_cm_event: %s", strerror(errno));
    REQUIRE(req->event == RDMA_CM_EVENT_CONNECT_REQUEST, "got %s", rdma_event_str(req->event));
    printf("raw: holding an unacked CONNECT_REQUEST, calling rdma_destroy_id(listen)\n");
    fflush(stdout);
    rdma_destroy_id(listen_id);
    printf("raw: rdma_destroy_id returned\n");
    fflush(stdout);
    _exit(0);
}

/* Returns 1 when the raw child was still blocked after HANG_SECONDS. */
static int raw_destroy_hangs(void)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0)
        raw_child();
    for (int i = 0; i < HANG_SECONDS * 10; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return 0;
        usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 1;
}

int main(void)
{
    harness_watchdog(90);
    /* Before this process touches librdmacm, so the child starts clean. */
    CHECK(raw_destroy_hangs(), "raw librdmacm: rdma_destroy_id returned with an unacked event");

    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    struct rdma_cm_id *client = cm_client(cch, PORT);
    cm_connect(client, "held", 4);

    cmsafe_event *req = cm_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    struct rdma_cm_id *child = cmsafe_event_cm(req)->id;
    rxe_create_qp(child);
    cm_accept(child, NULL, 0);
    cmsafe_event *cest = cm_expect(cch, RDMA_CM_EVENT_ESTABLISHED);
    cmsafe_event *sest = cm_expect(sch, RDMA_CM_EVENT_ESTABLISHED);

    /* Held: req (counted against listen_id) and sest (counted against child). */
    harness_watchdog(20);
    rdma_destroy_qp(child);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(child) while its ESTABLISHED is held");
    CHECK(rdma_destroy_id(listen_id) == 0,
          "rdma_destroy_id(listen) while its CONNECT_REQUEST is held");
    harness_watchdog(60);

    /* The copies outlive the ids they name. */
    CHECK(cmsafe_event_cm(req)->event == RDMA_CM_EVENT_CONNECT_REQUEST, "held copy readable");
    unsigned len = 0;
    const unsigned char *p = cm_pdata(req, &len);
    /* The 4 bytes sent: padded to the REQ's 56 on IB/RoCE, as sent on iWARP. */
    unsigned want = cm_req_len(cm_transport(client), 4);
    CHECK(len == want && memcmp(p, "held", 4) == 0, "held copy's private data (len %u, want %u)",
          len, want);

    /* The client sees the server's destroy as DISCONNECTED. */
    cmsafe_event *cdisc = cm_expect(cch, RDMA_CM_EVENT_DISCONNECTED);
    cmsafe_event_release(cdisc);
    cmsafe_event_release(cest);
    cmsafe_event_release(sest);
    cmsafe_event_release(req);
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(client)");
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
