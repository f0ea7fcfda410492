//! A mutex that survives fork(2): pthread_atfork takes it before the fork and both processes
//! release it after, so a child never inherits it locked by a thread that does not exist there.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

pub struct ForkSafeMutex<T> {
    raw: UnsafeCell<libc::pthread_mutex_t>,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialized by `raw`.
unsafe impl<T: Send> Sync for ForkSafeMutex<T> {}

impl<T> ForkSafeMutex<T> {
    pub const fn new(data: T) -> Self {
        ForkSafeMutex {
            raw: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            data: UnsafeCell::new(data),
        }
    }

    pub fn lock(&self) -> Guard<'_, T> {
        // SAFETY: a valid, statically initialized mutex; not recursive and never held across
        // calls that re-enter the preload.
        unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        Guard { mutex: self }
    }

    /// For the pthread_atfork prepare handler: held until `unlock_after_fork`.
    pub fn lock_for_fork(&self) {
        // SAFETY: as in `lock`.
        unsafe { libc::pthread_mutex_lock(self.raw.get()) };
    }

    /// For the parent and child handlers, in the thread that called `lock_for_fork`.
    pub fn unlock_after_fork(&self) {
        // SAFETY: locked by this thread in the prepare handler.
        unsafe { libc::pthread_mutex_unlock(self.raw.get()) };
    }
}

pub struct Guard<'a, T> {
    mutex: &'a ForkSafeMutex<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock is held.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held, exclusively.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: locked by this guard.
        unsafe { libc::pthread_mutex_unlock(self.mutex.raw.get()) };
    }
}
