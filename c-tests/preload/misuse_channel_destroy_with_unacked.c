/* Misuse: channel-destroy-with-unacked. The program destroys an event channel while an event it
 * fetched from that channel is still unacked (rdma_cma.h: all events must be acked first).
 *   Events: 1 ADDR_RESOLVED (acked), 2 ROUTE_RESOLVED (held), then
 *   rdma_destroy_event_channel. Expected: channel-destroy-with-unacked seq=2
 *   type=ROUTE_RESOLVED.
 * The held event is acked right after (its memory does not belong to the channel); the id is
 * left alone, as destroying it would use the freed channel. Raw librdmacm: runs to the end (the
 * call does not wait), exit 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7487 };

int main(void)
{
    harness_watchdog(60);
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *id = NULL;
    struct rdma_cm_event *ev = raw_route_unacked(ch, PORT, &id); /* seq 1 acked, seq 2 held */

    STEP("calling rdma_destroy_event_channel with ROUTE_RESOLVED unacked");
    rdma_destroy_event_channel(ch); /* the misuse */
    STEP("rdma_destroy_event_channel returned");
    raw_ack(ev);
    STEP("exiting (id %p left as it is)", (void *)id);
    return harness_exit();
}
