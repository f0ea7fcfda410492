//! What an event's `status` means: OK, a negative errno, an IB CM reject reason, or an errno
//! carried by an iWARP REJECTED (rdma_get_cm_event(3), rdma_cm.7; the kernel's
//! include/rdma/ib_cm.h for the reject reasons).

use crate::cm::sys::{ibv_context, ibv_transport_type};
use crate::cm::{rdma_cm_event_type::*, EventType};

/// The transport of the device an id is bound to, as far as status decoding cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// InfiniBand or RoCE: a REJECTED status is an IB CM reject reason.
    Ib,
    /// iWARP: a REJECTED status is an errno.
    Iwarp,
    /// No device yet (e.g. ADDR_ERROR before binding).
    Unknown,
}

/// How to read an event's status.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusKind {
    /// 0: no error.
    Ok = 0,
    /// A negative errno (ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, ...).
    Errno = 1,
    /// REJECTED on IB/RoCE: a positive IB CM reject reason (`cmsafe_reject_reason_str`).
    IbRejectReason = 2,
    /// REJECTED on iWARP: a negative errno (typically -ECONNREFUSED).
    IwarpReject = 3,
    /// A value none of the above explains.
    Other = 4,
}

pub(crate) fn kind(event: EventType, status: i32, transport: Transport) -> StatusKind {
    match (event, status, transport) {
        (_, 0, _) => StatusKind::Ok,
        (RDMA_CM_EVENT_REJECTED, s, Transport::Iwarp) if s < 0 => StatusKind::IwarpReject,
        (RDMA_CM_EVENT_REJECTED, s, _) if s > 0 => StatusKind::IbRejectReason,
        (_, s, _) if s < 0 => StatusKind::Errno,
        _ => StatusKind::Other,
    }
}

/// # Safety
/// `verbs` is NULL or the live device context of a cm_id.
pub(crate) unsafe fn transport_of(verbs: *mut ibv_context) -> Transport {
    if verbs.is_null() {
        return Transport::Unknown;
    }
    // SAFETY: a live context points at its device for as long as the context exists.
    let device = unsafe { (*verbs).device };
    if device.is_null() {
        return Transport::Unknown;
    }
    // SAFETY: as above.
    match unsafe { (*device).transport_type } {
        ibv_transport_type::IBV_TRANSPORT_IWARP => Transport::Iwarp,
        _ => Transport::Ib,
    }
}

/// The kernel's name for an IB CM reject reason (enum ib_cm_rej_reason, include/rdma/ib_cm.h).
pub fn reject_reason_name(reason: i32) -> Option<&'static str> {
    Some(match reason {
        1 => "IB_CM_REJ_NO_QP",
        2 => "IB_CM_REJ_NO_EEC",
        3 => "IB_CM_REJ_NO_RESOURCES",
        4 => "IB_CM_REJ_TIMEOUT",
        5 => "IB_CM_REJ_UNSUPPORTED",
        6 => "IB_CM_REJ_INVALID_COMM_ID",
        7 => "IB_CM_REJ_INVALID_COMM_INSTANCE",
        8 => "IB_CM_REJ_INVALID_SERVICE_ID",
        9 => "IB_CM_REJ_INVALID_TRANSPORT_TYPE",
        10 => "IB_CM_REJ_STALE_CONN",
        11 => "IB_CM_REJ_RDC_NOT_EXIST",
        12 => "IB_CM_REJ_INVALID_GID",
        13 => "IB_CM_REJ_INVALID_LID",
        14 => "IB_CM_REJ_INVALID_SL",
        15 => "IB_CM_REJ_INVALID_TRAFFIC_CLASS",
        16 => "IB_CM_REJ_INVALID_HOP_LIMIT",
        17 => "IB_CM_REJ_INVALID_PACKET_RATE",
        18 => "IB_CM_REJ_INVALID_ALT_GID",
        19 => "IB_CM_REJ_INVALID_ALT_LID",
        20 => "IB_CM_REJ_INVALID_ALT_SL",
        21 => "IB_CM_REJ_INVALID_ALT_TRAFFIC_CLASS",
        22 => "IB_CM_REJ_INVALID_ALT_HOP_LIMIT",
        23 => "IB_CM_REJ_INVALID_ALT_PACKET_RATE",
        24 => "IB_CM_REJ_PORT_CM_REDIRECT",
        25 => "IB_CM_REJ_PORT_REDIRECT",
        26 => "IB_CM_REJ_INVALID_MTU",
        27 => "IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES",
        28 => "IB_CM_REJ_CONSUMER_DEFINED",
        29 => "IB_CM_REJ_INVALID_RNR_RETRY",
        30 => "IB_CM_REJ_DUPLICATE_LOCAL_COMM_ID",
        31 => "IB_CM_REJ_INVALID_CLASS_VERSION",
        32 => "IB_CM_REJ_INVALID_FLOW_LABEL",
        33 => "IB_CM_REJ_INVALID_ALT_FLOW_LABEL",
        35 => "IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(
            kind(RDMA_CM_EVENT_ESTABLISHED, 0, Transport::Ib),
            StatusKind::Ok
        );
        assert_eq!(
            kind(RDMA_CM_EVENT_ADDR_ERROR, -110, Transport::Unknown),
            StatusKind::Errno
        );
        assert_eq!(
            kind(RDMA_CM_EVENT_REJECTED, 28, Transport::Ib),
            StatusKind::IbRejectReason
        );
        assert_eq!(
            kind(RDMA_CM_EVENT_REJECTED, -111, Transport::Iwarp),
            StatusKind::IwarpReject
        );
        assert_eq!(
            kind(RDMA_CM_EVENT_REJECTED, -110, Transport::Ib),
            StatusKind::Errno
        );
        assert_eq!(
            kind(RDMA_CM_EVENT_CONNECT_ERROR, 5, Transport::Ib),
            StatusKind::Other
        );
    }

    #[test]
    fn reject_reasons() {
        assert_eq!(reject_reason_name(1), Some("IB_CM_REJ_NO_QP"));
        assert_eq!(reject_reason_name(8), Some("IB_CM_REJ_INVALID_SERVICE_ID"));
        assert_eq!(reject_reason_name(28), Some("IB_CM_REJ_CONSUMER_DEFINED"));
        assert_eq!(
            reject_reason_name(35),
            Some("IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED")
        );
        assert_eq!(reject_reason_name(34), None);
        assert_eq!(reject_reason_name(0), None);
        assert_eq!((1..=35).filter_map(reject_reason_name).count(), 34);
    }
}
