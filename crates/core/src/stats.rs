//! Process-wide counters: what was fetched, acked and released, and what is still alive.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Event types counted one by one: the 20 of rdma-core 60's header (ADDR_RESOLVED ..
/// TIMEWAIT_EXIT, then ADDRINFO_RESOLVED, ADDRINFO_ERROR, USER and INTERNAL).
pub(crate) const EVENT_TYPES: usize = 20;
/// Entries in the per-type counters: one per known type, and one for unknown types.
pub const EVENT_TYPE_SLOTS: usize = 21;
const _: () = assert!(EVENT_TYPE_SLOTS == EVENT_TYPES + 1);

pub(crate) struct Counters {
    pub acked: AtomicU64,
    pub alloc_failures: AtomicU64,
    pub by_type: [AtomicU64; EVENT_TYPE_SLOTS],
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);

pub(crate) static COUNTERS: Counters = Counters {
    acked: ZERO,
    alloc_failures: ZERO,
    by_type: [ZERO; EVENT_TYPE_SLOTS],
};

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events fetched from librdmacm and copied.
    pub fetched: u64,
    /// Calls to `rdma_ack_cm_event` made by cmsafe.
    pub acked: u64,
    /// Event copies whose last reference was released.
    pub released: u64,
    /// Event copies still referenced.
    pub live_events: u64,
    /// Private data buffers still referenced (by an event or on their own).
    pub live_buffers: u64,
    /// Events fetched from librdmacm but not yet copied because an allocation failed;
    /// each is returned by the next fetch on its channel.
    pub pending: u64,
    /// Allocations that failed (real or injected).
    pub alloc_failures: u64,
    /// Events fetched, by `enum rdma_cm_event_type`; the last entry counts unknown types.
    pub by_type: [u64; EVENT_TYPE_SLOTS],
}

/// One thread's per-type counts. Only its thread writes them (a load and a store, no locked
/// read-modify-write on the copy path); a snapshot adds up every block. When the thread ends,
/// its block waits for the next new thread, counts and all: the sum stays right.
struct TypeBlock {
    by_type: [AtomicU64; EVENT_TYPE_SLOTS],
}

/// Every block ever made (they are never freed), and the ones whose thread ended.
static BLOCKS: Mutex<Vec<&'static TypeBlock>> = Mutex::new(Vec::new());
static SPARE: Mutex<Vec<&'static TypeBlock>> = Mutex::new(Vec::new());

/// A thread's per-type counters, kept in its thread-local block; handed back to SPARE when the
/// thread ends.
pub(crate) struct TypeCounts(Cell<Option<&'static TypeBlock>>);

impl TypeCounts {
    pub(crate) const fn new() -> Self {
        TypeCounts(Cell::new(None))
    }

    /// Counts one event of type `t`.
    pub(crate) fn count(&self, t: u32) {
        let i = (t as usize).min(EVENT_TYPES);
        let block = match self.0.get() {
            Some(b) => b,
            None => match new_block() {
                Some(b) => {
                    self.0.set(Some(b));
                    b
                }
                // No memory for a block: the shared counter.
                None => return count_type_shared(t),
            },
        };
        let c = &block.by_type[i];
        c.store(c.load(Relaxed) + 1, Relaxed);
    }
}

impl Drop for TypeCounts {
    fn drop(&mut self) {
        if let Some(block) = self.0.take() {
            // Capacity for every block was reserved when it was made: this never allocates.
            lock(&SPARE).push(block);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A block for a thread that has none: a spare one, or a new one; None when memory is short.
fn new_block() -> Option<&'static TypeBlock> {
    if let Some(block) = lock(&SPARE).pop() {
        return Some(block);
    }
    let mut blocks = lock(&BLOCKS);
    // Room for this block in both lists, so that a thread's end never allocates.
    blocks.try_reserve(1).ok()?;
    let need = blocks.len() + 1;
    {
        let mut spare = lock(&SPARE);
        let more = need.saturating_sub(spare.len());
        spare.try_reserve(more).ok()?;
    }
    let layout = std::alloc::Layout::new::<TypeBlock>();
    // SAFETY: a non-zero-sized layout; all-zero bytes are valid AtomicU64s.
    let block = unsafe { std::alloc::alloc_zeroed(layout) } as *const TypeBlock;
    // SAFETY: NULL or a fresh, zeroed, suitably aligned block, leaked on purpose (blocks are
    // reused, never freed, so a snapshot may always read them).
    let block: &'static TypeBlock = unsafe { block.as_ref() }?;
    blocks.push(block);
    Some(block)
}

/// Counts one event of type `t` where a thread has no block (its thread-locals are gone).
pub(crate) fn count_type_shared(t: u32) {
    COUNTERS.by_type[(t as usize).min(EVENT_TYPES)].fetch_add(1, Relaxed);
}

/// Events counted by type so far, over every thread.
pub(crate) fn by_type() -> [u64; EVENT_TYPE_SLOTS] {
    let mut by_type = [0; EVENT_TYPE_SLOTS];
    for (out, c) in by_type.iter_mut().zip(COUNTERS.by_type.iter()) {
        *out = c.load(Relaxed);
    }
    for block in lock(&BLOCKS).iter() {
        for (out, c) in by_type.iter_mut().zip(block.by_type.iter()) {
            *out += c.load(Relaxed);
        }
    }
    by_type
}
