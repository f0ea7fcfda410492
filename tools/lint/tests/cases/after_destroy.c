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
