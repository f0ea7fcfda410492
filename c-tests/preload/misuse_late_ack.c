/* Misuse: late-ack. The program holds an event for a long time before acking it (while it is
 * held, librdmacm cannot destroy or migrate the id).
 *   misuse_late_ack [HOLD_MS]   (default 1500, above the preload's default CMSAFE_LATE_ACK_MS
 *   of 1000)
 *   Events: 1 ADDR_RESOLVED (acked), 2 ROUTE_RESOLVED (held HOLD_MS, then acked). Expected:
 *   late-ack seq=2 type=ROUTE_RESOLVED when HOLD_MS exceeds CMSAFE_LATE_ACK_MS, no finding
 *   otherwise.
 * Raw librdmacm: runs to the end, exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7488 };

int main(int argc, char **argv)
{
    long hold_ms = argc > 1 ? strtol(argv[1], NULL, 10) : 1500;
    REQUIRE(hold_ms > 0 && hold_ms < 30000, "usage: misuse_late_ack [HOLD_MS]");
    harness_watchdog(60);
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *id = NULL;
    struct rdma_cm_event *ev = raw_route_unacked(ch, PORT, &id); /* seq 1 acked, seq 2 held */

    STEP("holding ROUTE_RESOLVED for %ld ms before acking it", hold_ms);
    struct timespec ts = {.tv_sec = hold_ms / 1000, .tv_nsec = (hold_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    raw_ack(ev);
    STEP("acked");

    CHECK_EQ_INT(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
