/* Misuse: rejected-id-never-destroyed. A server rejects every connection request and acks the
 * CONNECT_REQUEST, but never destroys the request's new id: each keeps a kernel cm_id (and
 * librdmacm's memory) until the process exits. A listener and a client in one process; ROUNDS
 * (65) rounds of: client id, ADDR_RESOLVED, ROUTE_RESOLVED, connect; CONNECT_REQUEST (rejected,
 * acked, the id kept); the client's REJECTED (acked), client id destroyed. 4 events a round.
 * On stderr "step: rejecting 65 connection requests, destroying none of their ids" first.
 * Then it prints "kernel cm_ids of this process: N" (from `rdma resource show cm_id`: the listen
 * id and one per rejected request, 66) before "step: done", and exits 0. The audit's finding
 * comes at the 64th rejected id alive (CMSAFE_REJECTED_IDS, 64 by default), and its exit summary
 * counts the 65 ids never destroyed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7489, ROUNDS = 65 };

static int kernel_cm_ids(void)
{
    char cmd[96], line[512];
    snprintf(cmd, sizeof cmd, "rdma resource show cm_id 2>/dev/null");
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char pid[32];
    snprintf(pid, sizeof pid, " pid %d ", (int)getpid());
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, pid))
            n++;
    pclose(f);
    return n;
}

int main(void)
{
    struct rdma_event_channel *sch = raw_channel(), *cch = raw_channel();
    struct rdma_cm_id *listen_id = raw_listen(sch, PORT);
    STEP("rejecting %d connection requests, destroying none of their ids", ROUNDS);
    for (int i = 0; i < ROUNDS; i++) {
        struct rdma_cm_id *client = raw_client(cch, PORT, 0);
        raw_connect(client, NULL, 0);
        struct rdma_cm_event *req = raw_get(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
        raw_reject(req->id); /* and req->id is never destroyed */
        raw_ack(req);
        raw_get_ack(cch, RDMA_CM_EVENT_REJECTED);
        CHECK_EQ_INT(rdma_destroy_id(client), 0);
    }
    printf("kernel cm_ids of this process: %d\n", kernel_cm_ids());
    fflush(stdout);
    STEP("done");
    CHECK_EQ_INT(rdma_destroy_id(listen_id), 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
