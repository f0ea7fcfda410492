/* Private data lengths on the real stack, read four ways that must agree: cmsafe_event_cm's
 * param.conn, cmsafe_event_private_data, cmsafe_buf_data and cmsafe_buf_len.
 *
 * What this stack reports (Soft-RoCE, IPv4; measured, and the same as the facts file): the length
 * is the transport's, not the sender's. A CONNECT_REQUEST carries 56 bytes whatever was sent (the
 * bytes sent, then zeros), and 56 zero bytes when nothing was sent; an ESTABLISHED carries 196,
 * a consumer REJECTED 148, also when the peer sent nothing.
 *
 * iWARP (Soft-iWARP) reports the sender's length: each message carries exactly the bytes sent
 * (MPA private data), and none at all (no buffer, NULL/0) when nothing was sent. cm_req_len and
 * its siblings hold both; the transport is the listen id's device's. */
#define _GNU_SOURCE
#include <errno.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7710, REQ_ROOM = CM_REQ_ROOM, REP_ROOM = CM_REP_ROOM, REJ_ROOM = CM_REJ_ROOM };

/* The transport of the listen id's device, set in main before the first connection. */
static enum cm_transport tr;

static void check_none(const cmsafe_event *ev, const char *what);

/* The four views agree, and hold `sent` then zeros, `want_len` long. */
static void check_lengths(const cmsafe_event *ev, const void *sent, size_t sent_len,
                          size_t want_len, const char *what)
{
    /* Nothing to hold (iWARP with nothing sent): no buffer at all, as for any event without. */
    if (want_len == 0) {
        check_none(ev, what);
        return;
    }
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    const cmsafe_buf *buf = cmsafe_event_private_data(ev);
    REQUIRE(buf != NULL, "%s: no private data buffer", what);
    const unsigned char *data = cmsafe_buf_data(buf);
    size_t len = cmsafe_buf_len(buf);
    CHECK(len == want_len, "%s: cmsafe_buf_len %zu, want %zu", what, len, want_len);
    CHECK(cm->param.conn.private_data_len == want_len, "%s: view private_data_len %u, want %zu",
          what, cm->param.conn.private_data_len, want_len);
    CHECK(cm->param.conn.private_data == data, "%s: view private_data %p, buffer data %p", what,
          cm->param.conn.private_data, (const void *)data);
    CHECK(data != NULL, "%s: cmsafe_buf_data is NULL", what);
    if (data && sent_len)
        CHECK(memcmp(data, sent, sent_len) == 0, "%s: the first %zu bytes are not those sent",
              what, sent_len);
    size_t nonzero = 0;
    for (size_t i = sent_len; data && i < len; i++)
        nonzero += data[i] != 0;
    CHECK(nonzero == 0, "%s: %zu of the %zu bytes after those sent are not zero", what, nonzero,
          len - sent_len);
}

static void check_none(const cmsafe_event *ev, const char *what)
{
    const struct rdma_cm_event *cm = cmsafe_event_cm(ev);
    CHECK(cmsafe_event_private_data(ev) == NULL, "%s: has a buffer", what);
    CHECK(cm->param.conn.private_data == NULL && cm->param.conn.private_data_len == 0,
          "%s: view has %p/%u", what, cm->param.conn.private_data, cm->param.conn.private_data_len);
}

/* One connection: connect with `req` (`req_len` bytes, maybe NULL/0), then accept with `rep`
 * or reject with `rej`; checks every length on the way. */
static void connection(struct rdma_event_channel *sch, struct rdma_event_channel *cch,
                       const void *req, unsigned char req_len, int accept, const void *reply,
                       unsigned char reply_len, const char *what)
{
    STEP("%s", what);
    char w[128];
    struct rdma_cm_id *client = cm_client(cch, PORT);
    cm_connect(client, req, req_len);
    cmsafe_event *creq = cm_expect_within(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
    snprintf(w, sizeof w, "%s: CONNECT_REQUEST", what);
    check_lengths(creq, req, req_len, cm_req_len(tr, req_len), w);
    struct rdma_cm_id *child = cmsafe_event_id(creq);
    cmsafe_event_release(creq);

    if (accept) {
        rxe_create_qp(child);
        cm_accept(child, reply, reply_len);
        cmsafe_event *est = cm_expect_within(cch, RDMA_CM_EVENT_ESTABLISHED, 5000);
        snprintf(w, sizeof w, "%s: client ESTABLISHED", what);
        check_lengths(est, reply, reply_len, cm_rep_len(tr, reply_len), w);
        cmsafe_event *sest = cm_expect_within(sch, RDMA_CM_EVENT_ESTABLISHED, 5000);
        snprintf(w, sizeof w, "%s: server ESTABLISHED", what);
        check_none(sest, w);
        REQUIRE(rdma_disconnect(client) == 0, "rdma_disconnect: %s", strerror(errno));
        cmsafe_event *sdisc = cm_expect_within(sch, RDMA_CM_EVENT_DISCONNECTED, 5000);
        snprintf(w, sizeof w, "%s: server DISCONNECTED", what);
        check_none(sdisc, w);
        REQUIRE(rdma_disconnect(child) == 0, "rdma_disconnect(child): %s", strerror(errno));
        cmsafe_event *cdisc = cm_expect_within(cch, RDMA_CM_EVENT_DISCONNECTED, 5000);
        snprintf(w, sizeof w, "%s: client DISCONNECTED", what);
        check_none(cdisc, w);
        cmsafe_event_release(est);
        cmsafe_event_release(sest);
        cmsafe_event_release(sdisc);
        cmsafe_event_release(cdisc);
        rdma_destroy_qp(child);
    } else {
        cm_reject(child, reply, reply_len);
        cmsafe_event *rej = cm_expect_within(cch, RDMA_CM_EVENT_REJECTED, 5000);
        CHECK_EQ_INT(cmsafe_event_status(rej), cm_consumer_reject_status(tr));
        snprintf(w, sizeof w, "%s: REJECTED", what);
        check_lengths(rej, reply, reply_len, cm_rej_len(tr, reply_len), w);
        cmsafe_event_release(rej);
    }
    CHECK(rdma_destroy_id(child) == 0, "%s: rdma_destroy_id(child)", what);
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "%s: rdma_destroy_id(client)", what);
}

/* A buffer outlives its event: cmsafe_buf_retain, release the event, read the bytes later. */
static void retained_buffer(struct rdma_event_channel *sch, struct rdma_event_channel *cch)
{
    STEP("a retained buffer outlives its event");
    unsigned char req[33];
    cm_fill(req, sizeof req, 77);
    struct rdma_cm_id *client = cm_client(cch, PORT);
    cm_connect(client, req, sizeof req);
    cmsafe_event *creq = cm_expect_within(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
    struct rdma_cm_id *child = cmsafe_event_id(creq);
    cmsafe_stats s0 = cm_stats();
    const cmsafe_buf *buf = cmsafe_event_private_data(creq);
    CHECK(cmsafe_buf_retain(buf) == buf, "cmsafe_buf_retain returns its argument");
    CHECK(cmsafe_event_private_data(creq) == buf, "the event's buffer is the same");
    cmsafe_event_release(creq);
    cmsafe_stats s1 = cm_stats();
    CHECK_EQ_INT(s0.live_events - s1.live_events, 1);
    CHECK_EQ_INT(s1.live_buffers, s0.live_buffers);
    CHECK_EQ_INT(s1.released - s0.released, 1);
    /* Reuse the freed event slot a few times before reading the buffer. */
    cm_reject(child, "later", 5);
    cmsafe_event *rej = cm_expect_within(cch, RDMA_CM_EVENT_REJECTED, 5000);
    cmsafe_event_release(rej);
    CHECK(cm_bytes_are(cmsafe_buf_data(buf), cmsafe_buf_len(buf), req, sizeof req,
                       cm_req_len(tr, sizeof req)),
          "the retained buffer's bytes (len %zu)", cmsafe_buf_len(buf));
    cmsafe_stats s2 = cm_stats();
    cmsafe_buf_release(buf);
    cmsafe_stats s3 = cm_stats();
    CHECK_EQ_INT(s2.live_buffers - s3.live_buffers, 1);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(child)");
    rdma_destroy_qp(client);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(client)");
}

int main(void)
{
    harness_watchdog(50);
    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    tr = cm_transport(listen_id);
    STEP("transport %s", cm_transport_name(tr));

    /* NULL accessors: the neutral values the header documents. */
    CHECK(cmsafe_buf_data(NULL) == NULL, "cmsafe_buf_data(NULL)");
    CHECK_EQ_INT(cmsafe_buf_len(NULL), 0);
    CHECK(cmsafe_buf_retain(NULL) == NULL, "cmsafe_buf_retain(NULL)");
    cmsafe_buf_release(NULL);

    unsigned char b40[40], b56[REQ_ROOM], b196[REP_ROOM], b148[REJ_ROOM], b1[1] = {0xa5};
    cm_fill(b40, sizeof b40, 3);
    cm_fill(b56, sizeof b56, 5);
    cm_fill(b196, sizeof b196, 7);
    cm_fill(b148, sizeof b148, 9);

    /* 40 bytes sent -> 56 received: the 40, then 16 zeros (iWARP: the 40). Accepted with all
     * 196 bytes. */
    connection(sch, cch, b40, sizeof b40, 1, b196, sizeof b196, "40 bytes; accept with 196");
    /* Nothing sent (NULL, 0) -> 56 zero bytes received, never NULL/0; accepted with nothing ->
     * ESTABLISHED carries 196 zero bytes. iWARP: none, NULL/0, both times. */
    connection(sch, cch, NULL, 0, 1, NULL, 0, "nothing; accept with nothing");
    /* The whole room of a REQ: 56 bytes sent, the same 56 received. Rejected with 148. */
    connection(sch, cch, b56, sizeof b56, 0, b148, sizeof b148, "56 bytes; reject with 148");
    /* 1 byte; rejected with nothing -> REJECTED carries 148 zero bytes (iWARP: none). */
    connection(sch, cch, b1, sizeof b1, 0, NULL, 0, "1 byte; reject with nothing");
    retained_buffer(sch, cch);

    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    cmsafe_stats s = cm_stats();
    CHECK_EQ_INT(s.fetched, s.acked);
    CHECK_EQ_INT(s.live_events, 0);
    CHECK_EQ_INT(s.live_buffers, 0);
    CHECK_EQ_INT(s.pending, 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
