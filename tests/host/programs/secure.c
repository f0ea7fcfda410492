/* Run setuid (AT_SECURE), where no CMSAFE_* variable may have any effect; linked against the
 * preload itself, since the loader ignores an LD_PRELOAD path in a setuid program:
 *   secure EXPECTED  checks getauxval(AT_SECURE) is EXPECTED (0 or 1; else exit 3), then gets and
 *                    acks an ESTABLISHED (the preload's summary at exit names its mode) */
#define _GNU_SOURCE
#include "host.h"

int main(int argc, char **argv)
{
    host_start();
    REQUIRE(argc == 2, "usage: secure EXPECTED_AT_SECURE");
    host_secure(argv[1]);
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_round(id, RDMA_CM_EVENT_ESTABLISHED);
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    return 0;
}
