//! Allocation fault injection, for tests of the "nothing lost" guarantee.
//!
//! Every allocation site on the fetch path asks [`should_fail`] first; tests arm it through
//! `cmsafe_debug_fail_alloc` to make exactly one chosen allocation fail.

use std::sync::atomic::{AtomicI64, Ordering};

/// Allocations left before the injected failure; negative when disarmed.
static COUNTDOWN: AtomicI64 = AtomicI64::new(-1);

/// Arms one failure: the allocation after `skip` successful ones fails. Negative disarms.
pub fn arm(skip: i64) {
    COUNTDOWN.store(skip, Ordering::SeqCst);
}

/// Whether this allocation must fail.
pub(crate) fn should_fail() -> bool {
    if COUNTDOWN.load(Ordering::Relaxed) < 0 {
        return false;
    }
    // Decrement past zero: the allocation that moves it from 0 to -1 is the one that fails.
    COUNTDOWN.fetch_sub(1, Ordering::SeqCst) == 0
}
