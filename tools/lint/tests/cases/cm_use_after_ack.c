/* cmsafe-lint's rules, held by tests/test_rules.py: each line that must get a finding says so
 * at its end (expect: KIND, or expect-note: KIND); every other line must get none.
 * use-after-ack: the event, its private data or a copy of its pointer read after the ack. */
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

struct conn {
    const void *pdata;
    int status;
};

static void ack(struct rdma_cm_event *ev)
{
    rdma_ack_cm_event(ev);
}

/* Acks only when it fails: not an ack a later use can follow. */
static int check(struct rdma_cm_event *ev)
{
    if (ev->status) {
        rdma_ack_cm_event(ev);
        return -1;
    }
    return 0;
}

static void log_event(const struct rdma_cm_event *ev)
{
    printf("%s %d\n", rdma_event_str(ev->event), ev->status);
}

int direct(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    rdma_ack_cm_event(ev);
    return ev->status; /* expect: use-after-ack */
}

int through_copy(struct rdma_event_channel *ch, char *out)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    const char *pdata = ev->param.conn.private_data;
    ack(ev);
    memcpy(out, pdata, 8); /* expect: use-after-ack */
    return 0;
}

int through_field(struct rdma_event_channel *ch, struct conn *c)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    c->pdata = ev->param.conn.private_data;
    rdma_ack_cm_event(ev);
    printf("%s\n", (const char *)c->pdata); /* expect: use-after-ack */
    return 0;
}

int through_helper(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    rdma_ack_cm_event(ev);
    log_event(ev); /* expect: use-after-ack */
    return 0;
}

/* Reading before the ack, or the pointer's value after it, is fine. */
int before(struct rdma_event_channel *ch, struct conn *c)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    c->status = ev->status;
    struct rdma_cm_id *id = ev->id;
    rdma_ack_cm_event(ev);
    ev = NULL;
    return id != NULL && c->status == 0;
}

/* A helper that acks only on its error path starts no use-after-ack. */
int partial_ack(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    if (check(ev))
        return -1;
    int status = ev->status;
    rdma_ack_cm_event(ev);
    return status;
}

/* The branch that runs when the ack failed: librdmacm freed nothing (UCX's
 * uct_rdmacm_cm_ack_event logs the event's type there). */
int failed_ack(struct rdma_cm_event *event)
{
    if (rdma_ack_cm_event(event)) {
        fprintf(stderr, "ack failed on %s\n", rdma_event_str(event->event));
        return -1;
    }
    return 0;
}

/* An infinite loop's head has no exit: the ack of the retried event at the top is not followed
 * to the read after the loop, only the ack before the break is (perftest 4.5-0.17's
 * rdma_cm_client_connection, its TOS error path). */
int retry_loop(struct rdma_event_channel *ch, struct rdma_cm_id *id, int tos)
{
    struct rdma_cm_event *event;
    while (1) {
        if (rdma_get_cm_event(ch, &event))
            return -1;
        if (event->event == RDMA_CM_EVENT_ADDR_ERROR) {
            rdma_ack_cm_event(event);
            continue;
        }
        rdma_ack_cm_event(event);
        break;
    }
    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1)) {
        fprintf(stderr, "TOS failed: %d\n", event->event); /* expect: use-after-ack */
        return -1;
    }
    return 0;
}

/* A multicast join's ud.private_data is the program's own context, not the event's memory. */
int multicast(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *event;
    void *context = NULL;
    if (rdma_get_cm_event(ch, &event))
        return -1;
    switch (event->event) {
    case RDMA_CM_EVENT_MULTICAST_JOIN:
        context = event->param.ud.private_data;
        break;
    default:
        break;
    }
    rdma_ack_cm_event(event);
    printf("%p\n", context);
    return 0;
}

/* A loop left only by its returns: the defensive return after it is never reached. */
int loop_returns(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    while (1) {
        if (rdma_get_cm_event(ch, &ev))
            return -1;
        if (ev->status) {
            rdma_ack_cm_event(ev);
            continue;
        }
        rdma_ack_cm_event(ev);
        return 0;
    }
    return ev->status;
}
