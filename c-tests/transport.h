/* What the c-tests expect of the transport's wire format, in one place. IB and RoCE share the
 * IB CM's; iWARP (MPA over TCP) has its own. Header-only so that the C++ test (cpp_events, its
 * own harness) uses the same answers as the C tests. */
#ifndef CMSAFE_CTEST_TRANSPORT_H
#define CMSAFE_CTEST_TRANSPORT_H

#include <errno.h>
#include <infiniband/verbs.h>

enum cm_transport { CM_TRANSPORT_IB, CM_TRANSPORT_IWARP };

/* The room for private data in the IB CM's REQ, REP and REJ (after librdmacm's IP header in the
 * REQ): IB/RoCE deliver the bytes sent, then zeros to this length. */
enum { CM_REQ_ROOM = 56, CM_REP_ROOM = 196, CM_REJ_ROOM = 148 };

/* The transport of an opened device, as the device reports it. */
static inline enum cm_transport cm_device_transport(const struct ibv_context *verbs)
{
    return verbs->device->transport_type == IBV_TRANSPORT_IWARP ? CM_TRANSPORT_IWARP
                                                                : CM_TRANSPORT_IB;
}

/* "IB/RoCE" or "iWARP", for messages. */
static inline const char *cm_transport_name(enum cm_transport t)
{
    return t == CM_TRANSPORT_IWARP ? "iWARP" : "IB/RoCE";
}

/* The private data length an event carries when the peer sent `sent` bytes (0 to the room):
 * IB/RoCE's CM messages always carry their whole room; iWARP's MPA carries exactly the bytes
 * sent, and none (NULL, 0) when none were sent. */
static inline unsigned cm_pdata_len(enum cm_transport t, unsigned room, unsigned sent)
{
    return t == CM_TRANSPORT_IWARP ? sent : room;
}

static inline unsigned cm_req_len(enum cm_transport t, unsigned sent)
{
    return cm_pdata_len(t, CM_REQ_ROOM, sent);
}

static inline unsigned cm_rep_len(enum cm_transport t, unsigned sent)
{
    return cm_pdata_len(t, CM_REP_ROOM, sent);
}

static inline unsigned cm_rej_len(enum cm_transport t, unsigned sent)
{
    return cm_pdata_len(t, CM_REJ_ROOM, sent);
}

/* Whether an id's last event is TIMEWAIT_EXIT (IB/RoCE) or DISCONNECTED (iWARP has no
 * timewait). */
static inline int cm_has_timewait(enum cm_transport t)
{
    return t != CM_TRANSPORT_IWARP;
}

/* A consumer's rdma_reject as the active side's REJECTED status: 28 on IB/RoCE
 * (IB_CM_REJ_CONSUMER_DEFINED), -ECONNRESET on iWARP (siw's MPA reject). */
static inline int cm_consumer_reject_status(enum cm_transport t)
{
    return t == CM_TRANSPORT_IWARP ? -ECONNRESET : 28;
}

/* Whether rdma_connect and rdma_accept need the id's QP made first: iWARP's connection carries
 * the QP from the start (iw_cm_connect and iw_cm_accept look the QP up: EINVAL without one);
 * the IB CM can connect an id without a QP. */
static inline int cm_qp_before_connect(enum cm_transport t)
{
    return t == CM_TRANSPORT_IWARP;
}

/* Whether the transport has UD QPs (RDMA_PS_UDP) and multicast: iWARP is RC only (siw's
 * rdma_create_qp of a UD QP fails with EOPNOTSUPP). */
static inline int cm_has_ud(enum cm_transport t)
{
    return t != CM_TRANSPORT_IWARP;
}

#endif
