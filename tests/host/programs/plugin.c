/* A plugin of the program's gets an event and nobody acks it:
 *   plugin PATH  dlopen(PATH) RTLD_LOCAL before any CM call, then an ESTABLISHED queued on the
 *                program's id and got by the plugin's helper_get_event; prints "the plugin got
 *                ESTABLISHED" and exits 0 without acking it */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "host.h"

int main(int argc, char **argv)
{
    host_start();
    if (argc != 2) {
        printf("usage: plugin PATH\n");
        return 2;
    }
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    REQUIRE(plugin, "dlopen: %s", dlerror());
    struct rdma_cm_event *(*get)(struct rdma_event_channel *);
    *(void **)&get = dlsym(plugin, "helper_get_event");
    REQUIRE(get, "dlsym: %s", dlerror());
    struct rdma_event_channel *ch = host_channel();
    host_queue(host_id(ch), RDMA_CM_EVENT_ESTABLISHED, NULL);
    struct rdma_cm_event *ev = get(ch);
    REQUIRE(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED, "the plugin's event");
    printf("the plugin got ESTABLISHED\n");
    return 0;
}
