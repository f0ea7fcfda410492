/* Run setuid (AT_SECURE) against libcmsafe.so, where no CMSAFE_* variable may have any effect:
 *   secure_api EXPECTED  checks getauxval(AT_SECURE) is EXPECTED (0 or 1; else exit 3), then an
 *                        ESTABLISHED through the compat API (cmsafe_compat_*), acked twice: the
 *                        second ack is a warning of libcmsafe's log (on stderr unless CMSAFE_LOG
 *                        turns it off); at exit CMSAFE_FLIGHT_DUMP names the flight recorder's
 *                        dump file */
#define _GNU_SOURCE
#include <cmsafe.h>

#include "host.h"

int main(int argc, char **argv)
{
    host_start();
    REQUIRE(argc == 2, "usage: secure_api EXPECTED_AT_SECURE");
    host_secure(argv[1]);
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
    struct rdma_cm_event *ev = NULL;
    REQUIRE(cmsafe_compat_get_cm_event(ch, &ev) == 0, "cmsafe_compat_get_cm_event");
    REQUIRE(cmsafe_compat_ack_cm_event(ev) == 0, "cmsafe_compat_ack_cm_event");
    REQUIRE(cmsafe_compat_ack_cm_event(ev) == 0, "cmsafe_compat_ack_cm_event, again");
    REQUIRE(cmsafe_compat_destroy_id(id) == 0, "cmsafe_compat_destroy_id");
    rdma_destroy_event_channel(ch);
    return 0;
}
