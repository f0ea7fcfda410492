//! `SeqRecord`: one slot of a ring of records that many threads write and a reader copies out
//! while they write, with no lock (the flight recorder's slots, `cmsafe_flight_dump(3)`).
//!
//! Each record carries a sequence number, unique and never 0, that decides its slot (the ring
//! is indexed by it) and its place in the slot's history: the stamp holds `seq * 2` for a whole
//! record and `seq * 2 + 1` while a thread writes one. A writer claims the slot with one
//! compare-and-swap from a whole, older record, so two threads never write one slot at once: a
//! writer that finds the slot being written, or holding a newer record, drops its own. The
//! usual writer guesses the record the slot holds (the one a ring's length before) and claims
//! it in one compare-and-swap; anything else is the fallback's, which loads the stamp first.
//!
//! The reader is the seqlock's: the stamp, the words, an acquire fence, the stamp again; the
//! copy is the record only when both stamps are the one asked for, so a record being written
//! (torn) is never returned, only skipped.

use crate::shim::{fence, AtomicU64, Ordering};

/// One slot: the stamp and `W` words of record, on a cache line of its own when W <= 7.
#[repr(C, align(64))]
pub struct SeqRecord<const W: usize> {
    stamp: AtomicU64,
    words: [AtomicU64; W],
}

impl<const W: usize> SeqRecord<W> {
    /// An empty slot (stamp 0: no record, since sequence numbers start at 1).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        SeqRecord {
            stamp: AtomicU64::new(0),
            words: [const { AtomicU64::new(0) }; W],
        }
    }

    /// An empty slot (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        SeqRecord {
            stamp: AtomicU64::new(0),
            words: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Claims the slot by moving its stamp from `from` to `seq`'s busy stamp; false when the
    /// stamp was anything else.
    #[inline(always)]
    fn claim(&self, from: u64, seq: u64) -> bool {
        // Acquire: a later claim sees the words the previous holder wrote before its release,
        // and never writes under them.
        if self
            .stamp
            .compare_exchange(from, seq * 2 + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // Release: a reader that sees any word stored after this fence also sees the busy
        // stamp (its second load), and discards the copy.
        fence(Ordering::Release);
        true
    }

    /// Writes record `seq` (> 0). False, writing nothing, when the slot holds a newer record or
    /// another thread is writing it (a writer as far behind as the ring is long).
    pub fn write(&self, seq: u64, words: [u64; W]) -> bool {
        match self.claim_older(seq) {
            Some(claimed) => {
                claimed.fill(words);
                true
            }
            None => false,
        }
    }

    /// The slot, claimed for record `seq` (> 0) from record `prev` (the one a ring's length
    /// before, which the slot most likely holds); None when it holds anything else. One
    /// compare-and-swap: the writer's usual path, `claim_older` its fallback.
    #[inline(always)]
    pub fn claim_from(&self, prev: u64, seq: u64) -> Option<Claimed<'_, W>> {
        self.claim(prev.wrapping_mul(2), seq)
            .then_some(Claimed { slot: self, seq })
    }

    /// The slot, claimed for record `seq` (> 0) from whatever whole, older record it holds;
    /// None when it holds a newer one or another thread is writing it.
    pub fn claim_older(&self, seq: u64) -> Option<Claimed<'_, W>> {
        let old = self.stamp.load(Ordering::Relaxed);
        (old & 1 == 0 && old < seq * 2 && self.claim(old, seq))
            .then_some(Claimed { slot: self, seq })
    }

    /// A copy of record `seq` when the slot holds it whole; None when it holds another record,
    /// none, or one being written.
    pub fn read(&self, seq: u64) -> Option<[u64; W]> {
        // Acquire: the words of the record this stamp names are visible.
        if self.stamp.load(Ordering::Acquire) != seq * 2 {
            return None;
        }
        let mut out = [0u64; W];
        for (o, w) in out.iter_mut().zip(&self.words) {
            *o = w.load(Ordering::Relaxed);
        }
        // Acquire: a word stored by a later writer, if any was loaded above, makes its busy
        // stamp visible to the load below.
        fence(Ordering::Acquire);
        (self.stamp.load(Ordering::Relaxed) == seq * 2).then_some(out)
    }

    /// Leaves the slot as a writer of `seq` that stopped midway leaves it (a torn record), for
    /// tests of the crates that read these slots. False when the claim failed, as `write`'s.
    #[doc(hidden)]
    pub fn claim_and_stop(&self, seq: u64) -> bool {
        self.claim_older(seq).map(std::mem::forget).is_some()
    }

    /// The sequence number of the record the slot holds whole or is being written, 0 for none.
    pub fn seq(&self) -> u64 {
        self.stamp.load(Ordering::Relaxed) / 2
    }
}

/// A slot claimed for a record: [`Claimed::fill`] writes it. Dropped unfilled, the slot stays
/// busy for good (its record torn, skipped by readers, and the slot's later writers drop
/// theirs): fill it.
#[must_use = "a claimed slot stays busy until it is filled"]
pub struct Claimed<'a, const W: usize> {
    slot: &'a SeqRecord<W>,
    seq: u64,
}

impl<const W: usize> Claimed<'_, W> {
    /// The words, then the whole stamp: the record is there for readers.
    #[inline(always)]
    pub fn fill(self, words: [u64; W]) {
        for (w, v) in self.slot.words.iter().zip(words) {
            w.store(v, Ordering::Relaxed);
        }
        // Release: the words are seen by whoever sees the whole stamp.
        self.slot.stamp.store(self.seq * 2, Ordering::Release);
    }
}

#[cfg(not(loom))]
impl<const W: usize> Default for SeqRecord<W> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn newer_records_replace_older_and_never_the_reverse() {
        let s = SeqRecord::<3>::new();
        assert_eq!(s.read(1), None);
        assert!(s.write(1, [1, 2, 3]));
        assert_eq!(s.read(1), Some([1, 2, 3]));
        assert!(
            s.write(9, [9, 8, 7]),
            "a wrong guess, then the record there"
        );
        assert_eq!(s.read(1), None, "replaced");
        assert_eq!(s.read(9), Some([9, 8, 7]));
        assert!(!s.write(5, [5, 5, 5]), "an older record is dropped");
        assert!(!s.write(9, [0, 0, 0]), "the same record is written once");
        assert_eq!(s.read(9), Some([9, 8, 7]));
        assert_eq!(s.seq(), 9);
    }

    #[test]
    fn a_claim_from_a_guess_takes_only_that_record() {
        let s = SeqRecord::<1>::new();
        assert!(s.write(2, [20]));
        assert!(s.claim_from(1, 6).is_none(), "the slot holds 2, not 1");
        s.claim_from(2, 6).expect("the slot holds 2").fill([60]);
        assert_eq!(s.read(6), Some([60]));
        assert!(s.claim_from(2, 10).is_none(), "record 2 was replaced by 6");
    }

    #[test]
    fn a_record_being_written_is_not_read() {
        let s = SeqRecord::<2>::new();
        assert!(s.write(3, [30, 31]));
        // What a writer that claimed the slot for 7 and stopped leaves.
        assert!(s.claim(6, 7));
        s.words[0].store(70, Ordering::Relaxed);
        assert_eq!(s.read(7), None, "torn: skipped");
        assert_eq!(s.read(3), None, "the old record is gone");
        assert!(!s.write(8, [80, 81]), "busy: dropped");
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// A record is read whole or not at all: its words are all its own (each a function of its
    /// seq), whatever the writer is doing meanwhile.
    fn whole(seq: u64, words: [u64; 2]) {
        assert_eq!(words, [seq * 10, seq * 10 + 1], "record {seq} read torn");
    }

    /// A reader copying out while a writer replaces record 1 by record 3: it gets record 1
    /// whole, record 3 whole, or nothing, never a mix.
    #[test]
    fn a_reader_never_sees_a_torn_record() {
        loom::model(|| {
            let s = Arc::new(SeqRecord::<2>::new());
            assert!(s.write(1, [10, 11]));
            let w = {
                let s = s.clone();
                // The usual path: the record a ring before, guessed right.
                thread::spawn(move || s.claim_from(1, 3).expect("record 1 there").fill([30, 31]))
            };
            for seq in [1, 3] {
                if let Some(words) = s.read(seq) {
                    whole(seq, words);
                }
            }
            w.join().unwrap();
            assert_eq!(s.read(3), Some([30, 31]));
        });
    }

    /// Two writers of one slot at once (records 2 and 4, as far apart as the ring is long) and
    /// a reader: the slot ends holding one record whole, the newer unless the older was the
    /// only one to claim it; the reader never sees a mix of the two.
    #[test]
    fn two_writers_of_one_slot_never_mix() {
        loom::model(|| {
            let s = Arc::new(SeqRecord::<2>::new());
            let writers: Vec<_> = [2u64, 4]
                .into_iter()
                .map(|seq| {
                    let s = s.clone();
                    thread::spawn(move || {
                        // The writer's usual path: a guess at the record a ring before.
                        s.claim_from(seq - 2, seq)
                            .or_else(|| s.claim_older(seq))
                            .map(|c| c.fill([seq * 10, seq * 10 + 1]))
                            .is_some()
                    })
                })
                .collect();
            for seq in [2, 4] {
                if let Some(words) = s.read(seq) {
                    whole(seq, words);
                }
            }
            let wrote: Vec<bool> = writers.into_iter().map(|w| w.join().unwrap()).collect();
            let held = s.seq();
            assert!(held == 2 || held == 4);
            whole(held, s.read(held).expect("a whole record"));
            // The newer one is dropped only when it found the older one being written.
            assert!(wrote[1] || held == 2);
        });
    }
}
