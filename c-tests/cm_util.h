/* Connection helpers for the c-tests, built on cmsafe: every event is fetched with
 * cmsafe_get_event, so every read below happens after librdmacm's event was acked. */
#ifndef CMSAFE_CM_UTIL_H
#define CMSAFE_CM_UTIL_H

#include <cmsafe.h>
#include <netinet/in.h>

/* The guest's RDMA address ($RXE_ADDR, set by scripts/rxe-vm) and a port. */
struct sockaddr_in cm_addr(unsigned short port);

/* Fetches the next event on `ch`; fails the test if it is not of type `want`.
 * The caller releases the result. */
cmsafe_event *cm_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want);

/* A listen id bound to $RXE_ADDR:port on channel `ch`. */
struct rdma_cm_id *cm_listen(struct rdma_event_channel *ch, unsigned short port);

/* A client id on `ch` with its address and route resolved and an RC QP. */
struct rdma_cm_id *cm_client(struct rdma_event_channel *ch, unsigned short port);

/* An RC QP on `id` with librdmacm's default PD and CQs. */
void cm_create_qp(struct rdma_cm_id *id);

/* rdma_connect / rdma_accept / rdma_reject with `len` bytes of private data. */
void cm_connect(struct rdma_cm_id *id, const void *pdata, unsigned char len);
void cm_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len);
void cm_reject(struct rdma_cm_id *id, const void *pdata, unsigned char len);

/* The private data of an event's view, with its length. */
const unsigned char *cm_pdata(const cmsafe_event *ev, unsigned *len);

#endif
