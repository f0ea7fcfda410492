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
