//! The C ABI: `include/cmsafe.h` is generated from this module by cbindgen.
//!
//! Conventions, after rustls-ffi: every export is a plain `extern "C" fn` whose body runs inside
//! [`guard!`], so no panic unwinds into C; handles are opaque and checked (a released or foreign
//! handle is reported and aborts rather than corrupting memory); NULL is checked before any use;
//! out parameters are written only on success; failures return -1 (or NULL) with errno.

mod buf;
mod compat;
mod event;
mod fetch;
pub mod flight; // public for its constants, as the crate's ffi (lib.rs)
mod fork;
mod observe;
mod version;

/// Runs a body so that a panic becomes the function's documented failure value instead of
/// unwinding into C.
macro_rules! guard {
    ($fail:expr, $body:block) => {{
        ::cmsafe_core::logging::init();
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(value) => value,
            Err(_) => {
                ::log::error!("cmsafe: internal panic caught at the C boundary");
                $fail
            }
        }
    }};
}
pub(crate) use guard;

/// `-1` with errno, the librdmacm convention for failures.
pub(crate) fn fail(errno: i32) -> libc::c_int {
    cmsafe_core::errno::set(errno);
    -1
}

/// librdmacm's `private_data_len` is a `uint8_t`: private data never exceeds 255 bytes.
pub const MAX_PRIVATE_DATA: usize = 255;
// Spelled here for cbindgen, which emits no constant of a dependency; held to the core's.
const _: () = assert!(MAX_PRIVATE_DATA == cmsafe_core::event::MAX_PRIVATE_DATA);

/// Entries in the per-type counters: one per type of rdma-core 60+'s header (0 to 19: see
/// `enum rdma_cm_event_type`), and the last for numbers above.
pub const EVENT_TYPE_SLOTS: usize = 21;
const _: () = assert!(EVENT_TYPE_SLOTS == cmsafe_core::stats::EVENT_TYPE_SLOTS);

/// An owned, refcounted copy of one RDMA CM event (see `cmsafe_get_event`).
#[allow(non_camel_case_types)]
pub struct cmsafe_event {
    _private: [u8; 0],
}

/// An immutable, refcounted private data buffer (see `cmsafe_event_private_data`).
#[allow(non_camel_case_types)]
pub struct cmsafe_buf {
    _private: [u8; 0],
}
