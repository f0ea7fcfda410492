/* Misuse: foreign-ack. The program passes rdma_ack_cm_event a pointer that rdma_get_cm_event
 * never returned: its own heap copy of an event (a "helpful" copy taken before the real one was
 * acked, later acked by mistake in place of the original).
 *   Events: 1 ADDR_RESOLVED (acked normally). Then rdma_ack_cm_event(own copy). Expected
 *   finding: foreign-ack (no event of the process is involved: the seq and type the finding
 *   carries are printed by the runner, not checked).
 * So that the call cannot crash when it is passed on to librdmacm, the copy is laid out like
 * librdmacm 44's struct cma_event (the public event, private_data[256], then the owning id's
 * private struct, which starts with the rdma_cm_id, and a NULL multicast pointer): librdmacm then
 * bumps that id's completed-event count and free()s the copy, which is a valid heap block.
 * Raw librdmacm: runs to the end, exit 0. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7484 };

/* librdmacm/cma.c (v44): struct cma_event. */
struct fake_cma_event {
    struct rdma_cm_event event;
    uint8_t private_data[256];
    void *id_priv;
    void *mc;
};

int main(void)
{
    harness_watchdog(60);
    struct rdma_event_channel *ch = raw_channel();
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id: %s", strerror(errno));
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));

    struct rdma_cm_event *ev = raw_get(ch, RDMA_CM_EVENT_ADDR_RESOLVED); /* seq 1 */
    struct fake_cma_event *copy = calloc(1, sizeof *copy);
    REQUIRE(copy, "calloc failed");
    copy->event = *ev;
    copy->id_priv = ev->id; /* struct cma_id_private starts with its struct rdma_cm_id */
    copy->mc = NULL;
    raw_ack(ev);

    STEP("acking a pointer rdma_get_cm_event never returned");
    int rc = rdma_ack_cm_event(&copy->event); /* the misuse; librdmacm frees `copy` */
    STEP("rdma_ack_cm_event(foreign) returned %d", rc);

    CHECK_EQ_INT(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
