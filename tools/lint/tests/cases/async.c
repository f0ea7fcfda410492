/* Async events: async-never-acked, async-double-ack, async-destroy-with-unacked. */
#include <stdio.h>
#include <infiniband/verbs.h>

struct watcher {
    struct ibv_context *ctx;
    struct ibv_async_event last;
};

int leaked(struct ibv_context *ctx)
{
    struct ibv_async_event ev;
    if (ibv_get_async_event(ctx, &ev))
        return -1;
    if (ev.event_type == IBV_EVENT_PORT_ERR)
        return 1; /* expect: async-never-acked */
    ibv_ack_async_event(&ev);
    return 0;
}

/* Kept in memory that outlives the call: acked by another function. */
int kept(struct watcher *w)
{
    if (ibv_get_async_event(w->ctx, &w->last))
        return -1;
    printf("%s\n", ibv_event_type_str(w->last.event_type));
    return 0;
}

void twice(struct ibv_context *ctx)
{
    struct ibv_async_event ev;
    if (ibv_get_async_event(ctx, &ev))
        return;
    ibv_ack_async_event(&ev);
    ibv_ack_async_event(&ev); /* expect: async-double-ack */
}

/* The QP destroyed in the handler, the event acked after it. */
void handler(struct ibv_context *ctx)
{
    struct ibv_async_event ev;
    if (ibv_get_async_event(ctx, &ev))
        return;
    if (ev.event_type == IBV_EVENT_QP_FATAL)
        ibv_destroy_qp(ev.element.qp); /* expect: async-destroy-with-unacked */
    ibv_ack_async_event(&ev);
}

/* An event about a CQ does not hold a QP's destroy. */
void other_kind(struct ibv_context *ctx, struct ibv_qp *qp)
{
    struct ibv_async_event ev;
    if (ibv_get_async_event(ctx, &ev))
        return;
    if (ev.element.cq != NULL)
        ibv_destroy_qp(qp);
    ibv_ack_async_event(&ev);
}
