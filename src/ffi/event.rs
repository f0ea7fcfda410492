//! Reading an event copy, and its refcount.
//!
//! Every accessor borrows `ev` for the call: NULL gives the documented neutral value, and a
//! handle that was already released (or never came from cmsafe) is reported and aborts.

use libc::{c_char, c_int, size_t};

use super::{cmsafe_buf, cmsafe_event, fail, guard};
use cmsafe_core::cm::{rdma_cm_event, rdma_cm_id};
use cmsafe_core::event::Event;
use cmsafe_core::status::StatusKind;

fn with_event<R>(ev: *const cmsafe_event, op: &str, none: R, f: impl FnOnce(&Event) -> R) -> R {
    if ev.is_null() {
        return none;
    }
    Event::with_raw(ev as *const u8, op, f)
}

/// Takes one more reference to `ev`, for another owner (another thread, a queue, ...).
///
/// Ownership: the caller owns the new reference and releases it with `cmsafe_event_release`.
/// NULL: returns NULL. Threads: atomic; any thread holding a reference may retain.
/// Returns `ev`.
#[no_mangle]
pub extern "C" fn cmsafe_event_retain(ev: *const cmsafe_event) -> *mut cmsafe_event {
    guard!(std::ptr::null_mut(), {
        with_event(ev, "cmsafe_event_retain", std::ptr::null_mut(), |e| {
            e.clone().into_raw() as *mut cmsafe_event
        })
    })
}

/// Releases one reference to `ev`; the last release frees the copy. Its private data buffer
/// lives on while references to the buffer are held (`cmsafe_buf_retain`).
///
/// Ownership: the caller gives up the reference it held; pointers obtained from `ev`
/// (`cmsafe_event_cm`, `cmsafe_event_private_data`, addresses) must not be used afterwards unless
/// another reference is held.
///
/// NULL: a no-op. A handle already released, or never returned by cmsafe, is reported
/// (an error log naming the handle) and the process aborts: going on would corrupt memory.
/// A released handle stays detectable while its slot waits in quarantine: at least 128 newer
/// events fetched by the same thread (1024 across threads). A handle is a pointer: once its
/// slot holds a newer event, a release through the stale handle releases that event.
///
/// Threads: atomic; any thread may release.
#[no_mangle]
pub extern "C" fn cmsafe_event_release(ev: *mut cmsafe_event) {
    guard!((), {
        if !ev.is_null() {
            drop(Event::from_raw(ev as *const u8, "cmsafe_event_release"));
        }
    })
}

/// librdmacm's view of the copy, to read with the usual field names.
///
/// `param.conn.private_data` (or `param.ud.private_data` for UD ids) points into the private
/// data buffer cmsafe owns and `private_data_len` is its length; both are NULL/0 when the event
/// carries none. For MULTICAST_JOIN/ERROR, `param.ud.private_data` is the user's context
/// pointer, untouched. `id` and `listen_id` are the application's cm_ids, as reported.
///
/// Ownership: borrowed from `ev`; valid while a reference to `ev` is held. Never pass it to
/// `rdma_ack_cm_event(3)`: it is not librdmacm's memory, and the original is already acked.
/// NULL: returns NULL. Threads: the copy is immutable; any thread holding `ev` may read it.
#[no_mangle]
pub extern "C" fn cmsafe_event_cm(ev: *const cmsafe_event) -> *const rdma_cm_event {
    guard!(std::ptr::null(), {
        with_event(ev, "cmsafe_event_cm", std::ptr::null(), |e| {
            e.cm() as *const rdma_cm_event
        })
    })
}

/// The event type, an `enum rdma_cm_event_type` value (`rdma_event_str(3)` names it).
/// NULL: returns -1. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_type(ev: *const cmsafe_event) -> c_int {
    guard!(-1, {
        with_event(ev, "cmsafe_event_type", -1, |e| e.event_type() as c_int)
    })
}

/// The event's status as librdmacm reported it (`rdma_get_cm_event(3)`): 0, a negative errno,
/// or for REJECTED on IB/RoCE a positive IB CM reject reason; `cmsafe_event_status_kind` says
/// which. NULL: returns 0 and sets errno to EINVAL. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_status(ev: *const cmsafe_event) -> c_int {
    guard!(0, {
        if ev.is_null() {
            fail(libc::EINVAL);
            return 0;
        }
        with_event(ev, "cmsafe_event_status", 0, |e| e.status())
    })
}

/// How to read `cmsafe_event_status`: OK, ERRNO (negative errno), IB_REJECT_REASON (REJECTED on
/// IB/RoCE: see `cmsafe_reject_reason_str`), IWARP_REJECT (REJECTED on iWARP: negative errno),
/// or OTHER. The transport is the one the id's device had when the event was fetched.
/// NULL: returns CMSAFE_STATUS_KIND_OTHER. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_status_kind(ev: *const cmsafe_event) -> StatusKind {
    guard!(StatusKind::Other, {
        with_event(ev, "cmsafe_event_status_kind", StatusKind::Other, |e| {
            e.status_kind()
        })
    })
}

/// The event's cm_id: for CONNECT_REQUEST the new id librdmacm created for the connection.
/// Owned by the application (released with `rdma_destroy_id(3)`), not by the event.
/// NULL: returns NULL. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_id(ev: *const cmsafe_event) -> *mut rdma_cm_id {
    guard!(std::ptr::null_mut(), {
        with_event(ev, "cmsafe_event_id", std::ptr::null_mut(), |e| e.id())
    })
}

/// The listen id a CONNECT_REQUEST arrived on; NULL for other events and for NULL `ev`.
/// Owned by the application. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_listen_id(ev: *const cmsafe_event) -> *mut rdma_cm_id {
    guard!(std::ptr::null_mut(), {
        with_event(ev, "cmsafe_event_listen_id", std::ptr::null_mut(), |e| {
            e.listen_id()
        })
    })
}

/// The event's sequence number: process-wide, strictly increasing in fetch order, starting at 1.
/// NULL: returns 0. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_seq(ev: *const cmsafe_event) -> u64 {
    guard!(0, { with_event(ev, "cmsafe_event_seq", 0, |e| e.seq()) })
}

/// When the event was fetched (or copied, for `cmsafe_event_copy`), in nanoseconds of
/// CLOCK_MONOTONIC_COARSE (clock_gettime(2)): the same clock as CLOCK_MONOTONIC, read without a
/// system call on any clocksource, but advanced only once per kernel tick, so its resolution is
/// what `clock_getres(CLOCK_MONOTONIC_COARSE)` reports (1 to 10 ms: 4 ms on a HZ=250 kernel)
/// and it may lag CLOCK_MONOTONIC by up to that much. Compare it with CLOCK_MONOTONIC_COARSE
/// readings, not CLOCK_MONOTONIC ones.
/// NULL: returns 0. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_time_ns(ev: *const cmsafe_event) -> u64 {
    guard!(0, {
        with_event(ev, "cmsafe_event_time_ns", 0, |e| e.fetched_ns())
    })
}

/// The id's local address as it was when the event was fetched (what `rdma_get_local_addr(3)`
/// returned then); readable after the id is destroyed. Its family is AF_UNSPEC when the id had
/// no address yet. The storage is as long as the family's own address structure: a
/// `struct sockaddr_in` for AF_INET, `sockaddr_in6` for AF_INET6, `sockaddr_ib` (48 bytes) for
/// AF_IB, a `struct sockaddr` (16 bytes) for AF_UNSPEC, and a whole `struct sockaddr_storage`
/// for any other family; read no further than that. It is 4-byte aligned (8 for AF_IB).
///
/// Ownership: borrowed from `ev`, valid while a reference to `ev` is held.
/// NULL: returns NULL. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_src_addr(ev: *const cmsafe_event) -> *const libc::sockaddr {
    guard!(std::ptr::null(), {
        with_event(ev, "cmsafe_event_src_addr", std::ptr::null(), |e| {
            e.src_addr() as *const libc::sockaddr
        })
    })
}

/// The id's peer address as it was when the event was fetched (`rdma_get_peer_addr(3)`);
/// otherwise as `cmsafe_event_src_addr`.
#[no_mangle]
pub extern "C" fn cmsafe_event_dst_addr(ev: *const cmsafe_event) -> *const libc::sockaddr {
    guard!(std::ptr::null(), {
        with_event(ev, "cmsafe_event_dst_addr", std::ptr::null(), |e| {
            e.dst_addr() as *const libc::sockaddr
        })
    })
}

/// The event's private data buffer, or NULL when the event carries none (no private data, and
/// always for MULTICAST_JOIN/ERROR). Its length is what the transport reported, which on IB/RoCE
/// can exceed what the peer sent: CONNECT_REQUEST carries 56 bytes, ESTABLISHED 196, REJECTED
/// 148, the peer's bytes first and zeros after. A NULL pointer with a nonzero length from
/// librdmacm gives an empty buffer.
///
/// Ownership: borrowed from `ev`; to keep it longer than `ev`, take a reference with
/// `cmsafe_buf_retain` (and give it back with `cmsafe_buf_release`).
/// NULL: returns NULL. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_event_private_data(ev: *const cmsafe_event) -> *const cmsafe_buf {
    guard!(std::ptr::null(), {
        with_event(ev, "cmsafe_event_private_data", std::ptr::null(), |e| {
            e.private_data()
                .map_or(std::ptr::null(), |b| b.as_raw() as *const cmsafe_buf)
        })
    })
}

/// Writes a USER event's `param.arg` (the value its writer gave `rdma_write_cm_event(3)`,
/// rdma-core 60+, librdmacm/cma.c `rdma_get_cm_event`) into `*arg`. The copy keeps the arg as
/// librdmacm delivered it; reading it here needs no header that declares `param.arg`, so a
/// program built against rdma-core before 60 can read it too.
///
/// NULL: `ev` or `arg` NULL fails with EINVAL. Threads: any.
/// Returns 0, or -1 with errno EINVAL (NULL), or ENOMSG when `ev` is not RDMA_CM_EVENT_USER
/// (no other event type carries an arg; `*arg` is untouched).
#[no_mangle]
pub extern "C" fn cmsafe_event_arg(ev: *const cmsafe_event, arg: *mut u64) -> c_int {
    guard!(fail(libc::EIO), {
        if ev.is_null() || arg.is_null() {
            return fail(libc::EINVAL);
        }
        with_event(ev, "cmsafe_event_arg", -1, |e| match e.arg() {
            Some(value) => {
                // SAFETY: `arg` is not NULL and points to writable storage per the contract.
                unsafe { arg.write(value) };
                0
            }
            None => fail(libc::ENOMSG),
        })
    })
}

/// Writes one log line describing `ev` into `buf` (NUL-terminated, cut to `len` bytes like
/// snprintf(3)): sequence number, type, status decoded, id, listen id, addresses and the private
/// data *length*. Never the private data bytes: they often carry tokens.
///
/// NULL: `ev` NULL, or `buf` NULL with `len` > 0, fails with EINVAL; `buf` NULL with `len` 0
/// only measures. Threads: any.
///
/// Returns the length of the whole line, without the NUL (a return >= `len` means it was cut),
/// or -1 with errno EINVAL.
#[no_mangle]
pub extern "C" fn cmsafe_event_describe(
    ev: *const cmsafe_event,
    buf: *mut c_char,
    len: size_t,
) -> c_int {
    guard!(fail(libc::EIO), {
        if ev.is_null() || (buf.is_null() && len > 0) {
            return fail(libc::EINVAL);
        }
        let line = with_event(ev, "cmsafe_event_describe", String::new(), |e| e.describe());
        if len > 0 {
            let n = line.len().min(len - 1);
            // SAFETY: `buf` holds `len` writable bytes per the contract; n + 1 <= len.
            unsafe {
                std::ptr::copy_nonoverlapping(line.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        line.len().min(c_int::MAX as usize) as c_int
    })
}
