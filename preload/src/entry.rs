//! The exported names. On x86_64 and aarch64 each is a trampoline of two or three instructions
//! that passes the caller's return address (at [rsp] on x86_64 entry, in the link register x30
//! on aarch64) as one more argument and jumps to the implementation, a wrapper in cm/ or verbs/
//! (their wrap_*.rs): who called is then known for nothing, where walking the stack with
//! backtrace(3) on every event cost more than the rest of the preload's work together. Elsewhere the implementation walks the stack
//! itself (return address 0).

use std::ffi::{c_int, c_uint, c_void};

use cmsafe_core::cm::{rdma_cm_event, rdma_cm_id, rdma_conn_param, rdma_event_channel};

use crate::audit::segv;
use crate::cm::{wrap_events, wrap_ids};
use crate::verbs::{wrap_async, wrap_cq};

/// Exported but under Miri (make miri), which runs the unit tests with its own `signal` and the
/// rest: a test never calls through these names.
///
/// `name(args)` calls `imp(args, return address)`; `reg` and `xreg` are the argument register
/// after the last one of `args` (System V x86_64: rdi, rsi, rdx, rcx, r8, r9; AAPCS64: x0 to x7,
/// integers and pointers alike).
macro_rules! entry {
    ($(#[$doc:meta])* $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?, $imp:path,
     $reg:literal, $xreg:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the wrapped library's own function: the arguments are what its man page asks for.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[cfg_attr(not(miri), no_mangle)]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty),*) $(-> $ret)? {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {imp}", imp = sym $imp)
        }

        $(#[$doc])*
        ///
        /// # Safety
        /// As the wrapped library's own function: the arguments are what its man page asks for.
        // `hint #34` is `bti c`: a no-op unless the library is built with branch protection,
        // where an indirect call (the program's PLT) must land on it. x30 is left as it is, so
        // the implementation returns straight to the caller.
        #[cfg(target_arch = "aarch64")]
        #[unsafe(naked)]
        #[cfg_attr(not(miri), no_mangle)]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty),*) $(-> $ret)? {
            core::arch::naked_asm!(
                "hint #34",
                concat!("mov ", $xreg, ", x30"),
                "b {imp}",
                imp = sym $imp
            )
        }

        $(#[$doc])*
        ///
        /// # Safety
        /// As the wrapped library's own function: the arguments are what its man page asks for.
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        #[cfg_attr(not(miri), no_mangle)]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty),*) $(-> $ret)? {
            // SAFETY: forwarded.
            unsafe { $imp($($arg,)* 0) }
        }
    };
}

entry!(
    /// rdma_get_cm_event(3), interposed.
    rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> i32,
    wrap_events::get_cm_event, "rdx", "x2"
);
entry!(
    /// rdma_ack_cm_event(3), interposed.
    rdma_ack_cm_event(event: *mut rdma_cm_event) -> i32, wrap_events::ack_cm_event, "rsi", "x1"
);
entry!(
    /// rdma_destroy_id(3), interposed.
    rdma_destroy_id(id: *mut rdma_cm_id) -> i32, wrap_events::destroy_id, "rsi", "x1"
);
entry!(
    /// rdma_migrate_id(3), interposed.
    rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> i32,
    wrap_events::migrate_id, "rdx", "x2"
);
entry!(
    /// rdma_destroy_event_channel(3), interposed.
    rdma_destroy_event_channel(channel: *mut rdma_event_channel), wrap_events::destroy_event_channel, "rsi", "x1"
);
entry!(
    /// rdma_destroy_qp(3), interposed.
    rdma_destroy_qp(id: *mut rdma_cm_id), wrap_events::destroy_qp, "rsi", "x1"
);
entry!(
    /// rdma_create_id(3), interposed.
    rdma_create_id(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut libc::c_void,
        ps: u32
    ) -> i32,
    wrap_ids::create_id, "r8", "x4"
);
entry!(
    /// rdma_create_ep(3), interposed.
    rdma_create_ep(
        id: *mut *mut rdma_cm_id,
        res: *mut libc::c_void,
        pd: *mut libc::c_void,
        qp_init_attr: *mut libc::c_void
    ) -> i32,
    wrap_ids::create_ep, "r8", "x4"
);
entry!(
    /// rdma_create_event_channel(3), interposed.
    rdma_create_event_channel() -> *mut rdma_event_channel, wrap_ids::create_channel, "rdi", "x0"
);
entry!(
    /// rdma_get_request(3), interposed.
    rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> i32,
    wrap_ids::get_request, "rdx", "x2"
);
entry!(
    /// rdma_accept(3), interposed.
    rdma_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> i32,
    wrap_ids::accept, "rdx", "x2"
);
entry!(
    /// rdma_connect(3), interposed.
    rdma_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> i32,
    wrap_ids::connect, "rdx", "x2"
);
entry!(
    /// rdma_reject(3), interposed.
    rdma_reject(id: *mut rdma_cm_id, private_data: *const libc::c_void, len: u8) -> i32,
    wrap_ids::reject, "rcx", "x3"
);
entry!(
    /// rdma_disconnect(3), interposed.
    rdma_disconnect(id: *mut rdma_cm_id) -> i32, wrap_ids::disconnect, "rsi", "x1"
);
entry!(
    /// rdma_bind_addr(3), interposed.
    rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> i32,
    wrap_ids::bind_addr, "rdx", "x2"
);
entry!(
    /// rdma_resolve_addr(3), interposed.
    rdma_resolve_addr(
        id: *mut rdma_cm_id,
        src_addr: *mut libc::sockaddr,
        dst_addr: *mut libc::sockaddr,
        timeout_ms: c_int
    ) -> i32,
    wrap_ids::resolve_addr, "r8", "x4"
);
entry!(
    /// rdma_resolve_route(3), interposed.
    rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> i32,
    wrap_ids::resolve_route, "rdx", "x2"
);
entry!(
    /// rdma_listen(3), interposed.
    rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> i32, wrap_ids::listen, "rdx", "x2"
);
entry!(
    /// rdma_create_qp(3), interposed.
    rdma_create_qp(id: *mut rdma_cm_id, pd: *mut c_void, qp_init_attr: *mut c_void) -> i32,
    wrap_ids::create_qp, "rcx", "x3"
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
    wrap_ids::set_option, "r9", "x5"
);
entry!(
    /// ibv_get_cq_event(3), interposed.
    ibv_get_cq_event(channel: *mut c_void, cq: *mut *mut c_void, cq_context: *mut *mut c_void) -> i32,
    wrap_cq::get_cq_event, "rcx", "x3"
);
entry!(
    /// ibv_ack_cq_events(3), interposed.
    ibv_ack_cq_events(cq: *mut c_void, nevents: c_uint), wrap_cq::ack_cq_events, "rdx", "x2"
);
entry!(
    /// ibv_destroy_cq(3), interposed.
    ibv_destroy_cq(cq: *mut c_void) -> i32, wrap_cq::destroy_cq, "rsi", "x1"
);
entry!(
    /// ibv_get_async_event(3), interposed.
    ibv_get_async_event(context: *mut c_void, event: *mut c_void) -> i32,
    wrap_async::get_async_event, "rdx", "x2"
);
entry!(
    /// ibv_ack_async_event(3), interposed.
    ibv_ack_async_event(event: *mut c_void), wrap_async::ack_async_event, "rsi", "x1"
);
entry!(
    /// ibv_destroy_qp(3), interposed.
    ibv_destroy_qp(qp: *mut c_void) -> i32, wrap_async::destroy_qp, "rsi", "x1"
);
entry!(
    /// ibv_destroy_srq(3), interposed.
    ibv_destroy_srq(srq: *mut c_void) -> i32, wrap_async::destroy_srq, "rsi", "x1"
);

entry!(
    /// sigaction(2), interposed: SIGSEGV's action, once audit's handler is installed
    /// (audit/segv.rs); every other signal passes through.
    sigaction(
        sig: c_int,
        act: *const libc::sigaction,
        oldact: *mut libc::sigaction
    ) -> c_int,
    segv::sigaction, "rcx", "x3"
);
entry!(
    /// __sigaction, glibc's other name for sigaction(2), interposed as it.
    __sigaction(
        sig: c_int,
        act: *const libc::sigaction,
        oldact: *mut libc::sigaction
    ) -> c_int,
    segv::sigaction_, "rcx", "x3"
);
entry!(
    /// signal(3), interposed as sigaction(2) is.
    signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t,
    segv::signal, "rdx", "x2"
);
entry!(
    /// ssignal(3), interposed as signal(3).
    ssignal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t,
    segv::ssignal, "rdx", "x2"
);
entry!(
    /// bsd_signal(3), interposed as signal(3).
    bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t,
    segv::bsd_signal, "rdx", "x2"
);
entry!(
    /// sysv_signal(3), interposed with System V's semantics.
    sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t,
    segv::sysv_signal, "rdx", "x2"
);
entry!(
    /// __sysv_signal, the name glibc's headers give sysv_signal.
    __sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t,
    segv::sysv_signal_, "rdx", "x2"
);

#[cfg(test)]
mod tests {
    /// Five arguments and the return address, as rdma_set_option's implementation gets them.
    unsafe extern "C-unwind" fn five(
        a: usize,
        b: usize,
        c: usize,
        d: usize,
        e: usize,
        ret: usize,
    ) -> usize {
        assert_eq!(
            (a, b, c, d, e),
            (1, 2, 3, 4, 5),
            "arguments passed through unchanged"
        );
        ret
    }

    /// No argument, as rdma_create_event_channel's.
    unsafe extern "C-unwind" fn none(ret: usize) -> usize {
        ret
    }

    entry!(cmsafe_test_entry_five(a: usize, b: usize, c: usize, d: usize, e: usize) -> usize,
        five, "r9", "x5");
    entry!(cmsafe_test_entry_none() -> usize, none, "rdi", "x0");

    /// The return address the trampoline passed is in the function that called it, just past
    /// the call: within its first few hundred bytes here (a debug build's test function).
    fn called_from(ret: usize, f: usize) {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert!(
            ret > f && ret < f + 4096,
            "return address {ret:#x}, caller at {f:#x}"
        );
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        assert_eq!(ret, 0, "the stack is walked instead");
    }

    #[inline(never)]
    fn call_five() -> usize {
        // SAFETY: the test entry takes any values. black_box keeps an optimized build from
        // turning the call into a jump, which would pass our caller's return address.
        std::hint::black_box(unsafe { cmsafe_test_entry_five(1, 2, 3, 4, 5) })
    }

    #[inline(never)]
    fn call_none() -> usize {
        // SAFETY: as above.
        std::hint::black_box(unsafe { cmsafe_test_entry_none() })
    }

    #[test]
    fn the_trampoline_passes_the_arguments_and_the_callers_return_address() {
        called_from(call_five(), call_five as fn() -> usize as usize);
        called_from(call_none(), call_none as fn() -> usize as usize);
        // Two calls from one place give the same address.
        assert_eq!(call_none(), call_none());
    }
}
