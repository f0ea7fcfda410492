//! A piece of work done once, which other threads may wait for up to a deadline (the preload's
//! exit summary: a second thread's exit(3) at the same moment waits for it, for a bounded time,
//! rather than ending the process in the middle of it).
//!
//! The word is PENDING, WAITED (pending, and a waiter may sleep on it: `done` must wake) or
//! DONE. A waiter marks the word WAITED before it sleeps, so a `done` that finds PENDING knows
//! no one can be asleep and makes no system call.

use crate::futex::{Errno, Futex};
use crate::lock::Deadline;
use crate::shim::Ordering;

const PENDING: u32 = 0;
const WAITED: u32 = 1;
const DONE: u32 = 2;

/// The latch: pending until `done`, then done for good (see the module doc).
pub struct Latch {
    futex: Futex,
}

impl Latch {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Latch {
            futex: Futex::new(PENDING),
        }
    }

    #[cfg(loom)]
    pub fn new() -> Self {
        Latch {
            futex: Futex::new(PENDING),
        }
    }

    /// Marks the work done and wakes every waiter. Done again is done.
    pub fn done(&self) {
        // Release: what the worker wrote before this is seen by a waiter whose load reads DONE
        // (Acquire).
        if self.futex.word.swap(DONE, Ordering::Release) == WAITED {
            self.futex.wake_all();
        }
    }

    /// Whether `done` was called.
    pub fn is_done(&self) -> bool {
        self.futex.word.load(Ordering::Acquire) == DONE
    }

    /// Waits until the work is done: Ok once it is (at once if it was); ETIMEDOUT once
    /// `deadline` passed first (at once for [`Deadline::Now`]), or EINTR when a signal ended the
    /// wait (a caller with a deadline calls again).
    pub fn wait(&self, deadline: Deadline) -> Result<(), Errno> {
        let word = &self.futex.word;
        loop {
            // Acquire: pairs with `done`'s Release.
            match word.load(Ordering::Acquire) {
                DONE => return Ok(()),
                // Relaxed: nothing is published by the mark; a failure (done meanwhile, or
                // marked by another waiter) is looked at again.
                PENDING
                    if word
                        .compare_exchange(PENDING, WAITED, Ordering::Relaxed, Ordering::Relaxed)
                        .is_err() =>
                {
                    continue
                }
                _ => {}
            }
            match deadline {
                Deadline::Now => return Err(libc::ETIMEDOUT),
                Deadline::Never => self.futex.wait(WAITED, None)?,
                Deadline::At(ns) => self.futex.wait(WAITED, Some(ns))?,
            }
        }
    }
}

impl Default for Latch {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::futex::now_ns;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_pending_latch_times_out_at_the_deadline_and_a_done_one_does_not_wait() {
        let latch = Latch::new();
        assert!(!latch.is_done());
        assert_eq!(latch.wait(Deadline::Now), Err(libc::ETIMEDOUT));
        let start = now_ns();
        assert_eq!(
            latch.wait(Deadline::At(start + 20_000_000)),
            Err(libc::ETIMEDOUT)
        );
        assert!(
            now_ns() >= start + 20_000_000,
            "gave up before the deadline"
        );
        latch.done();
        assert!(latch.is_done());
        assert_eq!(latch.wait(Deadline::Now), Ok(()));
        assert_eq!(latch.wait(Deadline::Never), Ok(()));
    }

    #[test]
    fn sleeping_waiters_wake_when_the_work_is_done() {
        let latch = Arc::new(Latch::new());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let l = Arc::clone(&latch);
                std::thread::spawn(move || l.wait(Deadline::Never))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        latch.done();
        for w in waiters {
            assert_eq!(w.join().unwrap(), Ok(()));
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{Deadline, Latch};
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// The work's result, written before `done` and read by whoever the latch let through.
    struct Work {
        latch: Latch,
        result: UnsafeCell<u32>,
    }

    impl Work {
        fn new() -> Arc<Self> {
            Arc::new(Work {
                latch: Latch::new(),
                result: UnsafeCell::new(0),
            })
        }

        fn finish(&self) {
            // SAFETY: only the worker writes, before `done`; readers read after `wait` is Ok.
            self.result.with_mut(|r| unsafe { *r = 7 });
            self.latch.done();
        }

        fn read(&self, deadline: Deadline) -> Option<u32> {
            self.latch
                .wait(deadline)
                .ok()
                // SAFETY: the latch is done: the worker wrote and writes no more.
                .map(|()| self.result.with(|r| unsafe { *r }))
        }
    }

    /// Two waiters with no deadline and the worker: neither sleeps for good (loom reports a
    /// lost wake-up as a deadlock), and both see the result written before `done`.
    #[test]
    fn every_waiter_wakes_and_sees_the_work() {
        loom::model(|| {
            let w = Work::new();
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let w = Arc::clone(&w);
                    thread::spawn(move || w.read(Deadline::Never))
                })
                .collect();
            w.finish();
            for t in waiters {
                assert_eq!(t.join().unwrap(), Some(7));
            }
        });
    }

    /// A waiter with a deadline (which has passed at once in the model) either sees the work
    /// done, with its result, or gives up; it never reads a result not yet written.
    #[test]
    fn a_waiter_with_a_deadline_sees_the_work_or_gives_up() {
        loom::model(|| {
            let w = Work::new();
            let worker = {
                let w = Arc::clone(&w);
                thread::spawn(move || w.finish())
            };
            let got = w.read(Deadline::At(1));
            assert!(got.is_none() || got == Some(7), "{got:?}");
            worker.join().unwrap();
            assert_eq!(w.read(Deadline::Now), Some(7));
        });
    }
}
