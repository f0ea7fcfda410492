//! A mutex that survives fork(2): pthread_atfork takes it before the fork and both processes
//! release it after, so a child never inherits it locked by a thread that does not exist there.
//! The pool's shared free lists and the compat header's copies use it, and so does the
//! LD_PRELOAD library for all of its state.
//!
//! It is std's mutex (a futex word: one compare-and-swap to lock, one swap to unlock, inlined),
//! not glibc's pthread_mutex_lock and unlock, two calls that cost more by count (bench/README.md,
//! "The counts behind the code's shape"); the preload's tracker lock is taken twice per event. The guard taken before the fork is kept in the mutex itself until the parent and the
//! child each drop theirs; in the child that drop may issue a futex wake for waiters that were
//! left behind in the parent, which wakes nobody.

use std::cell::UnsafeCell;
use std::sync::{Mutex, MutexGuard, PoisonError};

pub struct ForkSafeMutex<T: 'static> {
    inner: Mutex<T>,
    /// The prepare handler's guard, until the parent or child handler drops it. Touched only by
    /// the forking thread, while it holds `inner`.
    fork_guard: UnsafeCell<Option<MutexGuard<'static, T>>>,
}

// SAFETY: `inner` serializes access to the data; `fork_guard` is touched only by the thread
// that holds `inner` (the pthread_atfork handlers run in the forking thread).
unsafe impl<T: Send> Sync for ForkSafeMutex<T> {}

impl<T: 'static> ForkSafeMutex<T> {
    pub const fn new(data: T) -> Self {
        ForkSafeMutex {
            inner: Mutex::new(data),
            fork_guard: UnsafeCell::new(None),
        }
    }

    /// The data, locked. A panic caught while it was held (the preload catches every one) does
    /// not make it unusable: the data is whatever the panicking code left, as before.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The data, if no thread holds it now (tests: whether a lock is free).
    #[cfg(test)]
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.inner.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// For the pthread_atfork prepare handler: held until `unlock_after_fork`.
    pub fn lock_for_fork(&'static self) {
        let guard = self.lock();
        // SAFETY: only the thread holding `inner` touches `fork_guard` (see above).
        unsafe { *self.fork_guard.get() = Some(guard) };
    }

    /// For the parent and child handlers, in the thread that called `lock_for_fork`.
    pub fn unlock_after_fork(&'static self) {
        // SAFETY: as in `lock_for_fork`: this thread still holds `inner` through that guard.
        drop(unsafe { (*self.fork_guard.get()).take() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static M: ForkSafeMutex<u32> = ForkSafeMutex::new(0);

    #[test]
    fn held_from_the_prepare_handler_to_the_after_handler() {
        M.lock_for_fork();
        assert!(M.try_lock().is_none(), "held across the fork");
        M.unlock_after_fork();
        *M.lock() += 1;
        assert_eq!(*M.lock(), 1);
        // A second unlock with no fork in between releases nothing.
        M.unlock_after_fork();
        assert!(M.try_lock().is_some());
    }

    #[test]
    fn a_panic_while_held_leaves_it_usable() {
        static P: ForkSafeMutex<u32> = ForkSafeMutex::new(7);
        let r = std::panic::catch_unwind(|| {
            let _g = P.lock();
            panic!("inside");
        });
        assert!(r.is_err());
        assert_eq!(*P.lock(), 7);
    }
}
