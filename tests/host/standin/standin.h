/* The stand-in librdmacm's control API, for host tests: what the kernel would do on a real stack
 * (an event arrives) is done here on demand. The librdmacm calls themselves are in
 * <rdma/rdma_cma.h>; tests/host/standin/rdmacm.c says how the stand-in behaves. */
#ifndef CMSAFE_STANDIN_H
#define CMSAFE_STANDIN_H

#include <stdint.h>

#include <rdma/rdma_cma.h>

/* Queues an event of TYPE with STATUS and LEN bytes of PRIVATE_DATA (copied; NULL for none) for
 * ID on its event channel, as the kernel reports one: the channel's fd is readable until
 * rdma_get_cm_event takes it. For RDMA_CM_EVENT_CONNECT_REQUEST, ID is the listen id: the event
 * brings a new cm_id on the listen id's channel (event->id, with event->listen_id the listen id)
 * and counts against the listen id, as librdmacm counts it. Returns the event's id (the new id
 * for a CONNECT_REQUEST, else ID), or NULL with errno: EINVAL (ID NULL, or LEN bytes from NULL),
 * ENOMEM. */
struct rdma_cm_id *standin_queue_event(struct rdma_cm_id *id, enum rdma_cm_event_type type,
                                       int status, const void *private_data, uint8_t len);

/* The events counted against ID (its own, and a listen id's CONNECT_REQUESTs) that
 * rdma_get_cm_event handed out and rdma_ack_cm_event has not acked: what rdma_destroy_id waits
 * for. */
unsigned standin_unacked(struct rdma_cm_id *id);

#endif
