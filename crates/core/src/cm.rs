//! The librdmacm types and names cmsafe works with.
//!
//! They come from [`sys`], cmsafe's own `#[repr(C)]` bindings written from librdmacm's header;
//! `tests/layout.rs` checks them against the C header field by field. (The crate `rdma-sys` ran
//! bindgen 0.59 in its build script, which panics with libclang 16 and later.)

/// Not scanned for include/cmsafe.h: the C header includes `<rdma/rdma_cma.h>` for these.
/// cbindgen:ignore
pub mod sys;

pub use sys::{
    ibv_ah_attr, ibv_qp_type, rdma_ack_cm_event, rdma_cm_event, rdma_cm_event_type, rdma_cm_id,
    rdma_conn_param, rdma_create_event_channel, rdma_destroy_event_channel, rdma_event_channel,
    rdma_get_cm_event, rdma_ud_param,
};

/// `enum rdma_cm_event_type` as C passes it.
pub type EventType = rdma_cm_event_type::Type;

/// librdmacm's name for an event type (`rdma_event_str(3)` without the `RDMA_CM_EVENT_` prefix).
pub fn event_type_name(t: EventType) -> &'static str {
    use rdma_cm_event_type::*;
    match t {
        RDMA_CM_EVENT_ADDR_RESOLVED => "ADDR_RESOLVED",
        RDMA_CM_EVENT_ADDR_ERROR => "ADDR_ERROR",
        RDMA_CM_EVENT_ROUTE_RESOLVED => "ROUTE_RESOLVED",
        RDMA_CM_EVENT_ROUTE_ERROR => "ROUTE_ERROR",
        RDMA_CM_EVENT_CONNECT_REQUEST => "CONNECT_REQUEST",
        RDMA_CM_EVENT_CONNECT_RESPONSE => "CONNECT_RESPONSE",
        RDMA_CM_EVENT_CONNECT_ERROR => "CONNECT_ERROR",
        RDMA_CM_EVENT_UNREACHABLE => "UNREACHABLE",
        RDMA_CM_EVENT_REJECTED => "REJECTED",
        RDMA_CM_EVENT_ESTABLISHED => "ESTABLISHED",
        RDMA_CM_EVENT_DISCONNECTED => "DISCONNECTED",
        RDMA_CM_EVENT_DEVICE_REMOVAL => "DEVICE_REMOVAL",
        RDMA_CM_EVENT_MULTICAST_JOIN => "MULTICAST_JOIN",
        RDMA_CM_EVENT_MULTICAST_ERROR => "MULTICAST_ERROR",
        RDMA_CM_EVENT_ADDR_CHANGE => "ADDR_CHANGE",
        RDMA_CM_EVENT_TIMEWAIT_EXIT => "TIMEWAIT_EXIT",
        _ => "UNKNOWN",
    }
}
