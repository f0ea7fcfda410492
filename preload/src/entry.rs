//! The exported names. On x86_64 each is a two-instruction trampoline that passes the caller's
//! return address (at [rsp] on entry) as one more argument and jumps to the implementation in
//! lib.rs: who called is then known for nothing, where walking the stack with backtrace(3) on
//! every event cost more than the rest of the preload's work together. Elsewhere the
//! implementation walks the stack itself (return address 0).

use std::ffi::{c_int, c_uint, c_void};

use cmsafe_core::cm::{rdma_cm_event, rdma_cm_id, rdma_conn_param, rdma_event_channel};

/// `name(args)` calls `imp(args, return address)`; `reg` is the argument register after the
/// last one of `args` (System V: rdi, rsi, rdx, rcx, r8, r9).
macro_rules! entry {
    ($(#[$doc:meta])* $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?, $imp:path, $reg:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the wrapped library's own function: the arguments are what its man page asks for.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty),*) $(-> $ret)? {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {imp}", imp = sym $imp)
        }

        $(#[$doc])*
        ///
        /// # Safety
        /// As the wrapped library's own function: the arguments are what its man page asks for.
        #[cfg(not(target_arch = "x86_64"))]
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty),*) $(-> $ret)? {
            // SAFETY: forwarded.
            unsafe { $imp($($arg,)* 0) }
        }
    };
}

entry!(
    /// rdma_get_cm_event(3), interposed.
    rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> i32,
    crate::get_cm_event, "rdx"
);
entry!(
    /// rdma_ack_cm_event(3), interposed.
    rdma_ack_cm_event(event: *mut rdma_cm_event) -> i32, crate::ack_cm_event, "rsi"
);
entry!(
    /// rdma_destroy_id(3), interposed.
    rdma_destroy_id(id: *mut rdma_cm_id) -> i32, crate::destroy_id, "rsi"
);
entry!(
    /// rdma_migrate_id(3), interposed.
    rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> i32,
    crate::migrate_id, "rdx"
);
entry!(
    /// rdma_destroy_event_channel(3), interposed.
    rdma_destroy_event_channel(channel: *mut rdma_event_channel), crate::destroy_event_channel, "rsi"
);
entry!(
    /// rdma_destroy_qp(3), interposed.
    rdma_destroy_qp(id: *mut rdma_cm_id), crate::destroy_qp, "rsi"
);
entry!(
    /// rdma_create_id(3), interposed.
    rdma_create_id(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut libc::c_void,
        ps: u32
    ) -> i32,
    crate::ids::create_id, "r8"
);
entry!(
    /// rdma_create_ep(3), interposed.
    rdma_create_ep(
        id: *mut *mut rdma_cm_id,
        res: *mut libc::c_void,
        pd: *mut libc::c_void,
        qp_init_attr: *mut libc::c_void
    ) -> i32,
    crate::ids::create_ep, "r8"
);
entry!(
    /// rdma_create_event_channel(3), interposed.
    rdma_create_event_channel() -> *mut rdma_event_channel, crate::ids::create_channel, "rdi"
);
entry!(
    /// rdma_get_request(3), interposed.
    rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> i32,
    crate::ids::get_request, "rdx"
);
entry!(
    /// rdma_accept(3), interposed.
    rdma_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> i32,
    crate::ids::accept, "rdx"
);
entry!(
    /// rdma_connect(3), interposed.
    rdma_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> i32,
    crate::ids::connect, "rdx"
);
entry!(
    /// rdma_reject(3), interposed.
    rdma_reject(id: *mut rdma_cm_id, private_data: *const libc::c_void, len: u8) -> i32,
    crate::ids::reject, "rcx"
);
entry!(
    /// rdma_disconnect(3), interposed.
    rdma_disconnect(id: *mut rdma_cm_id) -> i32, crate::ids::disconnect, "rsi"
);
entry!(
    /// rdma_bind_addr(3), interposed.
    rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> i32,
    crate::ids::bind_addr, "rdx"
);
entry!(
    /// rdma_resolve_addr(3), interposed.
    rdma_resolve_addr(
        id: *mut rdma_cm_id,
        src_addr: *mut libc::sockaddr,
        dst_addr: *mut libc::sockaddr,
        timeout_ms: c_int
    ) -> i32,
    crate::ids::resolve_addr, "r8"
);
entry!(
    /// rdma_resolve_route(3), interposed.
    rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> i32,
    crate::ids::resolve_route, "rdx"
);
entry!(
    /// rdma_listen(3), interposed.
    rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> i32, crate::ids::listen, "rdx"
);
entry!(
    /// rdma_create_qp(3), interposed.
    rdma_create_qp(id: *mut rdma_cm_id, pd: *mut c_void, qp_init_attr: *mut c_void) -> i32,
    crate::ids::create_qp, "rcx"
);
entry!(
    /// rdma_set_option(3), interposed.
    rdma_set_option(
        id: *mut rdma_cm_id,
        level: c_int,
        optname: c_int,
        optval: *mut c_void,
        optlen: libc::size_t
    ) -> i32,
    crate::ids::set_option, "r9"
);
entry!(
    /// ibv_get_cq_event(3), interposed.
    ibv_get_cq_event(channel: *mut c_void, cq: *mut *mut c_void, cq_context: *mut *mut c_void) -> i32,
    crate::verbs::get_cq_event, "rcx"
);
entry!(
    /// ibv_ack_cq_events(3), interposed.
    ibv_ack_cq_events(cq: *mut c_void, nevents: c_uint), crate::verbs::ack_cq_events, "rdx"
);
entry!(
    /// ibv_destroy_cq(3), interposed.
    ibv_destroy_cq(cq: *mut c_void) -> i32, crate::verbs::destroy_cq, "rsi"
);
entry!(
    /// ibv_get_async_event(3), interposed.
    ibv_get_async_event(context: *mut c_void, event: *mut c_void) -> i32,
    crate::async_verbs::get_async_event, "rdx"
);
entry!(
    /// ibv_ack_async_event(3), interposed.
    ibv_ack_async_event(event: *mut c_void), crate::async_verbs::ack_async_event, "rsi"
);
entry!(
    /// ibv_destroy_qp(3), interposed.
    ibv_destroy_qp(qp: *mut c_void) -> i32, crate::async_verbs::destroy_qp, "rsi"
);
entry!(
    /// ibv_destroy_srq(3), interposed.
    ibv_destroy_srq(srq: *mut c_void) -> i32, crate::async_verbs::destroy_srq, "rsi"
);
