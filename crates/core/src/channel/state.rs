//! What cmsafe remembers per event channel: an event librdmacm handed out that could not be
//! copied yet (allocation failure), the lock cmsafe's readers hold across a fetch, and whether
//! the channel's fd is O_NONBLOCK.
//!
//! States are keyed by the channel's address and never freed: a handful of bytes per channel
//! the process ever used, and no lifetime to get wrong when a channel is destroyed.

use std::alloc::{alloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use super::lock::{Deadline, TimedGuard, TimedMutex};
use crate::cm::{rdma_cm_event, rdma_event_channel};
use crate::errno::Errno;
use crate::fault;
use crate::pool::AllocError;
use crate::stats::COUNTERS;
use crate::PtrMap;

/// An event fetched from librdmacm and not acked yet.
pub(crate) struct RawEvent(pub *mut rdma_cm_event);

// SAFETY: a librdmacm event may be acked from any thread (it is a heap block plus a mutex-guarded
// counter on its id).
unsafe impl Send for RawEvent {}

pub(crate) struct ChannelState {
    /// Held across a whole fetch; holds the event waiting to be copied.
    pending: TimedMutex<Option<RawEvent>>,
    /// The fd's O_NONBLOCK flag as last learned, with the fd it was learned on:
    /// `fd << 2 | KNOWN | NONBLOCKING`, 0 when not known.
    mode: AtomicU64,
}

const KNOWN: u64 = 1;
const NONBLOCKING: u64 = 2;

impl ChannelState {
    pub(crate) fn lock(
        &self,
        deadline: Deadline,
    ) -> Result<TimedGuard<'_, Option<RawEvent>>, Errno> {
        self.pending.lock(deadline)
    }

    /// Whether `fd` (this channel's) is O_NONBLOCK: remembered once learned, so only the first
    /// call on a channel (or on a new fd at the same address) reads it with fcntl(2).
    pub(crate) fn nonblocking(&self, fd: i32) -> Result<bool, Errno> {
        if let Some(known) = self.nonblocking_if_known(fd) {
            return Ok(known);
        }
        // SAFETY: F_GETFL reads the flags of any descriptor; a bad one fails with EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(crate::errno::get());
        }
        let nonblocking = flags & libc::O_NONBLOCK != 0;
        self.remember(fd, nonblocking);
        Ok(nonblocking)
    }

    /// The fd's O_NONBLOCK flag if already known, without a system call.
    pub(crate) fn nonblocking_if_known(&self, fd: i32) -> Option<bool> {
        let mode = self.mode.load(Ordering::Relaxed);
        (mode & KNOWN != 0 && mode >> 2 == fd as u32 as u64).then_some(mode & NONBLOCKING != 0)
    }

    /// Records what a fetch proved: `rdma_get_cm_event` failing with EAGAIN means O_NONBLOCK.
    pub(crate) fn remember(&self, fd: i32, nonblocking: bool) {
        let flag = if nonblocking { NONBLOCKING } else { 0 };
        self.mode
            .store((fd as u32 as u64) << 2 | KNOWN | flag, Ordering::Relaxed);
    }

    /// Forgets the fd's mode: the channel is being destroyed (its address may be reused).
    pub(crate) fn forget_mode(&self) {
        self.mode.store(0, Ordering::Relaxed);
    }
}

static STATES: RwLock<Option<PtrMap<usize, &'static ChannelState>>> = RwLock::new(None);
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

/// The state of `ch` if cmsafe ever fetched from it.
pub(crate) fn existing(ch: *mut rdma_event_channel) -> Option<&'static ChannelState> {
    STATES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&(ch as usize)).copied())
}

/// The state of `ch`, created on first use; fails only when memory cannot be had.
pub(crate) fn state_of(ch: *mut rdma_event_channel) -> Result<&'static ChannelState, AllocError> {
    let key = ch as usize;
    if let Some(state) = existing(ch) {
        return Ok(state);
    }
    let mut states = STATES.write().unwrap_or_else(|e| e.into_inner());
    let map = states.get_or_insert_with(PtrMap::default);
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
            pending: TimedMutex::new(None),
            mode: AtomicU64::new(0),
        });
        &*ptr
    };
    map.insert(key, state);
    Ok(state)
}
