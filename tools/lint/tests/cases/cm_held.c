/* Calls that wait for an event held on the same path: rdma_destroy_id, rdma_migrate_id,
 * rdma_destroy_event_channel, rdma_destroy_qp (with a DISCONNECTED held). */
#include <pthread.h>
#include <stdlib.h>
#include <rdma/rdma_cma.h>

struct node {
    struct rdma_cm_id *id;
};

static struct rdma_cm_event *global_event;

/* A handler given the id and the event (every caller passes ev->id and ev), destroying the
 * id when it cannot queue the work (rdma-core 44's cmtime, its DISCONNECTED handler). */
static void cma_handler(struct rdma_cm_id *id, struct rdma_cm_event *event)
{
    void *request;
    switch (event->event) {
    case RDMA_CM_EVENT_DISCONNECTED:
        request = malloc(64);
        if (!request) {
            rdma_disconnect(id);
            rdma_destroy_qp(id); /* expect: qp-destroy-before-ack */
            rdma_destroy_id(id); /* expect: destroy-in-own-handler */
        } else {
            free(request);
        }
        break;
    default:
        break;
    }
    rdma_ack_cm_event(event);
}

void dispatcher(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *event;
    while (!rdma_get_cm_event(ch, &event))
        cma_handler(event->id, event);
}

/* A CONNECT_REQUEST counts against its listen id: destroying the request's own new id in its
 * handler's error path does not wait (UCX's uct_rdmacm_cm_handle_event_connect_request). */
static void drop_id(struct rdma_cm_id *id)
{
    rdma_destroy_id(id);
}

static void on_request(struct rdma_cm_event *event, int fail)
{
    if (fail) {
        rdma_reject(event->id, NULL, 0);
        drop_id(event->id);
        rdma_ack_cm_event(event);
    }
}

static void process(struct rdma_cm_event *event, int fail)
{
    switch (event->event) {
    case RDMA_CM_EVENT_CONNECT_REQUEST:
        on_request(event, fail);
        break;
    default:
        rdma_ack_cm_event(event);
        break;
    }
}

void server(struct rdma_event_channel *ch, struct rdma_cm_id *listen_id, struct node *n)
{
    struct rdma_cm_event *event;
    if (rdma_get_cm_event(ch, &event))
        return;
    process(event, 1);
    if (rdma_get_cm_event(ch, &event))
        return;
    if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        /* A request holds its listen id only; these may be any ids (the lint knows a listen
         * id by its rdma_listen). */
        rdma_destroy_id(n->id);
        rdma_destroy_id(listen_id);
    }
    rdma_ack_cm_event(event);
}

/* The listen id is known by its rdma_listen. */
int listener(struct rdma_event_channel *ch, struct rdma_cm_id *lid)
{
    struct rdma_cm_event *req;
    if (rdma_listen(lid, 8))
        return -1;
    if (rdma_get_cm_event(ch, &req))
        return -1;
    if (req->event != RDMA_CM_EVENT_CONNECT_REQUEST)
        return rdma_ack_cm_event(req);
    rdma_reject(req->id, NULL, 0);
    rdma_destroy_id(req->id);
    rdma_destroy_id(lid); /* expect: destroy-in-own-handler */
    return rdma_ack_cm_event(req);
}

int migrate(struct rdma_event_channel *ch, struct rdma_event_channel *other)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    struct rdma_cm_id *id = ev->id;
    rdma_migrate_id(id, other); /* expect: migrate-with-unacked */
    return rdma_ack_cm_event(ev);
}

int channels(struct rdma_event_channel *ch, struct rdma_event_channel *other)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    rdma_destroy_event_channel(other); /* another channel than the event's */
    rdma_destroy_event_channel(ch); /* expect: channel-destroy-with-unacked */
    return rdma_ack_cm_event(ev);
}

/* A destroy of the QP while an ESTABLISHED is held is not judged: only a DISCONNECTED. */
int established(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
        rdma_destroy_qp(ev->id);
    return rdma_ack_cm_event(ev);
}

/* The event acked after the destroy was got meanwhile by another thread, joined in between
 * (c-tests/preload/preload_read_without_ids.c): not held at the destroy. */
static void *reader(void *arg)
{
    rdma_get_cm_event(arg, &global_event);
    return NULL;
}

int joined(struct rdma_event_channel *ch, struct rdma_cm_id *id)
{
    pthread_t t;
    pthread_create(&t, NULL, reader, ch);
    rdma_destroy_id(id);
    pthread_join(t, NULL);
    return rdma_ack_cm_event(global_event);
}

/* Without the join, the event acked after the destroy was held across it. */
int held_global(struct rdma_cm_id *id)
{
    rdma_destroy_id(id); /* expect: destroy-in-own-handler */
    return rdma_ack_cm_event(global_event);
}

/* A listen id gets no event but connection requests: a held ESTABLISHED does not hold it. */
int listener_closed(struct rdma_event_channel *ch, struct rdma_cm_id *lid)
{
    struct rdma_cm_event *ev;
    if (rdma_listen(lid, 8) || rdma_get_cm_event(ch, &ev))
        return -1;
    if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
        rdma_destroy_id(lid);
    return rdma_ack_cm_event(ev);
}

/* The type kept in a variable and tested in the handler (the storm's raw server): a request's
 * own id destroyed on the handler's error path does not wait; nor is a struct of the program's
 * with an `id` field (`c->id`) an event. */
struct conn {
    struct rdma_cm_id *id;
};

static void close_conn(struct conn *c)
{
    rdma_destroy_id(c->id);
}

static void handle_type(int type, struct rdma_cm_id *id, struct conn *c)
{
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        if (rdma_accept(id, NULL))
            rdma_destroy_id(id);
        return;
    }
    if (type == RDMA_CM_EVENT_DISCONNECTED)
        close_conn(c);
}

void typed_server(struct rdma_event_channel *ch, struct conn *c)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return;
    int type = ev->event;
    struct rdma_cm_id *id = ev->id;
    handle_type(type, id, c);
    rdma_ack_cm_event(ev);
}

/* A listen id made two helpers down, the outer one returning the inner one's as it comes. */
static struct rdma_cm_id *bound_listener(struct rdma_event_channel *ch, int backlog)
{
    struct rdma_cm_id *id;
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) || rdma_listen(id, backlog))
        return NULL;
    return id;
}

static struct rdma_cm_id *small_listener(struct rdma_event_channel *ch)
{
    return bound_listener(ch, 8);
}

void stacked_listener(struct rdma_event_channel *ch)
{
    struct rdma_cm_id *lid = small_listener(ch);
    struct rdma_cm_event *req;
    if (!lid || rdma_get_cm_event(ch, &req))
        return;
    rdma_destroy_id(lid); /* expect: destroy-in-own-handler */
    rdma_ack_cm_event(req);
}

/* SPDK's nvmf target: the DISCONNECTED's handler disconnects the queue pair its id's context
 * points to, through the transport's ops table, whose close destroys the pair's cm_id; the
 * poller acks after the handler. Which id `rq->cm_id` is, only the run knows (the event's own,
 * set at connect): the finding says "if". */
struct qpair {
    struct transport *t;
};
struct rqpair {
    struct qpair qpair;
    struct rdma_cm_id *cm_id;
};
struct transport_ops {
    void (*qpair_fini)(struct qpair *q);
    void (*shutdown)(struct qpair *q);
    void (*qpair_close)(struct qpair *q);
};
struct transport {
    const struct transport_ops *ops;
};

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static void rq_destroy(struct rqpair *rq)
{
    if (rq->cm_id)
        rdma_destroy_id(rq->cm_id); /* expect: destroy-in-own-handler */
}

static void rq_close(struct qpair *q)
{
    struct rqpair *rq = container_of(q, struct rqpair, qpair);
    rq_destroy(rq);
}

static const struct transport_ops rdma_ops = {
    .qpair_fini = rq_close,
};

static void qpair_disconnect(struct qpair *q)
{
    q->t->ops->qpair_fini(q);
}

static int on_disconnect(struct rdma_cm_event *ev)
{
    struct qpair *q = ev->id->context;
    if (!q)
        return -1;
    qpair_disconnect(q);
    return 0;
}

void cm_poll(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    while (rdma_get_cm_event(ch, &ev) == 0) {
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
            on_disconnect(ev);
        rdma_ack_cm_event(ev);
    }
}

/* Its fix: the event acked before the disconnect. */
void cm_poll_acked_first(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    while (rdma_get_cm_event(ch, &ev) == 0) {
        int type = ev->event;
        struct qpair *q = ev->id->context;
        rdma_ack_cm_event(ev);
        if (type == RDMA_CM_EVENT_DISCONNECTED && q)
            qpair_disconnect(q);
    }
}

/* Two transports give `shutdown` a function each: which one a call through it reaches is not
 * known, so it is not followed. */
static void rq_shutdown(struct qpair *q)
{
    struct rqpair *rq = container_of(q, struct rqpair, qpair);
    rdma_destroy_id(rq->cm_id);
}

static void other_shutdown(struct qpair *q)
{
    (void)q;
}

static const struct transport_ops rdma_shutdown_ops = {
    .shutdown = rq_shutdown,
};

static const struct transport_ops other_ops = {
    .shutdown = other_shutdown,
};

static void qpair_shutdown(struct qpair *q)
{
    q->t->ops->shutdown(q);
}

void cm_poll_shutdown(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    while (rdma_get_cm_event(ch, &ev) == 0) {
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
            qpair_shutdown(ev->id->context);
        rdma_ack_cm_event(ev);
    }
}

/* SPDK's fix (v23.09): the handler acks the DISCONNECTED itself, says so, and only then
 * disconnects the qpair (through a close of its own here, so that a finding would have a line
 * of its own). */
static void rq_close_after_ack(struct qpair *q)
{
    struct rqpair *rq = container_of(q, struct rqpair, qpair);
    rdma_destroy_id(rq->cm_id);
}

static const struct transport_ops rdma_close_ops = {
    .qpair_close = rq_close_after_ack,
};

static int on_disconnect_acked(struct rdma_cm_event *ev, int *acked)
{
    struct qpair *q = ev->id->context;
    if (!q)
        return -1;
    rdma_ack_cm_event(ev);
    *acked = 1;
    q->t->ops->qpair_close(q);
    return 0;
}

void cm_poll_fixed(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    while (rdma_get_cm_event(ch, &ev) == 0) {
        int acked = 0;
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
            on_disconnect_acked(ev, &acked);
        if (!acked)
            rdma_ack_cm_event(ev);
    }
}
