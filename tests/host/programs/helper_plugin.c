/* The plugin of tests/host/programs/plugin.c: built under two names, one of which merely
 * contains "librdmacm" (libmy-librdmacm-helper.so), one not (libmy-helper.so). */
#include <stddef.h>

#include <rdma/rdma_cma.h>

struct rdma_cm_event *helper_get_event(struct rdma_event_channel *ch);

struct rdma_cm_event *helper_get_event(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev = NULL;
    return rdma_get_cm_event(ch, &ev) == 0 ? ev : NULL;
}
