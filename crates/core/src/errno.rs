//! errno, the currency of the C API: the one place cmsafe, its C ABI and the preload read and
//! write the calling thread's errno.

/// An errno value.
pub type Errno = i32;

/// The calling thread's errno.
#[inline]
pub fn get() -> Errno {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid; reading it
    // is async-signal-safe (the preload's SIGSEGV handler saves it).
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's errno.
#[inline]
pub fn set(value: Errno) {
    // SAFETY: as in `get`; writing the slot is async-signal-safe too.
    unsafe { *libc::__errno_location() = value };
}

#[cfg(test)]
mod tests {
    #[test]
    fn set_is_what_get_and_std_read() {
        super::set(libc::ETIMEDOUT);
        assert_eq!(super::get(), libc::ETIMEDOUT);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ETIMEDOUT)
        );
        super::set(0);
        assert_eq!(super::get(), 0);
    }
}
