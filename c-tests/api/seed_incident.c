/* The seed incident: a server reads a connecting client's token from private data.
 *   seed_incident raw     acks CONNECT_REQUEST, then reads the private data (the classic bug:
 *                         AddressSanitizer reports heap-use-after-free)
 *   seed_incident cmsafe  the same server through cmsafe_get_event: the read is of cmsafe's copy
 * Built with -fsanitize=address; the runner checks each outcome. */
#define _GNU_SOURCE
#include <errno.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7474 };
static const char token[] = "token:7f3a9c21-acme-storage-node-17";

/* The raw server's handling: ack first, read afterwards. */
static void raw_server(struct rdma_event_channel *sch, char *out, size_t outlen,
                       struct rdma_cm_id **child)
{
    struct rdma_cm_event *ev = NULL;
    REQUIRE(rdma_get_cm_event(sch, &ev) == 0, "rdma_get_cm_event: %s", strerror(errno));
    REQUIRE(ev->event == RDMA_CM_EVENT_CONNECT_REQUEST, "got %s", rdma_event_str(ev->event));
    const void *pdata = ev->param.conn.private_data;
    *child = ev->id;
    rdma_ack_cm_event(ev);
    memcpy(out, pdata, outlen); /* reads freed memory */
}

static void cmsafe_server(struct rdma_event_channel *sch, char *out, size_t outlen,
                          struct rdma_cm_id **child)
{
    cmsafe_event *ev = cm_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    const void *pdata = cmsafe_event_cm(ev)->param.conn.private_data;
    *child = cmsafe_event_cm(ev)->id;
    memcpy(out, pdata, outlen); /* reads cmsafe's copy: the original is already acked */
    cmsafe_event_release(ev);
}

int main(int argc, char **argv)
{
    harness_watchdog(60);
    int raw = argc > 1 && strcmp(argv[1], "raw") == 0;
    REQUIRE(argc > 1 && (raw || strcmp(argv[1], "cmsafe") == 0), "usage: seed_incident raw|cmsafe");

    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    struct rdma_cm_id *client = cm_client(cch, PORT);
    cm_connect(client, token, sizeof token);

    char got[sizeof token];
    struct rdma_cm_id *child = NULL;
    (raw ? raw_server : cmsafe_server)(sch, got, sizeof got, &child);
    CHECK(memcmp(got, token, sizeof token) == 0, "the token read back differs");
    printf("%s server read the token: %.*s\n", argv[1], (int)sizeof token - 1, got);

    cm_reject(child, NULL, 0);
    cmsafe_event_release(cm_expect(cch, RDMA_CM_EVENT_REJECTED));
    rdma_destroy_id(child);
    rdma_destroy_qp(client);
    rdma_destroy_id(client);
    rdma_destroy_id(listen_id);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
