//! The grace a destroy gives other threads to ack what they hold (an event thread may be about
//! to): CMSAFE_LATE_ACK_MS, looked at every millisecond, before the destroy is judged.

use crate::sys::config::CONFIG;

/// Starting from `now`, what is still unacked: looks `again` every millisecond while `waiting`
/// says so, for at most CMSAFE_LATE_ACK_MS. Returns the last look and how long it waited, in
/// nanoseconds. The sleeps hold cancellation off (cancel::sleep), as every wait of ours does.
pub fn for_acks<T>(
    mut now: T,
    waiting: impl Fn(&T) -> bool,
    mut again: impl FnMut(&T) -> T,
) -> (T, u64) {
    let start = cmsafe_core::clock::monotonic_ns();
    let elapsed = || cmsafe_core::clock::monotonic_ns() - start;
    while waiting(&now) && elapsed() < CONFIG.late_ack_ns {
        crate::sys::cancel::sleep(std::time::Duration::from_millis(1));
        now = again(&now);
    }
    (now, elapsed())
}
