//! Anonymous memory of our own, from mmap(2), apart from the program's malloc: the flight
//! recorder's rings (kept for good) and a dump's index of the copies held (unmapped when the
//! dump is done), which a misuse's abort path uses; the preload's allocator's chunks (kept for
//! good). Neither malloc nor a lock.

use crate::errno::Errno;

/// A private anonymous mapping of `len` bytes, zeroed; unmapped when dropped.
pub struct Mapping {
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
    pub fn new(len: usize) -> Result<Mapping, Errno> {
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

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length, as asked for (the kernel rounds it up to whole pages).
    pub fn bytes(&self) -> usize {
        self.len
    }

    /// The memory, kept for the life of the process: never unmapped.
    pub fn leak(self) -> *mut u8 {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, of this length; whoever borrowed into it is gone with the
        // borrow of `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
