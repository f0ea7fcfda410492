/* Connection helpers for the c-tests, built on cmsafe: every event is fetched with
 * cmsafe_get_event, so every read below happens after librdmacm's event was acked. */
#ifndef CMSAFE_CM_UTIL_H
#define CMSAFE_CM_UTIL_H

#include <cmsafe.h>
#include <netinet/in.h>
#include <stdint.h>

#include "rxe_setup.h"

/* Fetches the next event on `ch`; fails the test if it is not of type `want`.
 * The caller releases the result. */
cmsafe_event *cm_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want);

/* A listen id bound to $RXE_ADDR:port on channel `ch` (RDMA_PS_TCP, backlog 128). */
struct rdma_cm_id *cm_listen(struct rdma_event_channel *ch, unsigned short port);

/* A client id on `ch` with its address and route resolved and an RC QP. */
struct rdma_cm_id *cm_client(struct rdma_event_channel *ch, unsigned short port);

/* rdma_connect / rdma_accept / rdma_reject with `len` bytes of private data. */
void cm_connect(struct rdma_cm_id *id, const void *pdata, unsigned char len);
void cm_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len);
void cm_reject(struct rdma_cm_id *id, const void *pdata, unsigned char len);

/* The private data of an event's view, with its length. */
const unsigned char *cm_pdata(const cmsafe_event *ev, unsigned *len);

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t cm_now_ns(void);

/* CLOCK_MONOTONIC_COARSE now, in nanoseconds (the clock cmsafe_event_time_ns uses). */
uint64_t cm_coarse_now_ns(void);

/* Milliseconds elapsed since `start_ns` (a cm_now_ns value). */
double cm_ms_since(uint64_t start_ns);

/* Fills `buf` with a pattern derived from `seed` (never all zero). */
void cm_fill(unsigned char *buf, unsigned len, unsigned char seed);

/* The process-wide counters now; fails the test if cmsafe_stats_get fails. */
cmsafe_stats cm_stats(void);

/* Fetches the next event on `ch` within `timeout_ms`; fails the test if none arrives or it is
 * not of type `want`. The caller releases the result. */
cmsafe_event *cm_expect_within(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
                               int timeout_ms);

/* Checks that no event arrives on `ch` within `ms` milliseconds (an event that does arrive
 * fails the test, is described on stderr and released). Returns 1 when the channel was quiet. */
int cm_quiet(struct rdma_event_channel *ch, int ms);

/* Waits until `ch`'s fd is readable (an event is queued), at most `timeout_ms`, without
 * fetching anything. Returns 1 when readable. */
int cm_wait_readable(struct rdma_event_channel *ch, int timeout_ms);

/* Whether `p`/`len` is `want_len` bytes: the `sent_len` bytes of `sent`, then zeros. */
int cm_bytes_are(const unsigned char *p, size_t len, const void *sent, size_t sent_len,
                 size_t want_len);

/* The IPv4 address and port of `sa` (host order port); 0 when `sa` is not AF_INET. */
int cm_sin(const struct sockaddr *sa, struct in_addr *addr, unsigned short *port);

/* For helper threads: as rxe_create_qp / cm_accept, but they touch no harness counter (CHECK and
 * REQUIRE are for the main thread only). Return 0, or -1 after a message on stderr. */
int cm_try_create_qp(struct rdma_cm_id *id);
int cm_try_accept(struct rdma_cm_id *id, const void *pdata, unsigned char len);

/* The transport's wire format (cm_req_len, cm_has_timewait, ...): c-tests/transport.h. */
#include "transport.h"

/* The transport of the device `id` is bound to (`id->verbs`, so after rdma_bind_addr or address
 * resolution), from the device itself: an environment variable may only name it in messages.
 * Fails the test when `id` has no device. */
enum cm_transport cm_transport(const struct rdma_cm_id *id);

/* Prints "skip: WHAT: WHY" and counts it apart (harness_skipped), for a step the transport
 * cannot run: never a silent skip. */
void cm_skip(const char *what, const char *why);

#endif
