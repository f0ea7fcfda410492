/* double-ack and foreign-ack. */
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static int dispatch(struct rdma_cm_event *ev)
{
    int ret = ev->status;
    rdma_ack_cm_event(ev);
    return ret;
}

int twice(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    int ret = dispatch(ev);
    rdma_ack_cm_event(ev); /* expect: double-ack */
    return ret;
}

/* Two events, each acked once, one pointer. */
int once_each(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    for (int i = 0; i < 2; i++) {
        if (rdma_get_cm_event(ch, &ev))
            return -1;
        rdma_ack_cm_event(ev);
    }
    return 0;
}

int copy_acked(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev, copy;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    memcpy(&copy, ev, sizeof copy);
    rdma_ack_cm_event(ev);
    return rdma_ack_cm_event(&copy); /* expect: foreign-ack */
}

int heap_acked(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev, *mine;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    mine = malloc(sizeof *mine);
    if (!mine)
        return rdma_ack_cm_event(ev);
    *mine = *ev;
    rdma_ack_cm_event(ev);
    return rdma_ack_cm_event(mine); /* expect: foreign-ack */
}

/* The program keeps its own flag of whether a handler acked (SPDK's nvmf_process_cm_event,
 * libfabric's vrb_eq_cm_process_event): the flow graph does not follow the flag. */
static void removal(struct rdma_cm_event *event)
{
    rdma_ack_cm_event(event);
}

void flagged(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *event;
    int acked;
    while (1) {
        acked = 0;
        if (rdma_get_cm_event(ch, &event))
            break;
        switch (event->event) {
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            removal(event);
            acked = 1;
            break;
        default:
            break;
        }
        if (!acked)
            rdma_ack_cm_event(event);
    }
}

/* SPDK's initiator: the events a controller keeps pending, acked as the list is emptied. The
 * iterator macro gives `entry` the next entry at each turn (its definition is in a header the
 * lint does not read): round the loop, `entry->evt` is another event. */
struct pending_entry {
    struct rdma_cm_event *evt;
    void *link;
};

void ack_pending_of(void *pending, void *context)
{
    struct pending_entry *entry, *tmp;
    STAILQ_FOREACH_SAFE(entry, pending, link, tmp) {
        if (entry->evt->id->context == context)
            rdma_ack_cm_event(entry->evt);
    }
}

void ack_all_pending(void *pending)
{
    struct pending_entry *entry;
    STAILQ_FOREACH(entry, pending, link) {
        rdma_ack_cm_event(entry->evt);
    }
}

/* The same event acked twice in one turn is still twice. */
void ack_pending_twice(void *pending)
{
    struct pending_entry *entry;
    STAILQ_FOREACH(entry, pending, link) {
        rdma_ack_cm_event(entry->evt);
        rdma_ack_cm_event(entry->evt); /* expect: double-ack */
    }
}
