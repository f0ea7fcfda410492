#define _GNU_SOURCE
#include "cm_util.h"

#include <arpa/inet.h>
#include <errno.h>

#include "harness.h"

int harness_passed, harness_failed;

struct sockaddr_in cm_addr(unsigned short port)
{
    const char *a = getenv("RXE_ADDR");
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    REQUIRE(a && inet_pton(AF_INET, a, &sin.sin_addr) == 1,
            "RXE_ADDR must hold the guest's RDMA address (run under scripts/rxe-vm)");
    return sin;
}

cmsafe_event *cm_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    cmsafe_event *ev = NULL;
    int rc = cmsafe_get_event(ch, &ev);
    REQUIRE(rc == 0 && ev, "cmsafe_get_event: %s", strerror(errno));
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    REQUIRE(cm->event == want, "got %s (status %d), want %s", rdma_event_str(cm->event),
            cm->status, rdma_event_str(want));
    return ev;
}

static void expect_and_release(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    cmsafe_event_release(cm_expect(ch, want));
}

struct rdma_cm_id *cm_listen(struct rdma_event_channel *ch, unsigned short port)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in sin = cm_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&sin) == 0, "rdma_bind_addr: %s", strerror(errno));
    REQUIRE(rdma_listen(id, 128) == 0, "rdma_listen: %s", strerror(errno));
    return id;
}

void cm_create_qp(struct rdma_cm_id *id)
{
    struct ibv_qp_init_attr attr = {
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    REQUIRE(rdma_create_qp(id, NULL, &attr) == 0, "rdma_create_qp: %s", strerror(errno));
}

struct rdma_cm_id *cm_client(struct rdma_event_channel *ch, unsigned short port)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = cm_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    expect_and_release(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    expect_and_release(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    cm_create_qp(id);
    return id;
}

static struct rdma_conn_param conn_param(const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = {
        .private_data = pdata,
        .private_data_len = len,
        .responder_resources = 1,
        .initiator_depth = 1,
        .retry_count = 7,
        .rnr_retry_count = 7,
    };
    return p;
}

void cm_connect(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = conn_param(pdata, len);
    REQUIRE(rdma_connect(id, &p) == 0, "rdma_connect: %s", strerror(errno));
}

void cm_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = conn_param(pdata, len);
    REQUIRE(rdma_accept(id, &p) == 0, "rdma_accept: %s", strerror(errno));
}

void cm_reject(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    REQUIRE(rdma_reject(id, pdata, len) == 0, "rdma_reject: %s", strerror(errno));
}

const unsigned char *cm_pdata(const cmsafe_event *ev, unsigned *len)
{
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    *len = cm->param.conn.private_data_len;
    return cm->param.conn.private_data;
}
