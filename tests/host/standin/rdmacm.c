/* A stand-in librdmacm for host tests: built as librdmacm.so.1, it exports librdmacm's calls at
 * RDMACM_1.0 with the real structures of <rdma/rdma_cma.h>, so that the preload (and libcmsafe)
 * take it for librdmacm, and events come when a test queues them (standin.h), not from a kernel.
 *
 * What the preload relies on is done as librdmacm does it (rdma-core's librdmacm/cma.c):
 * - Each event lives inside a private struct that embeds the public one, its private data
 *   pointing into that block; rdma_ack_cm_event frees the block, so a read of the private data
 *   after the ack reads freed memory. The blocks come from a pool of the stand-in's own, not
 *   from malloc: a test that forks or exits from a signal handler in its event loop must meet
 *   the preload's locks there, not glibc's malloc arena lock, which fork(3) takes and which a
 *   handler interrupting malloc would hold (a hang raw as much as under the preload).
 * - An event counts against its id, a CONNECT_REQUEST against its listen id; rdma_destroy_id and
 *   rdma_migrate_id wait (a condition variable) until every event counted against the id that
 *   rdma_get_cm_event handed out has been acked.
 * - An event channel has a real fd, readable while an event is queued: rdma_get_cm_event blocks
 *   reading it, or fails with EAGAIN when the program made it O_NONBLOCK, and poll(2) works on it.
 * - A destroyed id's unread events are dropped, as the kernel drops them.
 * Everything else is as small as a test double can be: the calls that would talk to a device
 * (bind, resolve, listen, connect, accept, reject, disconnect, set_option) succeed and queue
 * nothing, those that would need one (rdma_create_qp, rdma_create_ep, rdma_get_request) fail
 * with ENOSYS, and no call of the library calls another exported one, so that the preload sees
 * only the program's calls. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "standin.h"

/* librdmacm's RDMA_MAX_PRIVATE_DATA: the private data buffer of its struct cma_event. */
#define MAX_PRIVATE_DATA 256

struct event {
    struct rdma_cm_event pub; /* first: the program's pointer is the block's */
    uint8_t private_data[MAX_PRIVATE_DATA];
    struct id *owner; /* whom the event counts against */
    struct event *next;
};

/* The pool of event blocks: never-used ones from `fresh`, freed ones on a list. Enough for the
 * scale benchmark's 50,000 events held unacked at once (untouched blocks cost no memory). */
#define EVENTS 65536
static struct event pool[EVENTS];
static struct event *free_events;
static size_t fresh;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* A zeroed block, or NULL with ENOMEM when all are in use. */
static struct event *event_alloc(void)
{
    pthread_mutex_lock(&pool_lock);
    struct event *e = free_events;
    if (e)
        free_events = e->next;
    else if (fresh < EVENTS)
        e = &pool[fresh++];
    pthread_mutex_unlock(&pool_lock);
    if (!e) {
        errno = ENOMEM;
        return NULL;
    }
    memset(e, 0, sizeof *e);
    return e;
}

/* Back to the pool; its bytes stay until the block is taken again, as freed heap's do. */
static void event_free(struct event *e)
{
    pthread_mutex_lock(&pool_lock);
    e->next = free_events;
    free_events = e;
    pthread_mutex_unlock(&pool_lock);
}

struct id {
    struct rdma_cm_id pub; /* first */
    pthread_mutex_t lock;
    pthread_cond_t acked;
    unsigned reported; /* events handed out by rdma_get_cm_event */
    unsigned completed; /* of those, acked */
    int own_channel; /* made by rdma_create_id(NULL, ...), destroyed with the id */
};

struct channel {
    /* pub.fd: an eventfd in semaphore mode, its count the events queued (and, after a destroy
     * or migrate took some away, a few more: a read that finds the queue empty reads again). */
    struct rdma_event_channel pub; /* first */
    pthread_mutex_t lock;
    struct event *head, *tail;
};

static struct channel *new_channel(void)
{
    struct channel *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NULL;
    ch->pub.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->pub.fd < 0) {
        free(ch);
        return NULL;
    }
    pthread_mutex_init(&ch->lock, NULL);
    return ch;
}

static struct id *new_id(struct rdma_event_channel *channel, void *context,
                         enum rdma_port_space ps)
{
    struct id *id = calloc(1, sizeof *id);
    if (!id)
        return NULL;
    id->pub.channel = channel;
    id->pub.context = context;
    id->pub.ps = ps;
    id->pub.qp_type = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
    pthread_mutex_init(&id->lock, NULL);
    pthread_cond_init(&id->acked, NULL);
    return id;
}

/* A NULL or otherwise unusable argument, as librdmacm says it. */
static int invalid(void)
{
    errno = EINVAL;
    return -1;
}

static void free_id(struct id *id)
{
    pthread_cond_destroy(&id->acked);
    pthread_mutex_destroy(&id->lock);
    free(id);
}

/* Appends E to CH's queue and makes the fd readable for it. */
static int enqueue(struct channel *ch, struct event *e)
{
    uint64_t one = 1;
    int rc = 0;
    pthread_mutex_lock(&ch->lock);
    if (write(ch->pub.fd, &one, sizeof one) != sizeof one) {
        rc = -1;
    } else {
        e->next = NULL;
        if (ch->tail)
            ch->tail->next = e;
        else
            ch->head = e;
        ch->tail = e;
    }
    pthread_mutex_unlock(&ch->lock);
    return rc;
}

/* Takes out of CH's queue the events counted against OWNER (every event when OWNER is NULL),
 * in order. */
static struct event *take_queued(struct channel *ch, struct id *owner)
{
    struct event *taken = NULL, **tail = &taken, **p;
    pthread_mutex_lock(&ch->lock);
    for (p = &ch->head; *p;) {
        struct event *e = *p;
        if (owner && e->owner != owner) {
            p = &e->next;
            continue;
        }
        *p = e->next;
        e->next = NULL;
        *tail = e;
        tail = &e->next;
    }
    ch->tail = NULL;
    for (struct event *e = ch->head; e; e = e->next)
        ch->tail = e;
    pthread_mutex_unlock(&ch->lock);
    return taken;
}

/* Events never handed out: freed, with the new id a CONNECT_REQUEST would have brought. */
static void drop_events(struct event *e)
{
    while (e) {
        struct event *next = e->next;
        if (e->pub.event == RDMA_CM_EVENT_CONNECT_REQUEST)
            free_id((struct id *)e->pub.id);
        event_free(e);
        e = next;
    }
}

static void wait_for_acks(struct id *id)
{
    pthread_mutex_lock(&id->lock);
    while (id->completed < id->reported)
        pthread_cond_wait(&id->acked, &id->lock);
    pthread_mutex_unlock(&id->lock);
}

static void destroy_channel(struct channel *ch)
{
    drop_events(take_queued(ch, NULL));
    close(ch->pub.fd);
    pthread_mutex_destroy(&ch->lock);
    free(ch);
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
    struct channel *ch = new_channel();
    return ch ? &ch->pub : NULL;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
    if (channel)
        destroy_channel((struct channel *)channel);
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **cm_id, void *context,
                   enum rdma_port_space ps)
{
    if (!cm_id)
        return invalid();
    struct channel *own = NULL;
    if (!channel) {
        /* librdmacm gives an id made without a channel one of its own. */
        own = new_channel();
        if (!own)
            return -1;
        channel = &own->pub;
    }
    struct id *id = new_id(channel, context, ps);
    if (!id) {
        if (own)
            destroy_channel(own);
        return -1;
    }
    id->own_channel = own != NULL;
    *cm_id = &id->pub;
    return 0;
}

int rdma_destroy_id(struct rdma_cm_id *cm_id)
{
    if (!cm_id)
        return invalid();
    struct id *id = (struct id *)cm_id;
    struct channel *ch = (struct channel *)cm_id->channel;
    drop_events(take_queued(ch, id));
    wait_for_acks(id);
    if (id->own_channel)
        destroy_channel(ch);
    free_id(id);
    return 0;
}

int rdma_migrate_id(struct rdma_cm_id *cm_id, struct rdma_event_channel *channel)
{
    if (!cm_id || !channel)
        return invalid();
    struct id *id = (struct id *)cm_id;
    struct channel *from = (struct channel *)cm_id->channel;
    struct event *moved = take_queued(from, id);
    wait_for_acks(id);
    cm_id->channel = channel;
    if (id->own_channel) {
        destroy_channel(from);
        id->own_channel = 0;
    }
    while (moved) {
        struct event *next = moved->next;
        if (enqueue((struct channel *)channel, moved) != 0)
            drop_events(moved);
        moved = next;
    }
    return 0;
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
    if (!channel || !event)
        return invalid();
    struct channel *ch = (struct channel *)channel;
    for (;;) {
        uint64_t n;
        /* Blocks, or EAGAIN on an O_NONBLOCK fd, or EINTR: as librdmacm's read of its fd. */
        if (read(ch->pub.fd, &n, sizeof n) != sizeof n)
            return -1;
        pthread_mutex_lock(&ch->lock);
        struct event *e = ch->head;
        if (e) {
            ch->head = e->next;
            if (!ch->head)
                ch->tail = NULL;
        }
        pthread_mutex_unlock(&ch->lock);
        if (!e)
            continue; /* taken away by a destroy or migrate since it was queued */
        pthread_mutex_lock(&e->owner->lock);
        e->owner->reported++;
        pthread_mutex_unlock(&e->owner->lock);
        e->next = NULL;
        *event = &e->pub;
        return 0;
    }
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
    if (!event)
        return invalid();
    struct event *e = (struct event *)event;
    struct id *owner = e->owner;
    pthread_mutex_lock(&owner->lock);
    owner->completed++;
    pthread_cond_broadcast(&owner->acked);
    pthread_mutex_unlock(&owner->lock);
    event_free(e);
    return 0;
}

struct rdma_cm_id *standin_queue_event(struct rdma_cm_id *cm_id, enum rdma_cm_event_type type,
                                       int status, const void *private_data, uint8_t len)
{
    if (!cm_id || (len && !private_data)) {
        invalid();
        return NULL;
    }
    struct event *e = event_alloc();
    if (!e)
        return NULL;
    struct id *subject = (struct id *)cm_id;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        /* librdmacm's new id: the listen id's channel, context and port space. */
        subject = new_id(cm_id->channel, cm_id->context, cm_id->ps);
        if (!subject) {
            event_free(e);
            return NULL;
        }
        e->pub.listen_id = cm_id;
    }
    e->owner = (struct id *)cm_id;
    e->pub.id = &subject->pub;
    e->pub.event = type;
    e->pub.status = status;
    if (len)
        memcpy(e->private_data, private_data, len);
    const void *pdata = len ? e->private_data : NULL;
    if (subject->pub.qp_type == IBV_QPT_UD) {
        e->pub.param.ud.private_data = pdata;
        e->pub.param.ud.private_data_len = len;
    } else {
        e->pub.param.conn.private_data = pdata;
        e->pub.param.conn.private_data_len = len;
    }
    if (enqueue((struct channel *)cm_id->channel, e) != 0) {
        int saved = errno;
        drop_events(e);
        errno = saved;
        return NULL;
    }
    return &subject->pub;
}

unsigned standin_unacked(struct rdma_cm_id *cm_id)
{
    struct id *id = (struct id *)cm_id;
    pthread_mutex_lock(&id->lock);
    unsigned n = id->reported - id->completed;
    pthread_mutex_unlock(&id->lock);
    return n;
}

/* A call on an id that needs no device here: it succeeds and queues nothing. */
static int id_call(struct rdma_cm_id *id)
{
    if (!id)
        return invalid();
    return 0;
}

/* A call that needs a device: none here. */
static int no_device(void)
{
    errno = ENOSYS;
    return -1;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    (void)addr;
    return id_call(id);
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
                      int timeout_ms)
{
    (void)src_addr, (void)dst_addr, (void)timeout_ms;
    return id_call(id);
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    (void)timeout_ms;
    return id_call(id);
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
    (void)backlog;
    return id_call(id);
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
    (void)conn_param;
    return id_call(id);
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
    (void)conn_param;
    return id_call(id);
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
    (void)private_data, (void)private_data_len;
    return id_call(id);
}

int rdma_disconnect(struct rdma_cm_id *id)
{
    return id_call(id);
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
    (void)level, (void)optname, (void)optval, (void)optlen;
    return id_call(id);
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
    (void)id, (void)pd, (void)qp_init_attr;
    return no_device();
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
    (void)id;
}

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
                   struct ibv_qp_init_attr *qp_init_attr)
{
    (void)id, (void)res, (void)pd, (void)qp_init_attr;
    return no_device();
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
    (void)listen, (void)id;
    return no_device();
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
    static const char *const names[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED",
        "RDMA_CM_EVENT_ADDR_ERROR",
        "RDMA_CM_EVENT_ROUTE_RESOLVED",
        "RDMA_CM_EVENT_ROUTE_ERROR",
        "RDMA_CM_EVENT_CONNECT_REQUEST",
        "RDMA_CM_EVENT_CONNECT_RESPONSE",
        "RDMA_CM_EVENT_CONNECT_ERROR",
        "RDMA_CM_EVENT_UNREACHABLE",
        "RDMA_CM_EVENT_REJECTED",
        "RDMA_CM_EVENT_ESTABLISHED",
        "RDMA_CM_EVENT_DISCONNECTED",
        "RDMA_CM_EVENT_DEVICE_REMOVAL",
        "RDMA_CM_EVENT_MULTICAST_JOIN",
        "RDMA_CM_EVENT_MULTICAST_ERROR",
        "RDMA_CM_EVENT_ADDR_CHANGE",
        "RDMA_CM_EVENT_TIMEWAIT_EXIT",
    };
    if ((unsigned)event < sizeof names / sizeof names[0])
        return names[event];
    return "UNKNOWN EVENT";
}
