/* Misuse: rejected-id-never-destroyed. A server rejects every connection request and acks the
 * CONNECT_REQUEST, but never destroys the request's new id: each keeps a kernel cm_id (and
 * librdmacm's memory) until the process exits. A listener and a client in one process; ROUNDS
 * (65) rounds of: client id, ADDR_RESOLVED, ROUTE_RESOLVED, connect; CONNECT_REQUEST (rejected,
 * acked, the id kept); the client's REJECTED (acked), client id destroyed. 4 events a round.
 * On stderr "step: rejecting 65 connection requests, destroying none of their ids" first.
 * Then it prints "kernel cm_ids of this process: N" (from `rdma resource show cm_id`: the listen
 * id and one per rejected request, 66) before "step: done", and exits 0. The audit's finding
 * comes at the 64th rejected id alive (CMSAFE_REJECTED_IDS, 64 by default), and its exit summary
 * counts the 65 ids never destroyed.
 *
 *   misuse_rejected_not_destroyed sync: the listener is a synchronous id (rdma_create_id with
 *   no channel) and each request's id comes from rdma_get_request, as librdmacm's rdma_server
 *   example does; librdmacm gets the CONNECT_REQUEST itself and keeps it in the request id's
 *   `event`, unacked until that id is destroyed. So the listen id cannot be destroyed either
 *   (librdmacm counts a CONNECT_REQUEST against its listen id: rdma_destroy_id would wait for
 *   good), and the summary counts 66 ids never destroyed, 65 of rejected requests: the ids
 *   rdma_get_request handed out are the program's, though librdmacm got their events. */
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

/* A synchronous listen id on PORT: its events are librdmacm's to get (rdma_get_request). */
static struct rdma_cm_id *sync_listen(void)
{
    struct rdma_cm_id *id = NULL;
    CHECK_EQ_INT(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
    struct sockaddr_in a = rxe_addr(PORT);
    CHECK_EQ_INT(rdma_bind_addr(id, (struct sockaddr *)&a), 0);
    CHECK_EQ_INT(rdma_listen(id, 128), 0);
    return id;
}

int main(int argc, char **argv)
{
    int sync = argc > 1 && strcmp(argv[1], "sync") == 0;
    struct rdma_event_channel *sch = raw_channel(), *cch = raw_channel();
    struct rdma_cm_id *listen_id = sync ? sync_listen() : raw_listen(sch, PORT);
    STEP("rejecting %d connection requests, destroying none of their ids", ROUNDS);
    for (int i = 0; i < ROUNDS; i++) {
        struct rdma_cm_id *client = raw_client(cch, PORT, 0);
        raw_connect(client, NULL, 0);
        if (sync) {
            struct rdma_cm_id *req_id = NULL;
            CHECK_EQ_INT(rdma_get_request(listen_id, &req_id), 0);
            raw_reject(req_id); /* and req_id is never destroyed */
        } else {
            struct rdma_cm_event *req = raw_get(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
            raw_reject(req->id); /* and req->id is never destroyed */
            raw_ack(req);
        }
        raw_get_ack(cch, RDMA_CM_EVENT_REJECTED);
        CHECK_EQ_INT(raw_destroy_id(client), 0);
    }
    printf("kernel cm_ids of this process: %d\n", kernel_cm_ids());
    fflush(stdout);
    STEP("done");
    if (!sync)
        CHECK_EQ_INT(rdma_destroy_id(listen_id), 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
