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
