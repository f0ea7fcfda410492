/* Misuse: double-ack. The client acks its ROUTE_RESOLVED twice.
 *   Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (acked twice). Expected finding: double-ack seq=2
 *   type=ROUTE_RESOLVED, printed before the second ack reaches librdmacm (if it does).
 * Raw librdmacm: the second rdma_ack_cm_event frees the block again and glibc aborts
 * ("free(): double free detected"). If the second ack returns, the program goes on cleanly and
 * exits 0.
 *
 *   misuse_double_ack late: LATE_EVENTS more events (ADDR_RESOLVED of fresh ids, each acked and
 *   its id destroyed) come between the two acks, more than the preload keeps records of acked
 *   events for (4096), so the second ack is of a pointer whose record is gone. Expected: still a
 *   double-ack finding (no seq or type: the record left), and the ack kept from librdmacm, whose
 *   rdma_ack_cm_event would read a cma_event header from the preload's own memory. Raw: the
 *   block was freed long ago (and likely reused), so the second free corrupts the heap. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7483, LATE_EVENTS = 4200, BATCH = 64 };

/* `n` ADDR_RESOLVED events of fresh ids, BATCH resolving at once, each acked and its id
 * destroyed. */
static void events_between(struct rdma_event_channel *ch, int n)
{
    struct sockaddr_in dst = rxe_addr(RAW_NO_LISTENER_PORT);
    struct rdma_cm_id *ids[BATCH];
    for (int done = 0; done < n;) {
        int k = n - done < BATCH ? n - done : BATCH;
        for (int i = 0; i < k; i++) {
            CHECK_EQ_INT(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP), 0);
            CHECK_EQ_INT(rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 2000), 0);
        }
        for (int i = 0; i < k; i++)
            raw_get_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
        for (int i = 0; i < k; i++)
            CHECK_EQ_INT(rdma_destroy_id(ids[i]), 0);
        done += k;
    }
}

int main(int argc, char **argv)
{
    int late = argc > 1 && strcmp(argv[1], "late") == 0;
    harness_watchdog(late ? 120 : 60);
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *id = NULL;
    struct rdma_cm_event *ev = raw_route_unacked(ch, PORT, &id); /* seq 1 acked, seq 2 held */
    raw_ack(ev);
    if (late) {
        STEP("%d more events between the two acks", LATE_EVENTS);
        events_between(ch, LATE_EVENTS);
    }
    STEP("acking ROUTE_RESOLVED a second time");
    int rc = rdma_ack_cm_event(ev); /* the misuse */
    STEP("second rdma_ack_cm_event returned %d", rc);

    CHECK_EQ_INT(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
