//! The safe Rust API: an event channel whose `get_event` returns an owned, already-acked event.

use std::io;
use std::ptr::NonNull;

use crate::cm::{
    rdma_ack_cm_event, rdma_cm_event, rdma_create_event_channel, rdma_destroy_event_channel,
    rdma_event_channel, rdma_get_cm_event,
};
use crate::event::Event;

/// An RDMA CM event channel (`rdma_create_event_channel(3)`).
pub struct EventChannel {
    raw: NonNull<rdma_event_channel>,
    owned: bool,
}

// SAFETY: librdmacm's event channel is a file descriptor; the kernel hands each event to exactly
// one reader, and librdmacm takes no per-channel state in rdma_get_cm_event.
unsafe impl Send for EventChannel {}
// SAFETY: as above: concurrent rdma_get_cm_event calls on one channel are allowed.
unsafe impl Sync for EventChannel {}

impl EventChannel {
    /// Creates a channel, destroyed on drop.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain librdmacm call; NULL with errno on failure.
        let raw = unsafe { rdma_create_event_channel() };
        NonNull::new(raw)
            .map(|raw| EventChannel { raw, owned: true })
            .ok_or_else(io::Error::last_os_error)
    }

    /// Borrows a channel the caller owns; dropping the result leaves it alone.
    ///
    /// # Safety
    /// `raw` is a live event channel that outlives the returned value.
    pub unsafe fn from_raw(raw: NonNull<rdma_event_channel>) -> Self {
        EventChannel { raw, owned: false }
    }

    pub fn as_raw(&self) -> *mut rdma_event_channel {
        self.raw.as_ptr()
    }

    /// Blocks like `rdma_get_cm_event(3)`, copies the event and acks the original before
    /// returning, so the copy never depends on librdmacm's memory and the id is never left
    /// waiting on this event.
    pub fn get_event(&self) -> io::Result<Event> {
        // SAFETY: `self.raw` is a live channel by construction.
        unsafe { get_event_raw(self.raw.as_ptr()) }
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: we created it and nothing else destroys it.
            unsafe { rdma_destroy_event_channel(self.raw.as_ptr()) };
        }
    }
}

/// Fetch, copy, ack.
///
/// # Safety
/// `ch` is a live event channel.
pub(crate) unsafe fn get_event_raw(ch: *mut rdma_event_channel) -> io::Result<Event> {
    let mut raw: *mut rdma_cm_event = std::ptr::null_mut();
    // SAFETY: the caller guarantees `ch`; `raw` is a valid out pointer.
    if unsafe { rdma_get_cm_event(ch, &mut raw) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: librdmacm just returned `raw`, unacked.
    let event = unsafe { Event::copy_of(raw) };
    // SAFETY: `raw` came from rdma_get_cm_event and is acked exactly once, after the copy.
    if unsafe { rdma_ack_cm_event(raw) } != 0 {
        // rdma_ack_cm_event only fails for a NULL event: not reachable with a fetched one.
        log::error!("rdma_ack_cm_event failed: {}", io::Error::last_os_error());
    }
    Ok(event)
}
