/* Misuse: a connect retried after REJECTED on the id the first try destroyed, as perftest
 * 4.5-0.17's RDMA CM client does (its retry loop destroys the ids and frees the array that holds
 * them, then calls rdma_resolve_addr on a slot of that array; fixed upstream in perftest 3d9d8d0).
 * Events: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED, 3 REJECTED (no RDMA peer listens on the port:
 * raw_connect_unanswered; status 8 on IB/RoCE, -ECONNRESET on iWARP), all acked; then
 * rdma_destroy_id and rdma_destroy_event_channel, as the first try's clean-up does.
 * The retry, with no argument: rdma_resolve_addr on the destroyed id (use-after-destroy-id).
 * With "reused": the slot that held the id was freed and reused, here for the peer's address,
 * as perftest's got from rdma_getaddrinfo; the retry passes the slot's bytes as the id, an
 * address no object can have (not-a-cm-id): librdmacm faults at once. On stderr:
 * "step: calling rdma_resolve_addr on the <destroyed id | reused slot>" before the misuse and
 * "step: rdma_resolve_addr on the <...> returned R (errno E)" after it; the safe preload refuses
 * the call with -1 and EINVAL. Exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "raw_util.h"

int main(int argc, char **argv)
{
    int reused = argc > 1 && strcmp(argv[1], "reused") == 0;
    const char *what = reused ? "reused slot" : "destroyed id";
    struct rdma_event_channel *ch = raw_channel();
    /* The program keeps its id in a slot that later holds other things. */
    union {
        struct rdma_cm_id *id;
        struct sockaddr_in addr;
    } slot;
    slot.id = raw_client(ch, RAW_NO_LISTENER_PORT, 0); /* seq 1, 2 */
    raw_connect_unanswered(slot.id, RAW_TOKEN, sizeof RAW_TOKEN);
    struct rdma_cm_event *ev = raw_get(ch, RDMA_CM_EVENT_REJECTED); /* seq 3 */
    CHECK_EQ_INT(ev->status, raw_unanswered_status(raw_transport(slot.id)));
    printf("connect: %s status %d\n", rdma_event_str(ev->event), ev->status);
    fflush(stdout); /* raw, the retry kills the process */
    raw_ack(ev);

    /* The first try's clean-up. */
    CHECK_EQ_INT(raw_destroy_id(slot.id), 0);
    rdma_destroy_event_channel(ch);
    struct sockaddr_in dst = rxe_addr(RAW_NO_LISTENER_PORT);
    if (reused)
        slot.addr = dst;

    /* The retry. */
    STEP("calling rdma_resolve_addr on the %s", what);
    int rc = rdma_resolve_addr(slot.id, NULL, (struct sockaddr *)&dst, 2000);
    int err = errno;
    STEP("rdma_resolve_addr on the %s returned %d (errno %s)", what, rc,
         rc ? strerrorname_np(err) : "-");
    return harness_exit();
}
