/* Run setuid (AT_SECURE), where no CMSAFE_* variable may have any effect; linked against the
 * preload itself, since the loader ignores an LD_PRELOAD path in a setuid program:
 *   secure EXPECTED [unacked]  checks getauxval(AT_SECURE) is EXPECTED (0 or 1; else exit 3),
 *                    then gets and acks an ESTABLISHED (the preload's summary at exit names its
 *                    mode); with "unacked", also gets a DISCONNECTED it never acks (a never-acked
 *                    finding at exit, whose line carries the program's addresses) */
#define _GNU_SOURCE
#include "host.h"

int main(int argc, char **argv)
{
    host_start();
    REQUIRE(argc == 2 || argc == 3, "usage: secure EXPECTED_AT_SECURE [unacked]");
    host_secure(argv[1]);
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_round(id, RDMA_CM_EVENT_ESTABLISHED);
    if (argc == 3) {
        /* Left unacked: the id is not destroyed, which would wait for it. */
        struct rdma_cm_id *other = host_id(ch);
        host_queue(other, RDMA_CM_EVENT_DISCONNECTED, NULL);
        host_get(ch, RDMA_CM_EVENT_DISCONNECTED);
    }
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    if (argc == 2)
        rdma_destroy_event_channel(ch);
    return 0;
}
