//! The system's page size, read once. mprotect(2) works on whole pages at page-aligned
//! addresses, and the page is not 4096 bytes everywhere: arm64 kernels are built with 4K, 16K or
//! 64K pages (4K in Debian's, 16K on Apple silicon, 64K in some distributions').

use std::sync::atomic::{AtomicUsize, Ordering};

/// Taken when sysconf(3) gives no page size: the largest arm64 page, so that offsets and
/// lengths that are multiples of it stay aligned for every smaller page too.
pub const FALLBACK: usize = 64 << 10;

static SIZE: AtomicUsize = AtomicUsize::new(0);

/// The page size in bytes: sysconf(_SC_PAGESIZE), asked on the first call. After that one
/// atomic load, which a signal handler may do.
/// Inlined into the preload's event path: the load and its test, the first call out of line.
#[inline]
pub fn size() -> usize {
    // Relaxed: every thread finds the same value; two first calls at once only ask twice.
    let s = SIZE.load(Ordering::Relaxed);
    if s != 0 {
        return s;
    }
    ask()
}

#[cold]
#[inline(never)]
fn ask() -> usize {
    // SAFETY: sysconf(3) reads a constant of the process (the kernel's AT_PAGESZ).
    let s = from_sysconf(unsafe { libc::sysconf(libc::_SC_PAGESIZE) });
    SIZE.store(s, Ordering::Relaxed);
    s
}

/// sysconf's answer as a page size: a power of two of at least 4096 bytes, else [`FALLBACK`].
fn from_sysconf(v: libc::c_long) -> usize {
    match usize::try_from(v) {
        Ok(s) if s >= 4096 && s.is_power_of_two() => s,
        _ => FALLBACK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_page_size_linux_has_is_taken_as_it_is() {
        assert_eq!(from_sysconf(4096), 4096);
        assert_eq!(from_sysconf(16384), 16384);
        assert_eq!(from_sysconf(65536), 65536);
    }

    #[test]
    fn no_usable_answer_gives_the_largest_arm64_page() {
        assert_eq!(from_sysconf(-1), 65536);
        assert_eq!(from_sysconf(0), 65536);
        assert_eq!(from_sysconf(2048), 65536);
        assert_eq!(from_sysconf(12288), 65536);
    }

    #[test]
    fn the_size_is_the_kernels() {
        // SAFETY: as in `size`.
        let asked = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert_eq!(size() as libc::c_long, asked);
        assert_eq!(size(), size());
        // x86-64 has 4K pages only.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(size(), 4096);
        // The size the kernel under test is known to have (make arm64-16k-test boots a 16K
        // one): this run must have found it, not only agreed with sysconf.
        if let Ok(want) = std::env::var("CMSAFE_TEST_PAGE_SIZE") {
            assert_eq!(size().to_string(), want, "CMSAFE_TEST_PAGE_SIZE");
        }
    }
}
