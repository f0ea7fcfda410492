/* libcmsafe's misuse abort: a cmsafe_event released twice, which the API answers by saying so
 * on stderr, dumping the flight recorder there and aborting. Linked against libcmsafe.so.
 *   api_abort [FILE]  says "released once" on stdout, then releases the event again; never
 *                     returns. With FILE, the program first points its own stderr at FILE
 *                     (created new), as a daemon sends its stderr to its log */
#include <fcntl.h>

#include <cmsafe.h>

#include "host.h"

int main(int argc, char **argv)
{
    host_start();
    if (argc > 1) {
        int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL, 0600);
        REQUIRE(fd >= 0 && dup2(fd, 2) == 2 && close(fd) == 0, "stderr to %s", argv[1]);
    }
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
