//! A mutex that survives fork(2) and never deadlocks the thread it interrupted.
//!
//! pthread_atfork takes it before the fork and both processes release it after, so a child
//! never inherits it locked by a thread that does not exist there. The pool's shared free lists
//! and the compat header's copies use it, and so does the LD_PRELOAD library for all of its
//! state.
//!
//! A program may call fork(2) or exit(3) from a signal handler (a service's SIGTERM handler
//! often exits), and the signal may land while this very thread holds the lock inside one of
//! our calls. Waiting for it there waits forever. So a mutex knows its holder (a word naming
//! the thread, written once it is won and cleared just before it is released: [`HolderWord`]),
//! and each thread says which mutex it is taking or releasing (set before the attempt or the
//! clearing, restored once the holder word is written or the lock released): there is no
//! moment at which the thread holds the lock and nothing says so. The exit and fork paths
//! ask [`ForkSafeMutex::held_here`] first: [`ForkSafeMutex::lock_unless_held_here`] gives up at once
//! instead of waiting for itself. A fork that skipped a lock leaves it to the interrupted frame,
//! which the child inherits and which releases it when the handler returns; the child's reset of
//! the data then runs at the next lock ([`ForkSafeMutex::after_fork_in_child`]).
//!
//! It is std's mutex (a futex word: one compare-and-swap to lock, one swap to unlock, inlined),
//! not glibc's pthread_mutex_lock and unlock, two calls that cost more by count (bench/README.md,
//! "The counts behind the code's shape"); the preload's tracker lock is taken twice per event.
//! The guard taken before the fork is kept in the mutex itself until the parent and the child
//! each drop theirs; in the child that drop may issue a futex wake for waiters that were left
//! behind in the parent, which wakes nobody.

use cmsafe_sync::HolderWord;
use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

thread_local! {
    /// The mutex this thread is taking or releasing (its address), 0 when none; the cell's own
    /// address names the thread in a mutex's holder word. A signal handler that takes one of
    /// these locks in the middle of another's window restores the value it found.
    static TAKING: Cell<usize> = const { Cell::new(0) };
}

pub struct ForkSafeMutex<T: 'static> {
    inner: Mutex<T>,
    /// The thread that holds `inner`: named once it won the lock, cleared just before it
    /// releases it. With `TAKING`, a reader on the holder's own thread (a signal handler) sees
    /// the thread named from before the win to after the release, never the lock held and
    /// nothing named.
    holder: HolderWord,
    /// The prepare handler's guard, until the parent or child handler drops it. Touched only by
    /// the forking thread, while it holds `inner`.
    fork_guard: UnsafeCell<Option<MutexGuard<'static, T>>>,
    /// The prepare handler found the forking thread itself inside the lock and took nothing.
    /// Touched only by the forking thread.
    skipped: AtomicBool,
    /// A child's reset (a `fn(&mut T)` as an address, 0 for none) that could not run in the
    /// fork handler: the next holder runs it first.
    pending_reset: AtomicUsize,
}

// SAFETY: `inner` serializes access to the data; `fork_guard` is touched only by the thread
// that holds `inner` (the pthread_atfork handlers run in the forking thread).
unsafe impl<T: Send> Sync for ForkSafeMutex<T> {}

/// The data, locked: the mutex's guard, which also clears the holder word when dropped.
pub struct ForkSafeGuard<'a, T: 'static> {
    /// Dropped by hand, after the holder word is cleared (`Drop`).
    guard: ManuallyDrop<MutexGuard<'a, T>>,
    mutex: &'a ForkSafeMutex<T>,
    /// This thread's `TAKING` cell, kept so the release needs no second look-up: the guard
    /// never leaves the thread (a `MutexGuard` is not `Send`), so the cell outlives it.
    taking: *const Cell<usize>,
}

impl<T> Deref for ForkSafeGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for ForkSafeGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for ForkSafeGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: see `taking`: this thread's cell, alive while the thread runs.
        let taking = unsafe { &*self.taking };
        // TAKING says "releasing" before the holder word is cleared and until the lock is
        // released: in between, this thread, interrupted, takes itself for the holder of a
        // lock it is releasing, which is harmless (the exit path gives up once more than it
        // needs to); never the lock held and nothing saying so.
        let before = taking.replace(self.mutex.addr());
        self.mutex.holder.clear();
        // SAFETY: dropped once, here; `guard` is not used after.
        unsafe { ManuallyDrop::drop(&mut self.guard) };
        taking.set(before);
    }
}

impl<T: 'static> ForkSafeMutex<T> {
    pub const fn new(data: T) -> Self {
        ForkSafeMutex {
            inner: Mutex::new(data),
            holder: HolderWord::new(),
            fork_guard: UnsafeCell::new(None),
            skipped: AtomicBool::new(false),
            pending_reset: AtomicUsize::new(0),
        }
    }

    #[inline]
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// The data, locked. A panic caught while it was held (the preload catches every one) does
    /// not make it unusable: the data is whatever the panicking code left, as before.
    pub fn lock(&self) -> ForkSafeGuard<'_, T> {
        let (mut guard, taking) = self.take();
        // Relaxed: set and read under the lock (the child's handler, or its interrupted frame's
        // unlock, came before this lock in the same process).
        if self.pending_reset.load(Ordering::Relaxed) != 0 {
            run_reset::<T>(&self.pending_reset, &mut guard);
        }
        ForkSafeGuard {
            guard: ManuallyDrop::new(guard),
            mutex: self,
            taking,
        }
    }

    /// Takes `inner` with this thread named as taking it, then as its holder (module doc): one
    /// look-up of the thread-local, whose cell is returned for the release.
    #[inline]
    fn take(&self) -> (MutexGuard<'_, T>, *const Cell<usize>) {
        TAKING.with(|taking| {
            let before = taking.replace(self.addr());
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            self.holder.claim(taking as *const Cell<usize> as usize);
            taking.set(before);
            (guard, taking as *const Cell<usize>)
        })
    }

    /// Whether the calling thread is taking or holds this lock: true only when the caller is a
    /// signal handler (or exit or fork handler run from one) that interrupted our own code
    /// inside it. Async-signal-safe: a thread-local read and a load.
    pub fn held_here(&self) -> bool {
        TAKING.with(|taking| {
            taking.get() == self.addr() || self.holder.names(taking as *const Cell<usize> as usize)
        })
    }

    /// The data, locked, unless the calling thread itself is inside the lock (`held_here`):
    /// then None at once, never a wait for itself. For the exit and fork paths.
    pub fn lock_unless_held_here(&self) -> Option<ForkSafeGuard<'_, T>> {
        (!self.held_here()).then(|| self.lock())
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

    /// For the pthread_atfork prepare handler: held until `unlock_after_fork`, unless the
    /// forking thread is inside it already (a fork from a signal handler that interrupted our
    /// code), which then keeps it.
    pub fn lock_for_fork(&'static self) {
        if self.held_here() {
            self.skipped.store(true, Ordering::Relaxed);
            return;
        }
        let (guard, _) = self.take();
        // SAFETY: only the thread holding `inner` touches `fork_guard` (see above).
        unsafe { *self.fork_guard.get() = Some(guard) };
    }

    /// For the parent and child handlers, in the thread that called `lock_for_fork`.
    pub fn unlock_after_fork(&'static self) {
        if self.skipped.swap(false, Ordering::Relaxed) {
            return;
        }
        // SAFETY: as in `lock_for_fork`: this thread still holds `inner` through that guard.
        let guard = unsafe { (*self.fork_guard.get()).take() };
        if let Some(guard) = guard {
            TAKING.with(|taking| {
                let before = taking.replace(self.addr());
                self.holder.clear();
                drop(guard);
                taking.set(before);
            });
        }
    }

    /// For the child handler, instead of `unlock_after_fork`: `reset` runs on the data (what the
    /// child must not inherit), then the lock is released. When the forking thread was inside
    /// the lock, or `later` (the reset cannot run now: it frees memory whose allocator the
    /// forking thread was inside), the reset waits for the next lock.
    pub fn after_fork_in_child(&'static self, reset: fn(&mut T), later: bool) {
        if later || self.skipped.load(Ordering::Relaxed) {
            // Relaxed: read by the next holder, after the interrupted frame's unlock.
            self.pending_reset
                .store(reset as *const () as usize, Ordering::Relaxed);
            self.unlock_after_fork();
            return;
        }
        // SAFETY: as in `lock_for_fork`: this thread holds `inner` through that guard.
        if let Some(guard) = unsafe { (*self.fork_guard.get()).as_mut() } {
            reset(guard);
        }
        self.unlock_after_fork();
    }
}

#[cold]
#[inline(never)]
fn run_reset<T>(pending: &AtomicUsize, data: &mut T) {
    let f = pending.swap(0, Ordering::Relaxed);
    if f != 0 {
        // SAFETY: only `after_fork_in_child` stores here, a `fn(&mut T)` of this very mutex's T.
        let reset: fn(&mut T) = unsafe { std::mem::transmute::<usize, fn(&mut T)>(f) };
        reset(data);
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
        assert!(!M.held_here());
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
        assert!(!P.held_here(), "the unwind left the thread's list");
    }

    /// The exit path of a thread interrupted inside the lock gives up instead of waiting for
    /// itself; another thread's hold is waited for as before.
    #[test]
    fn the_holder_itself_is_never_made_to_wait() {
        static H: ForkSafeMutex<u32> = ForkSafeMutex::new(3);
        let g = H.lock();
        assert!(H.held_here());
        assert!(H.lock_unless_held_here().is_none(), "this thread holds it");
        let other = std::thread::spawn(|| {
            assert!(!H.held_here());
            *H.lock_unless_held_here().expect("waits, then takes it")
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(g);
        assert_eq!(other.join().unwrap(), 3);
        assert!(!H.held_here());
        assert_eq!(*H.lock_unless_held_here().expect("free again"), 3);
    }

    /// A fork from a signal handler that interrupted the lock's holder: the prepare handler
    /// takes nothing, the parent's handler releases nothing, and the child's reset runs at the
    /// next lock, after the interrupted frame released it.
    #[test]
    fn a_fork_inside_the_lock_leaves_it_to_the_interrupted_frame() {
        static F: ForkSafeMutex<u32> = ForkSafeMutex::new(5);
        let frame = F.lock();
        // The handlers, as a fork in a signal handler runs them here.
        F.lock_for_fork();
        F.after_fork_in_child(|v| *v = 0, false);
        assert_eq!(*frame, 5, "the interrupted frame still holds the data");
        drop(frame);
        assert_eq!(*F.lock(), 0, "the child's reset ran at the next lock");
        assert_eq!(*F.lock(), 0);
        // An ordinary fork: taken, reset and released by the handlers.
        *F.lock() = 9;
        F.lock_for_fork();
        assert!(F.held_here());
        F.after_fork_in_child(|v| *v += 1, false);
        assert!(!F.held_here());
        assert_eq!(*F.lock(), 10);
        // A reset asked to wait does, though the lock was taken for the fork.
        F.lock_for_fork();
        F.after_fork_in_child(|v| *v = 1, true);
        assert!(!F.held_here());
        assert_eq!(*F.lock(), 1, "ran at the next lock");
        // And the parent's side of a fork inside the lock releases nothing.
        let frame = F.lock();
        F.lock_for_fork();
        F.unlock_after_fork();
        assert!(F.held_here(), "still the frame's");
        drop(frame);
        assert!(F.try_lock().is_some());
    }
}
