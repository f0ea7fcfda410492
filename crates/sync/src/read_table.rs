//! `ReadTable`: the threads blocked in a read (the preload's `rdma_get_cm_event`), by event
//! channel, for a watcher that takes no lock. A reader claims a free slot with one
//! compare-and-swap, writes its call site and its thread, and gives the slot back with two
//! stores; nothing allocates, locks or makes a system call. When every slot is taken, a read is
//! simply not tracked.
//!
//! The watcher's snapshot never pairs one read's channel with another read's thread or call
//! site: a slot's fields are written by its claimer after the claim, with Release stores, and a snapshot keeps a slot only when its channel reads the same
//! before and after its thread and call site. A slot freed and claimed again for the same
//! channel in between gives the new read, whole: still a true read of that channel.

use crate::shim::{AtomicI32, AtomicUsize, Ordering};

struct Slot {
    /// The channel read (0: a free slot).
    channel: AtomicUsize,
    /// The reading thread (0 until the claimer published the slot).
    thread: AtomicI32,
    /// The call site (the program's return address).
    at: AtomicUsize,
}

impl Slot {
    #[cfg(not(loom))]
    const fn new() -> Self {
        Slot {
            channel: AtomicUsize::new(0),
            thread: AtomicI32::new(0),
            at: AtomicUsize::new(0),
        }
    }

    #[cfg(loom)]
    fn new() -> Self {
        Slot {
            channel: AtomicUsize::new(0),
            thread: AtomicI32::new(0),
            at: AtomicUsize::new(0),
        }
    }
}

/// One read in progress, as a snapshot shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read {
    pub slot: usize,
    pub channel: usize,
    pub thread: i32,
    pub at: usize,
}

/// The reads in progress, `N` at most (the module's doc).
pub struct ReadTable<const N: usize> {
    slots: [Slot; N],
}

/// A read in progress, for [`ReadTable::leave`]; `N` (out of range) when it is not tracked.
pub type Token = usize;

impl<const N: usize> ReadTable<N> {
    /// No read in progress (const: for a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        ReadTable {
            slots: [const { Slot::new() }; N],
        }
    }

    /// No read in progress (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        ReadTable {
            slots: core::array::from_fn(|_| Slot::new()),
        }
    }

    /// The token of a read not tracked.
    pub const NONE: Token = N;

    /// `thread` (non-zero) begins reading `channel` (0: nothing tracked), called from `at`.
    #[inline]
    pub fn enter(&self, channel: usize, thread: i32, at: usize) -> Token {
        if channel == 0 || thread == 0 {
            return N;
        }
        for (i, s) in self.slots.iter().enumerate() {
            // Relaxed first look: the compare-and-swap decides. Acquire on success: the
            // previous claimer's stores (its leave) come before ours.
            if s.channel.load(Ordering::Relaxed) == 0
                && s.channel
                    .compare_exchange(0, channel, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                // Release: a snapshot that sees this call site sees the claim too, so its
                // second look at the channel cannot find the slot's previous read.
                s.at.store(at, Ordering::Release);
                s.thread.store(thread, Ordering::Release);
                return i;
            }
        }
        N
    }

    /// The read `token` ended (returned, failed or was cancelled).
    #[inline]
    pub fn leave(&self, token: Token) {
        if let Some(s) = self.slots.get(token) {
            // Relaxed: the channel's Release store below orders it before the slot is free.
            s.thread.store(0, Ordering::Relaxed);
            s.channel.store(0, Ordering::Release);
        }
    }

    /// Every read in progress whose fields were read whole (the module's doc).
    pub fn snapshot(&self) -> impl Iterator<Item = Read> + '_ {
        self.slots.iter().enumerate().filter_map(|(slot, s)| {
            // Acquire on the channel and the thread: the claimer's stores before them are seen.
            let channel = s.channel.load(Ordering::Acquire);
            if channel == 0 {
                return None;
            }
            let thread = s.thread.load(Ordering::Acquire);
            let at = s.at.load(Ordering::Acquire);
            // The channel again: a slot freed and claimed for another channel in between would
            // pair this channel with the other read's thread.
            (thread != 0 && s.channel.load(Ordering::Acquire) == channel).then_some(Read {
                slot,
                channel,
                thread,
                at,
            })
        })
    }

    /// In a child after fork(2): only the forking thread lives there, and it reads nothing.
    pub fn clear(&self) {
        for s in &self.slots {
            s.thread.store(0, Ordering::Relaxed);
            s.channel.store(0, Ordering::Relaxed);
        }
    }
}

impl<const N: usize> Default for ReadTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn on(t: &ReadTable<4>, channel: usize) -> Vec<(i32, usize)> {
        let mut v: Vec<_> = t
            .snapshot()
            .filter(|r| r.channel == channel)
            .map(|r| (r.thread, r.at))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_read_is_seen_on_its_channel_until_it_leaves() {
        let t = ReadTable::<4>::new();
        let (a, b) = (0x7a00_0010, 0x7a00_0020);
        let t1 = t.enter(a, 101, 0x1001);
        let t2 = t.enter(a, 102, 0x1002);
        let t3 = t.enter(b, 103, 0x1003);
        assert_eq!((t1, t2, t3), (0, 1, 2));
        assert_eq!(on(&t, a), [(101, 0x1001), (102, 0x1002)]);
        assert_eq!(on(&t, b), [(103, 0x1003)]);
        t.leave(t1);
        assert_eq!(on(&t, a), [(102, 0x1002)]);
        // The freed slot is the first taken again.
        assert_eq!(t.enter(b, 104, 0x1004), 0);
        assert_eq!(on(&t, b), [(103, 0x1003), (104, 0x1004)]);
        t.clear();
        assert_eq!(t.snapshot().count(), 0);
    }

    #[test]
    fn past_its_slots_or_without_a_channel_a_read_is_not_tracked() {
        let t = ReadTable::<2>::new();
        assert_eq!(t.enter(0, 1, 0x10), ReadTable::<2>::NONE);
        assert_eq!(t.enter(0x100, 0, 0x10), ReadTable::<2>::NONE);
        assert_eq!(t.enter(0x100, 1, 0x10), 0);
        assert_eq!(t.enter(0x100, 2, 0x20), 1);
        assert_eq!(t.enter(0x100, 3, 0x30), ReadTable::<2>::NONE);
        t.leave(ReadTable::<2>::NONE);
        assert_eq!(t.snapshot().count(), 2);
    }
}

// Every role runs in a spawned thread; the model's main thread only sets up and joins.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Each reader's (channel, call site), by its thread id (1 and 2).
    const READS: [(usize, usize); 2] = [(0x100, 0xa1), (0x200, 0xa2)];

    /// Two readers, one after the other in one slot or in two, each entering and leaving; a
    /// watcher's snapshots never mix one read's fields with another's, and two reads never
    /// share a slot.
    #[test]
    fn a_snapshot_never_mixes_two_reads() {
        loom::model(|| {
            let t = Arc::new(ReadTable::<1>::new());
            let readers: Vec<_> = (0..2)
                .map(|i| {
                    let t = t.clone();
                    thread::spawn(move || {
                        let (channel, at) = READS[i];
                        let token = t.enter(channel, i as i32 + 1, at);
                        t.leave(token);
                    })
                })
                .collect();
            let w = {
                let t = t.clone();
                thread::spawn(move || {
                    for r in t.snapshot() {
                        let (channel, at) = READS[(r.thread - 1) as usize];
                        assert_eq!((r.channel, r.at), (channel, at), "mixed: {r:?}");
                    }
                })
            };
            w.join().unwrap();
            for r in readers {
                r.join().unwrap();
            }
            assert_eq!(t.snapshot().count(), 0);
        });
    }

    /// A read in progress while another enters and leaves: always seen, whole.
    #[test]
    fn a_read_in_progress_is_always_seen() {
        loom::model(|| {
            let t = Arc::new(ReadTable::<2>::new());
            let held = t.enter(0x100, 1, 0xa1);
            let other = {
                let t = t.clone();
                thread::spawn(move || {
                    let token = t.enter(0x200, 2, 0xa2);
                    t.leave(token);
                })
            };
            let w = {
                let t = t.clone();
                thread::spawn(move || {
                    let seen: Vec<_> = t.snapshot().filter(|r| r.thread == 1).collect();
                    assert_eq!(seen.len(), 1);
                    assert_eq!((seen[0].channel, seen[0].at), (0x100, 0xa1));
                })
            };
            other.join().unwrap();
            w.join().unwrap();
            t.leave(held);
        });
    }
}
