//! A mutex whose acquisition can give up at a deadline: cmsafe's readers hold their channel's
//! lock across the whole fetch (a reader waiting forever holds it while blocked in
//! `rdma_get_cm_event`), and a reader with a timeout must not wait for it longer than asked.
//!
//! The lock word and its futex waits are `cmsafe_sync::TimedLock` (model-checked there); this
//! adds the value it guards. Uncontended, locking and unlocking are one atomic operation each
//! and no system call; a waiter sleeps in futex(2) with an absolute CLOCK_MONOTONIC deadline.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

use cmsafe_sync::TimedLock;

use crate::errno::Errno;

pub(crate) use cmsafe_sync::Deadline;

pub(crate) struct TimedMutex<T> {
    lock: TimedLock,
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
            lock: TimedLock::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// The lock, or ETIMEDOUT once `deadline` passed, or EINTR when a signal interrupted the
    /// wait (a signal must not be swallowed by a wait the caller did not ask for).
    pub(crate) fn lock(&self, deadline: Deadline) -> Result<TimedGuard<'_, T>, Errno> {
        self.lock.lock(deadline)?;
        Ok(TimedGuard { mutex: self })
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
        // SAFETY: a guard exists only while its lock is held, and is dropped once.
        unsafe { self.mutex.lock.unlock() };
    }
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
