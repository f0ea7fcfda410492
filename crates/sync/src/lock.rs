//! The lock word of a mutex whose acquisition can give up at a deadline (the core's
//! `TimedMutex` holds a value behind it).
//!
//! Uncontended, locking and unlocking are one atomic operation each and no system call; a waiter
//! sleeps on the word (futex(2)) with an absolute CLOCK_MONOTONIC deadline. The word is FREE,
//! HELD, or CONTENDED (held, and a waiter may sleep on it: the unlock must wake one). A waiter
//! marks the word CONTENDED before it sleeps, and takes the lock with CONTENDED when it wins, so
//! an unlock that finds HELD knows no one can be asleep.

use crate::futex::{Errno, Futex};
use crate::shim::Ordering;

/// When to stop waiting for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// Wait as long as it takes.
    Never,
    /// Do not wait at all.
    Now,
    /// Until this CLOCK_MONOTONIC time, in nanoseconds.
    At(u64),
}

const FREE: u32 = 0;
const HELD: u32 = 1;
const CONTENDED: u32 = 2;

/// A lock with deadlines, with no value of its own (see the module doc).
pub struct TimedLock {
    futex: Futex,
}

impl TimedLock {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        TimedLock {
            futex: Futex::new(FREE),
        }
    }

    #[cfg(loom)]
    pub fn new() -> Self {
        TimedLock {
            futex: Futex::new(FREE),
        }
    }

    /// Takes the lock; or ETIMEDOUT once `deadline` passed (at once for [`Deadline::Now`] when
    /// the lock is held), or EINTR when a signal interrupted the wait (a signal must not be
    /// swallowed by a wait the caller did not ask for).
    #[inline]
    pub fn lock(&self, deadline: Deadline) -> Result<(), Errno> {
        let word = &self.futex.word;
        // Acquire: what the last holder wrote before its unlock (Release) is seen by this one.
        // Relaxed on failure: nothing is read then.
        if word
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(());
        }
        loop {
            // Acquire: as above, when the swap finds the lock FREE and so takes it.
            if word.swap(CONTENDED, Ordering::Acquire) == FREE {
                return Ok(());
            }
            match deadline {
                Deadline::Now => return Err(libc::ETIMEDOUT),
                Deadline::Never => self.futex.wait(CONTENDED, None)?,
                Deadline::At(ns) => self.futex.wait(CONTENDED, Some(ns))?,
            }
        }
    }

    /// Gives the lock back, waking one waiter when one may sleep.
    ///
    /// # Safety
    /// The caller holds the lock: its `lock` returned Ok and it has not unlocked since.
    #[inline]
    pub unsafe fn unlock(&self) {
        // Release: what this holder wrote is seen by the next, whose swap or compare-exchange
        // reads this value (Acquire).
        if self.futex.word.swap(FREE, Ordering::Release) == CONTENDED {
            self.futex.wake_one();
        }
    }
}

impl Default for TimedLock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::futex::now_ns;
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_held_lock_fails_a_try_and_times_out_at_the_deadline() {
        let lock = TimedLock::new();
        assert_eq!(lock.lock(Deadline::Now), Ok(()));
        assert_eq!(lock.lock(Deadline::Now), Err(libc::ETIMEDOUT));
        let start = now_ns();
        assert_eq!(
            lock.lock(Deadline::At(start + 20_000_000)),
            Err(libc::ETIMEDOUT)
        );
        assert!(
            now_ns() >= start + 20_000_000,
            "gave up before the deadline"
        );
        // SAFETY: held since the first `lock`.
        unsafe { lock.unlock() };
        // Free again, though the waits above left it marked CONTENDED.
        assert_eq!(lock.lock(Deadline::Now), Ok(()));
        // SAFETY: just taken.
        unsafe { lock.unlock() };
    }

    #[test]
    fn a_sleeping_waiter_gets_the_lock_when_it_is_given_back() {
        let lock = Arc::new(TimedLock::new());
        assert_eq!(lock.lock(Deadline::Never), Ok(()));
        let l = Arc::clone(&lock);
        let waiter = std::thread::spawn(move || {
            let got = l.lock(Deadline::Never);
            // SAFETY: held when `got` is Ok.
            got.map(|()| unsafe { l.unlock() })
        });
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: held since the `lock` above.
        unsafe { lock.unlock() };
        assert_eq!(waiter.join().unwrap(), Ok(()));
    }

    extern "C" fn nothing(_: libc::c_int) {}

    /// A signal whose handler does not ask for restarts ends a wait with EINTR, and leaves the
    /// lock as it was.
    #[test]
    fn a_signal_ends_a_wait_with_eintr() {
        // SAFETY: a zeroed sigaction with a handler that does nothing, without SA_RESTART.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        let lock = Arc::new(TimedLock::new());
        assert_eq!(lock.lock(Deadline::Never), Ok(()));
        let (tx, rx) = mpsc::channel();
        let l = Arc::clone(&lock);
        let waiter = std::thread::spawn(move || tx.send(l.lock(Deadline::Never)).unwrap());
        let thread = std::os::unix::thread::JoinHandleExt::as_pthread_t(&waiter);
        // A signal that lands before the waiter sleeps is not the one that ends its wait: send
        // until one does.
        let got = (0..500).find_map(|_| {
            // SAFETY: the waiter is alive until it sends its result.
            unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
            rx.recv_timeout(Duration::from_millis(10)).ok()
        });
        waiter.join().unwrap();
        assert_eq!(got, Some(Err(libc::EINTR)));
        assert_eq!(
            lock.lock(Deadline::Now),
            Err(libc::ETIMEDOUT),
            "no longer held"
        );
        // SAFETY: held since the first `lock`.
        unsafe { lock.unlock() };
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{Deadline, TimedLock};
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// A lock and the value it guards: loom's cell reports two holders reaching it at once.
    struct Guarded {
        lock: TimedLock,
        count: UnsafeCell<u32>,
    }

    impl Guarded {
        fn new() -> Arc<Self> {
            Arc::new(Guarded {
                lock: TimedLock::new(),
                count: UnsafeCell::new(0),
            })
        }

        /// Takes the lock as `deadline` says and adds one under it.
        fn add(&self, deadline: Deadline) -> Result<(), i32> {
            self.lock.lock(deadline)?;
            // SAFETY: the lock is held: no other thread reaches the count.
            self.count.with_mut(|c| unsafe { *c += 1 });
            // SAFETY: held since the `lock` above.
            unsafe { self.lock.unlock() };
            Ok(())
        }

        /// The count, read under the lock.
        fn count(&self) -> u32 {
            self.lock
                .lock(Deadline::Now)
                .expect("no one holds the lock");
            // SAFETY: the lock is held.
            let count = self.count.with(|c| unsafe { *c });
            // SAFETY: held since the `lock` above.
            unsafe { self.lock.unlock() };
            count
        }
    }

    /// Three threads each take the lock as long as it takes and add one: never two inside at
    /// once (loom's cell), no waiter left asleep (loom reports a deadlock), every add counted.
    #[test]
    fn three_threads_exclude_each_other_and_none_sleeps_for_good() {
        loom::model(|| {
            let g = Guarded::new();
            let others: Vec<_> = (0..2)
                .map(|_| {
                    let g = Arc::clone(&g);
                    thread::spawn(move || g.add(Deadline::Never))
                })
                .collect();
            assert_eq!(g.add(Deadline::Never), Ok(()));
            for t in others {
                assert_eq!(t.join().unwrap(), Ok(()));
            }
            assert_eq!(g.count(), 3);
        });
    }

    /// A try (`Deadline::Now`) against a thread that takes and gives back the lock: it fails
    /// only with ETIMEDOUT and only while the lock may be held, never once it was seen given
    /// back; and the CONTENDED mark a failed try leaves costs no one the lock.
    #[test]
    fn a_try_fails_only_while_the_lock_is_held() {
        loom::model(|| {
            let g = Guarded::new();
            let given_back = Arc::new(AtomicBool::new(false));
            let holder = {
                let (g, given_back) = (Arc::clone(&g), Arc::clone(&given_back));
                thread::spawn(move || {
                    assert_eq!(g.add(Deadline::Never), Ok(()));
                    given_back.store(true, Ordering::SeqCst);
                })
            };
            let was_given_back = given_back.load(Ordering::SeqCst);
            let tried = g.add(Deadline::Now);
            match tried {
                Ok(()) => {}
                Err(e) => {
                    assert_eq!(e, libc::ETIMEDOUT);
                    assert!(!was_given_back, "a try failed on a lock given back");
                }
            }
            holder.join().unwrap();
            assert_eq!(g.add(Deadline::Now), Ok(()), "a try failed on a free lock");
            assert_eq!(g.count(), if tried.is_ok() { 3 } else { 2 });
        });
    }

    /// A waiter with a deadline gives up (in the model, a deadline has always passed when the
    /// wait begins) while another waits as long as it takes: the one who gave up leaves the
    /// word CONTENDED, and neither that nor its leaving strands the other.
    #[test]
    fn a_waiter_that_gives_up_strands_no_other() {
        loom::model(|| {
            let g = Guarded::new();
            let timed = {
                let g = Arc::clone(&g);
                thread::spawn(move || g.add(Deadline::At(1)))
            };
            let patient = {
                let g = Arc::clone(&g);
                thread::spawn(move || g.add(Deadline::Never))
            };
            assert_eq!(g.add(Deadline::Never), Ok(()));
            let timed = timed.join().unwrap();
            assert!(matches!(timed, Ok(()) | Err(libc::ETIMEDOUT)), "{timed:?}");
            assert_eq!(patient.join().unwrap(), Ok(()));
            assert_eq!(g.count(), if timed.is_ok() { 3 } else { 2 });
        });
    }
}
