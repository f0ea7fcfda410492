//! Hand-written bindings to the part of librdmacm cmsafe uses.
//!
//! Written from the C definitions in librdmacm's `<rdma/rdma_cma.h>` (rdma-core
//! `librdmacm/rdma_cma.h`) and libibverbs' `<infiniband/verbs.h>` (rdma-core
//! `libibverbs/verbs.h`), with the same type and field names as the C header. No bindgen and
//! no libclang are needed to build them; `crates/core/tests/layout.rs` compares every size and offset
//! cmsafe relies on with what the C compiler makes of the header, on every machine that runs the
//! tests.
//!
//! What is here:
//! - the structs cmsafe reads or builds, with their full layout: `rdma_cm_event` and its
//!   `param` union, `rdma_conn_param`, `rdma_ud_param`, `ibv_ah_attr`, `ibv_global_route`,
//!   `ibv_gid`, `rdma_cm_id`, `rdma_route`, `rdma_addr`, `rdma_event_channel`, and
//!   `ibv_qp_init_attr` for the tests on the real stack;
//! - `ibv_context` and `ibv_device` only up to the last field read (`device`,
//!   `transport_type`): they are only ever reached through librdmacm's pointers, never built,
//!   copied or sized here;
//! - opaque types for what is only pointed at (`ibv_qp`, `ibv_pd`, ...);
//! - C enums as modules with a `Type` alias and one constant per enumerator (C passes an enum
//!   as its underlying integer type, and a value this list does not know must stay readable):
//!   `unsigned int` for enums with no negative enumerator, `int` for those with one;
//! - the functions cmsafe calls (the first five) and those the tests on the real stack call,
//!   linked from `librdmacm`.
#![allow(non_camel_case_types, non_upper_case_globals)]

use libc::{c_int, c_void, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage};

/// A pointee whose layout cmsafe never needs: only pointers to it are passed around.
macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque! {
    /// `struct ibv_qp` (verbs.h).
    ibv_qp,
    /// `struct ibv_pd` (verbs.h).
    ibv_pd,
    /// `struct ibv_cq` (verbs.h).
    ibv_cq,
    /// `struct ibv_srq` (verbs.h).
    ibv_srq,
    /// `struct ibv_comp_channel` (verbs.h).
    ibv_comp_channel,
    /// `struct ibv_sa_path_rec` (infiniband/sa.h).
    ibv_sa_path_rec,
}

/// `enum rdma_cm_event_type` (rdma_cma.h).
pub mod rdma_cm_event_type {
    /// No enumerator is negative: C gives the enum the type `unsigned int`.
    pub type Type = u32;
    pub const RDMA_CM_EVENT_ADDR_RESOLVED: Type = 0;
    pub const RDMA_CM_EVENT_ADDR_ERROR: Type = 1;
    pub const RDMA_CM_EVENT_ROUTE_RESOLVED: Type = 2;
    pub const RDMA_CM_EVENT_ROUTE_ERROR: Type = 3;
    pub const RDMA_CM_EVENT_CONNECT_REQUEST: Type = 4;
    pub const RDMA_CM_EVENT_CONNECT_RESPONSE: Type = 5;
    pub const RDMA_CM_EVENT_CONNECT_ERROR: Type = 6;
    pub const RDMA_CM_EVENT_UNREACHABLE: Type = 7;
    pub const RDMA_CM_EVENT_REJECTED: Type = 8;
    pub const RDMA_CM_EVENT_ESTABLISHED: Type = 9;
    pub const RDMA_CM_EVENT_DISCONNECTED: Type = 10;
    pub const RDMA_CM_EVENT_DEVICE_REMOVAL: Type = 11;
    pub const RDMA_CM_EVENT_MULTICAST_JOIN: Type = 12;
    pub const RDMA_CM_EVENT_MULTICAST_ERROR: Type = 13;
    pub const RDMA_CM_EVENT_ADDR_CHANGE: Type = 14;
    pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: Type = 15;
    // From rdma-core 60 (RDMACM_1.4: rdma_resolve_addrinfo, rdma_write_cm_event); a
    // librdmacm before it never delivers these, and the header before it lacks them.
    pub const RDMA_CM_EVENT_ADDRINFO_RESOLVED: Type = 16;
    pub const RDMA_CM_EVENT_ADDRINFO_ERROR: Type = 17;
    pub const RDMA_CM_EVENT_USER: Type = 18;
    /// Consumed inside librdmacm (its DNS path of `rdma_resolve_addrinfo`); a program should
    /// never see it.
    pub const RDMA_CM_EVENT_INTERNAL: Type = 19;
}

/// `enum rdma_port_space` (rdma_cma.h).
pub mod rdma_port_space {
    /// No enumerator is negative: `unsigned int`.
    pub type Type = u32;
    pub const RDMA_PS_IPOIB: Type = 0x0002;
    pub const RDMA_PS_TCP: Type = 0x0106;
    pub const RDMA_PS_UDP: Type = 0x0111;
    pub const RDMA_PS_IB: Type = 0x013F;
}

/// `enum ibv_qp_type` (verbs.h).
pub mod ibv_qp_type {
    /// No enumerator is negative: `unsigned int`.
    pub type Type = u32;
    pub const IBV_QPT_RC: Type = 2;
    pub const IBV_QPT_UC: Type = 3;
    pub const IBV_QPT_UD: Type = 4;
    pub const IBV_QPT_RAW_PACKET: Type = 8;
    pub const IBV_QPT_XRC_SEND: Type = 9;
    pub const IBV_QPT_XRC_RECV: Type = 10;
    pub const IBV_QPT_DRIVER: Type = 0xff;
}

/// `enum ibv_transport_type` (verbs.h).
pub mod ibv_transport_type {
    /// `IBV_TRANSPORT_UNKNOWN` is -1: C gives the enum the type `int`.
    pub type Type = i32;
    pub const IBV_TRANSPORT_UNKNOWN: Type = -1;
    pub const IBV_TRANSPORT_IB: Type = 0;
    pub const IBV_TRANSPORT_IWARP: Type = 1;
    pub const IBV_TRANSPORT_USNIC: Type = 2;
    pub const IBV_TRANSPORT_USNIC_UDP: Type = 3;
    pub const IBV_TRANSPORT_UNSPECIFIED: Type = 4;
}

/// `struct ibv_device` (verbs.h), up to `transport_type`: only reached through
/// `ibv_context.device`, never built or sized here.
#[repr(C)]
pub struct ibv_device {
    /// `struct _ibv_device_ops`: two function pointers libibverbs no longer uses.
    _ops: [*mut c_void; 2],
    /// `enum ibv_node_type` (it has -1, so `int`).
    pub node_type: c_int,
    pub transport_type: ibv_transport_type::Type,
}

/// `struct ibv_context` (verbs.h), up to `device`: only reached through `rdma_cm_id.verbs`,
/// never built or sized here.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
}

/// The `global` member of `union ibv_gid` (verbs.h); both halves are big-endian.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

/// `union ibv_gid` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

/// `struct ibv_global_route` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_cap` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: ibv_qp_type::Type,
    pub sq_sig_all: c_int,
}

/// `struct rdma_ib_addr` (rdma_cma.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// `__be16`.
    pub pkey: u16,
}

/// The first anonymous union of `struct rdma_addr`: the source address.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_addr_src {
    pub src_addr: sockaddr,
    pub src_sin: sockaddr_in,
    pub src_sin6: sockaddr_in6,
    pub src_storage: sockaddr_storage,
}

/// The second anonymous union of `struct rdma_addr`: the destination address.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_addr_dst {
    pub dst_addr: sockaddr,
    pub dst_sin: sockaddr_in,
    pub dst_sin6: sockaddr_in6,
    pub dst_storage: sockaddr_storage,
}

/// The `addr` union of `struct rdma_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_addr_ib {
    pub ibaddr: rdma_ib_addr,
}

/// `struct rdma_addr` (rdma_cma.h). C's two anonymous unions get the names
/// `src_addr_union` and `dst_addr_union`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    pub src_addr_union: rdma_addr_src,
    pub dst_addr_union: rdma_addr_dst,
    pub addr: rdma_addr_ib,
}

/// `struct rdma_route` (rdma_cma.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel` (rdma_cma.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_cm_id` (rdma_cma.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    pub ps: rdma_port_space::Type,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    pub qp_type: ibv_qp_type::Type,
}

/// `struct rdma_conn_param` (rdma_cma.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param` (rdma_cma.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
    /// The value given to `rdma_write_cm_event(3)`, for RDMA_CM_EVENT_USER (rdma-core 60+; it
    /// lies over `conn.private_data`, and adds nothing to the union's size).
    pub arg: u64,
}

/// `struct rdma_cm_event` (rdma_cma.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    pub event: rdma_cm_event_type::Type,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

#[link(name = "rdmacm")]
extern "C" {
    // What cmsafe calls.
    pub fn rdma_create_event_channel() -> *mut rdma_event_channel;
    pub fn rdma_destroy_event_channel(channel: *mut rdma_event_channel);
    pub fn rdma_get_cm_event(
        channel: *mut rdma_event_channel,
        event: *mut *mut rdma_cm_event,
    ) -> c_int;
    pub fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int;
    pub fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int;

    // What the tests on the real stack call (tests/real_stack.rs).
    pub fn rdma_create_id(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut c_void,
        ps: rdma_port_space::Type,
    ) -> c_int;
    pub fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int;
    pub fn rdma_resolve_addr(
        id: *mut rdma_cm_id,
        src_addr: *mut sockaddr,
        dst_addr: *mut sockaddr,
        timeout_ms: c_int,
    ) -> c_int;
    pub fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int;
    pub fn rdma_create_qp(
        id: *mut rdma_cm_id,
        pd: *mut ibv_pd,
        qp_init_attr: *mut ibv_qp_init_attr,
    ) -> c_int;
    pub fn rdma_destroy_qp(id: *mut rdma_cm_id);
    pub fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int;
    pub fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int;
    pub fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int;
    pub fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int;
}
