//! Fetch, copy, ack: the one path every cmsafe event takes.
//!
//! Readers wait in poll(2) on the channel's fd without any lock, then take the channel's lock,
//! check again that an event is queued and fetch it; so a timed wait never blocks inside
//! rdma_get_cm_event behind another cmsafe reader, and each event goes to exactly one reader.
//! If the copy cannot be allocated, the event is neither acked nor dropped: it waits in the
//! channel's state and the next fetch on that channel returns it.

use std::io;

use super::state::{self, RawEvent};
use crate::cm::{rdma_ack_cm_event, rdma_cm_event, rdma_event_channel, rdma_get_cm_event};
use crate::event::{monotonic_ns, Event};
use crate::stats::COUNTERS;

/// How long a fetch may wait for the first event.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// Until an event arrives (or a signal interrupts the wait).
    Forever,
    /// At most this many milliseconds.
    Millis(u64),
}

impl Wait {
    /// The C convention: negative waits forever, 0 takes only what is queued.
    pub fn from_timeout_ms(timeout_ms: i32) -> Wait {
        if timeout_ms < 0 {
            Wait::Forever
        } else {
            Wait::Millis(timeout_ms as u64)
        }
    }
}

/// Errors as errno values, the currency of the C API.
pub(crate) type Errno = i32;

fn last_errno() -> Errno {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One event from `ch`, waiting as `wait` says; ETIMEDOUT when none came in time.
///
/// # Safety
/// `ch` is a live event channel.
pub(crate) unsafe fn fetch_one(ch: *mut rdma_event_channel, wait: Wait) -> Result<Event, Errno> {
    let state = state::state_of(ch).map_err(|_| libc::ENOMEM)?;
    // SAFETY: `ch` is live; its fd is the channel's file descriptor.
    let fd = unsafe { (*ch).fd };
    let deadline = match wait {
        Wait::Forever => None,
        Wait::Millis(ms) => Some(monotonic_ns().saturating_add(ms.saturating_mul(1_000_000))),
    };
    loop {
        {
            let mut slot = state.lock();
            if let Some(raw) = state::unstash(&mut slot) {
                // SAFETY: a stashed event is unacked librdmacm memory.
                return unsafe { copy_and_ack(raw, &mut slot) };
            }
            if poll_readable(fd, 0)? {
                let mut raw: *mut rdma_cm_event = std::ptr::null_mut();
                // SAFETY: `ch` is live, `raw` a valid out pointer.
                if unsafe { rdma_get_cm_event(ch, &mut raw) } == 0 {
                    // SAFETY: just returned by librdmacm, unacked.
                    return unsafe { copy_and_ack(RawEvent(raw), &mut slot) };
                }
                match last_errno() {
                    // librdmacm consumed the kernel event itself (cma.c discards some) and the
                    // channel is non-blocking: nothing for us after all.
                    libc::EAGAIN => {}
                    e => return Err(e),
                }
            }
        }
        let wait_ms = match deadline {
            None => -1,
            Some(d) => {
                let now = monotonic_ns();
                if now >= d {
                    return Err(libc::ETIMEDOUT);
                }
                // Round up, so the wait is never shorter than asked.
                ((d - now).div_ceil(1_000_000)).min(i32::MAX as u64) as i32
            }
        };
        poll_readable(fd, wait_ms)?;
    }
}

/// Up to `max` events: waits as `wait` says for the first, then takes what is already queued
/// without waiting again. Returns how many `sink` received; 0 when none came in time. An error
/// after the first event ends the batch early and is left for the next call to report (an event
/// that could not be copied stays queued in the channel's state).
///
/// # Safety
/// `ch` is a live event channel.
pub(crate) unsafe fn fetch_batch(
    ch: *mut rdma_event_channel,
    max: usize,
    wait: Wait,
    mut sink: impl FnMut(Event),
) -> Result<usize, Errno> {
    // SAFETY: forwarded from the caller.
    match unsafe { fetch_one(ch, wait) } {
        Ok(ev) => sink(ev),
        Err(libc::ETIMEDOUT) => return Ok(0),
        Err(e) => return Err(e),
    }
    let mut n = 1;
    while n < max {
        // SAFETY: forwarded from the caller.
        match unsafe { fetch_one(ch, Wait::Millis(0)) } {
            Ok(ev) => sink(ev),
            Err(_) => break,
        }
        n += 1;
    }
    Ok(n)
}

/// Copies `raw` and acks it; if the copy fails, puts `raw` back in `slot` unacked.
///
/// # Safety
/// `raw` is an unacked event from `rdma_get_cm_event`.
unsafe fn copy_and_ack(raw: RawEvent, slot: &mut Option<RawEvent>) -> Result<Event, Errno> {
    // SAFETY: forwarded from the caller.
    match unsafe { Event::copy_of(raw.0) } {
        Ok(event) => {
            // SAFETY: acked exactly once, after the copy.
            if unsafe { rdma_ack_cm_event(raw.0) } == 0 {
                COUNTERS
                    .acked
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            } else {
                // Only a NULL event makes rdma_ack_cm_event fail.
                log::error!("rdma_ack_cm_event failed: {}", io::Error::last_os_error());
            }
            Ok(event)
        }
        Err(_) => {
            log::warn!("cmsafe: no memory to copy an event; it stays queued for the next fetch");
            state::stash(slot, raw);
            Err(libc::ENOMEM)
        }
    }
}

/// Whether `fd` is readable within `timeout_ms` (negative: no limit). EINTR is an error: a
/// signal must not shorten a wait silently.
fn poll_readable(fd: i32, timeout_ms: i32) -> Result<bool, Errno> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut pfd, 1, timeout_ms) } {
        n if n < 0 => Err(last_errno()),
        0 => Ok(false),
        _ if pfd.revents & libc::POLLNVAL != 0 => Err(libc::EBADF),
        _ => Ok(true),
    }
}

/// Whether the channel's fd is O_NONBLOCK.
///
/// # Safety
/// `ch` is a live event channel.
pub(crate) unsafe fn is_nonblocking(ch: *mut rdma_event_channel) -> Result<bool, Errno> {
    // SAFETY: `ch` is live.
    let flags = unsafe { libc::fcntl((*ch).fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(last_errno());
    }
    Ok(flags & libc::O_NONBLOCK != 0)
}
