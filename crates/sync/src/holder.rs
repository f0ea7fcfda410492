//! `HolderWord`: which thread holds a lock, readable by a signal handler on any thread.
//!
//! Only the holder writes the word, and only while it holds the lock: its own name (any non-zero
//! word unique to the thread) just after winning it, 0 just before releasing it. The lock orders
//! every write, so a thread that asks whether the word names it gets an exact answer about
//! itself; what it learns about other threads is only a hint. The exit and fork paths ask it on
//! the thread a signal interrupted, to learn whether that thread was inside the lock (they must
//! not wait for themselves). The moments just before the name is written and just after it is
//! cleared, when the thread holds the lock and the word does not say so, are the caller's to
//! cover (the fork-safe mutex says which lock the thread is taking or releasing).
//!
//! Clearing after the release instead, by compare-and-swap so as to spare a newer holder's
//! name, would also be exact under C11's total modification order, but loom's model orders
//! stores only partially and reports it.

use crate::shim::{AtomicUsize, Ordering};

/// The name of the thread that holds a lock, 0 when none (module doc).
pub struct HolderWord {
    name: AtomicUsize,
}

impl HolderWord {
    /// No holder (const: for a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        HolderWord {
            name: AtomicUsize::new(0),
        }
    }

    /// No holder (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        HolderWord {
            name: AtomicUsize::new(0),
        }
    }

    /// Called by the thread named `me` (non-zero) just after it won the lock.
    #[inline]
    pub fn claim(&self, me: usize) {
        // Relaxed: every write is made under the lock, which orders them; a reader asking about
        // itself sees its own writes in program order.
        self.name.store(me, Ordering::Relaxed);
    }

    /// Called by the holder just before it releases the lock.
    #[inline]
    pub fn clear(&self) {
        // Relaxed: as in `claim`.
        self.name.store(0, Ordering::Relaxed);
    }

    /// Whether the word names `me`: exact when `me` is the asking thread. Async-signal-safe.
    #[inline]
    pub fn names(&self, me: usize) -> bool {
        self.name.load(Ordering::Relaxed) == me
    }
}

impl Default for HolderWord {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_word_names_the_holder_from_claim_to_clear() {
        let h = HolderWord::new();
        assert!(!h.names(1));
        h.claim(1);
        assert!(h.names(1));
        assert!(!h.names(2));
        h.clear();
        assert!(!h.names(1));
        h.claim(2);
        assert!(h.names(2));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    /// Two threads take one lock in turn, naming themselves in the word: each,
    /// asking about itself, sees its name for as long as it holds the lock and not before or
    /// after, whatever the other thread does in between.
    #[test]
    fn each_thread_knows_exactly_whether_it_is_the_holder() {
        loom::model(|| {
            let lock = Arc::new(Mutex::new(()));
            let word = Arc::new(HolderWord::new());
            let threads: Vec<_> = [1usize, 2]
                .into_iter()
                .map(|me| {
                    let (lock, word) = (lock.clone(), word.clone());
                    thread::spawn(move || {
                        assert!(!word.names(me), "named before taking the lock");
                        let guard = lock.lock().unwrap();
                        word.claim(me);
                        assert!(word.names(me), "not named while holding the lock");
                        word.clear();
                        drop(guard);
                        assert!(!word.names(me), "still named after releasing it");
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert!(!word.names(1) && !word.names(2));
        });
    }
}
