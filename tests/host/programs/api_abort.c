/* libcmsafe's misuse abort: a cmsafe_event released twice, which the API answers by saying so
 * on stderr, dumping the flight recorder there and aborting. Linked against libcmsafe.so.
 *   api_abort    says "released once" on stdout, then releases the event again; never returns */
#include <cmsafe.h>

#include "host.h"

int main(void)
{
    host_start();
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
    cmsafe_event *ev = NULL;
    REQUIRE(cmsafe_get_event(ch, &ev) == 0, "cmsafe_get_event");
    cmsafe_event_release(ev);
    printf("released once\n");
    cmsafe_event_release(ev);
    printf("returned from the second release\n");
    return 0;
}
