//! The preload's own memory, apart from the program's malloc.
//!
//! A program's signal handler may call exit(3) (a service's SIGTERM handler often does) while
//! the thread it interrupted is inside malloc, holding the arena's lock: without the preload,
//! exit allocates nothing and gets through; the preload's exit handler, which says the summary,
//! allocates. So everything the preload allocates comes from here: blocks of a few sizes carved
//! from mappings of its own, each size behind a fork-safe lock of its own, which the exit and
//! fork paths can tell they interrupted (`held_here`) and never wait for. Blocks are reused,
//! never given back: the preload's tables are bounded (docs/preload.md, "Memory"), so this is
//! bounded too. Blocks above the largest size are mappings of their own.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use cmsafe_core::fork_lock::ForkSafeMutex;

/// Block sizes, each a power of two: a block of one is aligned to its size (up to a page).
const SIZES: [usize; 13] = [
    16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
];
/// Bytes mapped at once for a size's blocks.
const CHUNK: usize = 256 * 1024;

/// A size's free blocks (a list through their first word) and what is left of its last chunk.
struct Blocks {
    free: usize,
    next: usize,
    end: usize,
}

// SAFETY: the addresses are of memory only this allocator hands out, under the lock.
unsafe impl Send for Blocks {}

static CLASSES: [ForkSafeMutex<Blocks>; SIZES.len()] = [const {
    ForkSafeMutex::new(Blocks {
        free: 0,
        next: 0,
        end: 0,
    })
}; SIZES.len()];

/// The index of the smallest size that holds `layout`, None for the largest blocks.
fn class(layout: &Layout) -> Option<usize> {
    let need = layout.size().max(layout.align());
    SIZES.iter().position(|&s| s >= need)
}

/// Bytes mapped for the preload's blocks now, and the most there ever were: its tables' memory,
/// said in the exit summary. Chunks are never given back, so only the blocks of their own (the
/// largest) make the two differ.
static MAPPED: AtomicUsize = AtomicUsize::new(0);
static MOST: AtomicUsize = AtomicUsize::new(0);

fn map(len: usize) -> usize {
    let at = cmsafe_core::mapping::Mapping::new(len).map_or(0, |m| m.leak() as usize);
    if at != 0 {
        // Relaxed: figures for the exit summary, ordered with nothing else.
        let now = MAPPED.fetch_add(len, Ordering::Relaxed) + len;
        MOST.fetch_max(now, Ordering::Relaxed);
    }
    at
}

/// The most bytes the preload's allocator had mapped at once.
pub fn mapped_most() -> usize {
    MOST.load(Ordering::Relaxed)
}

/// Rounds `len` up to whole pages.
fn pages(len: usize) -> usize {
    let page = cmsafe_core::page::size();
    len.div_ceil(page) * page
}

pub struct Allocator;

// SAFETY: each block is handed out once until it is given back (a free list per size, under
// that size's lock), aligned as its layout asks (a power-of-two block at a multiple of its size
// from a page-aligned chunk, or a page-aligned mapping).
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(&layout) else {
            if layout.align() > cmsafe_core::page::size() {
                return std::ptr::null_mut();
            }
            return map(pages(layout.size())) as *mut u8;
        };
        let size = SIZES[c];
        let mut b = CLASSES[c].lock();
        if b.free != 0 {
            let block = b.free;
            // SAFETY: a free block's first word is the next free block's address.
            b.free = unsafe { *(block as *const usize) };
            return block as *mut u8;
        }
        if b.next + size > b.end {
            let chunk = map(CHUNK.max(size));
            if chunk == 0 {
                return std::ptr::null_mut();
            }
            b.next = chunk;
            b.end = chunk + CHUNK.max(size);
        }
        let block = b.next;
        b.next += size;
        block as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(c) = class(&layout) else {
            // SAFETY: a mapping of its own, of this length (`alloc`).
            unsafe { libc::munmap(ptr.cast(), pages(layout.size())) };
            MAPPED.fetch_sub(pages(layout.size()), Ordering::Relaxed);
            return;
        };
        let mut b = CLASSES[c].lock();
        // SAFETY: the block is ours and free now: its first word links the list.
        unsafe { *(ptr as *mut usize) = b.free };
        b.free = ptr as usize;
    }
}

/// Whether the calling thread is inside the allocator (a signal handler that interrupted it).
pub fn held_here() -> bool {
    CLASSES.iter().any(|c| c.held_here())
}

/// For the pthread_atfork handlers (lifecycle.rs): taken last before a fork, released first
/// after, so that the other tables' resets in the child can free what they hold.
pub fn lock_for_fork() {
    CLASSES.iter().for_each(|c| c.lock_for_fork());
}

pub fn unlock_after_fork() {
    CLASSES.iter().rev().for_each(|c| c.unlock_after_fork());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_reused_and_apart() {
        let a = Allocator;
        let l = Layout::from_size_align(24, 8).unwrap();
        // SAFETY: allocations of a valid layout, given back with it.
        unsafe {
            let p = a.alloc(l);
            let q = a.alloc(l);
            assert!(!p.is_null() && !q.is_null());
            assert_eq!(p as usize % 32, 0, "a 32-byte block");
            assert!((p as usize).abs_diff(q as usize) >= 32, "apart");
            p.write_bytes(0xab, 24);
            let big = Layout::from_size_align(200_000, 4096).unwrap();
            let m = a.alloc(big);
            assert_eq!(m as usize % 4096, 0);
            m.write_bytes(1, 200_000);
            assert!(mapped_most() >= 200_000, "a block of its own is counted");
            a.dealloc(m, big);
            let aligned = Layout::from_size_align(8, 256).unwrap();
            let r = a.alloc(aligned);
            assert_eq!(r as usize % 256, 0);
            a.dealloc(r, aligned);
            a.dealloc(q, l);
            a.dealloc(p, l);
            // Given back, a block is handed out again: among the next few of its size (other
            // tests' threads allocate meanwhile).
            let again: Vec<*mut u8> = (0..64).map(|_| a.alloc(l)).collect();
            assert!(again.contains(&p) || again.contains(&q));
            again.into_iter().for_each(|b| a.dealloc(b, l));
        }
        assert!(!held_here());
    }
}
