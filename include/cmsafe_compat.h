/*
 * cmsafe_compat.h: safe mode for existing librdmacm code, without editing it.
 *
 * Build the program with `-include cmsafe_compat.h` and link it with cmsafe
 * (`pkg-config --cflags --libs cmsafe`). Its unchanged calls
 *   rdma_get_cm_event   -> cmsafe_compat_get_cm_event: librdmacm's event is copied and acked
 *                          at once; the program gets the copy
 *   rdma_ack_cm_event   -> cmsafe_compat_ack_cm_event: marks the copy acked; it stays valid
 *                          until the event's id is destroyed (or 4096 newer acks)
 *   rdma_destroy_id     -> cmsafe_compat_destroy_id: destroys the id, then frees its copies
 * so code that acks an event and then reads its private data reads the right bytes, and
 * rdma_destroy_id never waits forever for an event the program forgot to ack.
 * The same core as the LD_PRELOAD library's safe mode (libcmsafe_preload.so, CMSAFE_MODE=safe).
 * See cmsafe_compat_get_cm_event(3).
 *
 * This header includes no system header, so `-include` leaves feature-test macros such as
 * _GNU_SOURCE, defined later by the program, in force. The renamed declarations in
 * <rdma/rdma_cma.h> match the ones below.
 */
#ifndef CMSAFE_COMPAT_H
#define CMSAFE_COMPAT_H

#ifdef __cplusplus
extern "C" {
#endif

struct rdma_event_channel;
struct rdma_cm_event;
struct rdma_cm_id;

int cmsafe_compat_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event);
int cmsafe_compat_ack_cm_event(struct rdma_cm_event *event);
int cmsafe_compat_destroy_id(struct rdma_cm_id *id);

#ifdef __cplusplus
}
#endif

#define rdma_get_cm_event cmsafe_compat_get_cm_event
#define rdma_ack_cm_event cmsafe_compat_ack_cm_event
#define rdma_destroy_id cmsafe_compat_destroy_id

#endif /* CMSAFE_COMPAT_H */
