/* A plugin that reaches librdmacm only through its own dependency: preload_dlopen loads it with
 * dlopen(RTLD_LOCAL), as UCX loads its rdmacm transport, so librdmacm is in no global scope and
 * the preload must find it all the same. One round connects an RC pair inside the process,
 * disconnects it and destroys everything, acking every event at once: 7 events. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "raw_util.h"

/* The event types one round fetches, in order (the runner compares them across modes). */
int plugin_round(unsigned short port)
{
    struct raw_pair p;
    raw_pair_connect(&p, port, NULL); /* ADDR_RESOLVED ROUTE_RESOLVED CONNECT_REQUEST
                                         ESTABLISHED ESTABLISHED */
    /* The client's DREQ gives the server its DISCONNECTED; the server's rdma_disconnect sends
     * the DREP that gives the client its own. */
    REQUIRE(rdma_disconnect(p.client) == 0, "rdma_disconnect: %s", strerror(errno));
    raw_get_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED);
    REQUIRE(rdma_disconnect(p.child) == 0, "rdma_disconnect: %s", strerror(errno));
    raw_get_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED);
    rdma_destroy_qp(p.client);
    rdma_destroy_qp(p.child);
    REQUIRE(rdma_destroy_id(p.client) == 0, "rdma_destroy_id(client): %s", strerror(errno));
    REQUIRE(rdma_destroy_id(p.child) == 0, "rdma_destroy_id(child): %s", strerror(errno));
    REQUIRE(rdma_destroy_id(p.listen) == 0, "rdma_destroy_id(listen): %s", strerror(errno));
    rdma_destroy_event_channel(p.sch);
    rdma_destroy_event_channel(p.cch);
    return harness_failed ? -1 : 7;
}
