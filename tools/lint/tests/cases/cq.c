/* Completion events: cq-never-acked, cq-destroy-with-unacked, cq-ack-after-destroy,
 * cq-over-ack, cq-ack-wrong-cq. */
#include <pthread.h>
#include <stdio.h>
#include <infiniband/verbs.h>

struct ctx {
    struct ibv_comp_channel *channel;
    struct ibv_cq *cq, *send_cq, *recv_cq;
    int events;
};

static int poll_all(struct ibv_cq *cq)
{
    struct ibv_wc wc;
    return ibv_poll_cq(cq, 1, &wc);
}

/* A CQ thread that acks each event itself (rdma-core 44's rping): the error path that leaves
 * the thread owes the ack. The check that the event is of its CQ makes the ack of its own CQ
 * right. */
void *cq_thread(void *arg)
{
    struct ctx *c = arg;
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    while (1) {
        if (ibv_get_cq_event(c->channel, &ev_cq, &ev_ctx))
            pthread_exit(NULL);
        if (ev_cq != c->cq)
            pthread_exit(NULL); /* expect: cq-never-acked */
        if (ibv_req_notify_cq(c->cq, 0))
            pthread_exit(NULL); /* expect: cq-never-acked */
        poll_all(c->cq);
        ibv_ack_cq_events(c->cq, 1);
    }
}

/* Events got here, acked in a batch by the caller (rdma-core 44's xsrq_pingpong): the
 * function owes no ack. */
int get_event(struct ctx *c)
{
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    if (ibv_get_cq_event(c->channel, &ev_cq, &ev_ctx))
        return 1;
    if (ev_cq != c->recv_cq)
        return 1;
    c->events++;
    return 0;
}

/* Counted per CQ and acked under the counts (UCX's uct_ib_iface_pre_arm): a path that went by
 * the acks owes none; one that leaves before them does. */
int pre_arm(struct ctx *c)
{
    struct ibv_cq *cq;
    void *cq_context;
    int res, sends = 0, recvs = 0;
    do {
        res = ibv_get_cq_event(c->channel, &cq, &cq_context);
        if (res == 0) {
            if (c->send_cq == cq)
                ++sends;
            if (c->recv_cq == cq)
                ++recvs;
        }
    } while (res == 0);
    if (res != -1)
        return -1; /* expect: cq-never-acked */
    if (sends > 0)
        ibv_ack_cq_events(c->send_cq, sends);
    if (recvs > 0)
        ibv_ack_cq_events(c->recv_cq, recvs);
    if (sends > 0 || recvs > 0)
        return 1;
    return 0;
}

/* The CQ destroyed, then its event acked ("when the handler returns"). */
void destroy_then_ack(struct ctx *c)
{
    struct ibv_cq *cq;
    void *x;
    if (ibv_get_cq_event(c->channel, &cq, &x))
        return;
    poll_all(cq);
    ibv_destroy_cq(cq); /* expect: cq-destroy-with-unacked */
    ibv_ack_cq_events(cq, 1); /* expect: cq-ack-after-destroy */
}

void over(struct ctx *c)
{
    struct ibv_cq *cq;
    void *x;
    if (ibv_get_cq_event(c->channel, &cq, &x))
        return;
    poll_all(cq);
    ibv_ack_cq_events(cq, 1);
    ibv_ack_cq_events(cq, 1); /* expect: cq-over-ack */
    if (ibv_get_cq_event(c->channel, &cq, &x))
        return;
    ibv_ack_cq_events(cq, 2); /* expect: cq-over-ack */
}

/* Two events got in a loop, then both acked: a count, not an over-ack. (When the second get
 * fails the first event is left unacked, but that path uses the event nowhere before the next
 * get, as a failed get's path does: the rules take neither for a success path. A limit.) */
void batch(struct ctx *c)
{
    struct ibv_cq *cq = NULL;
    void *x;
    for (int i = 0; i < 2; i++)
        if (ibv_get_cq_event(c->channel, &cq, &x))
            return;
    ibv_ack_cq_events(cq, 2);
}

/* The event's CQ is never looked at: the ack may be of the wrong CQ. */
void wrong(struct ctx *c)
{
    struct ibv_cq *cq;
    void *x;
    if (ibv_get_cq_event(c->channel, &cq, &x))
        return;
    poll_all(cq);
    ibv_ack_cq_events(c->recv_cq, 1); /* expect: cq-ack-wrong-cq */
}

int main(int argc, char **argv)
{
    struct ctx c;
    struct ibv_cq *cq;
    void *x;
    (void)argv;
    if (argc < 2 || ibv_get_cq_event(c.channel, &cq, &x))
        return 1;
    poll_all(cq);
    return 0; /* expect-note: cq-never-acked */
}

/* A cm_id's recv_cq_channel carries its recv_cq alone (librdmacm's rsocket, rs_get_cq_event):
 * acking the id's recv_cq acks the event's CQ. */
struct cm_id {
    struct ibv_comp_channel *recv_cq_channel;
    struct ibv_cq *recv_cq;
};

void own_channel(struct cm_id *id)
{
    struct ibv_cq *cq;
    void *x;
    if (ibv_get_cq_event(id->recv_cq_channel, &cq, &x))
        return;
    poll_all(cq);
    ibv_ack_cq_events(id->recv_cq, 1);
}

/* glusterfs's receive thread: each completion event acked with the count of work completions
 * the last poll returned (0 once the queue is drained): never the one event got. */
void *recv_thread(struct ibv_comp_channel *chan)
{
    struct ibv_cq *cq;
    void *ctx;
    struct ibv_wc wc[10];
    int n = 0, failed;
    while (1) {
        failed = 0;
        if (ibv_get_cq_event(chan, &cq, &ctx))
            continue;
        ibv_req_notify_cq(cq, 0);
        while (!failed && (n = ibv_poll_cq(cq, 10, wc)) > 0) {
            for (int i = 0; i < n && !failed; i++) {
                if (wc[i].status != IBV_WC_SUCCESS) {
                    failed = 1;
                    ibv_ack_cq_events(cq, n); /* expect: cq-over-ack */
                }
            }
        }
        if (!failed)
            ibv_ack_cq_events(cq, n); /* expect: cq-over-ack */
    }
    return NULL;
}

/* The same with its one event acked: the failure branch's ack and the last one are on no one
 * path (`failed` set by the first, asked clear before the second and round the loops). */
void *recv_thread_one(struct ibv_comp_channel *chan)
{
    struct ibv_cq *cq;
    void *ctx;
    struct ibv_wc wc[10];
    int n = 0, failed;
    while (1) {
        failed = 0;
        if (ibv_get_cq_event(chan, &cq, &ctx))
            continue;
        ibv_req_notify_cq(cq, 0);
        while (!failed && (n = ibv_poll_cq(cq, 10, wc)) > 0) {
            for (int i = 0; i < n && !failed; i++) {
                if (wc[i].status != IBV_WC_SUCCESS) {
                    failed = 1;
                    ibv_ack_cq_events(cq, 1);
                }
            }
        }
        if (!failed)
            ibv_ack_cq_events(cq, 1);
    }
    return NULL;
}
