//! Anonymous memory of the flight recorder's own, from mmap(2): a ring's (kept for good) and a
//! dump's index of the copies held (unmapped when the dump is done). Neither malloc nor a lock:
//! a misuse's abort path dumps.

use crate::errno::Errno;

/// A private anonymous mapping of `len` bytes, zeroed; unmapped when dropped.
pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain memory; what lives in it is shared through its own atomics (the ring) or not
// at all (a dump's index).
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` (> 0) bytes, zeroed; ENOMEM when the kernel has none.
    pub(crate) fn new(len: usize) -> Result<Mapping, Errno> {
        // SAFETY: an anonymous private mapping of our own.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(libc::ENOMEM);
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length, as asked for (the kernel rounds it up to whole pages).
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, of this length; whoever borrowed into it is gone with the
        // borrow of `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
