//! Fetch, copy, ack: the one path every cmsafe event takes.
//!
//! A reader holds its channel's lock across the whole fetch (wait, `rdma_get_cm_event`, copy,
//! ack), so each event goes to exactly one reader and a reader that polled the fd readable is
//! the one that fetches: it never blocks inside `rdma_get_cm_event` behind another cmsafe
//! reader. Readers with a timeout wait for the lock no longer than their deadline.
//!
//! System calls are librdmacm's own wherever it can tell cmsafe what it needs: a fetch that may
//! wait forever calls `rdma_get_cm_event` straight away (it blocks on a blocking channel; EAGAIN
//! says the channel is O_NONBLOCK, and then poll(2) waits); a fetch that must not wait calls it
//! straight away on a channel known to be O_NONBLOCK and polls first only on a blocking one; a
//! timed wait polls once. If the copy cannot be allocated, the event is neither acked nor
//! dropped: it waits in the channel's state and the next fetch on that channel returns it.

use std::io;

use super::lock::Deadline;
use super::state::{self, RawEvent};
use crate::clock::monotonic_ns;
use crate::cm::{rdma_ack_cm_event, rdma_cm_event, rdma_event_channel, rdma_get_cm_event};
use crate::errno::{self, Errno};
use crate::event::{probes, Event};
use crate::stats::COUNTERS;

/// How long a fetch may wait for the first event.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// Until an event arrives (or a signal interrupts the wait).
    Forever,
    /// At most this many milliseconds.
    Millis(u64),
    /// As `rdma_get_cm_event(3)` does on this channel: until an event arrives on a blocking
    /// channel, not at all (EAGAIN) on an O_NONBLOCK one.
    AsChannel,
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

/// One event from `ch`, waiting as `wait` says; ETIMEDOUT when none came in time (EAGAIN for
/// [`Wait::AsChannel`] on an O_NONBLOCK channel with nothing queued).
///
/// # Safety
/// `ch` is a live event channel.
pub unsafe fn fetch_one(ch: *mut rdma_event_channel, wait: Wait) -> Result<Event, Errno> {
    let state = state::state_of(ch).map_err(|_| libc::ENOMEM)?;
    // SAFETY: `ch` is live; its fd is the channel's file descriptor.
    let fd = unsafe { (*ch).fd };
    let deadline = match wait {
        Wait::Forever => Deadline::Never,
        Wait::Millis(0) => Deadline::Now,
        Wait::Millis(ms) => {
            Deadline::At(monotonic_ns().saturating_add(ms.saturating_mul(1_000_000)))
        }
        // A reader that may block anyway waits for the lock too; on a channel known to be
        // O_NONBLOCK a busy lock means another reader is taking what is queued.
        Wait::AsChannel => match state.nonblocking_if_known(fd) {
            Some(true) => Deadline::Now,
            _ => Deadline::Never,
        },
    };
    let mut slot = match state.lock(deadline) {
        Ok(slot) => slot,
        Err(libc::ETIMEDOUT) if matches!(wait, Wait::AsChannel) => return Err(libc::EAGAIN),
        Err(e) => return Err(e),
    };
    if let Some(raw) = state::unstash(&mut slot) {
        // SAFETY: a stashed event is unacked librdmacm memory.
        return unsafe { copy_and_ack(raw, &mut slot) };
    }
    loop {
        match deadline {
            Deadline::Never => {}
            Deadline::Now if matches!(wait, Wait::AsChannel) => {}
            Deadline::Now => {
                if !state.nonblocking(fd)? && !poll_readable(fd, 0)? {
                    return Err(libc::ETIMEDOUT);
                }
            }
            Deadline::At(d) => {
                let now = monotonic_ns();
                // Round up, so the wait is never shorter than asked.
                let ms = d
                    .saturating_sub(now)
                    .div_ceil(1_000_000)
                    .min(i32::MAX as u64) as i32;
                if now >= d || !poll_readable(fd, ms)? {
                    return Err(libc::ETIMEDOUT);
                }
            }
        }
        let mut raw: *mut rdma_cm_event = std::ptr::null_mut();
        // SAFETY: `ch` is live, `raw` a valid out pointer.
        if unsafe { rdma_get_cm_event(ch, &mut raw) } == 0 {
            // SAFETY: just returned by librdmacm, unacked.
            return unsafe { copy_and_ack(RawEvent(raw), &mut slot) };
        }
        match errno::get() {
            // Nothing queued on an O_NONBLOCK channel (or librdmacm consumed the kernel's event
            // itself: cma.c discards some).
            libc::EAGAIN => {
                state.remember(fd, true);
                match wait {
                    Wait::AsChannel => return Err(libc::EAGAIN),
                    Wait::Millis(0) => return Err(libc::ETIMEDOUT),
                    Wait::Forever => {
                        poll_readable(fd, -1)?;
                    }
                    // The loop polls again for what is left of the timeout.
                    Wait::Millis(_) => {}
                }
            }
            e => return Err(e),
        }
    }
}

/// Up to `max` events: waits as `wait` says for the first, then takes what is already queued
/// without waiting again. Returns how many `sink` received; 0 when none came in time. An error
/// after the first event ends the batch early and is left for the next call to report (an event
/// that could not be copied stays queued in the channel's state).
///
/// # Safety
/// `ch` is a live event channel.
pub unsafe fn fetch_batch(
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
    match unsafe { Event::copy_to_ack(raw.0) } {
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
            if probes::on() {
                probes::fetched(&event);
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
        n if n < 0 => Err(errno::get()),
        0 => Ok(false),
        _ if pfd.revents & libc::POLLNVAL != 0 => Err(libc::EBADF),
        _ => Ok(true),
    }
}
