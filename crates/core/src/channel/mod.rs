//! The safe Rust API: an event channel whose fetches return owned, already-acked events.

mod fetch;
mod lock;
mod state;

use std::io;
use std::ptr::NonNull;
use std::time::Duration;

pub use crate::errno::Errno;
pub use fetch::Wait;
pub use fetch::{fetch_batch, fetch_one};
pub(crate) use state::pending_events;

use crate::cm::{rdma_create_event_channel, rdma_destroy_event_channel, rdma_event_channel};
use crate::event::Event;

/// An RDMA CM event channel (`rdma_create_event_channel(3)`).
pub struct EventChannel {
    raw: NonNull<rdma_event_channel>,
    owned: bool,
}

// SAFETY: an event channel is a file descriptor; the kernel hands each event to exactly one
// reader, and cmsafe serializes its own readers per channel.
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

fn err(errno: Errno) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

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

    /// The next event, copied, with the original already acked. Blocks like
    /// `rdma_get_cm_event(3)`; on a non-blocking channel fails with `WouldBlock` when nothing
    /// is queued.
    pub fn get_event(&self) -> io::Result<Event> {
        // SAFETY: `self.raw` is live by construction.
        unsafe { fetch_one(self.as_raw(), Wait::AsChannel) }.map_err(err)
    }

    /// The next event within `timeout` (`None`: no limit); `TimedOut` when none came.
    pub fn get_event_timeout(&self, timeout: Option<Duration>) -> io::Result<Event> {
        let wait = timeout.map_or(Wait::Forever, |d| Wait::Millis(d.as_millis() as u64));
        // SAFETY: `self.raw` is live by construction.
        unsafe { fetch_one(self.as_raw(), wait) }.map_err(err)
    }

    /// Waits up to `timeout` for a first event, then takes what is already queued, up to `max`.
    /// Empty when none came in time.
    pub fn get_events(&self, max: usize, timeout: Option<Duration>) -> io::Result<Vec<Event>> {
        let wait = timeout.map_or(Wait::Forever, |d| Wait::Millis(d.as_millis() as u64));
        let mut out = Vec::new();
        // SAFETY: `self.raw` is live by construction.
        unsafe { fetch_batch(self.as_raw(), max, wait, |ev| out.push(ev)) }.map_err(err)?;
        Ok(out)
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        if self.owned {
            // The address (and fd) may be reused by a channel with other flags.
            if let Some(state) = state::existing(self.as_raw()) {
                state.forget_mode();
            }
            // SAFETY: we created it and nothing else destroys it.
            unsafe { rdma_destroy_event_channel(self.raw.as_ptr()) };
        }
    }
}
