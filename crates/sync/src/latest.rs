//! `Latest`: the newest of a small value that any thread may set at any time, read by a signal
//! handler that may interrupt a setter (the program's own SIGSEGV action, which it sets through
//! our sigaction(2) while audit's handler reads it to pass on faults that are not ours).
//!
//! Neither side takes a lock or waits for the other: a setter may run inside a signal handler
//! that interrupted another setter or a reader on the same thread (sigaction is
//! async-signal-safe, and crash handlers call it). Each value is written once, as a record of
//! its own generation, into a small ring of seqlock slots ([`SeqRecord`]), and then published by
//! raising the newest generation (`fetch_max`). A reader copies the slot of the newest
//! generation and checks it was not overwritten meanwhile; a setter whose generation is older
//! than the one published when it finishes was overtaken: its value is replaced already, as two
//! racing sigaction calls leave the later one in place.
//!
//! The ring has `N` slots: a slot is reused after `N` more generations, so a reader can fail to
//! copy the newest value only while `N` setters at once are between taking their generation and
//! publishing it, and then says so (None from [`Latest::get`] after its retries).

use crate::seq_record::SeqRecord;
use crate::shim::{AtomicU64, Ordering};

/// The newest of `W` words, kept in `N` slots (module doc).
pub struct Latest<const W: usize, const N: usize> {
    slots: [SeqRecord<W>; N],
    /// The last generation handed to a setter (from 1).
    next: AtomicU64,
    /// The newest generation published, 0 while nothing is.
    current: AtomicU64,
}

impl<const W: usize, const N: usize> Latest<W, N> {
    /// Nothing set (const: for a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Latest {
            slots: [const { SeqRecord::new() }; N],
            next: AtomicU64::new(0),
            current: AtomicU64::new(0),
        }
    }

    /// Nothing set (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        Latest {
            slots: core::array::from_fn(|_| SeqRecord::new()),
            next: AtomicU64::new(0),
            current: AtomicU64::new(0),
        }
    }

    fn slot(&self, generation: u64) -> &SeqRecord<W> {
        &self.slots[(generation % N as u64) as usize]
    }

    /// Sets `words` as the newest value and returns the one it replaced (None when nothing was
    /// set, or when that one's slot was reused meanwhile). Async-signal-safe.
    pub fn set(&self, words: [u64; W]) -> Option<[u64; W]> {
        let generation = loop {
            // Relaxed: the number only picks a slot; the slot's stamp orders the words.
            let g = self.next.fetch_add(1, Ordering::Relaxed) + 1;
            // A slot still being written by a setter N generations behind is left to it.
            if self.slot(g).write(g, words) {
                break g;
            }
        };
        // AcqRel: publishes our record (written before) to readers that load `current`
        // (Acquire), and sees the record of the generation we replace.
        let before = self.current.fetch_max(generation, Ordering::AcqRel);
        if before > generation {
            // Overtaken: a newer value was published while we wrote ours.
            return Some(words);
        }
        (before != 0)
            .then(|| self.slot(before).read(before))
            .flatten()
    }

    /// The newest value, None when nothing was set. Async-signal-safe; it retries while the
    /// newest value's slot is being reused, at most `N` times (module doc).
    pub fn get(&self) -> Option<[u64; W]> {
        for _ in 0..N {
            // Acquire: pairs with `set`'s publication: the record of this generation is written.
            let g = self.current.load(Ordering::Acquire);
            if g == 0 {
                return None;
            }
            if let Some(words) = self.slot(g).read(g) {
                return Some(words);
            }
        }
        None
    }
}

impl<const W: usize, const N: usize> Default for Latest<W, N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_newest_is_read_and_each_set_returns_the_one_before() {
        let l = Latest::<2, 4>::new();
        assert_eq!(l.get(), None);
        assert_eq!(l.set([1, 2]), None);
        assert_eq!(l.get(), Some([1, 2]));
        assert_eq!(l.set([3, 4]), Some([1, 2]));
        // Many more than the ring's slots: each set still returns its predecessor.
        for i in 0..20u64 {
            let before = l.get().unwrap();
            assert_eq!(l.set([i, i + 1]), Some(before));
            assert_eq!(l.get(), Some([i, i + 1]));
        }
    }

    #[test]
    fn a_setter_that_stopped_midway_does_not_hide_the_value_published() {
        let l = Latest::<1, 4>::new();
        l.set([7]);
        // A setter interrupted after taking generation 2 and claiming its slot.
        let g = l.next.fetch_add(1, Ordering::Relaxed) + 1;
        assert!(l.slot(g).claim_and_stop(g));
        assert_eq!(
            l.get(),
            Some([7]),
            "generation 1 is still the newest published"
        );
        // A later setter skips nothing it needs: it takes generation 3.
        assert_eq!(l.set([9]), Some([7]));
        assert_eq!(l.get(), Some([9]));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two setters and a reader at once, in a ring of two slots: the reader sees nothing, the
    /// first value or one of the two new ones, each whole; at the end the newest published is
    /// one of the two, and a setter that returned its own value was overtaken by the other.
    #[test]
    fn setters_and_a_reader_never_see_a_torn_or_stale_value() {
        loom::model(|| {
            let l = Arc::new(Latest::<2, 2>::new());
            l.set([10, 11]);
            let setters: Vec<_> = [2u64, 3]
                .into_iter()
                .map(|v| {
                    let l = l.clone();
                    thread::spawn(move || l.set([v * 10, v * 10 + 1]))
                })
                .collect();
            if let Some(w) = l.get() {
                assert!([1, 2, 3].iter().any(|v| w == [v * 10, v * 10 + 1]), "{w:?}");
            }
            let replaced: Vec<_> = setters.into_iter().map(|s| s.join().unwrap()).collect();
            let last = l.get().expect("a value");
            assert!(last == [20, 21] || last == [30, 31], "{last:?}");
            for r in replaced.into_iter().flatten() {
                assert!([1, 2, 3].iter().any(|v| r == [v * 10, v * 10 + 1]), "{r:?}");
            }
        });
    }
}
