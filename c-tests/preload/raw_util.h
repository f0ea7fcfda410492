/* Connection helpers for the preload tests, on RAW librdmacm: these programs model unmodified
 * applications, so every event is fetched with rdma_get_cm_event and acked (or not) with
 * rdma_ack_cm_event by the program itself. Built without cmsafe and without sanitizers; run with
 * and without libcmsafe_preload.so by scripts/preload-misuse-tests. */
#ifndef CMSAFE_RAW_UTIL_H
#define CMSAFE_RAW_UTIL_H

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include "rxe_setup.h"
#include "transport.h"

/* Private data every connecting test sends: the runner greps the reports for RAW_TOKEN_TAG to
 * prove that no private data byte ever appears in them. */
#define RAW_TOKEN_TAG "PDTOKEN-5e7d1c"
#define RAW_TOKEN RAW_TOKEN_TAG "-cmsafe-misuse-probe"

/* A port no RDMA peer listens on. IB/RoCE: connecting to it yields REJECTED (status 8,
 * IB_CM_REJ_INVALID_SERVICE_ID) at once. iWARP: rdma_connect to a port nothing listens on fails
 * itself (ECONNREFUSED, no event): raw_connect_unanswered gives the REJECTED there. */
enum { RAW_NO_LISTENER_PORT = 7499 };

/* The guest's RDMA address ($RXE_ADDR, set by scripts/rxe-vm) and a port. */
struct sockaddr_in rxe_addr(unsigned short port);

/* The transport of the device `id` is bound to (once its address is resolved or bound), as the
 * device reports it (c-tests/transport.h). */
enum cm_transport raw_transport(const struct rdma_cm_id *id);

/* rdma_create_event_channel, required to work. */
struct rdma_event_channel *raw_channel(void);

/* Fetches the next event on `ch` with rdma_get_cm_event; fails the test unless it is of type
 * `want`. The event is NOT acked: the caller owns it. */
struct rdma_cm_event *raw_get(struct rdma_event_channel *ch, enum rdma_cm_event_type want);

/* rdma_ack_cm_event, required to return 0. */
void raw_ack(struct rdma_cm_event *ev);

/* raw_get then raw_ack at once: the well-behaved way. */
void raw_get_ack(struct rdma_event_channel *ch, enum rdma_cm_event_type want);

/* A listen id bound to $RXE_ADDR:port on `ch` (RDMA_PS_TCP, backlog 8). */
struct rdma_cm_id *raw_listen(struct rdma_event_channel *ch, unsigned short port);

/* A client id on `ch` with its address and route resolved: fetches and acks ADDR_RESOLVED and
 * ROUTE_RESOLVED (two events). With `with_qp`, an RC QP is created on it. */
struct rdma_cm_id *raw_client(struct rdma_event_channel *ch, unsigned short port, int with_qp);

/* A client id on `ch` (stored in *id) whose address is resolved (ADDR_RESOLVED fetched and
 * acked, event 1) and whose route is resolved: returns that ROUTE_RESOLVED (event 2), unacked,
 * for the misuse programs to misuse. */
struct rdma_cm_event *raw_route_unacked(struct rdma_event_channel *ch, unsigned short port,
                                        struct rdma_cm_id **id);

/* An id on `ch` whose ADDR_RESOLVED (of $RXE_ADDR:port) is queued on the channel, not yet
 * fetched: the channel's fd polls readable. */
struct rdma_cm_id *raw_addr_queued(struct rdma_event_channel *ch, unsigned short port);

/* rdma_connect / rdma_accept / rdma_reject with `len` bytes of private data. Where the transport
 * connects no id without its QP (iWARP: cm_qp_before_connect), raw_connect and raw_accept give an
 * id that has none its QP first (rxe_create_qp); raw_destroy_id destroys it. */
void raw_connect(struct rdma_cm_id *id, const void *pdata, unsigned char len);
void raw_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len);
void raw_reject(struct rdma_cm_id *id);

/* raw_connect of an id resolved to RAW_NO_LISTENER_PORT, for a REJECTED on it that no id of the
 * process answered. IB/RoCE: nothing listens, the CM rejects (status 8). iWARP, where rdma_connect
 * to a port nothing listens on fails without an event: a plain TCP socket listens on the port,
 * takes the connection and resets it before any MPA reply, as a service that is no iWARP peer
 * would; siw reports a peer close while it awaits the MPA reply as REJECTED, status -ECONNRESET
 * (siw_cm.c, SIW_CM_WORK_PEER_CLOSE in state SIW_EPSTATE_AWAIT_MPAREP). */
void raw_connect_unanswered(struct rdma_cm_id *id, const void *pdata, unsigned char len);

/* The status of raw_connect_unanswered's REJECTED: 8 (IB_CM_REJ_INVALID_SERVICE_ID) or
 * -ECONNRESET (iWARP). */
int raw_unanswered_status(enum cm_transport t);

/* rdma_destroy_id(id), after rdma_destroy_qp(id) when the id has a QP (raw_connect's, on iWARP):
 * returns rdma_destroy_id's result. For ids whose events are all acked. */
int raw_destroy_id(struct rdma_cm_id *id);

/* A connected RC pair inside one process, every event acked at once except where noted.
 * Events fetched, in this order: ADDR_RESOLVED, ROUTE_RESOLVED (client), CONNECT_REQUEST
 * (listener), ESTABLISHED (client), ESTABLISHED (server child): seq 1..5 in a fresh process.
 * With `hold_server_established`, the child's ESTABLISHED is returned unacked in *held. */
struct raw_pair {
    struct rdma_event_channel *sch, *cch;
    struct rdma_cm_id *listen, *client, *child;
};
void raw_pair_connect(struct raw_pair *p, unsigned short port, struct rdma_cm_event **held);

/* The same, with the client's QP made by `client_qp(client, arg)` instead of rxe_create_qp. */
void raw_pair_connect_qp(struct raw_pair *p, unsigned short port, struct rdma_cm_event **held,
                         void (*client_qp)(struct rdma_cm_id *client, void *arg), void *arg);

/* Completion events for the CQ misuse programs: a connected pair (raw_pair_connect's events,
 * seq 1..5) whose client QP sends on cqs[0] and receives on cqs[ncq - 1]: `ncq` (1 or 2) CQs of
 * the client's device, all on the one completion channel `cc`. */
struct raw_cq_pair {
    struct raw_pair pair;
    struct ibv_comp_channel *cc;
    struct ibv_cq *cqs[2];
    int ncq;
};
void raw_cq_pair_connect(struct raw_cq_pair *p, unsigned short port, int ncq);

/* One completion event: arms cqs[0] (ibv_req_notify_cq), sends a signalled zero-length message
 * from the client to a receive the server posts (with one SGE, raw_recv_sge's), and fetches the event with ibv_get_cq_event,
 * required to come from cqs[0]; polls both completions off (the send's and the server's
 * receive's). Returns that CQ, its event NOT acked. */
struct ibv_cq *raw_cq_event(struct raw_cq_pair *p);

/* raw_cq_pair_connect, then raw_cq_event in the calling thread, printing "main thread <tid>" and
 * "cq <the event's CQ>" on stdout for the runner to check the findings against. */
struct ibv_cq *raw_cq_main_event(struct raw_cq_pair *p, unsigned short port, int ncq);

/* ibv_destroy_cq(cq) between the lines "step: calling ibv_destroy_cq(NAME)" and
 * "step: ibv_destroy_cq(NAME) returned RC"; checked to return 0. */
void raw_destroy_cq(struct ibv_cq *cq, const char *name);

/* Async events (ibv_get_async_event) for the async misuse programs. */

/* Moves `qp` (connected, RTS) to SQD: rxe then raises IBV_EVENT_SQ_DRAINED for it; siw raises
 * nothing (below). */
void raw_qp_drain(struct ibv_qp *qp);

/* Provokes one async event of `qp` (connected, RTS) and returns its type. IB/RoCE: raw_qp_drain,
 * SQ_DRAINED. iWARP: siw raises SQ_DRAINED only when a flush finds work requests left on the send
 * queue (siw_qp.c, siw_sq_flush), never for SQD, which it takes as CLOSING (siw_verbs.c,
 * ib_qp_state_to_siw_qp_state: the connection is closed, the send queue empty); it raises
 * QP_FATAL for a send it cannot process (siw_qp_tx.c, siw_qp_sq_process): here a send of a
 * buffer registered on another protection domain of the device (siw_check_sge: PD mismatch),
 * which also drops the connection. */
enum ibv_event_type raw_qp_event(struct ibv_qp *qp);

/* One SGE of a small buffer registered on `pd` (once per PD) for a receive: libsiw refuses a
 * receive with no SGE (providers/siw/siw.c, push_recv_wqe: EINVAL); rxe takes either. */
struct ibv_sge raw_recv_sge(struct ibv_pd *pd);

/* The next async event of `ctx` (blocking; polled for up to 5 s when the fd is non-blocking),
 * required to be of type `want`. Printed as "event <type name> <object>" on stdout. NOT acked. */
struct ibv_async_event raw_async_event(struct ibv_context *ctx, enum ibv_event_type want);

/* Prints "<label><type name> <object>" (the object: "qp 0x...", "cq 0x...", "srq 0x..." or
 * "port N") on stdout. */
void raw_print_async(const char *label, const struct ibv_async_event *e);

/* A connected pair (raw_pair_connect's events, seq 1..5) whose client QP receives through an
 * SRQ, with one CQ for both directions. */
struct raw_srq_pair {
    struct raw_pair pair;
    struct ibv_srq *srq;
    struct ibv_cq *cq;
};
void raw_srq_pair_connect(struct raw_srq_pair *p, unsigned short port);

/* Posts 4 receives to the SRQ, sets its srq_limit to 4 (ibv_modify_srq) and sends one message
 * from the server: taking a receive drops the SRQ below its limit, and rxe (and siw:
 * siw_qp_rx.c, siw_rqe_get) raises IBV_EVENT_SRQ_LIMIT_REACHED. */
void raw_srq_limit(struct raw_srq_pair *p);

/* A CQ of 1 entry (returned) and an RC QP on `pd` using it (*qp), the QP moved to INIT, given 4
 * receives and moved to ERR: their flushed completions overflow the CQ, and rxe raises
 * IBV_EVENT_CQ_ERR for it (once per completion that did not fit; siw once, then stops the
 * flush: siw_qp.c, siw_rqe_complete and siw_rq_flush). */
struct ibv_cq *raw_cq_overflow(struct ibv_pd *pd, struct ibv_qp **qp);

/* ibv_destroy_qp(qp) between the lines "step: calling ibv_destroy_qp(NAME)" and
 * "step: ibv_destroy_qp(NAME) returned RC"; checked to return 0. */
void raw_destroy_qp(struct ibv_qp *qp, const char *name);

/* Prints `len` bytes as text on stdout after `label`: printable bytes as they are, others as
 * '.'. Used by the use-after-ack program to show what it read. */
void raw_print_bytes(const char *label, const void *data, size_t len);

#endif
