/* A program that is not linked with librdmacm and reaches it only through a plugin it loads
 * with dlopen(RTLD_LOCAL) (UCX's way), after its first call into the RDMA CM API:
 *   1. before any librdmacm is loaded, rdma_get_cm_event as the process sees it: none without
 *      the preload; the preload's, which must fail with ENOSYS then (nothing behind it yet);
 *   2. the plugin loaded RTLD_LOCAL: librdmacm is not in the global scope (rdma_getaddrinfo, which
 *      the preload does not interpose, is not found there), yet two rounds of connect/disconnect
 *      work (7 events each);
 *   3. the plugin closed and loaded again: a third round.
 * Under the preload every event is tracked (21 events, 0 findings) and nothing fails with
 * ENOSYS once librdmacm is loaded. Usage: preload_dlopen PLUGIN.so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int harness_passed, harness_failed, harness_skipped;
#include "harness.h"

typedef int get_event_fn(void *channel, void **event);
typedef int round_fn(unsigned short port);

static void *load(const char *path, round_fn **round)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h, "dlopen(%s): %s", path, dlerror());
    *round = (round_fn *)(uintptr_t)dlsym(h, "plugin_round");
    REQUIRE(*round, "plugin_round not in %s", path);
    return h;
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: preload_dlopen PLUGIN.so");

    get_event_fn *get = (get_event_fn *)(uintptr_t)dlsym(RTLD_DEFAULT, "rdma_get_cm_event");
    if (!get) {
        printf("before the plugin: no rdma_get_cm_event in the process\n");
    } else {
        void *ev = NULL;
        errno = 0;
        int rc = get(NULL, &ev);
        printf("before the plugin: rdma_get_cm_event returned %d, errno %s\n", rc,
               errno == ENOSYS ? "ENOSYS" : strerrorname_np(errno));
    }

    round_fn *round;
    void *h = load(argv[1], &round);
    CHECK(dlsym(RTLD_DEFAULT, "rdma_getaddrinfo") == NULL,
          "librdmacm is in the global scope: the plugin was not loaded RTLD_LOCAL");
    printf("plugin loaded RTLD_LOCAL: rdma_getaddrinfo in the global scope: %s\n",
           dlsym(RTLD_DEFAULT, "rdma_getaddrinfo") ? "yes" : "no");
    for (int r = 1; r <= 2; r++) {
        int n = round((unsigned short)(7440 + r));
        CHECK_EQ_INT(n, 7);
        printf("round %d: %d events\n", r, n);
        fflush(stdout);
    }
    REQUIRE(dlclose(h) == 0, "dlclose: %s", dlerror());
    h = load(argv[1], &round);
    int n = round(7443);
    CHECK_EQ_INT(n, 7);
    printf("round 3, after dlclose and a new dlopen: %d events\n", n);
    dlclose(h);
    return harness_exit();
}
