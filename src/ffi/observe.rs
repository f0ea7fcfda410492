//! Status names, logging, counters and the test hook.

use libc::{c_char, c_int, c_void};

use super::{fail, guard};
use cmsafe_core::logging;
use cmsafe_core::stats::EVENT_TYPE_SLOTS;
use cmsafe_core::status::reject_reason_name;

/// The kernel's name for an IB CM reject reason (`enum ib_cm_rej_reason` in the kernel's
/// include/rdma/ib_cm.h): 1 gives "IB_CM_REJ_NO_QP", 28 "IB_CM_REJ_CONSUMER_DEFINED", 35
/// "IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED".
///
/// Ownership: a static string; never free it. Threads: any.
/// Returns NULL (errno EINVAL) for a number that names no reason.
#[no_mangle]
pub extern "C" fn cmsafe_reject_reason_str(reason: c_int) -> *const c_char {
    guard!(std::ptr::null(), {
        match reject_reason_name(reason) {
            // The names are ASCII without NUL; each table entry gets its terminator here.
            Some(name) => reason_cstr(name),
            None => {
                fail(libc::EINVAL);
                std::ptr::null()
            }
        }
    })
}

fn reason_cstr(name: &'static str) -> *const c_char {
    use once_cell::sync::Lazy;
    use std::collections::HashMap;
    use std::ffi::CString;
    static NAMES: Lazy<HashMap<&'static str, CString>> = Lazy::new(|| {
        (1..=35)
            .filter_map(reject_reason_name)
            .map(|n| (n, CString::new(n).expect("no NUL in names")))
            .collect()
    });
    NAMES.get(name).map_or(std::ptr::null(), |c| c.as_ptr())
}

/// A host program's log sink (see `cmsafe_set_log_callback`).
#[allow(non_camel_case_types)]
pub type cmsafe_log_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, level: c_int, message: *const c_char)>;

/// Routes cmsafe's log messages to `callback(user_data, level, message)` instead of stderr;
/// NULL `callback` restores stderr. `level` is 1 error, 2 warning, 3 info, 4 debug, 5 trace;
/// `message` is NUL-terminated and valid during the call only.
///
/// Threads: the callback may be called from any thread that calls cmsafe, concurrently; it must
/// not block for long. Safe to call at any time.
#[no_mangle]
pub extern "C" fn cmsafe_set_log_callback(callback: cmsafe_log_callback, user_data: *mut c_void) {
    guard!((), {
        logging::set_callback(callback, user_data);
    })
}

/// Sets the most detailed level logged: 0 off, 1 error, 2 warning (the default), 3 info,
/// 4 debug, 5 trace. Overrides the CMSAFE_LOG environment variable (same names: off, error,
/// warn, info, debug, trace), read at the first cmsafe call.
///
/// Threads: any. Returns 0, or -1 with errno EINVAL for another number.
#[no_mangle]
pub extern "C" fn cmsafe_set_log_level(level: c_int) -> c_int {
    guard!(fail(libc::EIO), {
        match logging::level_filter_from_c(level) {
            Some(filter) => {
                logging::set_level(filter);
                0
            }
            None => fail(libc::EINVAL),
        }
    })
}

/// Process-wide counters (see `cmsafe_stats_get`).
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct cmsafe_stats {
    /// Events fetched from librdmacm and copied.
    pub fetched: u64,
    /// Calls to `rdma_ack_cm_event(3)` made by cmsafe (one per fetched event).
    pub acked: u64,
    /// Event copies whose last reference was released.
    pub released: u64,
    /// Event copies still referenced.
    pub live_events: u64,
    /// Private data buffers still referenced, by an event or on their own.
    pub live_buffers: u64,
    /// Events fetched but not yet copied because an allocation failed; the next fetch on their
    /// channel returns them. Nothing is acked or lost meanwhile.
    pub pending: u64,
    /// Allocations that failed (real, or injected with `cmsafe_debug_fail_alloc`).
    pub alloc_failures: u64,
    /// Events fetched by `enum rdma_cm_event_type` (index = type); the last entry counts types
    /// this version does not know.
    pub by_type: [u64; EVENT_TYPE_SLOTS],
}

/// Copies the process-wide counters into `*out`; tests use them to prove nothing leaks
/// (live_events, live_buffers and pending back to 0; acked == fetched).
///
/// NULL: fails with EINVAL. Threads: any; the counters are read one by one, so a snapshot taken
/// while other threads fetch may be slightly inconsistent.
/// Returns 0, or -1 with errno EINVAL.
#[no_mangle]
pub extern "C" fn cmsafe_stats_get(out: *mut cmsafe_stats) -> c_int {
    guard!(fail(libc::EIO), {
        if out.is_null() {
            return fail(libc::EINVAL);
        }
        let s = cmsafe_core::snapshot::snapshot();
        // SAFETY: `out` is not NULL and points to writable storage per the contract.
        unsafe {
            out.write(cmsafe_stats {
                fetched: s.fetched,
                acked: s.acked,
                released: s.released,
                live_events: s.live_events,
                live_buffers: s.live_buffers,
                pending: s.pending,
                alloc_failures: s.alloc_failures,
                by_type: s.by_type,
            })
        };
        0
    })
}

/// Test hook: makes one future allocation fail, to exercise the ENOMEM path. The allocation
/// after `skip` successful ones fails (0: the next one); a negative `skip` disarms. The
/// allocations of a fetch are: the channel's state (first fetch on a channel only), then the
/// event (one allocation, which holds its private data too).
///
/// Not for production use. Threads: process-wide; any.
#[no_mangle]
pub extern "C" fn cmsafe_debug_fail_alloc(skip: i64) {
    guard!((), {
        cmsafe_core::fault::arm(skip);
    })
}
