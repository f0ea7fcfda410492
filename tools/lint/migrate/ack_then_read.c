/* A server that acks a CONNECT_REQUEST and then reads its private data, on raw librdmacm:
 * the classic bug, for cmsafe-migrate's test (tools/lint/migrate/migrate-test). A listener
 * and a client in one process, on two event channels, at $RXE_ADDR:7431. The client sends
 * TOKEN; the server keeps a pointer to the request's private data, acks the request, then
 * copies the token through that pointer and prints "token: <what it read>"; it rejects the
 * request, and the client's REJECTED ends the run. Exit 0 when the token read back is TOKEN.
 * Built with AddressSanitizer, the original reports a heap-use-after-free in the copy (the
 * block rdma_ack_cm_event freed); cmsafe-migrate's port keeps cmsafe's copy for that read. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static const char TOKEN[] = "token-ack-then-read-5d41";

static void die(const char *what)
{
    fprintf(stderr, "ack_then_read: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* The next event on `ch`, which must be `want` (acked by the caller). */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    struct rdma_cm_event *event;
    if (rdma_get_cm_event(ch, &event))
        die("rdma_get_cm_event");
    if (event->event != want) {
        fprintf(stderr, "ack_then_read: got %s, want %s\n", rdma_event_str(event->event),
                rdma_event_str(want));
        exit(2);
    }
    return event;
}

static void next(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    rdma_ack_cm_event(expect(ch, want));
}

/* The server's part: the request's token, read after the ack. */
static int serve(struct rdma_event_channel *ch, char *out, size_t len)
{
    struct rdma_cm_event *event;
    if (rdma_get_cm_event(ch, &event))
        die("rdma_get_cm_event");
    if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_ack_cm_event(event);
        return -1;
    }
    struct rdma_cm_id *child = event->id;
    const char *pdata = event->param.conn.private_data;
    rdma_ack_cm_event(event);
    memcpy(out, pdata, len); /* after the ack: the bug */
    if (rdma_reject(child, NULL, 0))
        die("rdma_reject");
    return rdma_destroy_id(child);
}

int main(void)
{
    const char *a = getenv("RXE_ADDR");
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(7431)};
    if (!a || inet_pton(AF_INET, a, &sin.sin_addr) != 1) {
        fprintf(stderr, "ack_then_read: RXE_ADDR must hold the RDMA address\n");
        return 2;
    }
    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    if (!sch || !cch)
        die("rdma_create_event_channel");
    struct rdma_cm_id *listen_id, *client;
    if (rdma_create_id(sch, &listen_id, NULL, RDMA_PS_TCP) ||
        rdma_bind_addr(listen_id, (struct sockaddr *)&sin) || rdma_listen(listen_id, 1))
        die("listen");
    if (rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) ||
        rdma_resolve_addr(client, NULL, (struct sockaddr *)&sin, 2000))
        die("rdma_resolve_addr");
    next(cch, RDMA_CM_EVENT_ADDR_RESOLVED);
    if (rdma_resolve_route(client, 2000))
        die("rdma_resolve_route");
    next(cch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    struct ibv_qp_init_attr qp = {
        .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (rdma_create_qp(client, NULL, &qp))
        die("rdma_create_qp");
    struct rdma_conn_param param = {
        .private_data = TOKEN, .private_data_len = sizeof TOKEN,
        .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
    };
    if (rdma_connect(client, &param))
        die("rdma_connect");

    char got[sizeof TOKEN];
    if (serve(sch, got, sizeof got))
        return 1;
    got[sizeof got - 1] = '\0';
    printf("token: %s\n", got);
    next(cch, RDMA_CM_EVENT_REJECTED);

    rdma_destroy_qp(client);
    rdma_destroy_id(client);
    rdma_destroy_id(listen_id);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return strcmp(got, TOKEN) == 0 ? 0 : 1;
}
