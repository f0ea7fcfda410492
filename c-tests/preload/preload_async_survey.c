/* Which asynchronous events the device (Soft-RoCE's rxe, Soft-iWARP's siw) raises on demand: each
 * provocation below is tried and every async event that arrives within 2 s is printed as
 *   "async <PROVOCATION>: <ibv_event_type_str> <object>"
 * and acked at once (the well-behaved way); "async <PROVOCATION>: none" when nothing came. The
 * async fd is non-blocking: an empty one answers -1/EAGAIN ("no event"). Run raw and under the
 * preload: under it, no finding, and every event counted got and acked. The provocations:
 *   srq-limit    an SRQ with 4 receives and srq_limit 4 (ibv_modify_srq); one message takes one
 *   sq-drain     a connected RC QP moved to SQD (siw: none, raw_qp_drain says why)
 *   qp-error     that QP (on an SRQ) moved to ERR (a LAST_WQE_REACHED would come here)
 *   cq-overflow  a QP whose CQ holds 1 entry, 4 receives flushed by a move to ERR
 *   port-down, port-up  the device's netdev ($RXE_NETDEV) set down, then up (as root only) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7464 };

/* Prints and acks every async event of `ctx` arriving within `ms`. */
static void drain(struct ibv_context *ctx, const char *what, int ms)
{
    int n = 0;
    char label[64];
    snprintf(label, sizeof label, "async %s: ", what);
    struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
    while (poll(&pfd, 1, ms) == 1) {
        struct ibv_async_event e;
        if (ibv_get_async_event(ctx, &e) != 0) {
            CHECK(errno == EAGAIN, "ibv_get_async_event: %s", strerror(errno));
            break;
        }
        raw_print_async(label, &e);
        ibv_ack_async_event(&e);
        n++;
        ms = 500;
    }
    if (n == 0) {
        printf("%snone\n", label);
        fflush(stdout);
    }
}

int main(void)
{
    harness_watchdog(120);
    struct raw_srq_pair p;
    raw_srq_pair_connect(&p, PORT);
    struct ibv_context *ctx = p.pair.client->verbs;
    int fl = fcntl(ctx->async_fd, F_GETFL);
    REQUIRE(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl: %s", strerror(errno));
    struct ibv_async_event none;
    CHECK(ibv_get_async_event(ctx, &none) == -1 && errno == EAGAIN,
          "an empty non-blocking async fd: -1/EAGAIN");
    drain(ctx, "connect", 200);

    raw_srq_limit(&p);
    drain(ctx, "srq-limit", 2000);
    raw_qp_drain(p.pair.client->qp);
    drain(ctx, "sq-drain", 2000);
    struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
    CHECK_EQ_INT(ibv_modify_qp(p.pair.client->qp, &err, IBV_QP_STATE), 0);
    drain(ctx, "qp-error", 2000);

    struct ibv_qp *qp;
    struct ibv_cq *small = raw_cq_overflow(p.srq->pd, &qp);
    drain(ctx, "cq-overflow", 2000);
    /* Destroyed with their events acked: both return. */
    CHECK_EQ_INT(ibv_destroy_qp(qp), 0);
    CHECK_EQ_INT(ibv_destroy_cq(small), 0);

    const char *netdev = getenv("RXE_NETDEV");
    if (netdev && geteuid() == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "ip link set dev %s down", netdev);
        CHECK_EQ_INT(system(cmd), 0);
        drain(ctx, "port-down", 2000);
        snprintf(cmd, sizeof cmd, "ip link set dev %s up", netdev);
        CHECK_EQ_INT(system(cmd), 0);
        drain(ctx, "port-up", 2000);
    }
    return harness_exit();
}
