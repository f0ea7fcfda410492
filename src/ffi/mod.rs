//! The C ABI: `include/cmsafe.h` is generated from this module by cbindgen.
//!
//! Conventions, after rustls-ffi: every export is a plain `extern "C" fn` whose body runs inside
//! [`guard!`], so no panic unwinds into C; handles are opaque; NULL is checked before any use;
//! out parameters are written only on success.

mod event;
mod handle;


/// Runs a body so that a panic becomes the function's documented failure value instead of
/// unwinding into C.
macro_rules! guard {
    ($fail:expr, $body:block) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(value) => value,
            Err(_) => {
                ::log::error!("cmsafe: internal panic caught at the C boundary");
                $fail
            }
        }
    };
}
pub(crate) use guard;

/// `-1` with errno, the librdmacm convention for failures.
pub(crate) fn fail(errno: i32) -> libc::c_int {
    crate::errno::set(errno);
    -1
}
