//! Private data buffers: refcounted, immutable, independent of the event they came with.

use libc::size_t;

use super::{cmsafe_buf, guard};
use crate::event::PrivateData;

/// Takes one more reference to `buf`, so it outlives its event or moves to another thread.
///
/// Ownership: the caller owns the new reference and releases it with `cmsafe_buf_release`.
/// NULL: returns NULL. Threads: atomic.
/// Returns `buf`.
#[no_mangle]
pub extern "C" fn cmsafe_buf_retain(buf: *const cmsafe_buf) -> *const cmsafe_buf {
    guard!(std::ptr::null(), {
        if buf.is_null() {
            return std::ptr::null();
        }
        PrivateData::with_raw(buf as *const u8, "cmsafe_buf_retain", |b| {
            b.clone().into_raw() as *const cmsafe_buf
        })
    })
}

/// Releases one reference taken with `cmsafe_buf_retain`. (The reference an event holds is
/// released with the event: never release a buffer you did not retain.)
///
/// NULL: a no-op. A buffer already released, or never returned by cmsafe, is reported and the
/// process aborts (while its slot is in quarantine, as for `cmsafe_event_release`).
/// Threads: atomic; any thread may release.
#[no_mangle]
pub extern "C" fn cmsafe_buf_release(buf: *const cmsafe_buf) {
    guard!((), {
        if !buf.is_null() {
            PrivateData::from_raw(buf as *const u8, "cmsafe_buf_release")
                .release_own("cmsafe_buf_release");
        }
    })
}

/// The private data bytes: `cmsafe_buf_len(buf)` of them, immutable.
///
/// Ownership: borrowed from `buf`; valid while a reference to `buf` (or to its event) is held.
/// NULL: returns NULL. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_buf_data(buf: *const cmsafe_buf) -> *const u8 {
    guard!(std::ptr::null(), {
        if buf.is_null() {
            return std::ptr::null();
        }
        PrivateData::with_raw(buf as *const u8, "cmsafe_buf_data", |b| {
            b.as_bytes().as_ptr()
        })
    })
}

/// The number of private data bytes, in bytes (0 to 255): the length the transport reported.
/// NULL: returns 0. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_buf_len(buf: *const cmsafe_buf) -> size_t {
    guard!(0, {
        if buf.is_null() {
            return 0;
        }
        PrivateData::with_raw(buf as *const u8, "cmsafe_buf_len", |b| b.len())
    })
}
