#define _GNU_SOURCE
#include "raw_util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>

#include "harness.h"

int harness_passed, harness_failed;

struct sockaddr_in raw_addr(unsigned short port)
{
    const char *a = getenv("RXE_ADDR");
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    REQUIRE(a && inet_pton(AF_INET, a, &sin.sin_addr) == 1,
            "RXE_ADDR must hold the guest's RDMA address (run under scripts/rxe-vm)");
    return sin;
}

struct rdma_event_channel *raw_channel(void)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    REQUIRE(ch, "rdma_create_event_channel: %s", strerror(errno));
    return ch;
}

struct rdma_cm_event *raw_get(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    struct rdma_cm_event *ev = NULL;
    REQUIRE(rdma_get_cm_event(ch, &ev) == 0 && ev, "rdma_get_cm_event: %s", strerror(errno));
    REQUIRE(ev->event == want, "got %s (status %d), want %s", rdma_event_str(ev->event),
            ev->status, rdma_event_str(want));
    return ev;
}

void raw_ack(struct rdma_cm_event *ev)
{
    REQUIRE(rdma_ack_cm_event(ev) == 0, "rdma_ack_cm_event: %s", strerror(errno));
}

void raw_get_ack(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    raw_ack(raw_get(ch, want));
}

struct rdma_cm_id *raw_listen(struct rdma_event_channel *ch, unsigned short port)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in sin = raw_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&sin) == 0, "rdma_bind_addr: %s", strerror(errno));
    REQUIRE(rdma_listen(id, 8) == 0, "rdma_listen: %s", strerror(errno));
    return id;
}

void raw_create_qp(struct rdma_cm_id *id)
{
    struct ibv_qp_init_attr attr = {
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    REQUIRE(rdma_create_qp(id, NULL, &attr) == 0, "rdma_create_qp: %s", strerror(errno));
}

struct rdma_cm_id *raw_client(struct rdma_event_channel *ch, unsigned short port, int with_qp)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = raw_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    if (with_qp)
        raw_create_qp(id);
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

void raw_connect(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = conn_param(pdata, len);
    REQUIRE(rdma_connect(id, &p) == 0, "rdma_connect: %s", strerror(errno));
}

void raw_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    struct rdma_conn_param p = conn_param(pdata, len);
    REQUIRE(rdma_accept(id, &p) == 0, "rdma_accept: %s", strerror(errno));
}

void raw_reject(struct rdma_cm_id *id)
{
    REQUIRE(rdma_reject(id, NULL, 0) == 0, "rdma_reject: %s", strerror(errno));
}

static void default_client_qp(struct rdma_cm_id *client, void *arg)
{
    (void)arg;
    raw_create_qp(client);
}

void raw_pair_connect(struct raw_pair *p, unsigned short port, struct rdma_cm_event **held)
{
    raw_pair_connect_qp(p, port, held, default_client_qp, NULL);
}

void raw_pair_connect_qp(struct raw_pair *p, unsigned short port, struct rdma_cm_event **held,
                         void (*client_qp)(struct rdma_cm_id *client, void *arg), void *arg)
{
    p->sch = raw_channel();
    p->cch = raw_channel();
    p->listen = raw_listen(p->sch, port);
    p->client = raw_client(p->cch, port, 0);                      /* seq 1, 2 */
    client_qp(p->client, arg);
    raw_connect(p->client, RAW_TOKEN, sizeof RAW_TOKEN);

    struct rdma_cm_event *req = raw_get(p->sch, RDMA_CM_EVENT_CONNECT_REQUEST); /* seq 3 */
    p->child = req->id;
    raw_ack(req);
    raw_create_qp(p->child);
    raw_accept(p->child, RAW_TOKEN, sizeof RAW_TOKEN);

    /* The client's CONNECT_RESPONSE becomes ESTABLISHED inside rdma_get_cm_event, which also
     * sends the RTU the server's ESTABLISHED waits for: fetch the client's first. */
    raw_get_ack(p->cch, RDMA_CM_EVENT_ESTABLISHED);                 /* seq 4 */
    struct rdma_cm_event *est = raw_get(p->sch, RDMA_CM_EVENT_ESTABLISHED); /* seq 5 */
    if (held)
        *held = est;
    else
        raw_ack(est);
}

void raw_print_bytes(const char *label, const void *data, size_t len)
{
    const unsigned char *b = data;
    printf("%s", label);
    for (size_t i = 0; i < len; i++)
        putchar(isprint(b[i]) ? b[i] : '.');
    putchar('\n');
    fflush(stdout);
}

struct rdma_cm_event *raw_route_unacked(struct rdma_event_channel *ch, unsigned short port,
                                        struct rdma_cm_id **id)
{
    struct sockaddr_in dst = raw_addr(port);
    REQUIRE(rdma_create_id(ch, id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(*id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED); /* seq 1 */
    REQUIRE(rdma_resolve_route(*id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    return raw_get(ch, RDMA_CM_EVENT_ROUTE_RESOLVED); /* seq 2 */
}

struct rdma_cm_id *raw_addr_queued(struct rdma_event_channel *ch, unsigned short port)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = raw_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
    REQUIRE(poll(&pfd, 1, 5000) == 1, "no event queued on the channel after 5 s");
    return id;
}

static void cq_client_qp(struct rdma_cm_id *client, void *arg)
{
    struct raw_cq_pair *p = arg;
    p->cc = ibv_create_comp_channel(client->verbs);
    REQUIRE(p->cc, "ibv_create_comp_channel: %s", strerror(errno));
    for (int i = 0; i < p->ncq; i++) {
        p->cqs[i] = ibv_create_cq(client->verbs, 8, NULL, p->cc, 0);
        REQUIRE(p->cqs[i], "ibv_create_cq: %s", strerror(errno));
    }
    struct ibv_qp_init_attr attr = {
        .send_cq = p->cqs[0],
        .recv_cq = p->cqs[p->ncq - 1],
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    REQUIRE(rdma_create_qp(client, NULL, &attr) == 0, "rdma_create_qp: %s", strerror(errno));
}

void raw_cq_pair_connect(struct raw_cq_pair *p, unsigned short port, int ncq)
{
    REQUIRE(ncq >= 1 && ncq <= 2, "ncq %d: 1 or 2", ncq);
    p->ncq = ncq;
    raw_pair_connect_qp(&p->pair, port, NULL, cq_client_qp, p);
}

/* One successful completion of work request `wr_id` polled off `cq`, within 5 s. */
static void poll_one(struct ibv_cq *cq, uint64_t wr_id)
{
    struct ibv_wc wc;
    int n = 0;
    for (int tries = 0; tries < 5000 && n == 0; tries++) {
        n = ibv_poll_cq(cq, 1, &wc);
        if (n == 0)
            usleep(1000);
    }
    REQUIRE(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == wr_id,
            "ibv_poll_cq: %d completions, status %s", n, n == 1 ? ibv_wc_status_str(wc.status) : "-");
}

struct ibv_cq *raw_cq_event(struct raw_cq_pair *p)
{
    struct ibv_recv_wr rwr = {.wr_id = 1}, *bad_rwr = NULL;
    REQUIRE(ibv_post_recv(p->pair.child->qp, &rwr, &bad_rwr) == 0, "ibv_post_recv failed");
    REQUIRE(ibv_req_notify_cq(p->cqs[0], 0) == 0, "ibv_req_notify_cq failed");
    struct ibv_send_wr swr = {.wr_id = 2, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr *bad_swr = NULL;
    REQUIRE(ibv_post_send(p->pair.client->qp, &swr, &bad_swr) == 0, "ibv_post_send failed");
    struct ibv_cq *cq = NULL;
    void *ctx = NULL;
    REQUIRE(ibv_get_cq_event(p->cc, &cq, &ctx) == 0, "ibv_get_cq_event: %s", strerror(errno));
    REQUIRE(cq == p->cqs[0], "the event came from cq %p, not the send CQ %p", (void *)cq,
            (void *)p->cqs[0]);
    poll_one(cq, 2);
    /* The receive's completion too, so that the server's CQ never overflows in a loop. */
    poll_one(p->pair.child->recv_cq, 1);
    return cq;
}

struct ibv_cq *raw_cq_main_event(struct raw_cq_pair *p, unsigned short port, int ncq)
{
    raw_cq_pair_connect(p, port, ncq); /* CM seq 1..5 */
    printf("main thread %d\n", gettid());
    struct ibv_cq *cq = raw_cq_event(p);
    printf("cq %p\n", (void *)cq);
    fflush(stdout);
    return cq;
}

void raw_destroy_cq(struct ibv_cq *cq, const char *name)
{
    STEP("calling ibv_destroy_cq(%s)", name);
    int rc = ibv_destroy_cq(cq);
    STEP("ibv_destroy_cq(%s) returned %d", name, rc);
    CHECK_EQ_INT(rc, 0);
}
