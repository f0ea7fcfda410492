//! The calls that create cm_ids and event channels or act on an id without events:
//! rdma_create_id, rdma_create_ep (librdmacm makes its id without calling rdma_create_id),
//! rdma_create_event_channel, rdma_accept, rdma_connect, rdma_reject, rdma_disconnect,
//! rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_listen, rdma_create_qp and
//! rdma_set_option, interposed so that the lifecycles of ids and channels can be judged
//! (objects.rs): a call on a destroyed id or channel, or on an address no id can have, is named
//! before librdmacm reads it, and safe mode refuses it.

use cmsafe_core::cm::{rdma_cm_id, rdma_conn_param, rdma_event_channel};

use crate::cm::refuse::{channel_refused, id_refused};
use crate::cm::track::with_state;
use crate::lifecycle::quietly;
use crate::sys::config::{Mode, CONFIG};
use crate::sys::quiet::missing;
use crate::sys::{real, whereis};
use cmsafe_core::errno;

/// `call` on `id`, nothing else to judge: refused in safe mode when the id was destroyed.
fn id_call(call: &str, id: *mut rdma_cm_id, ret: usize, real: impl FnOnce() -> i32) -> i32 {
    if CONFIG.mode != Mode::Off && id_refused(call, id, ret) {
        return -1;
    }
    real()
}

/// After a call that makes an id (rdma_create_id, rdma_create_ep; rdma_get_request, whose id is
/// a connection request's) returned `rc`: on success the new id is known from here on, as the
/// caller's.
///
/// # Safety
/// When `rc` is 0 and `id` is not NULL, `*id` is the id librdmacm just stored there.
unsafe fn note_created(rc: i32, id: *mut *mut rdma_cm_id, ret: usize, from_request: bool) {
    if rc != 0 || id.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    let new = unsafe { *id };
    let channel = if new.is_null() {
        0
    } else {
        // SAFETY: librdmacm just made it (or, for rdma_get_request, handed it over): a live id.
        let ch = unsafe { (*new).channel };
        ch as usize
    };
    quietly(|| {
        let caller = whereis::caller_at(ret);
        with_state(|s| s.id_created(new as usize, channel, caller, from_request));
    });
}

/// rdma_create_id(3), interposed: the new id is known from here on.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut libc::c_void,
    ps: u32,
    ret: usize,
) -> i32 {
    let Some(real) = real::create_id() else {
        return missing();
    };
    if CONFIG.mode == Mode::Off {
        // SAFETY: passed on as given.
        return unsafe { real(channel, id, context, ps) };
    }
    if channel_refused("rdma_create_id", channel, ret) {
        return -1;
    }
    // SAFETY: passed on as given.
    let rc = unsafe { real(channel, id, context, ps) };
    // SAFETY: on success librdmacm stored the new id at `id`.
    unsafe { note_created(rc, id, ret, false) };
    rc
}

/// rdma_create_ep(3), interposed: the new id is known from here on.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut libc::c_void,
    pd: *mut libc::c_void,
    qp_init_attr: *mut libc::c_void,
    ret: usize,
) -> i32 {
    let Some(real) = real::create_ep() else {
        return missing();
    };
    // SAFETY: passed on as given.
    let rc = unsafe { real(id, res, pd, qp_init_attr) };
    if CONFIG.mode != Mode::Off {
        // SAFETY: on success librdmacm stored the new id at `id`.
        unsafe { note_created(rc, id, ret, false) };
    }
    rc
}

/// rdma_create_event_channel(3), interposed: the new channel is known from here on.
///
/// # Safety
/// As librdmacm's own function.
pub unsafe extern "C-unwind" fn create_channel(ret: usize) -> *mut rdma_event_channel {
    let Some(real) = real::create_channel() else {
        errno::set(libc::ENOSYS);
        return std::ptr::null_mut();
    };
    // SAFETY: no arguments.
    let channel = unsafe { real() };
    if CONFIG.mode != Mode::Off && !channel.is_null() {
        quietly(|| {
            let caller = whereis::caller_at(ret);
            with_state(|s| s.channel_created(channel as usize, caller));
        });
    }
    channel
}

/// rdma_get_request(3), interposed. librdmacm gets the CONNECT_REQUEST through its own
/// rdma_get_cm_event, so its new id was noted as librdmacm's; handed to the caller here, it is
/// the caller's from here on (counted at exit if never destroyed).
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
    ret: usize,
) -> i32 {
    let Some(real) = real::get_request() else {
        return missing();
    };
    // SAFETY: passed on as given.
    let rc = id_call("rdma_get_request", listen, ret, || unsafe {
        real(listen, id)
    });
    if CONFIG.mode != Mode::Off {
        // SAFETY: on success librdmacm stored the request's id at `id`.
        unsafe { note_created(rc, id, ret, true) };
    }
    rc
}

/// rdma_reject(3), interposed: a rejected request's id must still be destroyed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn reject(
    id: *mut rdma_cm_id,
    private_data: *const libc::c_void,
    len: u8,
    ret: usize,
) -> i32 {
    let Some(real) = real::reject() else {
        return missing();
    };
    if CONFIG.mode == Mode::Off {
        // SAFETY: passed on as given.
        return unsafe { real(id, private_data, len) };
    }
    if id_refused("rdma_reject", id, ret) {
        return -1;
    }
    // SAFETY: passed on as given.
    let rc = unsafe { real(id, private_data, len) };
    if rc == 0 && !id.is_null() {
        quietly(|| {
            let caller = whereis::caller_at(ret);
            with_state(|s| s.rejected(id as usize, caller));
        });
    }
    rc
}

/// Wrappers of calls on an id with nothing else to judge: each is refused in safe mode when the
/// id was destroyed or cannot be one (`id_call`).
macro_rules! id_calls {
    ($($(#[$doc:meta])* $name:ident: $call:literal ($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As librdmacm's own function: the arguments are what its man page asks for.
        pub unsafe extern "C-unwind" fn $name(id: *mut rdma_cm_id, $($arg: $ty,)* ret: usize) -> i32 {
            let Some(real) = real::$name() else {
                return missing();
            };
            // SAFETY: passed on as given.
            id_call($call, id, ret, || unsafe { real(id, $($arg),*) })
        }
    )*};
}

id_calls! {
    /// rdma_accept(3), interposed.
    accept: "rdma_accept" (param: *mut rdma_conn_param);
    /// rdma_connect(3), interposed.
    connect: "rdma_connect" (param: *mut rdma_conn_param);
    /// rdma_disconnect(3), interposed.
    disconnect: "rdma_disconnect" ();
    /// rdma_bind_addr(3), interposed.
    bind_addr: "rdma_bind_addr" (addr: *mut libc::sockaddr);
    /// rdma_resolve_addr(3), interposed: the first call of a connect, so of a connect retried on
    /// an id destroyed after REJECTED (perftest 4.5-0.17 passes a slot of its freed node array).
    resolve_addr: "rdma_resolve_addr" (
        src_addr: *mut libc::sockaddr,
        dst_addr: *mut libc::sockaddr,
        timeout_ms: libc::c_int
    );
    /// rdma_resolve_route(3), interposed.
    resolve_route: "rdma_resolve_route" (timeout_ms: libc::c_int);
    /// rdma_listen(3), interposed.
    listen: "rdma_listen" (backlog: libc::c_int);
    /// rdma_create_qp(3), interposed.
    create_qp: "rdma_create_qp" (pd: *mut libc::c_void, qp_init_attr: *mut libc::c_void);
    /// rdma_set_option(3), interposed.
    set_option: "rdma_set_option" (
        level: libc::c_int,
        optname: libc::c_int,
        optval: *mut libc::c_void,
        optlen: libc::size_t
    );
}
