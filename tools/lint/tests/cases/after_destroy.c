/* An id or an event channel used after its destroy. */
#include <rdma/rdma_cma.h>

static int cleanup(struct rdma_cm_id *id)
{
    if (id->qp)
        rdma_destroy_qp(id);
    return rdma_destroy_id(id);
}

int reject_after(struct rdma_cm_id *child)
{
    rdma_destroy_id(child);
    return rdma_reject(child, NULL, 0); /* expect: use-after-destroy-id */
}

int retry(struct rdma_cm_id *id, struct sockaddr *dst)
{
    cleanup(id);
    return rdma_resolve_addr(id, NULL, dst, 2000); /* expect: use-after-destroy-id */
}

int channel(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    rdma_destroy_event_channel(ch);
    return rdma_get_cm_event(ch, &ev); /* expect: use-after-destroy-channel */
}

/* Each turn destroys another id. */
void all(struct rdma_cm_id **ids, int n)
{
    for (int i = 0; i < n; i++)
        rdma_destroy_id(ids[i]);
}

/* A new id in the same variable. */
int again(struct rdma_event_channel *ch, struct rdma_cm_id *id)
{
    rdma_destroy_id(id);
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
        return -1;
    return rdma_listen(id, 1);
}

/* A request's id rejected and never destroyed: it keeps a kernel cm_id. */
int reject_only(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    struct rdma_cm_id *id = ev->id;
    rdma_reject(id, NULL, 0);
    rdma_ack_cm_event(ev);
    return 0; /* expect: rejected-id-never-destroyed */
}

/* Rejected, then destroyed; or handed to the caller's clean-up. */
struct rdma_cm_id *reject_kept(struct rdma_event_channel *ch, int destroy)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return NULL;
    struct rdma_cm_id *id = ev->id;
    rdma_reject(id, NULL, 0);
    rdma_ack_cm_event(ev);
    if (destroy) {
        rdma_destroy_id(id);
        return NULL;
    }
    return id;
}

/* Rejected by a helper that destroys it too (rdma-core 44's cmtime, cma_handler), or kept in
 * memory before the reject (libfabric 1.17's XRC reciprocal request, ep->tgt_id). */
static void refuse(struct rdma_cm_id *id)
{
    rdma_reject(id, NULL, 0);
    rdma_destroy_id(id);
}

struct ep {
    struct rdma_cm_id *tgt_id;
};

int reject_refused(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    struct rdma_cm_id *id = ev->id;
    rdma_ack_cm_event(ev);
    refuse(id);
    return 0;
}

int reject_stored(struct rdma_event_channel *ch, struct ep *ep, int migrate_fails)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    struct rdma_cm_id *id = ev->id;
    rdma_ack_cm_event(ev);
    ep->tgt_id = id;
    if (migrate_fails)
        rdma_reject(id, NULL, 0);
    return 0;
}

/* Stored on the success path only: the early failure's reject leaks it (tgt 1.0.85's
 * iser_cm_connect_request). */
void on_request(struct rdma_cm_event *ev, struct ep *ep, int fail)
{
    struct rdma_cm_id *cm_id = ev->id;
    if (fail)
        goto reject;
    ep->tgt_id = cm_id;
    if (rdma_accept(cm_id, NULL))
        goto reject;
    return;
reject:
    rdma_reject(cm_id, NULL, 0);
} /* expect: rejected-id-never-destroyed */

/* Ids and a channel reached through fields of a context (perftest's nodes), destroyed by one
 * helper and used by another. */
struct node {
    struct rdma_cm_id *id;
};
struct master {
    struct rdma_event_channel *channel;
    struct node *nodes;
};
struct ctx {
    struct master m;
    int n;
};

static void destroy_all(struct ctx *c)
{
    struct node *node;
    for (int i = 0; i < c->n; i++) {
        node = &c->m.nodes[i];
        rdma_destroy_id(node->id);
    }
    rdma_destroy_event_channel(c->m.channel);
    free(c->m.nodes);
}

static int resolve_all(struct ctx *c, struct sockaddr *dst)
{
    for (int i = 0; i < c->n; i++)
        if (rdma_resolve_addr(c->m.nodes[i].id, NULL, dst, 2000))
            return -1;
    return 0;
}

static int next_event(struct ctx *c)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(c->m.channel, &ev))
        return -1;
    return rdma_ack_cm_event(ev);
}

static int try_once(struct ctx *c, struct sockaddr *dst)
{
    if (resolve_all(c, dst))
        return -1;
    return next_event(c);
}

/* perftest's retry: the next turn resolves the ids the last one destroyed, on its channel. */
int retry_all(struct ctx *c, struct sockaddr *dst)
{
    for (int t = 0; t < 3; t++) {
        if (try_once(c, dst) == 0) /* expect: use-after-destroy-id */ /* expect: use-after-destroy-channel */
            return 0;
        destroy_all(c);
    }
    return -1;
}

static int make_all(struct ctx *c)
{
    c->m.channel = rdma_create_event_channel();
    c->m.nodes = calloc(c->n, sizeof *c->m.nodes);
    for (int i = 0; i < c->n; i++)
        if (rdma_create_id(c->m.channel, &c->m.nodes[i].id, NULL, RDMA_PS_TCP))
            return -1;
    return 0;
}

/* perftest's fix: each retry makes the channel and the ids again first. */
int retry_anew(struct ctx *c, struct sockaddr *dst)
{
    for (int t = 0; t < 3; t++) {
        if (t > 0 && make_all(c))
            return -1;
        if (try_once(c, dst) == 0)
            return 0;
        destroy_all(c);
    }
    return -1;
}

/* Makes the channel and an id (into the slot a condition picks), destroying the channel it
 * made when the id fails: the caller's channel was not that one. */
static int make_one(struct ctx *c, int which)
{
    struct rdma_cm_id **slot = which ? &c->m.nodes[0].id : &c->m.nodes[1].id;
    c->m.channel = rdma_create_event_channel();
    if (!c->m.channel)
        return -1;
    if (rdma_create_id(c->m.channel, slot, NULL, RDMA_PS_TCP)) {
        rdma_destroy_event_channel(c->m.channel);
        return -1;
    }
    return 0;
}

/* perftest's other retry: each turn makes its channel and id first. */
int retry_made(struct ctx *c, struct sockaddr *dst)
{
    for (int t = 0; t < 3; t++) {
        if (make_one(c, t & 1))
            return -1;
        if (try_once(c, dst) == 0)
            return 0;
        destroy_all(c);
    }
    return -1;
}

static void destroy_and_clear(struct ctx *c)
{
    for (int i = 0; i < c->n; i++) {
        rdma_destroy_id(c->m.nodes[i].id);
        c->m.nodes[i].id = NULL;
    }
}

/* Destroyed and cleared: no id is left to use (a NULL one fails with EINVAL). */
int retry_cleared(struct ctx *c, struct sockaddr *dst)
{
    for (int t = 0; t < 3; t++) {
        if (resolve_all(c, dst) == 0)
            return 0;
        destroy_and_clear(c);
    }
    return -1;
}

static void destroy_one(struct ctx *c, int i)
{
    rdma_destroy_id(c->m.nodes[i].id);
}

/* One element destroyed: which one the next use names is not known. */
int drop_one(struct ctx *c, struct sockaddr *dst)
{
    destroy_one(c, 0);
    return resolve_all(c, dst);
}

struct conn {
    struct rdma_cm_id *cm_id;
};

static void conn_free(struct conn *conn)
{
    if (conn->cm_id)
        rdma_destroy_id(conn->cm_id);
    free(conn);
}

/* tgt's: the connection's clean-up destroys the request's id, then the request is rejected. */
void accept_request(struct rdma_cm_id *cm_id)
{
    struct conn *conn = calloc(1, sizeof *conn);
    if (!conn)
        goto reject;
    conn->cm_id = cm_id;
    if (rdma_accept(cm_id, NULL))
        goto free_conn;
    return;
free_conn:
    conn_free(conn);
reject:
    rdma_reject(cm_id, NULL, 0); /* expect: use-after-destroy-id */
}
