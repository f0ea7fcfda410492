//! `GoneChannels`: the event channels a program destroyed, mirrored for a check that takes no
//! lock, on the preload's `rdma_get_cm_event` hot path (and `rdma_create_id`'s): those calls take
//! the tracker's lock for the check only when their channel may be a destroyed one. Every process
//! has one destroyed channel from the start (librdmacm's set-up makes and destroys a probe id
//! and its channel), and few programs destroy many.
//!
//! While at most [`SLOTS`] are remembered each has a slot, and a slot never moves while it holds
//! one, so a reader never misses one that moved; past that `overflow` sends every check to the
//! lock. `bits` summarises the slots (one bit per channel, all of them in overflow), so that most
//! checks end at one load instead of a scan of every slot.
//!
//! One writer (the preload's tracker, under its lock) adds and removes; any number of readers
//! check at once. A reader must never miss a channel that stays destroyed throughout its check:
//! the bit of such a channel is in every summary stored since it was added, its slot (if it
//! has one) keeps it, and a refill that gives it a slot publishes the slot before it clears
//! `overflow`.

use crate::shim::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Destroyed channels mirrored one per slot.
pub const SLOTS: usize = 8;

/// The destroyed channels, for the lock-free check (the module's doc).
pub struct GoneChannels {
    slots: [AtomicUsize; SLOTS],
    overflow: AtomicBool,
    bits: AtomicU64,
}

/// A channel's bit in `GoneChannels::bits`: channels are malloc'd, 16-byte aligned.
fn bit(channel: usize) -> u64 {
    1 << ((channel >> 4 ^ channel >> 10) & 63)
}

impl GoneChannels {
    /// None destroyed (const: for a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        GoneChannels {
            slots: [const { AtomicUsize::new(0) }; SLOTS],
            overflow: AtomicBool::new(false),
            bits: AtomicU64::new(0),
        }
    }

    /// None destroyed (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        GoneChannels {
            slots: core::array::from_fn(|_| AtomicUsize::new(0)),
            overflow: AtomicBool::new(false),
            bits: AtomicU64::new(0),
        }
    }

    /// False only when `channel` is surely not a destroyed one (0 is never a channel). One load
    /// when its bit is clear, the common case.
    #[inline]
    pub fn may_hold(&self, channel: usize) -> bool {
        // Acquire: a summary stored after a slot was written (`summarise`, Release) shows the
        // slot too. Acquire on `overflow`: a refill's slots are written before it is cleared
        // (Release), so a reader that sees it clear sees them. Relaxed slots: ordered by those.
        self.bits.load(Ordering::Acquire) & bit(channel) != 0
            && (self.overflow.load(Ordering::Acquire)
                || self
                    .slots
                    .iter()
                    .any(|s| s.load(Ordering::Relaxed) == channel))
    }

    /// `bits` again from the slots, after they changed.
    fn summarise(&self) {
        // Relaxed loads: the writer's own stores.
        let bits = if self.overflow.load(Ordering::Relaxed) {
            u64::MAX
        } else {
            self.slots
                .iter()
                .map(|s| s.load(Ordering::Relaxed))
                .filter(|&c| c != 0)
                .fold(0, |b, c| b | bit(c))
        };
        // Release: the slots written before are seen by a reader that sees these bits.
        self.bits.store(bits, Ordering::Release);
    }

    /// `channel` was destroyed. By the one writer.
    pub fn add(&self, channel: usize) {
        // Relaxed loads here and below: the writer reads its own stores.
        if self.overflow.load(Ordering::Relaxed) {
            return;
        }
        match self.slots.iter().find(|s| s.load(Ordering::Relaxed) == 0) {
            // Release: with the summary's, orders the slot before the bit that sends readers
            // to it.
            Some(s) => s.store(channel, Ordering::Release),
            // Release: pairs with the readers' Acquire (`may_hold`).
            None => self.overflow.store(true, Ordering::Release),
        }
        self.summarise();
    }

    /// `channel` left the set (made again). `still_gone` lists the set after it left; it is
    /// asked only in overflow, and only its first `SLOTS + 1` entries are read: when the set fits
    /// the slots again, they are refilled from it and `overflow` cleared. By the one writer.
    pub fn removed<I: IntoIterator<Item = usize>>(
        &self,
        channel: usize,
        still_gone: impl FnOnce() -> I,
    ) {
        // Relaxed loads here and in `refill`: the writer reads its own stores.
        if !self.overflow.load(Ordering::Relaxed) {
            if let Some(s) = self
                .slots
                .iter()
                .find(|s| s.load(Ordering::Relaxed) == channel)
            {
                // Release: as in `add`.
                s.store(0, Ordering::Release);
            }
        } else {
            let mut now = [0usize; SLOTS];
            let mut n = 0;
            for c in still_gone() {
                if n == SLOTS {
                    // More than the slots hold: stay in overflow.
                    n += 1;
                    break;
                }
                now[n] = c;
                n += 1;
            }
            if n <= SLOTS {
                self.refill(&now[..n]);
            }
        }
        self.summarise();
    }

    /// The slots from `now` while `overflow` still sends readers to the lock, then opened. A
    /// channel still in its slot stays there: a reader that loaded `overflow` before it was set
    /// may still be scanning, and must not find it gone from one slot and not yet in another.
    fn refill(&self, now: &[usize]) {
        // Relaxed stores: published by `overflow`'s Release below.
        for s in &self.slots {
            if !now.contains(&s.load(Ordering::Relaxed)) {
                s.store(0, Ordering::Relaxed);
            }
        }
        for &key in now {
            if self.slots.iter().any(|s| s.load(Ordering::Relaxed) == key) {
                continue;
            }
            if let Some(s) = self.slots.iter().find(|s| s.load(Ordering::Relaxed) == 0) {
                s.store(key, Ordering::Relaxed);
            }
        }
        // Release: the slots above are written before a reader that sees `overflow` clear scans
        // them.
        self.overflow.store(false, Ordering::Release);
    }

    // The three below load Relaxed: a snapshot for the writer (its own stores) or a test.

    /// Which slot holds `channel` (tests and diagnostics).
    pub fn slot_of(&self, channel: usize) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.load(Ordering::Relaxed) == channel)
    }

    /// The summary bits (tests and diagnostics).
    pub fn bits(&self) -> u64 {
        self.bits.load(Ordering::Relaxed)
    }

    /// Whether every check goes to the lock (tests and diagnostics).
    pub fn in_overflow(&self) -> bool {
        self.overflow.load(Ordering::Relaxed)
    }

    /// A channel's bit in the summary (tests and diagnostics).
    pub fn bit(channel: usize) -> u64 {
        bit(channel)
    }
}

impl Default for GoneChannels {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn overflow_and_refill() {
        let g = GoneChannels::new();
        let chans: Vec<usize> = (1..=SLOTS + 1).map(|i| 0x1000 * i).collect();
        for &c in &chans[..SLOTS] {
            g.add(c);
        }
        assert!(!g.in_overflow());
        assert!(chans[..SLOTS].iter().all(|&c| g.may_hold(c)));
        g.add(chans[SLOTS]);
        assert!(g.in_overflow() && g.bits() == u64::MAX);
        let places: Vec<_> = chans[1..SLOTS].iter().map(|&c| g.slot_of(c)).collect();
        // More than the slots hold: the list is read no further than SLOTS + 1 entries.
        let mut asked = 0;
        g.removed(chans[0], || {
            (0..).map(|i| 0x10_0000 + 0x10 * i).inspect(|_| asked += 1)
        });
        assert!(g.in_overflow());
        assert_eq!(asked, SLOTS + 1);
        // The first made again (the set now fits): each keeps its slot, the last gets the free one.
        g.removed(chans[0], || chans[1..].iter().copied());
        assert!(!g.in_overflow());
        let after: Vec<_> = chans[1..SLOTS].iter().map(|&c| g.slot_of(c)).collect();
        assert_eq!(after, places);
        assert_eq!(g.slot_of(chans[SLOTS]), Some(0));
        assert!(!g.may_hold(chans[0]) && chans[1..].iter().all(|&c| g.may_hold(c)));
    }
}

// Every role runs in a spawned thread; the model's main thread only sets up and joins.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Channels 16-byte aligned, each with a bit of its own.
    fn chan(i: usize) -> usize {
        0x1000 + 0x10 * i
    }

    /// Two readers checking `watched` while `writer` runs: never a miss.
    fn two_readers(g: GoneChannels, watched: &'static [usize], writer: fn(&GoneChannels)) {
        let g = Arc::new(g);
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                thread::spawn(move || {
                    for &c in watched {
                        assert!(g.may_hold(c), "missed {c:#x}, destroyed throughout");
                    }
                })
            })
            .collect();
        let w = {
            let g = g.clone();
            thread::spawn(move || writer(&g))
        };
        w.join().unwrap();
        for r in readers {
            r.join().unwrap();
        }
        for &c in watched {
            assert!(g.may_hold(c));
        }
    }

    /// Channel 0 stays destroyed, in its slot, while the writer adds past the slots (overflow)
    /// and refills them when another is made again.
    #[test]
    fn a_slotted_channel_is_never_missed() {
        loom::model(|| {
            let g = GoneChannels::new();
            for i in 0..SLOTS {
                g.add(chan(i));
            }
            two_readers(g, &[0x1000], |g| {
                // Overflow; then chan(1) made again: the rest fits, refilled.
                g.add(chan(SLOTS));
                g.removed(chan(1), || (0..=SLOTS).filter(|&i| i != 1).map(chan));
            });
        });
    }

    /// A channel destroyed in overflow (no slot) stays destroyed while the refill gives it a
    /// slot: never missed, before, during or after.
    #[test]
    fn a_channel_given_a_slot_by_the_refill_is_never_missed() {
        loom::model(|| {
            let g = GoneChannels::new();
            for i in 0..=SLOTS {
                g.add(chan(i));
            }
            assert!(g.in_overflow());
            // chan(SLOTS) has no slot.
            two_readers(g, &[0x1000 + 0x10 * SLOTS], |g| {
                g.removed(chan(3), || (0..=SLOTS).filter(|&i| i != 3).map(chan));
            });
        });
    }

    /// A slot freed and taken by another (no overflow) before the slot of a channel that stays
    /// destroyed: a reader scanning past it never misses that channel.
    #[test]
    fn a_slot_freed_and_taken_misses_no_other() {
        loom::model(|| {
            let g = GoneChannels::new();
            for i in 0..SLOTS {
                g.add(chan(i));
            }
            two_readers(g, &[0x1000 + 0x10 * (SLOTS - 1)], |g| {
                // chan(2) made again; its slot is taken by the next destroyed.
                g.removed(chan(2), Vec::new);
                g.add(chan(SLOTS));
            });
        });
    }
}
