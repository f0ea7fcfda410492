/* soak_events: a long-running well-behaved program on raw librdmacm, for showing that the
 * preload's memory stays bounded however many events pass through it (scripts/soak-events runs
 * it raw, under safe mode and under audit).
 *
 *   soak_events EVENTS CHECKPOINTS
 *
 * Each event is the cheapest full lifecycle there is: rdma_create_id, rdma_resolve_addr of
 * $RXE_ADDR, rdma_get_cm_event (ADDR_RESOLVED of that id, required), rdma_ack_cm_event,
 * rdma_destroy_id. Ids go in rounds of up to BATCH, all resolving at once: one resolution takes
 * a kernel work item's latency (about 1.5 ms in the emulated guest), a round of 64 overlaps them
 * (about 0.4 ms an event). Once per EVENTS/CHECKPOINTS events (at the end of the round that
 * reaches the mark) it prints "rss K events N", K the resident set in KiB (/proc/self/statm);
 * at the end "events N". Exits 1 with a message on any failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raw_util.h"

enum { BATCH = 64 };

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void fail(const char *what)
{
    fprintf(stderr, "soak_events: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: soak_events EVENTS CHECKPOINTS\n");
        return 2;
    }
    long events = atol(argv[1]), checkpoints = atol(argv[2]);
    if (events <= 0 || checkpoints <= 0 || checkpoints > events) {
        fprintf(stderr, "soak_events: EVENTS and CHECKPOINTS must be positive, CHECKPOINTS <= EVENTS\n");
        return 2;
    }
    long every = events / checkpoints, mark = every, printed = 0;
    struct rdma_event_channel *ch = raw_channel();
    struct sockaddr_in dst = rxe_addr(RAW_NO_LISTENER_PORT);
    struct rdma_cm_id *ids[BATCH];

    for (long done = 0; done < events;) {
        int k = events - done < BATCH ? (int)(events - done) : BATCH;
        for (int i = 0; i < k; i++) {
            if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP))
                fail("rdma_create_id");
            if (rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 2000))
                fail("rdma_resolve_addr");
        }
        for (int i = 0; i < k; i++) {
            struct rdma_cm_event *ev;
            if (rdma_get_cm_event(ch, &ev))
                fail("rdma_get_cm_event");
            int j = 0;
            while (j < k && ids[j] != ev->id)
                j++;
            if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED || j == k) {
                fprintf(stderr, "soak_events: event %ld: %s (status %d), want ADDR_RESOLVED of one of its ids\n",
                        done + i + 1, rdma_event_str(ev->event), ev->status);
                return 1;
            }
            if (rdma_ack_cm_event(ev))
                fail("rdma_ack_cm_event");
        }
        for (int i = 0; i < k; i++)
            if (rdma_destroy_id(ids[i]))
                fail("rdma_destroy_id");
        done += k;
        for (; done >= mark && printed < checkpoints; mark += every, printed++)
            printf("rss %ld events %ld\n", rss_kib(), done);
    }
    rdma_destroy_event_channel(ch);
    printf("events %ld\n", events);
    return 0;
}
