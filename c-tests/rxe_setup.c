#define _GNU_SOURCE
#include "rxe_setup.h"

#include <arpa/inet.h>
#include <errno.h>

#include "harness.h"

int harness_passed, harness_failed, harness_skipped;

struct sockaddr_in rxe_addr(unsigned short port)
{
    const char *a = getenv("RXE_ADDR");
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    REQUIRE(a && inet_pton(AF_INET, a, &sin.sin_addr) == 1,
            "RXE_ADDR must hold the guest's RDMA address (run under scripts/rxe-vm)");
    return sin;
}

struct rdma_cm_id *rxe_listen(struct rdma_event_channel *ch, unsigned short port,
                              enum rdma_port_space ps, int backlog)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in sin = rxe_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, ps) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&sin) == 0, "rdma_bind_addr: %s", strerror(errno));
    REQUIRE(rdma_listen(id, backlog) == 0, "rdma_listen: %s", strerror(errno));
    return id;
}

struct ibv_qp_init_attr rxe_qp_attr(void)
{
    struct ibv_qp_init_attr attr = {
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    return attr;
}

void rxe_create_qp(struct rdma_cm_id *id)
{
    struct ibv_qp_init_attr attr = rxe_qp_attr();
    REQUIRE(rdma_create_qp(id, NULL, &attr) == 0, "rdma_create_qp: %s", strerror(errno));
}

struct rdma_conn_param rxe_conn_param(const void *pdata, unsigned char len)
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
