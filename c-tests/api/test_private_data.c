/* Private data round trip on the real stack, every read after librdmacm's event was acked:
 * 40 bytes on connect, 100 on accept, 20 on a consumer reject (IB reject reason 28; on iWARP
 * -ECONNRESET). The lengths received are the transport's: see cm_req_len. */
#define _GNU_SOURCE
#include <errno.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7471 };

static void fill(unsigned char *buf, unsigned len, unsigned char seed)
{
    for (unsigned i = 0; i < len; i++)
        buf[i] = (unsigned char)(seed + i * 7);
}

/* The first `sent` bytes are ours, the rest of `got` (transport padding) is zero. */
static void check_pdata(const cmsafe_event *ev, const unsigned char *sent, unsigned sent_len,
                        unsigned want_len, const char *what)
{
    unsigned len = 0;
    const unsigned char *p = cm_pdata(ev, &len);
    CHECK(len == want_len, "%s: private_data_len %u, want %u", what, len, want_len);
    REQUIRE(p != NULL || want_len == 0, "%s: no private data", what);
    if (len == 0)
        return;
    CHECK(memcmp(p, sent, sent_len) == 0, "%s: the peer's bytes differ", what);
    unsigned nonzero = 0;
    for (unsigned i = sent_len; i < len; i++)
        nonzero += p[i] != 0;
    CHECK(nonzero == 0, "%s: %u padding bytes are not zero", what, nonzero);
}

int main(void)
{
    harness_watchdog(60);
    unsigned char req[40], rep[100], rej[20];
    fill(req, sizeof req, 1);
    fill(rep, sizeof rep, 101);
    fill(rej, sizeof rej, 201);

    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    /* The listen id is bound to the device's address: its transport is the connections'. */
    enum cm_transport tr = cm_transport(listen_id);
    STEP("transport %s", cm_transport_name(tr));

    STEP("connect with 40 bytes");
    /* 1. Accepted: 40 bytes out, 100 bytes back. */
    struct rdma_cm_id *client = cm_client(cch, PORT);
    cm_connect(client, req, sizeof req);
    cmsafe_event *creq = cm_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    const struct rdma_cm_event *creq_cm = cmsafe_event_cm(creq);
    CHECK(creq_cm->listen_id == listen_id, "CONNECT_REQUEST listen_id %p, want %p",
          (void *)creq_cm->listen_id, (void *)listen_id);
    CHECK(creq_cm->status == 0, "CONNECT_REQUEST status %d", creq_cm->status);
    struct rdma_cm_id *child = creq_cm->id;
    /* IB/RoCE CM REQ carries 56 bytes of private data (92 less the IP CM header), zero-padded;
     * iWARP the 40 sent. */
    check_pdata(creq, req, sizeof req, cm_req_len(tr, sizeof req), "CONNECT_REQUEST");

    STEP("accept with 100 bytes");
    rxe_create_qp(child);
    cm_accept(child, rep, sizeof rep);
    cmsafe_event *est = cm_expect(cch, RDMA_CM_EVENT_ESTABLISHED);
    /* The REP's private data area is 196 bytes on IB/RoCE. */
    check_pdata(est, rep, sizeof rep, cm_rep_len(tr, sizeof rep), "ESTABLISHED (client)");
    cmsafe_event *sest = cm_expect(sch, RDMA_CM_EVENT_ESTABLISHED);
    CHECK(cmsafe_event_cm(sest)->id == child, "server ESTABLISHED is for the child id");

    /* The copies stay readable after more events came and went. */
    check_pdata(creq, req, sizeof req, cm_req_len(tr, sizeof req),
                "CONNECT_REQUEST, read again later");

    STEP("second client, rejected with 20 bytes");
    /* 2. Rejected by the consumer with 20 bytes. */
    struct rdma_cm_id *client2 = cm_client(cch, PORT);
    const unsigned char hello[] = "second client";
    cm_connect(client2, hello, sizeof hello);
    cmsafe_event *creq2 = cm_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    check_pdata(creq2, hello, sizeof hello, cm_req_len(tr, sizeof hello), "second CONNECT_REQUEST");
    struct rdma_cm_id *child2 = cmsafe_event_cm(creq2)->id;
    STEP("reject");
    cm_reject(child2, rej, sizeof rej);
    cmsafe_event *rejected = cm_expect(cch, RDMA_CM_EVENT_REJECTED);
    /* IB CM reject reason 28: IB_CM_REJ_CONSUMER_DEFINED; iWARP's MPA reject: -ECONNRESET. */
    CHECK_EQ_INT(cmsafe_event_cm(rejected)->status, cm_consumer_reject_status(tr));
    CHECK(cmsafe_event_cm(rejected)->id == client2, "REJECTED is for the second client");
    /* The REJ's private data area is 148 bytes on IB/RoCE. */
    check_pdata(rejected, rej, sizeof rej, cm_rej_len(tr, sizeof rej), "REJECTED");

    STEP("disconnect");
    /* 3. Teardown: the client's DREQ reaches the server first; the server's own
     * rdma_disconnect answers it with the DREP that completes the client's disconnect. */
    REQUIRE(rdma_disconnect(client) == 0, "rdma_disconnect: %s", strerror(errno));
    cmsafe_event *sdisc = cm_expect(sch, RDMA_CM_EVENT_DISCONNECTED);
    CHECK(cmsafe_event_cm(sdisc)->id == child, "server DISCONNECTED is for the child id");
    REQUIRE(rdma_disconnect(child) == 0, "rdma_disconnect(child): %s", strerror(errno));
    cmsafe_event *cdisc = cm_expect(cch, RDMA_CM_EVENT_DISCONNECTED);
    CHECK(cmsafe_event_cm(cdisc)->id == client, "client DISCONNECTED is for the client id");

    STEP("destroy");
    cmsafe_event *all[] = {creq, est, sest, creq2, rejected, cdisc, sdisc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        cmsafe_event_release(all[i]);
    rdma_destroy_qp(child);
    rdma_destroy_qp(client);
    rdma_destroy_qp(client2);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(child)");
    CHECK(rdma_destroy_id(child2) == 0, "rdma_destroy_id(child2)");
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(client)");
    CHECK(rdma_destroy_id(client2) == 0, "rdma_destroy_id(client2)");
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
