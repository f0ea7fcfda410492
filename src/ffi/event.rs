//! Fetching events and reading the copies.

use libc::c_int;

use super::handle::{self, cmsafe_event};
use super::{fail, guard};
use crate::cm::{rdma_cm_event, rdma_event_channel};
use crate::channel::get_event_raw;

/// Fetches the next event from `ch`, copies everything it carries and acks the original.
///
/// Blocks like `rdma_get_cm_event(3)` until an event arrives. The copy holds the event type,
/// status, `id`, `listen_id`, the `param.conn` or `param.ud` member librdmacm filled, and
/// `private_data_len` bytes of private data in memory cmsafe owns. The original is acked with
/// `rdma_ack_cm_event(3)` before this returns, so `rdma_destroy_id(3)` never waits on it.
/// For MULTICAST_JOIN and MULTICAST_ERROR, `param.ud.private_data` is the context pointer given to
/// `rdma_join_multicast(3)`: it is kept as is and no bytes are copied (librdmacm/cma.c).
///
/// Ownership: on success `*out` receives a new event holding one reference, which the caller
/// releases with `cmsafe_event_release`. `*out` is written only on success.
///
/// NULL: `ch` or `out` NULL fails with EINVAL.
///
/// Threads: any number of threads may fetch from one channel at once; the kernel hands each
/// event to exactly one of them.
///
/// Returns 0 on success, or -1 with errno set: EINVAL for NULL arguments, or the errno of
/// `rdma_get_cm_event(3)` (e.g. EAGAIN on a non-blocking channel with nothing queued, ENODEV).
#[no_mangle]
pub extern "C" fn cmsafe_get_event(
    ch: *mut rdma_event_channel,
    out: *mut *mut cmsafe_event,
) -> c_int {
    guard!(fail(libc::EIO), {
        if ch.is_null() || out.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: `ch` is not NULL; the caller passes a live channel, as librdmacm requires.
        match unsafe { get_event_raw(ch) } {
            Ok(event) => {
                // SAFETY: `out` is not NULL and points to writable storage per the contract.
                unsafe { *out = handle::event_into_c(event) };
                0
            }
            Err(e) => fail(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    })
}

/// librdmacm's view of the copy, to read with the usual field names.
///
/// `param.conn.private_data` (or `param.ud.private_data` for UD ids) points into private data
/// cmsafe owns, and `private_data_len` is its length; both are NULL/0 when the event carries none.
/// For MULTICAST_JOIN/ERROR, `param.ud.private_data` is the user's context pointer, untouched.
/// `id` and `listen_id` are the application's cm_ids, as librdmacm reported them.
///
/// Ownership: borrowed from `ev`; valid while the caller holds `ev`. Do not pass it to
/// `rdma_ack_cm_event(3)`: it is not librdmacm's memory, and the original is already acked.
///
/// NULL: `ev` NULL returns NULL.
///
/// Threads: the copy is immutable; any thread holding `ev` may read it.
#[no_mangle]
pub extern "C" fn cmsafe_event_cm(ev: *const cmsafe_event) -> *const rdma_cm_event {
    guard!(std::ptr::null(), {
        // SAFETY: `ev` is NULL or a held handle, per the contract.
        match unsafe { handle::event_ref(ev) } {
            Some(event) => event.cm() as *const rdma_cm_event,
            None => std::ptr::null(),
        }
    })
}

/// Releases one reference to `ev`; the last release frees the copy (its private data buffer
/// lives on while other references to the buffer are held).
///
/// Ownership: the caller gives up the reference it held; `ev` and every pointer obtained from it
/// (`cmsafe_event_cm`) must not be used afterwards unless another reference is held.
///
/// NULL: a no-op.
///
/// Threads: atomic; any thread may release.
#[no_mangle]
pub extern "C" fn cmsafe_event_release(ev: *mut cmsafe_event) {
    guard!((), {
        if !ev.is_null() {
            // SAFETY: a non-NULL `ev` is a handle whose reference the caller owns.
            unsafe { handle::event_release(ev) };
        }
    })
}
