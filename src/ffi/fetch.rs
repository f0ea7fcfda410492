//! Fetching events: one, one with a timeout, or a batch.

use libc::c_int;

use super::{cmsafe_event, fail, guard};
use cmsafe_core::channel::{fetch_batch, fetch_one, Wait};
use cmsafe_core::cm::rdma_event_channel;

/// Fetches the next event from `ch`, copies everything it carries and acks the original.
///
/// Blocks like `rdma_get_cm_event(3)` until an event arrives; on a channel whose fd is
/// O_NONBLOCK it fails with EAGAIN when nothing is queued. The copy holds the event type,
/// status, `id`, `listen_id`, the `param.conn` or `param.ud` member librdmacm filled,
/// `private_data_len` bytes of private data, the id's addresses, a sequence number and the fetch
/// time. The original is acked with `rdma_ack_cm_event(3)` before this returns, so
/// `rdma_destroy_id(3)` never waits on it. For MULTICAST_JOIN and MULTICAST_ERROR,
/// `param.ud.private_data` is the context given to `rdma_join_multicast(3)`: kept as is, no bytes
/// copied (librdmacm/cma.c).
///
/// Ownership: on success `*out` receives a new event holding one reference, released with
/// `cmsafe_event_release`. `*out` is written only on success.
///
/// NULL: `ch` or `out` NULL fails with EINVAL.
///
/// Threads: any number of threads may fetch from one channel; each event is delivered to
/// exactly one of them. A fetch holds the channel's cmsafe lock while it waits (a blocked
/// `cmsafe_get_event` holds it inside `rdma_get_cm_event`), so fetches with a timeout on the
/// same channel wait for it no longer than their timeout. Do not mix with direct
/// `rdma_get_cm_event` calls on the same channel.
///
/// System calls: exactly those of `rdma_get_cm_event(3)` (its read of the channel's fd), none of
/// cmsafe's own: no poll(2), no fcntl(2); the fetch time is read through the vDSO where the
/// kernel's clocksource allows (TSC; see `cmsafe_event_time_ns`). On an O_NONBLOCK channel, the
/// EAGAIN of `rdma_get_cm_event` is passed on, as a raw loop sees it. An event kept after ENOMEM
/// is returned first, without a system call.
///
/// Returns 0, or -1 with errno: EINVAL (NULL argument), EAGAIN (non-blocking channel, nothing
/// queued), EINTR (a signal arrived while waiting), ENOMEM (the copy could not be allocated:
/// the event was neither acked nor dropped, and the next fetch on `ch` returns it; if the
/// allocation that failed was the channel's own bookkeeping, made on its first fetch, nothing was
/// taken from librdmacm at all), or the errno of `rdma_get_cm_event(3)`.
#[no_mangle]
pub extern "C" fn cmsafe_get_event(
    ch: *mut rdma_event_channel,
    out: *mut *mut cmsafe_event,
) -> c_int {
    guard!(fail(libc::EIO), {
        if ch.is_null() || out.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: `ch` is not NULL and, per the contract, a live channel.
        match unsafe { fetch_one(ch, Wait::AsChannel) } {
            Ok(event) => {
                // SAFETY: `out` is not NULL and points to writable storage per the contract.
                unsafe { *out = event.into_raw() as *mut cmsafe_event };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Like `cmsafe_get_event`, waiting at most `timeout_ms` milliseconds for an event.
///
/// `timeout_ms` < 0 waits without limit; 0 takes only an event already queued. The wait is
/// poll(2) on the channel's fd, so its resolution is the kernel's (about a millisecond).
///
/// Ownership, NULL, threads: as `cmsafe_get_event` (a fetch waiting on the same channel in
/// another thread counts against the timeout: this call waits for it at most `timeout_ms`).
///
/// System calls, besides `rdma_get_cm_event(3)`'s own:
/// - `timeout_ms` < 0: none on a blocking channel (`rdma_get_cm_event` itself blocks); on an
///   O_NONBLOCK channel with nothing queued, poll(2) until an event arrives.
/// - `timeout_ms` > 0: one poll(2) per call (its wait), and a clock_gettime(2) for the deadline
///   (through the vDSO where the clocksource allows).
/// - `timeout_ms` == 0: none on an O_NONBLOCK channel (nothing queued: the EAGAIN of
///   `rdma_get_cm_event`); one poll(2) with no wait on a blocking channel.
///
/// Which of the last two a channel is, cmsafe reads once with fcntl(2) F_GETFL, the first time a
/// call with `timeout_ms` == 0 (or a batch, see `cmsafe_get_events`) needs it, and learns from
/// any EAGAIN of `rdma_get_cm_event`; it then remembers it for that channel address and fd. Set
/// or clear O_NONBLOCK on a channel before cmsafe fetches from it, not in between: a channel
/// cmsafe believes O_NONBLOCK but that was made blocking again would make a `timeout_ms` == 0
/// call block until an event arrives. The same holds for a channel created at the address and
/// fd of a destroyed O_NONBLOCK one (the Rust `EventChannel` forgets when it destroys its own).
///
/// Returns 0, or -1 with errno: ETIMEDOUT (nothing arrived in time), EINTR (a signal arrived
/// while waiting: the wait is not resumed, as librdmacm's own blocking read would not be), and
/// the errors of `cmsafe_get_event`.
#[no_mangle]
pub extern "C" fn cmsafe_get_event_timeout(
    ch: *mut rdma_event_channel,
    out: *mut *mut cmsafe_event,
    timeout_ms: c_int,
) -> c_int {
    guard!(fail(libc::EIO), {
        if ch.is_null() || out.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: `ch` is not NULL and, per the contract, a live channel.
        match unsafe { fetch_one(ch, Wait::from_timeout_ms(timeout_ms)) } {
            Ok(event) => {
                // SAFETY: `out` is not NULL and points to writable storage per the contract.
                unsafe { *out = event.into_raw() as *mut cmsafe_event };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Drains a channel: waits up to `timeout_ms` for a first event (< 0: no limit, 0: only what is
/// queued), then takes every event already queued, up to `max`, without waiting again.
///
/// Ownership: `evs[0 .. return value]` receive new events, one reference each, released with
/// `cmsafe_event_release`; the rest of `evs` is left untouched.
///
/// NULL: `ch` or `evs` NULL fails with EINVAL.
///
/// Threads: as `cmsafe_get_event`; batches taken concurrently from one channel never share an
/// event.
///
/// System calls: the first event is waited for as `cmsafe_get_event_timeout` waits. Each further
/// event is taken with no wait: on an O_NONBLOCK channel by `rdma_get_cm_event` alone, so a
/// batch that drains the channel makes exactly the calls of a raw drain loop, its last one the
/// EAGAIN that ends the batch; on a blocking channel with a poll(2) before each further event
/// tried, the one that finds the channel empty included (nothing else tells whether another
/// event is queued).
///
/// Draining: a count below `max` means the batch found the channel empty (or an error ended it,
/// which the next call reports). A loop that drains an O_NONBLOCK channel after poll(2) may stop
/// at a count below `max`: calling again until 0 asks librdmacm once more (a second EAGAIN per
/// wakeup that a raw loop does not make).
///
/// Returns the number of events stored (0 when none arrived in time), or -1 with errno: EINVAL
/// (NULL argument, or `max` == 0), and the errors of `cmsafe_get_event` when they happen before
/// the first event. An error after the first event ends the batch early and returns the events
/// taken so far; it is not reported then. An event that could not be copied (ENOMEM) is kept,
/// unacked, and is the first event of the next call; another error (EINTR, a failing
/// `rdma_get_cm_event`) is reported by the next call if it recurs.
#[no_mangle]
pub extern "C" fn cmsafe_get_events(
    ch: *mut rdma_event_channel,
    evs: *mut *mut cmsafe_event,
    max: usize,
    timeout_ms: c_int,
) -> c_int {
    guard!(fail(libc::EIO), {
        if ch.is_null() || evs.is_null() || max == 0 {
            return fail(libc::EINVAL);
        }
        let max = max.min(c_int::MAX as usize);
        let mut n = 0usize;
        // SAFETY: `ch` is a live channel and `evs` holds `max` writable entries, per the
        // contract; `n` stays below `max`.
        let result = unsafe {
            fetch_batch(ch, max, Wait::from_timeout_ms(timeout_ms), |event| {
                *evs.add(n) = event.into_raw() as *mut cmsafe_event;
                n += 1;
            })
        };
        match result {
            Ok(count) => count as c_int,
            Err(e) => fail(e),
        }
    })
}

/// Copies an event the caller fetched with `rdma_get_cm_event(3)` itself, exactly as
/// `cmsafe_get_event` would, without acking it: the caller still owns `raw` and acks it with
/// `rdma_ack_cm_event(3)` (the copy does not depend on it afterwards).
///
/// For event loops that must call librdmacm directly but want an owned copy to hand on.
///
/// Ownership: on success `*out` receives a new event holding one reference, released with
/// `cmsafe_event_release`; `*out` is written only on success.
/// NULL: `raw` or `out` NULL fails with EINVAL. Threads: any; `raw` must not be acked meanwhile.
/// Returns 0, or -1 with errno: EINVAL, or ENOMEM (nothing was copied; `raw` is untouched).
///
/// # Safety
/// `raw` is an unacked event from `rdma_get_cm_event(3)` whose cm_id is alive.
#[no_mangle]
pub unsafe extern "C" fn cmsafe_event_copy(
    raw: *const cmsafe_core::cm::rdma_cm_event,
    out: *mut *mut cmsafe_event,
) -> c_int {
    guard!(fail(libc::EIO), {
        if raw.is_null() || out.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: a valid unacked event, per the contract.
        match unsafe { cmsafe_core::event::Event::copy_from_raw(raw) } {
            Ok(event) => {
                // SAFETY: `out` is not NULL and writable per the contract.
                unsafe { *out = event.into_raw() as *mut cmsafe_event };
                0
            }
            Err(_) => fail(libc::ENOMEM),
        }
    })
}
