/* storm_server_legacy: the reconnect storm's server as legacy code has it, WITH the classic bug.
 *
 *   storm_server_legacy ADDR PORT SEED CONNS WAVES WAVE_TIMEOUT_S [HEARTBEAT_MS]
 *
 * It acks every event at once (it never acks late and forgets none), and only then reads the
 * CONNECT_REQUEST's private data: event->param.conn.private_data points into the block
 * rdma_ack_cm_event just freed. Alone it reads freed memory (AddressSanitizer:
 * heap-use-after-free); run under LD_PRELOAD=libcmsafe_preload.so CMSAFE_MODE=safe, the event
 * it got is cmsafe's copy, which outlives its ack, and it reads the right token. The source is
 * not changed for that: this is the point. See storm.h for the rest. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "storm.h"

int main(int argc, char **argv)
{
    struct rdma_event_channel *ch = storm_server_init("storm_server_legacy", argc, argv);
    unsigned waves = (unsigned)storm_number(argv[5], "WAVES");

    for (unsigned w = 1; w <= waves; w++) {
        storm_wave_begin(w);
        while (!storm_wave_done()) {
            if (!storm_poll_channel(ch)) /* heartbeats, in a fault run */
                continue;
            struct rdma_cm_event *ev = NULL;
            if (rdma_get_cm_event(ch, &ev))
                storm_die("rdma_get_cm_event: %s", strerror(errno));
            storm_count_get();
            int type = ev->event, status = ev->status;
            struct rdma_cm_id *id = ev->id;
            if (rdma_ack_cm_event(ev)) /* acked at once, before anything is handled */
                storm_die("rdma_ack_cm_event: %s", strerror(errno));
            storm_count_ack();
            /* THE BUG: `ev` was freed by the ack; its private data is read anyway. */
            storm_handle(type, status, id, ev->param.conn.private_data,
                         ev->param.conn.private_data_len);
        }
        storm_wave_end();
    }
    return storm_server_finish();
}
