#define _GNU_SOURCE
#include "raw_util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include "harness.h"

enum cm_transport raw_transport(const struct rdma_cm_id *id)
{
    REQUIRE(id->verbs, "the id is bound to no device yet");
    return cm_device_transport(id->verbs);
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
    return rxe_listen(ch, port, RDMA_PS_TCP, 8);
}

struct rdma_cm_id *raw_client(struct rdma_event_channel *ch, unsigned short port, int with_qp)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(port);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    raw_get_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    if (with_qp)
        rxe_create_qp(id);
    return id;
}

/* The QP the transport needs before rdma_connect or rdma_accept, where the id has none. */
static void qp_if_needed(struct rdma_cm_id *id)
{
    if (!id->qp && cm_qp_before_connect(raw_transport(id)))
        rxe_create_qp(id);
}

void raw_connect(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    qp_if_needed(id);
    struct rdma_conn_param p = rxe_conn_param(pdata, len);
    REQUIRE(rdma_connect(id, &p) == 0, "rdma_connect: %s", strerror(errno));
}

void raw_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    qp_if_needed(id);
    struct rdma_conn_param p = rxe_conn_param(pdata, len);
    REQUIRE(rdma_accept(id, &p) == 0, "rdma_accept: %s", strerror(errno));
}

int raw_unanswered_status(enum cm_transport t)
{
    return t == CM_TRANSPORT_IWARP ? -ECONNRESET : 8;
}

void raw_connect_unanswered(struct rdma_cm_id *id, const void *pdata, unsigned char len)
{
    REQUIRE(ntohs(rdma_get_dst_port(id)) == RAW_NO_LISTENER_PORT,
            "the id is resolved to port %u, not RAW_NO_LISTENER_PORT", ntohs(rdma_get_dst_port(id)));
    if (raw_transport(id) != CM_TRANSPORT_IWARP) {
        raw_connect(id, pdata, len);
        return;
    }
    struct sockaddr_in a = rxe_addr(RAW_NO_LISTENER_PORT);
    int one = 1, ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(ls >= 0, "socket: %s", strerror(errno));
    REQUIRE(setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR: %s",
            strerror(errno));
    REQUIRE(bind(ls, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", strerror(errno));
    REQUIRE(listen(ls, 1) == 0, "listen: %s", strerror(errno));
    /* siw connects the TCP socket inside rdma_connect and sends its MPA request. */
    raw_connect(id, pdata, len);
    int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    REQUIRE(c >= 0, "accept: %s", strerror(errno));
    struct linger reset = {.l_onoff = 1, .l_linger = 0}; /* close() sends an RST */
    REQUIRE(setsockopt(c, SOL_SOCKET, SO_LINGER, &reset, sizeof reset) == 0, "SO_LINGER: %s",
            strerror(errno));
    close(c);
    close(ls);
}

int raw_destroy_id(struct rdma_cm_id *id)
{
    if (id->qp)
        rdma_destroy_qp(id);
    return rdma_destroy_id(id);
}

void raw_reject(struct rdma_cm_id *id)
{
    REQUIRE(rdma_reject(id, NULL, 0) == 0, "rdma_reject: %s", strerror(errno));
}

static void default_client_qp(struct rdma_cm_id *client, void *arg)
{
    (void)arg;
    rxe_create_qp(client);
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
    rxe_create_qp(p->child);
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
    struct sockaddr_in dst = rxe_addr(port);
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
    struct sockaddr_in dst = rxe_addr(port);
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

struct ibv_sge raw_recv_sge(struct ibv_pd *pd)
{
    static char buf[64];
    static struct ibv_mr *mrs[4];
    int i;
    for (i = 0; i < 4 && mrs[i] && mrs[i]->pd != pd; i++)
        ;
    REQUIRE(i < 4, "raw_recv_sge: more than 4 protection domains");
    if (!mrs[i]) {
        mrs[i] = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
        REQUIRE(mrs[i], "ibv_reg_mr: %s", strerror(errno));
    }
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof buf, .lkey = mrs[i]->lkey};
    return sge;
}

struct ibv_cq *raw_cq_event(struct raw_cq_pair *p)
{
    struct ibv_sge sge = raw_recv_sge(p->pair.child->qp->pd);
    struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad_rwr = NULL;
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

/* `destroy(obj)` between the step lines raw_destroy_cq and raw_destroy_qp promise. */
static void destroy_between_steps(int (*destroy)(void *), void *obj, const char *call,
                                  const char *name)
{
    STEP("calling %s(%s)", call, name);
    int rc = destroy(obj);
    STEP("%s(%s) returned %d", call, name, rc);
    CHECK_EQ_INT(rc, 0);
}

static int destroy_cq(void *cq)
{
    return ibv_destroy_cq(cq);
}

void raw_destroy_cq(struct ibv_cq *cq, const char *name)
{
    destroy_between_steps(destroy_cq, cq, "ibv_destroy_cq", name);
}

void raw_qp_drain(struct ibv_qp *qp)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_SQD};
    int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
    REQUIRE(rc == 0, "ibv_modify_qp to SQD: %s", strerror(rc));
}

enum ibv_event_type raw_qp_event(struct ibv_qp *qp)
{
    if (cm_device_transport(qp->context) != CM_TRANSPORT_IWARP) {
        raw_qp_drain(qp);
        return IBV_EVENT_SQ_DRAINED;
    }
    static char buf[8];
    struct ibv_pd *other = ibv_alloc_pd(qp->context);
    REQUIRE(other, "ibv_alloc_pd: %s", strerror(errno));
    REQUIRE(other != qp->pd, "a second protection domain");
    struct ibv_mr *mr = ibv_reg_mr(other, buf, sizeof buf, 0);
    REQUIRE(mr, "ibv_reg_mr: %s", strerror(errno));
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof buf, .lkey = mr->lkey};
    struct ibv_send_wr swr = {.wr_id = 3, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr *bad = NULL;
    /* siw fails the send inside this call: a completion in error, QP_FATAL. The other PD and its
     * MR stay: the program ends with its QP. */
    REQUIRE(ibv_post_send(qp, &swr, &bad) == 0, "ibv_post_send failed");
    return IBV_EVENT_QP_FATAL;
}

static const char *async_object(const struct ibv_async_event *e, char *buf, size_t len)
{
    switch (e->event_type) {
    case IBV_EVENT_CQ_ERR:
        snprintf(buf, len, "cq %p", (void *)e->element.cq);
        break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        snprintf(buf, len, "srq %p", (void *)e->element.srq);
        break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        snprintf(buf, len, "qp %p", (void *)e->element.qp);
        break;
    default:
        snprintf(buf, len, "port %d", e->element.port_num);
    }
    return buf;
}

void raw_print_async(const char *label, const struct ibv_async_event *e)
{
    char buf[64];
    printf("%s%s %s\n", label, ibv_event_type_str(e->event_type), async_object(e, buf, sizeof buf));
    fflush(stdout);
}

struct ibv_async_event raw_async_event(struct ibv_context *ctx, enum ibv_event_type want)
{
    struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
    REQUIRE(poll(&pfd, 1, 5000) == 1, "no async event within 5 s");
    struct ibv_async_event e;
    REQUIRE(ibv_get_async_event(ctx, &e) == 0, "ibv_get_async_event: %s", strerror(errno));
    raw_print_async("event ", &e);
    REQUIRE(e.event_type == want, "async event %s, want %s", ibv_event_type_str(e.event_type),
            ibv_event_type_str(want));
    return e;
}

static void srq_client_qp(struct rdma_cm_id *client, void *arg)
{
    struct raw_srq_pair *p = arg;
    struct ibv_pd *pd = ibv_alloc_pd(client->verbs);
    REQUIRE(pd, "ibv_alloc_pd: %s", strerror(errno));
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
    p->srq = ibv_create_srq(pd, &sa);
    REQUIRE(p->srq, "ibv_create_srq: %s", strerror(errno));
    p->cq = ibv_create_cq(client->verbs, 8, NULL, NULL, 0);
    REQUIRE(p->cq, "ibv_create_cq: %s", strerror(errno));
    struct ibv_qp_init_attr attr = {
        .send_cq = p->cq,
        .recv_cq = p->cq,
        .srq = p->srq,
        .cap = {.max_send_wr = 4, .max_send_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    REQUIRE(rdma_create_qp(client, pd, &attr) == 0, "rdma_create_qp: %s", strerror(errno));
}

void raw_srq_pair_connect(struct raw_srq_pair *p, unsigned short port)
{
    raw_pair_connect_qp(&p->pair, port, NULL, srq_client_qp, p);
}

void raw_srq_limit(struct raw_srq_pair *p)
{
    struct ibv_sge sge = raw_recv_sge(p->srq->pd);
    for (int i = 0; i < 4; i++) {
        struct ibv_recv_wr rwr = {.wr_id = 10 + i, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
        REQUIRE(ibv_post_srq_recv(p->srq, &rwr, &bad) == 0, "ibv_post_srq_recv failed");
    }
    struct ibv_srq_attr sattr = {.srq_limit = 4};
    int rc = ibv_modify_srq(p->srq, &sattr, IBV_SRQ_LIMIT);
    REQUIRE(rc == 0, "ibv_modify_srq(srq_limit 4): %s", strerror(rc));
    struct ibv_send_wr swr = {.wr_id = 1, .opcode = IBV_WR_SEND}, *bad_swr = NULL;
    REQUIRE(ibv_post_send(p->pair.child->qp, &swr, &bad_swr) == 0, "ibv_post_send failed");
}

static void qp_to(struct ibv_qp *qp, enum ibv_qp_state s, int mask)
{
    struct ibv_qp_attr a = {.qp_state = s, .port_num = 1};
    int rc = ibv_modify_qp(qp, &a, mask);
    REQUIRE(rc == 0, "ibv_modify_qp to state %d: %s", s, strerror(rc));
}

struct ibv_cq *raw_cq_overflow(struct ibv_pd *pd, struct ibv_qp **qp)
{
    struct ibv_cq *cq = ibv_create_cq(pd->context, 1, NULL, NULL, 0);
    REQUIRE(cq, "ibv_create_cq: %s", strerror(errno));
    struct ibv_qp_init_attr qa = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 1, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    *qp = ibv_create_qp(pd, &qa);
    REQUIRE(*qp, "ibv_create_qp: %s", strerror(errno));
    qp_to(*qp, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    struct ibv_sge sge = raw_recv_sge(pd);
    for (int i = 0; i < 4; i++) {
        struct ibv_recv_wr rwr = {.wr_id = 20 + i, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
        REQUIRE(ibv_post_recv(*qp, &rwr, &bad) == 0, "ibv_post_recv failed");
    }
    qp_to(*qp, IBV_QPS_ERR, IBV_QP_STATE);
    return cq;
}

static int destroy_qp(void *qp)
{
    return ibv_destroy_qp(qp);
}

void raw_destroy_qp(struct ibv_qp *qp, const char *name)
{
    destroy_between_steps(destroy_qp, qp, "ibv_destroy_qp", name);
}
