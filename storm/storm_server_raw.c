/* storm_server_raw: the reconnect storm's baseline, a correct librdmacm server.
 *
 *   storm_server_raw ADDR PORT SEED CONNS WAVES WAVE_TIMEOUT_S [HEARTBEAT_MS]
 *
 * rdma_get_cm_event, then everything read from the event, then rdma_ack_cm_event; an event
 * that destroys its id (DISCONNECTED...) is acked first, since rdma_destroy_id waits until
 * every event of the id is acked. See storm.h for the rest. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "storm.h"

int main(int argc, char **argv)
{
    struct rdma_event_channel *ch = storm_server_init("storm_server_raw", argc, argv);
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
            if (storm_closes(type)) {
                /* Ack before the id is destroyed; nothing else is read from the event. */
                if (rdma_ack_cm_event(ev))
                    storm_die("rdma_ack_cm_event: %s", strerror(errno));
                storm_count_ack();
                storm_handle(type, status, id, NULL, 0);
            } else {
                /* Get, read (the token), ack. */
                storm_handle(type, status, id, ev->param.conn.private_data,
                             ev->param.conn.private_data_len);
                if (rdma_ack_cm_event(ev))
                    storm_die("rdma_ack_cm_event: %s", strerror(errno));
                storm_count_ack();
            }
        }
        storm_wave_end();
    }
    return storm_server_finish();
}
