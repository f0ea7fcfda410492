//! The clocks cmsafe reads: the library, its C ABI and the preload alike.

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; both clocks used here exist on every Linux since
    // 2.6.32.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of timeouts.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_MONOTONIC_COARSE now, in nanoseconds: the clock of an event's fetch time. Read from
/// the vDSO without a system call on any clocksource, it advances once per kernel tick.
#[inline]
pub fn coarse_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}
