//! The deep copy of a librdmacm event: what points into librdmacm's block is copied out,
//! everything else is kept by value.
//!
//! Which member of `param` is live follows librdmacm's `rdma_get_cm_event` (librdmacm/cma.c):
//! CONNECT_RESPONSE, REJECTED and DISCONNECTED always fill `param.conn`; MULTICAST_JOIN and
//! MULTICAST_ERROR fill `param.ud` with the user's own context as `private_data`; every other
//! event fills `param.ud` when the id's QP type is UD and `param.conn` otherwise.

use super::private_data::PrivateData;
use crate::cm::{ibv_qp_type, rdma_cm_event, rdma_cm_event_type::*, EventType};

/// Which member of `rdma_cm_event.param` an event carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Conn,
    Ud,
    /// `param.ud` whose `private_data` is the context given to `rdma_join_multicast`.
    MulticastContext,
}

/// The member of `param` librdmacm filled for this event type and QP type.
pub fn param_kind(event: EventType, qp_type: ibv_qp_type::Type) -> ParamKind {
    match event {
        RDMA_CM_EVENT_MULTICAST_JOIN | RDMA_CM_EVENT_MULTICAST_ERROR => ParamKind::MulticastContext,
        RDMA_CM_EVENT_CONNECT_RESPONSE | RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED => {
            ParamKind::Conn
        }
        _ if qp_type == ibv_qp_type::IBV_QPT_UD => ParamKind::Ud,
        _ => ParamKind::Conn,
    }
}

/// `raw` copied by value, with its private data copied out.
pub(crate) struct Copied {
    pub cm: rdma_cm_event,
    pub private_data: Option<PrivateData>,
    pub kind: ParamKind,
}

/// Copies `raw`. The copy's `private_data` still points into `raw`: the caller redirects it
/// once the buffer has its final address.
///
/// # Safety
/// `raw` is a valid event that has not been acked; `raw.id`, when not NULL, is a live cm_id.
pub(crate) unsafe fn copy_event(raw: *const rdma_cm_event) -> Copied {
    // SAFETY: the caller guarantees `raw` is valid; the struct is plain data.
    let cm: rdma_cm_event = unsafe { std::ptr::read(raw) };
    let qp_type = if cm.id.is_null() {
        ibv_qp_type::IBV_QPT_RC
    } else {
        // SAFETY: a non-NULL id of an unacked event is a live cm_id owned by the application.
        unsafe { (*cm.id).qp_type }
    };
    let kind = param_kind(cm.event, qp_type);
    // SAFETY: `kind` names the member librdmacm wrote; both are plain data.
    let (ptr, len) = unsafe {
        match kind {
            ParamKind::Conn => (cm.param.conn.private_data, cm.param.conn.private_data_len),
            ParamKind::Ud => (cm.param.ud.private_data, cm.param.ud.private_data_len),
            ParamKind::MulticastContext => (std::ptr::null(), 0),
        }
    };
    let private_data = match (ptr.is_null(), len) {
        (_, 0) => None,
        // A length without bytes: an empty buffer, never a read through NULL.
        (true, _) => Some(PrivateData::copy_from(&[])),
        (false, len) => {
            // SAFETY: librdmacm's block holds `len` bytes at `ptr` until the ack.
            let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
            Some(PrivateData::copy_from(bytes))
        }
    };
    Copied {
        cm,
        private_data,
        kind,
    }
}
