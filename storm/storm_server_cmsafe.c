/* storm_server_cmsafe: the reconnect storm's server on the cmsafe API.
 *
 *   storm_server_cmsafe ADDR PORT SEED CONNS WAVES WAVE_TIMEOUT_S [HEARTBEAT_MS]
 *
 * Events come in batches from cmsafe_get_events: each one already acked with librdmacm, so the
 * token in a CONNECT_REQUEST's private data is read from cmsafe's copy, after the ack, and a
 * DISCONNECTED's id can be destroyed while the copy is still held. At the end the process-wide
 * counters must balance: fetched == acked == released, no live events or buffers, nothing
 * pending. See storm.h for the rest. */
#define _GNU_SOURCE
#include <cmsafe.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "storm.h"

enum { BATCH = 64 };

int main(int argc, char **argv)
{
    struct rdma_event_channel *ch = storm_server_init("storm_server_cmsafe", argc, argv);
    unsigned waves = (unsigned)storm_number(argv[5], "WAVES");
    unsigned long long batches = 0, batched = 0;
    size_t biggest = 0;

    for (unsigned w = 1; w <= waves; w++) {
        storm_wave_begin(w);
        while (!storm_wave_done()) {
            cmsafe_event *evs[BATCH];
            int n = cmsafe_get_events(ch, evs, BATCH, storm_wait_ms());
            if (n < 0 && (errno == ETIMEDOUT || errno == EINTR))
                n = 0;
            if (n < 0)
                storm_die("cmsafe_get_events: %s", strerror(errno));
            storm_tick();
            if (n == 0)
                continue;
            batches++;
            batched += (unsigned)n;
            if ((size_t)n > biggest)
                biggest = (size_t)n;
            for (int i = 0; i < n; i++) {
                const struct rdma_cm_event *cm = cmsafe_event_cm(evs[i]);
                const cmsafe_buf *pd = cmsafe_event_private_data(evs[i]);
                /* librdmacm's event is already acked: these bytes are cmsafe's copy. */
                storm_handle(cm->event, cm->status, cm->id, cmsafe_buf_data(pd),
                             cmsafe_buf_len(pd));
                cmsafe_event_release(evs[i]);
            }
        }
        storm_wave_end();
    }

    int rc = storm_server_finish();
    cmsafe_stats st;
    if (cmsafe_stats_get(&st))
        storm_die("cmsafe_stats_get: %s", strerror(errno));
    printf("STORM cmsafe fetched=%llu acked=%llu released=%llu live_events=%llu "
           "live_buffers=%llu pending=%llu alloc_failures=%llu batches=%llu "
           "mean_batch=%.2f max_batch=%zu\n",
           (unsigned long long)st.fetched, (unsigned long long)st.acked,
           (unsigned long long)st.released, (unsigned long long)st.live_events,
           (unsigned long long)st.live_buffers, (unsigned long long)st.pending,
           (unsigned long long)st.alloc_failures, batches,
           batches ? (double)batched / (double)batches : 0.0, biggest);
    if (st.fetched != st.acked || st.fetched != st.released || st.fetched != batched ||
        st.live_events || st.live_buffers || st.pending) {
        fprintf(stderr, "storm_server_cmsafe: FAIL: cmsafe's counters do not balance\n");
        rc = 1;
    }
    return rc;
}
