//! What cmsafe remembers per event channel: an event librdmacm handed out that could not be
//! copied yet (allocation failure), and the lock that makes "readable, then fetch" atomic among
//! cmsafe's readers.
//!
//! States are keyed by the channel's address and never freed: a handful of bytes per channel
//! the process ever used, and no lifetime to get wrong when a channel is destroyed.

use std::alloc::{alloc, Layout};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};

use crate::cm::{rdma_cm_event, rdma_event_channel};
use crate::fault;
use crate::pool::AllocError;
use crate::stats::COUNTERS;

/// An event fetched from librdmacm and not acked yet.
pub(crate) struct RawEvent(pub *mut rdma_cm_event);

// SAFETY: a librdmacm event may be acked from any thread (it is a heap block plus a mutex-guarded
// counter on its id).
unsafe impl Send for RawEvent {}

pub(crate) struct ChannelState {
    /// Held while checking readability and fetching; holds the event waiting to be copied.
    pending: Mutex<Option<RawEvent>>,
}

impl ChannelState {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<RawEvent>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

static STATES: RwLock<Option<HashMap<usize, &'static ChannelState>>> = RwLock::new(None);
static PENDING: AtomicU64 = AtomicU64::new(0);

/// Events waiting in some channel's state.
pub(crate) fn pending_events() -> u64 {
    PENDING.load(Ordering::Relaxed)
}

pub(crate) fn stash(slot: &mut Option<RawEvent>, raw: RawEvent) {
    debug_assert!(slot.is_none());
    *slot = Some(raw);
    PENDING.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn unstash(slot: &mut Option<RawEvent>) -> Option<RawEvent> {
    let raw = slot.take();
    if raw.is_some() {
        PENDING.fetch_sub(1, Ordering::Relaxed);
    }
    raw
}

/// The state of `ch`, created on first use; fails only when memory cannot be had.
pub(crate) fn state_of(ch: *mut rdma_event_channel) -> Result<&'static ChannelState, AllocError> {
    let key = ch as usize;
    if let Some(state) = STATES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&key))
    {
        return Ok(state);
    }
    let mut states = STATES.write().unwrap_or_else(|e| e.into_inner());
    let map = states.get_or_insert_with(HashMap::new);
    if let Some(state) = map.get(&key) {
        return Ok(state);
    }
    if fault::should_fail() || map.try_reserve(1).is_err() {
        COUNTERS.alloc_failures.fetch_add(1, Ordering::Relaxed);
        return Err(AllocError);
    }
    let layout = Layout::new::<ChannelState>();
    // SAFETY: a non-zero-sized layout.
    let ptr = unsafe { alloc(layout) } as *mut ChannelState;
    if ptr.is_null() {
        COUNTERS.alloc_failures.fetch_add(1, Ordering::Relaxed);
        return Err(AllocError);
    }
    // SAFETY: freshly allocated for exactly this type; leaked on purpose (see the module doc).
    let state: &'static ChannelState = unsafe {
        ptr.write(ChannelState {
            pending: Mutex::new(None),
        });
        &*ptr
    };
    map.insert(key, state);
    Ok(state)
}
