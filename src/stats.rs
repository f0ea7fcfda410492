//! Process-wide counters: what was fetched, acked and released, and what is still alive.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Event types counted one by one; librdmacm 44 defines 16 (ADDR_RESOLVED .. TIMEWAIT_EXIT).
pub(crate) const EVENT_TYPES: usize = 16;
/// Entries in the per-type counters: one per known type, and one for unknown types.
pub const EVENT_TYPE_SLOTS: usize = 17;
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

pub(crate) fn count_type(t: u32) {
    let i = (t as usize).min(EVENT_TYPES);
    COUNTERS.by_type[i].fetch_add(1, Relaxed);
}

/// The counters now.
pub fn snapshot() -> Stats {
    let mut by_type = [0; EVENT_TYPE_SLOTS];
    for (out, c) in by_type.iter_mut().zip(COUNTERS.by_type.iter()) {
        *out = c.load(Relaxed);
    }
    // Derived rather than counted, to keep atomics off the copy path: every copy takes a
    // sequence number, and a copy not live any more was released.
    let live_events = crate::event::live_events();
    let fetched = crate::event::copied();
    Stats {
        fetched,
        acked: COUNTERS.acked.load(Relaxed),
        released: fetched.saturating_sub(live_events),
        live_events,
        live_buffers: crate::event::live_buffers(),
        pending: crate::channel::pending_events(),
        alloc_failures: COUNTERS.alloc_failures.load(Relaxed),
        by_type,
    }
}
