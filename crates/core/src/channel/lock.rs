//! A mutex whose acquisition can give up at a deadline: cmsafe's readers hold their channel's
//! lock across the whole fetch (a reader waiting forever holds it while blocked in
//! `rdma_get_cm_event`), and a reader with a timeout must not wait for it longer than asked.
//!
//! Uncontended, locking and unlocking are one atomic operation each and no system call; a waiter
//! sleeps in futex(2) with an absolute CLOCK_MONOTONIC deadline.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

use super::Errno;

/// When to stop waiting for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// Wait as long as it takes.
    Never,
    /// Do not wait at all.
    Now,
    /// Until this CLOCK_MONOTONIC time, in nanoseconds.
    At(u64),
}

const FREE: u32 = 0;
const HELD: u32 = 1;
/// Held, and a waiter may sleep on it: the unlock must wake one.
const CONTENDED: u32 = 2;

pub(crate) struct TimedMutex<T> {
    state: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard exists at a time.
unsafe impl<T: Send> Sync for TimedMutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for TimedMutex<T> {}

pub(crate) struct TimedGuard<'a, T> {
    mutex: &'a TimedMutex<T>,
}

impl<T> TimedMutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        TimedMutex {
            state: AtomicU32::new(FREE),
            value: UnsafeCell::new(value),
        }
    }

    /// The lock, or ETIMEDOUT once `deadline` passed, or EINTR when a signal interrupted the
    /// wait (a signal must not be swallowed by a wait the caller did not ask for).
    pub(crate) fn lock(&self, deadline: Deadline) -> Result<TimedGuard<'_, T>, Errno> {
        if self
            .state
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(TimedGuard { mutex: self });
        }
        loop {
            if self.state.swap(CONTENDED, Ordering::Acquire) == FREE {
                return Ok(TimedGuard { mutex: self });
            }
            match deadline {
                Deadline::Now => return Err(libc::ETIMEDOUT),
                Deadline::Never => futex_wait(&self.state, CONTENDED, None)?,
                Deadline::At(ns) => futex_wait(&self.state, CONTENDED, Some(ns))?,
            }
        }
    }
}

impl<T> Deref for TimedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock: nobody else reaches the value.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for TimedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the guard is borrowed mutably.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for TimedGuard<'_, T> {
    fn drop(&mut self) {
        if self.mutex.state.swap(FREE, Ordering::Release) == CONTENDED {
            futex_wake(&self.mutex.state);
        }
    }
}

/// Sleeps while `word` holds `expected`, until woken, `deadline` (absolute CLOCK_MONOTONIC ns)
/// or a signal. Ok on a wake-up or a changed word; ETIMEDOUT, EINTR otherwise.
fn futex_wait(word: &AtomicU32, expected: u32, deadline: Option<u64>) -> Result<(), Errno> {
    let ts = deadline.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: a valid futex word, a valid or NULL absolute timeout; FUTEX_WAIT_BITSET without
    // FUTEX_CLOCK_REALTIME measures the deadline on CLOCK_MONOTONIC (futex(2)).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            libc::FUTEX_BITSET_MATCH_ANY,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    match super::fetch::last_errno() {
        libc::EAGAIN => Ok(()),
        e => Err(e),
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: a valid futex word; waking one waiter has no other effect.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn now_ns() -> u64 {
        crate::clock::monotonic_ns()
    }

    #[test]
    fn uncontended_lock_and_value() {
        let m = TimedMutex::new(5u32);
        {
            let mut g = m.lock(Deadline::Now).unwrap();
            assert_eq!(*g, 5);
            *g = 6;
        }
        assert_eq!(*m.lock(Deadline::Never).unwrap(), 6);
    }

    #[test]
    fn a_held_lock_times_out_at_the_deadline() {
        let m = TimedMutex::new(());
        let _held = m.lock(Deadline::Never).unwrap();
        assert_eq!(m.lock(Deadline::Now).err(), Some(libc::ETIMEDOUT));
        let start = now_ns();
        assert_eq!(
            m.lock(Deadline::At(start + 20_000_000)).err(),
            Some(libc::ETIMEDOUT)
        );
        assert!(
            now_ns() >= start + 20_000_000,
            "gave up before the deadline"
        );
    }

    #[test]
    fn a_waiter_gets_the_lock_when_it_is_released() {
        let m = Arc::new(TimedMutex::new(0u32));
        let held = m.lock(Deadline::Never).unwrap();
        let m2 = Arc::clone(&m);
        let waiter = std::thread::spawn(move || {
            let mut g = m2.lock(Deadline::Never).unwrap();
            *g += 1;
        });
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        waiter.join().unwrap();
        assert_eq!(*m.lock(Deadline::Now).unwrap(), 1);
    }
}
