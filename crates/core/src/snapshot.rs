//! A snapshot of the statistics: the counters of `stats`, and what is derived from the pools
//! and channels (live copies, pending events) rather than counted on the copy path.

use std::sync::atomic::Ordering::Relaxed;

use crate::stats::{by_type, Stats, COUNTERS};

/// The counters now.
pub fn snapshot() -> Stats {
    // Every copy takes a sequence number, and a copy not live any more was released.
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
        by_type: by_type(),
    }
}
