//! A pooled slot's references, in one atomic word: all of them in the low half, those held on
//! the slot's private data buffer alone in the high half.
//!
//! One word, because a reader must see both counts at one instant: a thread that checks an
//! event handle computes the event's own references as `all - buffer`, while another thread
//! takes and gives back buffer references on the same slot. With two words, no order of the
//! writes helps: the reader's two loads can always straddle a whole take or a whole give-back.
//! Here a buffer reference changes both halves in one read-modify-write, and the reader makes
//! one load.
//!
//! Giving a reference back is one read-modify-write too, whose result says what happened:
//! another reference remains, this was the last one (the caller frees the slot), or there was
//! no such reference to give (a misuse the caller names; the word is then wrong, and the
//! caller aborts).

use crate::shim::{fence, AtomicU64, Ordering};

/// One reference of any kind: the low half counts them all.
const ONE: u64 = 1;
/// One reference held on the buffer alone, also counted in the low half.
const BUF: u64 = 1 << 32 | ONE;

fn all(word: u64) -> u32 {
    word as u32
}

fn buf(word: u64) -> u32 {
    (word >> 32) as u32
}

/// What giving back a reference did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Released {
    /// Other references remain.
    Kept,
    /// That was the slot's last reference: the caller frees it. What every other holder did
    /// with the slot happens before this.
    Last,
    /// There was no such reference to give back (released more often than retained, or the
    /// same reference released by two threads at once): the caller reports it and aborts.
    Misuse,
}

/// The references of one slot (see the module doc). 8 bytes, 8-aligned, zero in a free slot.
#[repr(transparent)]
pub struct SlotRefs(AtomicU64);

// The pool keeps this at the start of each slot of its mmap'ed range and casts to it.
#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<SlotRefs>() == 8);
    assert!(std::mem::align_of::<SlotRefs>() == 8);
};

impl SlotRefs {
    /// No references: a free slot.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        SlotRefs(AtomicU64::new(0))
    }

    /// No references: a free slot.
    #[cfg(loom)]
    pub fn new() -> Self {
        SlotRefs(AtomicU64::new(0))
    }

    /// The counts at the start of a slot.
    ///
    /// # Safety
    /// `slot` is 8-aligned, valid for reads and writes of 8 bytes for `'a`, and only ever
    /// accessed atomically, through this type, while it is.
    #[cfg(not(loom))]
    #[inline]
    pub unsafe fn at<'a>(slot: *const u8) -> &'a SlotRefs {
        // SAFETY: per the contract; `SlotRefs` is an `AtomicU64`, whose layout is a `u64`'s.
        unsafe { &*(slot as *const SlotRefs) }
    }

    /// Makes a slot live with one reference: its buffer's when `buf`, else its event's.
    /// What was written into the slot before is seen by any thread that is handed it.
    #[inline]
    pub fn publish(&self, buf: bool) {
        // Release: the slot's contents, written before, travel with the handle to any thread
        // that reads the word with Acquire (`refs`, `event_refs`) or takes over the reference.
        self.0.store(if buf { BUF } else { ONE }, Ordering::Release);
    }

    /// One more reference to the event (the slot), made from one the caller holds.
    #[inline]
    pub fn retain_event(&self) {
        // Relaxed: the caller's reference keeps the slot live and its contents already
        // visible; only the count changes. Its give-back orders what this holder does.
        self.0.fetch_add(ONE, Ordering::Relaxed);
    }

    /// One more reference to the buffer, made from one the caller holds (of either kind).
    #[inline]
    pub fn retain_buf(&self) {
        // Relaxed: as in `retain_event`. Both halves change at once.
        self.0.fetch_add(BUF, Ordering::Relaxed);
    }

    /// Gives back one of the event's own references.
    #[inline]
    pub fn release_event(&self) -> Released {
        // Release: this holder's use of the slot happens before the free of whoever sees the
        // last reference go (the Acquire fence in `settle`).
        let before = self.0.fetch_sub(ONE, Ordering::Release);
        settle(before, ONE, all(before) <= buf(before))
    }

    /// Gives back one reference held on the buffer alone.
    #[inline]
    pub fn release_buf(&self) -> Released {
        // Release: as in `release_event`.
        let before = self.0.fetch_sub(BUF, Ordering::Release);
        settle(before, BUF, buf(before) == 0)
    }

    /// References of any kind; 0 in a free slot.
    #[inline]
    pub fn refs(&self) -> u32 {
        // Acquire: a caller that finds the slot live reads its contents next, which the
        // publishing store (or a give-back since) made visible.
        all(self.0.load(Ordering::Acquire))
    }

    /// References held on the buffer alone.
    #[inline]
    pub fn buf_refs(&self) -> u32 {
        // Acquire: as in `refs`.
        buf(self.0.load(Ordering::Acquire))
    }

    /// References to the event itself: all but those held on the buffer alone, both read at
    /// one instant.
    #[inline]
    pub fn event_refs(&self) -> u32 {
        // Acquire: as in `refs`.
        let word = self.0.load(Ordering::Acquire);
        all(word).saturating_sub(buf(word))
    }
}

impl Default for SlotRefs {
    fn default() -> Self {
        Self::new()
    }
}

/// What a give-back of `one` that found `before` did; `missing`: the kind given back had no
/// reference left.
#[inline]
fn settle(before: u64, one: u64, missing: bool) -> Released {
    if before == one {
        // Acquire: every other holder gave its reference back with Release; their uses of the
        // slot happen before the caller frees it.
        fence(Ordering::Acquire);
        Released::Last
    } else if missing {
        Released::Misuse
    } else {
        Released::Kept
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_and_outcomes() {
        let r = SlotRefs::new();
        r.publish(false);
        assert_eq!((r.refs(), r.event_refs(), r.buf_refs()), (1, 1, 0));
        r.retain_buf();
        r.retain_buf();
        r.retain_event();
        assert_eq!((r.refs(), r.event_refs(), r.buf_refs()), (4, 2, 2));
        assert_eq!(r.release_event(), Released::Kept);
        assert_eq!(r.release_buf(), Released::Kept);
        assert_eq!(r.release_event(), Released::Kept);
        assert_eq!((r.refs(), r.event_refs(), r.buf_refs()), (1, 0, 1));
        // The buffer outlives its event: its reference is the last.
        assert_eq!(r.release_buf(), Released::Last);
        assert_eq!(r.refs(), 0);
    }

    #[test]
    fn a_buffer_made_alone_has_only_buffer_references() {
        let r = SlotRefs::new();
        r.publish(true);
        assert_eq!((r.refs(), r.event_refs(), r.buf_refs()), (1, 0, 1));
        assert_eq!(r.release_buf(), Released::Last);
        assert_eq!((r.refs(), r.buf_refs()), (0, 0));
    }

    #[test]
    fn giving_back_what_is_not_held_is_a_misuse() {
        // An event's reference given back twice.
        let r = SlotRefs::new();
        r.publish(false);
        assert_eq!(r.release_event(), Released::Last);
        assert_eq!(r.release_event(), Released::Misuse);
        // An event's reference given back while only a buffer reference is held: never the
        // last, whose free would pull the buffer from under its holder.
        let r = SlotRefs::new();
        r.publish(false);
        r.retain_buf();
        assert_eq!(r.release_event(), Released::Kept);
        assert_eq!(r.release_event(), Released::Misuse);
        // A buffer reference given back when the buffer holds none (the event's own view).
        let r = SlotRefs::new();
        r.publish(false);
        assert_eq!(r.release_buf(), Released::Misuse);
        // A buffer's last reference given back twice.
        let r = SlotRefs::new();
        r.publish(true);
        assert_eq!(r.release_buf(), Released::Last);
        assert_eq!(r.release_buf(), Released::Misuse);
    }

    #[test]
    fn lies_over_the_slot_header() {
        let mut header = [0u64; 2];
        // SAFETY: an 8-aligned word of our own, used only through the cast while it is.
        let r = unsafe { SlotRefs::at(header.as_mut_ptr() as *const u8) };
        r.publish(true);
        r.retain_event();
        assert_eq!((r.refs(), r.event_refs(), r.buf_refs()), (2, 1, 1));
        assert_eq!(header[0], 1 << 32 | 2);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{Released, SlotRefs};
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// A slot as the models see it: its counts, a value its holders read, and how many times it
    /// was freed.
    struct Slot {
        refs: SlotRefs,
        value: UnsafeCell<u32>,
        frees: AtomicUsize,
    }

    impl Slot {
        /// A new slot with one reference, the event's (`buf` false) or its buffer's.
        fn new(buf: bool) -> Arc<Slot> {
            let slot = Slot {
                refs: SlotRefs::new(),
                value: UnsafeCell::new(7),
                frees: AtomicUsize::new(0),
            };
            slot.refs.publish(buf);
            Arc::new(slot)
        }

        fn release(&self, buf: bool) -> Released {
            let released = if buf {
                self.refs.release_buf()
            } else {
                self.refs.release_event()
            };
            if released == Released::Last {
                // Relaxed: a count the test reads after joining every thread.
                self.frees.fetch_add(1, Ordering::Relaxed);
            }
            released
        }

        /// What a holder does: reads the value (a reference is held).
        fn read(&self) -> u32 {
            // SAFETY: only the thread that frees the slot writes it, after the last reference.
            self.value.with(|v| unsafe { *v })
        }

        /// What the pool does with a freed slot: the next owner writes it anew. loom's cell
        /// reports it unless every holder's read happens before it.
        fn reuse(&self) {
            // SAFETY: called by the one thread that saw the last reference go.
            self.value.with_mut(|v| unsafe { *v = 0 });
        }
    }

    /// Model (i): a thread takes and gives back a buffer reference while the event's holder
    /// reads its event references: every read must see the one the reader holds.
    #[test]
    fn a_buffer_reference_never_hides_the_event_from_a_reader() {
        loom::model(|| {
            let slot = Slot::new(false);
            let s = Arc::clone(&slot);
            let buffers = thread::spawn(move || {
                s.refs.retain_buf();
                assert_eq!(s.release(true), Released::Kept);
            });
            for _ in 0..2 {
                let refs = slot.refs.event_refs();
                assert_eq!(refs, 1, "the event's own reference read as {refs}");
            }
            buffers.join().unwrap();
            assert_eq!((slot.refs.event_refs(), slot.refs.buf_refs()), (1, 0));
            assert_eq!(slot.release(false), Released::Last);
        });
    }

    /// Model (ii): two threads each give back one of the slot's two references (of each pair of
    /// kinds): exactly one sees the last go, the slot is freed once, and its freeing comes after
    /// the other holder's last read.
    #[test]
    fn of_two_references_released_at_once_exactly_one_is_the_last() {
        for (mine_buf, theirs_buf) in [(false, false), (false, true), (true, true)] {
            loom::model(move || {
                let slot = Slot::new(mine_buf);
                if theirs_buf {
                    slot.refs.retain_buf();
                } else {
                    slot.refs.retain_event();
                }
                let s = Arc::clone(&slot);
                let theirs = thread::spawn(move || {
                    assert_eq!(s.read(), 7);
                    let released = s.release(theirs_buf);
                    if released == Released::Last {
                        s.reuse();
                    }
                    released
                });
                assert_eq!(slot.read(), 7);
                let mine = slot.release(mine_buf);
                if mine == Released::Last {
                    slot.reuse();
                }
                let theirs = theirs.join().unwrap();
                assert!(
                    matches!(
                        (mine, theirs),
                        (Released::Last, Released::Kept) | (Released::Kept, Released::Last)
                    ),
                    "mine {mine:?}, theirs {theirs:?}"
                );
                assert_eq!(slot.frees.load(Ordering::Relaxed), 1);
                assert_eq!(slot.refs.refs(), 0);
            });
        }
    }

    /// Model (ii), misuse: two threads give back the same last reference (of an event, then of a
    /// buffer): one frees the slot, the other is told of the misuse; never both free it.
    #[test]
    fn the_same_last_reference_released_twice_is_named_not_freed_twice() {
        for buf in [false, true] {
            loom::model(move || {
                let slot = Slot::new(buf);
                let s = Arc::clone(&slot);
                let theirs = thread::spawn(move || s.release(buf));
                let mine = slot.release(buf);
                let theirs = theirs.join().unwrap();
                assert!(
                    matches!(
                        (mine, theirs),
                        (Released::Last, Released::Misuse) | (Released::Misuse, Released::Last)
                    ),
                    "mine {mine:?}, theirs {theirs:?}"
                );
                assert_eq!(
                    slot.frees.load(Ordering::Relaxed),
                    1,
                    "freed more than once"
                );
            });
        }
    }
}
