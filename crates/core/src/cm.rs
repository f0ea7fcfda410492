//! The librdmacm types and names cmsafe works with.
//!
//! They come from [`sys`], cmsafe's own `#[repr(C)]` bindings written from librdmacm's header;
//! `crates/core/tests/layout.rs` checks them against the C header field by field. (The crate `rdma-sys` ran
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
        RDMA_CM_EVENT_ADDRINFO_RESOLVED => "ADDRINFO_RESOLVED",
        RDMA_CM_EVENT_ADDRINFO_ERROR => "ADDRINFO_ERROR",
        RDMA_CM_EVENT_USER => "USER",
        RDMA_CM_EVENT_INTERNAL => "INTERNAL",
        t => unknown_name(t),
    }
}

/// The highest event number named by its number; above it, [`UNKNOWN_ABOVE`].
const NAMED_UP_TO: usize = 255;

/// The name of every number above the highest cmsafe names by number.
pub const UNKNOWN_ABOVE: &str = "UNKNOWN(>255)";

/// `UNKNOWN(N)` for every N up to [`NAMED_UP_TO`], built at compile time: a name needs no
/// allocation, so a signal handler and a report may both use it, and it stays `'static`.
static UNKNOWN_NAMES: [[u8; 12]; NAMED_UP_TO + 1] = {
    let mut names = [[0u8; 12]; NAMED_UP_TO + 1];
    let mut n = 0;
    while n <= NAMED_UP_TO {
        let name = &mut names[n];
        let prefix = b"UNKNOWN(";
        let mut i = 0;
        while i < prefix.len() {
            name[i] = prefix[i];
            i += 1;
        }
        let digits = if n >= 100 {
            3
        } else if n >= 10 {
            2
        } else {
            1
        };
        let mut d = 0;
        let mut v = n;
        while d < digits {
            name[i + digits - 1 - d] = b'0' + (v % 10) as u8;
            v /= 10;
            d += 1;
        }
        name[i + digits] = b')';
        n += 1;
    }
    names
};

/// An event number librdmacm's header (as cmsafe knows it) does not name, named by its number:
/// `UNKNOWN(20)`. A later librdmacm may add types; cmsafe must never guess what they carry.
fn unknown_name(t: EventType) -> &'static str {
    let Some(name) = UNKNOWN_NAMES.get(t as usize) else {
        return UNKNOWN_ABOVE;
    };
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    // Only ASCII is written into the table, so every prefix of a row is UTF-8.
    std::str::from_utf8(&name[..len]).unwrap_or(UNKNOWN_ABOVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_has_a_name() {
        assert_eq!(event_type_name(0), "ADDR_RESOLVED");
        assert_eq!(event_type_name(15), "TIMEWAIT_EXIT");
        assert_eq!(event_type_name(16), "ADDRINFO_RESOLVED");
        assert_eq!(event_type_name(17), "ADDRINFO_ERROR");
        assert_eq!(event_type_name(18), "USER");
        assert_eq!(event_type_name(19), "INTERNAL");
        assert_eq!(event_type_name(20), "UNKNOWN(20)");
        assert_eq!(event_type_name(7 + 100), "UNKNOWN(107)");
        assert_eq!(event_type_name(255), "UNKNOWN(255)");
        assert_eq!(event_type_name(256), "UNKNOWN(>255)");
        assert_eq!(event_type_name(u32::MAX), "UNKNOWN(>255)");
    }
}
