//! `SeqRecord`: one slot of a ring of records that many threads write and a reader copies out
//! while they write, with no lock (the flight recorder's slots, `cmsafe_flight_dump(3)`).
//!
//! Each record carries a sequence number, unique and never 0, that decides its slot (the ring
//! is indexed by it) and its place in the slot's history: the stamp holds `seq * 2` for a whole
//! record and `seq * 2 + 1` while a thread writes one. A writer claims the slot with one
//! compare-and-swap from a whole, older record, so two threads never write one slot at once: a
//! writer that finds the slot being written, or holding a newer record, drops its own. An
//! amendment (a field filled in later: the release time) claims the slot the same way, from
//! its own record only, so it never lands on a record that replaced its own.
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
    /// another thread is writing it (a writer as far behind as the ring is long). `prev`: the
    /// record the slot most likely holds, the one a ring's length before (a guess: any other
    /// whole, older record is replaced all the same, at the cost of a load and a second try).
    #[inline(always)]
    pub fn write(&self, seq: u64, prev: u64, words: [u64; W]) -> bool {
        if !self.claim(prev.wrapping_mul(2), seq) && !self.claim_older(seq) {
            return false;
        }
        for (w, v) in self.words.iter().zip(words) {
            w.store(v, Ordering::Relaxed);
        }
        // Release: the words are seen by whoever sees the whole stamp.
        self.stamp.store(seq * 2, Ordering::Release);
        true
    }

    /// Claims the slot for `seq` from whatever whole, older record it holds.
    #[cold]
    fn claim_older(&self, seq: u64) -> bool {
        let old = self.stamp.load(Ordering::Relaxed);
        old & 1 == 0 && old < seq * 2 && self.claim(old, seq)
    }

    /// Sets word `i` of record `seq`, if the slot still holds it whole; false otherwise (the
    /// record was replaced, or is being written or amended by another thread).
    #[inline(always)]
    pub fn amend(&self, seq: u64, i: usize, value: u64) -> bool {
        if !self.claim(seq * 2, seq) {
            return false;
        }
        self.words[i].store(value, Ordering::Relaxed);
        self.stamp.store(seq * 2, Ordering::Release);
        true
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
        self.claim_older(seq)
    }

    /// The sequence number of the record the slot holds whole or is being written, 0 for none.
    pub fn seq(&self) -> u64 {
        self.stamp.load(Ordering::Relaxed) / 2
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
        assert!(s.write(1, 0, [1, 2, 3]));
        assert_eq!(s.read(1), Some([1, 2, 3]));
        assert!(
            s.write(9, 5, [9, 8, 7]),
            "a wrong guess, then the record there"
        );
        assert_eq!(s.read(1), None, "replaced");
        assert_eq!(s.read(9), Some([9, 8, 7]));
        assert!(!s.write(5, 1, [5, 5, 5]), "an older record is dropped");
        assert!(!s.write(9, 1, [0, 0, 0]), "the same record is written once");
        assert_eq!(s.read(9), Some([9, 8, 7]));
        assert_eq!(s.seq(), 9);
    }

    #[test]
    fn an_amendment_lands_on_its_own_record_only() {
        let s = SeqRecord::<2>::new();
        assert!(s.write(4, 0, [40, 0]));
        assert!(s.amend(4, 1, 41));
        assert_eq!(s.read(4), Some([40, 41]));
        assert!(s.write(12, 4, [120, 0]));
        assert!(!s.amend(4, 1, 99), "record 4 was replaced");
        assert_eq!(s.read(12), Some([120, 0]));
    }

    #[test]
    fn a_record_being_written_is_not_read() {
        let s = SeqRecord::<2>::new();
        assert!(s.write(3, 0, [30, 31]));
        // What a writer that claimed the slot for 7 and stopped leaves.
        assert!(s.claim(6, 7));
        s.words[0].store(70, Ordering::Relaxed);
        assert_eq!(s.read(7), None, "torn: skipped");
        assert_eq!(s.read(3), None, "the old record is gone");
        assert!(!s.write(8, 7, [80, 81]), "busy: dropped");
        assert!(!s.amend(7, 1, 1), "busy: not amended");
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
            assert!(s.write(1, 0, [10, 11]));
            let w = {
                let s = s.clone();
                thread::spawn(move || assert!(s.write(3, 1, [30, 31])))
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
                    thread::spawn(move || s.write(seq, seq - 2, [seq * 10, seq * 10 + 1]))
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

    /// An amendment racing the slot's reuse: it lands on its own record or not at all, never
    /// on the record that replaced it.
    #[test]
    fn an_amendment_never_lands_on_the_next_record() {
        loom::model(|| {
            let s = Arc::new(SeqRecord::<2>::new());
            assert!(s.write(1, 0, [10, 0]));
            let a = {
                let s = s.clone();
                thread::spawn(move || s.amend(1, 1, 11))
            };
            let wrote = s.write(3, 1, [30, 31]);
            let amended = a.join().unwrap();
            if wrote {
                let words = s.read(3).expect("record 3 whole");
                assert_eq!(
                    words,
                    [30, 31],
                    "the amendment of record 1 landed on record 3"
                );
            } else {
                // The writer found the amendment in the slot and dropped record 3.
                assert!(amended);
                assert_eq!(s.read(1), Some([10, 11]));
            }
        });
    }
}
