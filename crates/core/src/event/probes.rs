//! The API's USDT probes (docs/tracing.md): an event fetched and acked by `cmsafe_get_event` and
//! its kin, and a copy's last reference released. Their numbers are the flight recorder's (seq,
//! the fetch time, which is the ack time: the API acks in the call that fetches), so a trace and
//! a dump (`cmsafe_flight_dump(3)`) join on seq.
//!
//! They share one semaphore ([`crate::usdt`]): each call site tests it and only then calls the
//! cold code that fires. The release's probe is in this crate's release path, so the preload,
//! built on it, has it too: there it marks safe mode's copies, numbered by cmsafe's copies
//! rather than by the preload's report.

use crate::cm::rdma_cm_event;
use crate::usdt_fire;

use super::Event;

crate::usdt_semaphore!(
    /// Raised by tracers attached to any of the API's probes.
    SEMAPHORE
);

/// `event_fetched(seq, type, status, id, listen_id, fetch_ns)` and then
/// `event_acked(seq, type, status, id, fetch_ns, ack_ns)`: `event` was fetched and its original
/// acked in the same call (so `ack_ns` is `fetch_ns`, as the flight recorder says).
#[cold]
#[inline(never)]
pub fn fetched(event: &Event) {
    let cm: &rdma_cm_event = event.cm();
    let (seq, fetch_ns) = (event.seq(), event.fetched_ns());
    usdt_fire!(
        SEMAPHORE,
        cmsafe,
        event_fetched,
        seq,
        cm.event,
        cm.status,
        cm.id,
        cm.listen_id,
        fetch_ns
    );
    usdt_fire!(
        SEMAPHORE,
        cmsafe,
        event_acked,
        seq,
        cm.event,
        cm.status,
        cm.id,
        fetch_ns,
        fetch_ns
    );
}

/// `copy_released(seq, type, id, release_ns)`: the copy's last reference went (the event's, or
/// its private data buffer's), at `release_ns` on CLOCK_MONOTONIC.
#[cold]
#[inline(never)]
pub(crate) fn released(seq: u64, event_type: u32, id: usize) {
    if seq == 0 {
        // A buffer made on its own, of no event.
        return;
    }
    usdt_fire!(
        SEMAPHORE,
        cmsafe,
        copy_released,
        seq,
        event_type,
        id,
        crate::clock::monotonic_ns()
    );
}
