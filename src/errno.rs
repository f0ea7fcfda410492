//! errno as C callers see it.

/// Sets the calling thread's errno.
pub(crate) fn set(value: i32) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = value };
}
