/* The reconnect storm: what the three servers and the client share.
 *
 * A storm server listens on one event channel and serves WAVES waves of CONNS connections. In
 * each wave it verifies every client's token (CONNECT_REQUEST private data), gives each
 * connection its own RC QP (one PD and one CQ shared by all of them), accepts with a few bytes
 * of private data, and says when all CONNS are established. The driver (scripts/storm-in-guest)
 * then SIGKILLs every client at once; the server handles whatever the stack reports for the
 * vanished peers, destroys every QP and id, says how long it took, and starts the next wave.
 *
 * The three servers differ only in how they fetch and ack events:
 *   storm_server_cmsafe  cmsafe_get_events (batches, already acked), reads the copy, releases
 *   storm_server_legacy  rdma_get_cm_event, rdma_ack_cm_event, THEN reads the private data
 *                        (the classic bug; correct only under libcmsafe_preload.so, safe mode)
 *   storm_server_raw     rdma_get_cm_event, reads, rdma_ack_cm_event (correct, the baseline)
 * Everything else is this file's core (storm_common.c), so the three do the same work.
 *
 * Output lines the driver reads (stdout, line-buffered), times in CLOCK_REALTIME microseconds
 * (the driver takes the kill time from bash's $EPOCHREALTIME, the same clock):
 *   STORM ready wave=W us=T
 *   STORM established wave=W conns=N us=T
 *   STORM wave=W conns=N first_event_us=T last_event_us=T last_destroy_us=T disconnected=D
 *         timewait=T other=O destroy_max_us=M events=E cpu_connect_us=C cpu_drain_us=C
 * (first/last event: the first and last handled after all were established; cpu: this
 * process's user+system time from the wave's first event to all established, and from then to
 * the wave's end). The wave's alarm (WAVE_TIMEOUT_S) runs from its first event to its end.
 *   STORM events wave=W TYPE:STATUS=COUNT ...   (the wave's events by type and status)
 *   STORM done server=NAME waves=W conns=N events=E got=G acked=A
 *
 * Fault runs (scripts/faults): a seventh argument, HEARTBEAT_MS, makes every connection carry a
 * zero-length SEND each way every HEARTBEAT_MS (the client does the same), so that a side whose
 * peer vanished finds out through its own traffic: the RC transport retries, gives up, the
 * heartbeat completes in error, the server calls rdma_disconnect and destroys the id at its
 * DISCONNECTED (the peer's DREP, or the DREQ's own timeout). On iWARP the SEND completes once
 * TCP has it: TCP's retransmissions give up (tcp_retries2), the QP flushes its receives and the
 * id gets DISCONNECTED (docs/faults.md, "iWARP"). Events that end a connection
 * before the wave is established are then expected (a lossy link): the id is destroyed and its
 * index may be requested again, with a token of any wave (a client moves a connection it lost
 * to the next wave's); the wave is established when all CONNS are up at once. "stale" counts
 * requests refused because twice CONNS ids were alive.
 * STORM_EVENT_LOG=FILE writes one line per event and per failed heartbeat:
 *   EV <us> <wave> <RDMA_CM_EVENT_...> <status> <index>   (index CONNS: not a live connection's)
 *   WC <us> <wave> <ibv_wc_status_str, spaces as _> <wc status> <index>
 */
#ifndef STORM_H
#define STORM_H

#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>

enum {
    STORM_TOKEN_MAX = 56,  /* RoCE carries 56 bytes of CONNECT_REQUEST private data */
    STORM_MAX_CONNS = 16384, /* past the 5,000 a target holds in a storm of its own */
    STORM_REPLY_LEN = 12,  /* the server's accept private data: "ok:<index>" */
    STORM_RECVS = 2,       /* receives each QP keeps posted for its peer's heartbeats */
    STORM_RECVS_IWARP = 64, /* the same on iWARP (storm_recvs) */
};

/* ---- shared by client and servers ------------------------------------------------------- */

/* Connection `index`'s token in wave `wave`: "storm:<wave>:<index>:<32 hex digits>". */
void storm_token(char out[STORM_TOKEN_MAX], uint64_t seed, unsigned wave, unsigned index);

/* The server's accept private data for connection `index`: "ok:<index>", zero-padded. */
void storm_reply(char out[STORM_REPLY_LEN], unsigned index);

/* CLOCK_REALTIME and CLOCK_MONOTONIC now, in microseconds. */
uint64_t storm_real_us(void);
uint64_t storm_mono_us(void);

/* "PROG: FAIL: <message>" on stderr, then exit(1). */
_Noreturn void storm_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The program's name in messages. */
extern const char *storm_prog;

/* Parses a non-negative decimal or 0x number; dies naming `what` if it is not one. */
unsigned long long storm_number(const char *s, const char *what);

/* ---- heartbeats (fault runs) -------------------------------------------------------------- */

/* The receives each QP keeps posted, by the device's transport. IB/RoCE: 2 (a SEND completes
 * when the peer acknowledged it, one heartbeat is out at a time, and RNR retries cover an empty
 * queue). iWARP has no RNR: a SEND that finds no receive posted ends the peer's QP (siw_proc_send
 * sends a DDP "no buffer" TERMINATE), and siw completes a SEND once TCP has it, so a TCP
 * connection that stalls (loss) and recovers delivers every heartbeat of the stall at once: 64
 * receives hold a 64-heartbeat stall, longer than TCP lives through with the fault runs'
 * tcp_retries2=6 (docs/faults.md, "iWARP"). Every side still sends a heartbeat each period,
 * so after a cut each side has data unacknowledged and its TCP notices. */
unsigned storm_recvs(struct ibv_context *verbs);

/* Every QP's attributes (its CQ shared by all of them, RECVS receives), and the CQ size for
 * CONNS of them. */
void storm_qp_attr(struct ibv_qp_init_attr *attr, struct ibv_cq *cq, unsigned recvs);
int storm_cq_size(unsigned conns, unsigned recvs);

/* A receive (one SGE of a small buffer registered on the QP's PD at the first call: libsiw takes
 * no receive without an SGE), a zero-length signaled SEND: 0 or ibv_post_*'s error as a
 * positive errno (libsiw returns it negated). storm_recv_release deregisters the buffer, before
 * the PD is freed. */
int storm_post_recv(struct ibv_qp *qp, uint64_t wr_id);
void storm_recv_release(void);
int storm_post_beat(struct ibv_qp *qp, uint64_t wr_id);

/* ibv_wc_status_str(status) with its spaces as underscores (one word in a log line). */
const char *storm_wc_name(int status);

/* ---- the server core -------------------------------------------------------------------- */

/* Parses `ADDR PORT SEED CONNS WAVES WAVE_TIMEOUT_S [HEARTBEAT_MS]`, creates the event channel, binds and
 * listens, and creates the PD and CQ every connection's QP shares. Returns the channel. */
struct rdma_event_channel *storm_server_init(const char *name, int argc, char **argv);

/* Wave bookkeeping: starts wave `wave` and says "ready" (its first event arms its alarm). */
void storm_wave_begin(unsigned wave);

/* Whether every connection of the current wave was established and is now destroyed. */
int storm_wave_done(void);

/* Closes the wave: its line on stdout, the alarm disarmed. */
void storm_wave_end(void);

/* Handles one event. `pdata`/`pdata_len` are the event's private data, read here (for
 * CONNECT_REQUEST: the token is verified and a reply sent with the accept). An event for which
 * storm_closes() is true destroys its QP and id here, and rdma_destroy_id waits until every event
 * of the id is acked: a raw librdmacm server acks such an event before handing it over. */
void storm_handle(int type, int status, struct rdma_cm_id *id, const void *pdata,
                  size_t pdata_len);

/* Heartbeats: milliseconds until the next one is due (-1 without HEARTBEAT_MS: wait forever),
 * and the work: completions polled, failed connections disconnected, heartbeats posted. */
int storm_wait_ms(void);
void storm_tick(void);

/* For servers that fetch with rdma_get_cm_event: waits up to storm_wait_ms() for the channel,
 * runs storm_tick(), and says whether an event is ready. */
int storm_poll_channel(struct rdma_event_channel *ch);

/* Whether handling an event of this type may destroy its id (so a raw server acks it first). */
int storm_closes(int type);

/* Counts events the program fetched and acked itself (raw and legacy servers). */
void storm_count_get(void);
void storm_count_ack(void);

/* After the last wave: destroys the listener, CQ, PD and channel, prints the "done" line.
 * Returns the exit status so far (0, or 1 when something was wrong). */
int storm_server_finish(void);

#endif
