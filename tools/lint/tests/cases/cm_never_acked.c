/* never-acked: a path from the get to where the event is dropped without its ack. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <rdma/rdma_cma.h>

struct dev {
    struct rdma_event_channel *channel;
    struct rdma_cm_event *event;
};

struct queue;
void queue_push(struct queue *q, void *item);

static int handle(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
    return id == NULL || ev->status;
}

int early_return(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1; /* the get failed: no event */
    if (ev->status)
        return ev->status; /* expect: never-acked */
    rdma_ack_cm_event(ev);
    return 0;
}

void event_loop(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *event;
    while (1) {
        if (rdma_get_cm_event(ch, &event)) /* expect: never-acked */
            break;
        if (event->event == RDMA_CM_EVENT_ADDR_CHANGE)
            continue;
        switch (event->event) {
        case RDMA_CM_EVENT_ESTABLISHED:
        case RDMA_CM_EVENT_DISCONNECTED:
            handle(event->id, event);
            rdma_ack_cm_event(event);
            break;
        default:
            break;
        }
    }
}

/* The event handed on: returned, stored, queued, given to another thread. */
struct rdma_cm_event *handed_to_caller(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return NULL;
    printf("%d\n", ev->event);
    return ev;
}

int kept(struct rdma_event_channel *ch, struct dev *d, struct queue *q, int how)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    printf("%d\n", ev->event);
    if (how == 1)
        d->event = ev;
    else
        queue_push(q, ev);
    return 0;
}

/* Got straight into memory that outlives the call (qperf's cm_expect_event): acked later by
 * another function. */
void into_field(struct dev *dev, int expected)
{
    if (rdma_get_cm_event(dev->channel, &dev->event) != 0)
        fprintf(stderr, "no event\n");
    if (dev->event->event != expected)
        fprintf(stderr, "unexpected event\n");
}

/* An error branch that ends the process: nothing waits for the ack any more. */
int exits(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        exit(1);
    if (ev->status) {
        fprintf(stderr, "error %d\n", ev->status);
        exit(1);
    }
    return rdma_ack_cm_event(ev);
}

void *cm_thread(void *arg)
{
    struct rdma_event_channel *ch = arg;
    struct rdma_cm_event *ev;
    while (!rdma_get_cm_event(ch, &ev)) {
        if (ev->status)
            pthread_exit(NULL); /* expect: never-acked */
        rdma_ack_cm_event(ev);
    }
    return NULL;
}

int main(void)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_event *ev;
    if (!ch || rdma_get_cm_event(ch, &ev))
        return 1;
    printf("%s\n", rdma_event_str(ev->event));
    return 0; /* expect-note: never-acked */
}

/* A failed get loops back to the next get (rdma-core 44's cmatose, connect_events): the get met
 * again is not a use of an event the failed one never gave. */
int failed_get_loop(struct rdma_event_channel *ch, int *left)
{
    struct rdma_cm_event *event;
    int ret = 0;
    while (*left && !ret) {
        ret = rdma_get_cm_event(ch, &event);
        if (!ret) {
            ret = handle(event->id, event);
            rdma_ack_cm_event(event);
        } else {
            perror("rdma_get_cm_event");
            ret = -1;
        }
    }
    return ret;
}
