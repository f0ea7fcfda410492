//! The functions behind `cmsafe_compat.h`: safe mode for programs rebuilt with
//! `-include cmsafe_compat.h`, their rdma_get_cm_event / rdma_ack_cm_event / rdma_destroy_id
//! calls unchanged in the source. The same core as the LD_PRELOAD library's safe mode.

use libc::c_int;

use super::guard;
use cmsafe_core::cm::{
    rdma_ack_cm_event, rdma_cm_event, rdma_cm_id, rdma_event_channel, rdma_get_cm_event,
};
use cmsafe_core::errno;
use cmsafe_core::fork_lock::ForkSafeMutex;
use cmsafe_core::safe::{Ack, SafeCopies};

/// Fork-safe: a child never inherits it held by another thread (`fork_lock`).
pub(super) static COPIES: ForkSafeMutex<Option<SafeCopies>> = ForkSafeMutex::new(None);

fn with_copies<R>(f: impl FnOnce(&mut SafeCopies) -> R) -> R {
    let mut guard = COPIES.lock();
    f(guard.get_or_insert_with(SafeCopies::new))
}

/// `rdma_get_cm_event(3)` in safe mode: fetches the event, copies it, acks librdmacm's event at
/// once and stores the copy in `*event`. The copy stays valid after the program's
/// `rdma_ack_cm_event` until the event's id (or a CONNECT_REQUEST's listen id) is destroyed, or
/// until 4096 newer events were acked.
///
/// Ownership: `*event` belongs to cmsafe; the program acks it as before (`cmsafe_compat.h` maps
/// `rdma_ack_cm_event` to `cmsafe_compat_ack_cm_event`). If the copy cannot be allocated,
/// `*event` is librdmacm's own event, unacked, and the program's ack goes to librdmacm: nothing
/// is lost, that event just is not protected.
///
/// NULL: as `rdma_get_cm_event(3)` (EINVAL). Threads: as `rdma_get_cm_event(3)`.
/// Returns 0, or -1 with errno from `rdma_get_cm_event(3)`.
///
/// # Safety
/// As `rdma_get_cm_event(3)`: `channel` is a live event channel, `event` writable.
#[no_mangle]
pub unsafe extern "C" fn cmsafe_compat_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    if event.is_null() {
        // SAFETY: librdmacm reports the NULL itself.
        return unsafe { rdma_get_cm_event(channel, event) };
    }
    let mut raw: *mut rdma_cm_event = std::ptr::null_mut();
    // SAFETY: the program's channel, our out pointer.
    let rc = unsafe { rdma_get_cm_event(channel, &mut raw) };
    if rc != 0 {
        return rc;
    }
    let saved = errno::get();
    let copy = guard!(None, {
        // SAFETY: `raw` was just returned, unacked.
        with_copies(|c| unsafe { c.adopt(raw) }).ok()
    });
    let handed = match copy {
        Some(p) => {
            // SAFETY: librdmacm's event, copied; acked exactly once.
            unsafe { rdma_ack_cm_event(raw) };
            p
        }
        None => raw,
    };
    // SAFETY: non-NULL, writable per the contract.
    unsafe { *event = handed };
    errno::set(saved);
    0
}

/// `rdma_ack_cm_event(3)` in safe mode: marks a copy from `cmsafe_compat_get_cm_event` acked
/// (librdmacm's event was acked when it was copied). A second ack of the same copy is logged and
/// ignored. A pointer that is not one of cmsafe's copies goes to `rdma_ack_cm_event(3)`.
///
/// NULL: as `rdma_ack_cm_event(3)` (EINVAL). Threads: any.
/// Returns 0, or -1 with errno from `rdma_ack_cm_event(3)`.
///
/// # Safety
/// As `rdma_ack_cm_event(3)`: `event` came from `rdma_get_cm_event` or its compat form.
#[no_mangle]
pub unsafe extern "C" fn cmsafe_compat_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    if event.is_null() {
        // SAFETY: librdmacm reports the NULL itself.
        return unsafe { rdma_ack_cm_event(event) };
    }
    let verdict = guard!(Ack::Unknown, { with_copies(|c| c.ack(event)) });
    match verdict {
        Ack::Acked => 0,
        Ack::AlreadyAcked => {
            log::warn!("cmsafe: rdma_ack_cm_event({event:p}) of an event already acked: ignored");
            0
        }
        // SAFETY: not ours: librdmacm's own event (or whatever the program passed).
        Ack::Unknown => unsafe { rdma_ack_cm_event(event) },
    }
}

/// `rdma_destroy_id(3)`, then the acked copies of the id's events are released.
///
/// NULL, threads, return: as `rdma_destroy_id(3)`.
///
/// # Safety
/// As `rdma_destroy_id(3)`: `id` is a live cm_id.
#[no_mangle]
pub unsafe extern "C" fn cmsafe_compat_destroy_id(id: *mut rdma_cm_id) -> c_int {
    // SAFETY: forwarded.
    let rc = unsafe { cmsafe_core::cm::sys::rdma_destroy_id(id) };
    let saved = errno::get();
    guard!((), { with_copies(|c| c.id_destroyed(id as usize)) });
    errno::set(saved);
    rc
}
