//! `SignalQueue`: a bounded multi-producer, multi-consumer queue that a signal handler may push
//! to: no allocation, no lock, no system call, nothing that waits for another thread.
//!
//! The preload's SIGSEGV handler records each use-after-ack here, on whichever thread faulted
//! (several may fault at once), and any thread's next wrapped call drains it (several may drain
//! at once).
//!
//! The design is D. Vyukov's bounded MPMC queue: each slot carries a sequence number that says
//! whose turn it is. A producer claims position `pos` by a compare-and-swap on `tail` once the
//! slot's number says it is free for that lap, writes the value, then publishes it by setting
//! the slot's number to `pos + 1`; a consumer claims it by a compare-and-swap on `head` once the
//! number says it is full, reads the value, then frees the slot for the next lap (`pos + N`).
//! Two producers (or two consumers) never own one slot: the compare-and-swap gives each position
//! to one of them; and a value is read only after it was published, and overwritten only after it
//! was read.
//!
//! In a signal handler: a push interrupted on its own thread by another push finds the
//! position moved on and takes the next one; nothing waits, so the handler cannot deadlock on
//! the thread it interrupted. Neither side is lock-free in the strict sense: a producer stopped
//! between its claim and its publication holds back the consumers at that slot (`pop` says empty
//! until it goes on), and a consumer stopped likewise makes a full lap report the queue full.
//! Both are reported, never waited for: a push that finds the queue full returns its value and
//! counts it (`lost`), so a finding that cannot be queued is counted, not silently dropped.
//!
//! `N` is at least 2: with one slot, "holds the value of `pos`" (`pos + 1`) and "free for the
//! producer of `pos + N`" would be the same number.
//!
//! Positions are `usize` and only grow: on 64-bit targets they never wrap in practice, so a
//! stalled thread cannot mistake a later lap for its own (no ABA).

use core::mem::MaybeUninit;

use crate::shim::{AtomicU64, AtomicUsize, Ordering};
use crate::slot_cell::SlotCell;

struct Slot<T> {
    /// The slot's turn, minus its index (so that every slot starts at 0 and `new` can be
    /// const): for the slot at index `i`, `stamp + i` is the position it waits for, as Vyukov's
    /// sequence number: `pos` when free for the producer of `pos`, `pos + 1` when holding the
    /// value of `pos`.
    stamp: AtomicUsize,
    value: SlotCell<MaybeUninit<T>>,
}

/// A bounded MPMC queue of `N` values of `T`, usable from a signal handler and from a `static`.
pub struct SignalQueue<T, const N: usize> {
    slots: [Slot<T>; N],
    /// The next position to push.
    tail: AtomicUsize,
    /// The next position to pop.
    head: AtomicUsize,
    /// Values pushed while the queue was full, since the last `take_lost`.
    lost: AtomicU64,
}

// SAFETY: a value is moved in by one thread and out by another (T: Send); the protocol gives each
// slot's cell to one thread at a time (the module's doc), so no `&T` is ever shared.
unsafe impl<T: Send, const N: usize> Sync for SignalQueue<T, N> {}

impl<T: Copy, const N: usize> SignalQueue<T, N> {
    /// An empty queue (const: for a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        assert!(
            N >= 2,
            "one slot cannot tell full from free for the next lap"
        );
        SignalQueue {
            slots: [const {
                Slot {
                    stamp: AtomicUsize::new(0),
                    value: SlotCell::new(MaybeUninit::uninit()),
                }
            }; N],
            tail: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// An empty queue (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        assert!(
            N >= 2,
            "one slot cannot tell full from free for the next lap"
        );
        SignalQueue {
            slots: core::array::from_fn(|_| Slot {
                stamp: AtomicUsize::new(0),
                value: SlotCell::new(MaybeUninit::uninit()),
            }),
            tail: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// The slot of position `pos`, and the turn it is at (see `Slot::stamp`).
    #[inline]
    fn slot(&self, pos: usize, order: Ordering) -> (&Slot<T>, usize) {
        let i = pos % N;
        let slot = &self.slots[i];
        (slot, slot.stamp.load(order).wrapping_add(i))
    }

    /// Sets the turn of the slot at position `pos` to `turn`.
    #[inline]
    fn set_turn(&self, slot: &Slot<T>, pos: usize, turn: usize) {
        // Release: the value written (push) or read (pop) before is done before the slot's next
        // owner, which loads the turn with Acquire, touches the cell.
        slot.stamp
            .store(turn.wrapping_sub(pos % N), Ordering::Release);
    }

    /// Queues `value`; async-signal-safe. When the queue is full the value is counted as lost
    /// and given back.
    pub fn push(&self, value: T) -> Result<(), T> {
        // Relaxed: only a guess at the position, checked against the slot's turn and claimed by
        // the compare-and-swap below.
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            // Acquire: pairs with `set_turn` by the consumer that freed the slot, so its read of
            // the previous value is done before we overwrite it.
            let (slot, turn) = self.slot(pos, Ordering::Acquire);
            let ahead = turn.wrapping_sub(pos) as isize;
            if ahead == 0 {
                // Relaxed: the compare-and-swap only decides which producer owns `pos` (its
                // atomicity does that); the data is ordered by the slot's turn.
                match self.tail.compare_exchange(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: position `pos` is ours alone (the compare-and-swap), and its
                        // slot's previous value was read (the turn, loaded with Acquire).
                        slot.value.with_mut(|p| unsafe { (*p).write(value) });
                        self.set_turn(slot, pos, pos.wrapping_add(1));
                        return Ok(());
                    }
                    Err(now) => pos = now,
                }
            } else if ahead < 0 {
                // The slot still holds the value of the previous lap: full.
                // Relaxed: a count, read by whoever reports it; it orders nothing.
                self.lost.fetch_add(1, Ordering::Relaxed);
                return Err(value);
            } else {
                // Another producer took `pos` meanwhile. Relaxed: as above.
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// The oldest value, or None when there is none (or the oldest is not published yet).
    pub fn pop(&self) -> Option<T> {
        // Relaxed: a guess, as in `push`.
        let mut pos = self.head.load(Ordering::Relaxed);
        loop {
            // Acquire: pairs with `set_turn` by the producer of `pos`: its value is written.
            let (slot, turn) = self.slot(pos, Ordering::Acquire);
            let ahead = turn.wrapping_sub(pos.wrapping_add(1)) as isize;
            if ahead == 0 {
                // Relaxed: the compare-and-swap only decides which consumer owns `pos`.
                match self.head.compare_exchange(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: position `pos` is ours alone (the compare-and-swap), and its
                        // value was published (the turn, loaded with Acquire); T is Copy.
                        let value = slot.value.with(|p| unsafe { (*p).assume_init() });
                        self.set_turn(slot, pos, pos.wrapping_add(N));
                        return Some(value);
                    }
                    Err(now) => pos = now,
                }
            } else if ahead < 0 {
                return None;
            } else {
                // Another consumer took `pos` meanwhile. Relaxed: as above.
                pos = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// Whether something was pushed that no `pop` has taken yet: two loads, for hot paths. A
    /// hint: a push that claimed its position counts before it is published.
    #[inline]
    pub fn maybe_pending(&self) -> bool {
        // Relaxed: a hint only; `pop` does the ordering. A thread sees its own pushes (program
        // order), and others' soon after.
        self.head.load(Ordering::Relaxed) != self.tail.load(Ordering::Relaxed)
    }

    /// Values lost to a full queue since the last call (each counted by one caller only).
    pub fn take_lost(&self) -> u64 {
        // Relaxed: a count; the swap gives each lost value to exactly one caller.
        self.lost.swap(0, Ordering::Relaxed)
    }
}

impl<T: Copy, const N: usize> Default for SignalQueue<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn values_come_out_in_order_over_many_laps() {
        let q: SignalQueue<(u64, u32), 4> = SignalQueue::new();
        assert_eq!(q.pop(), None);
        assert!(!q.maybe_pending());
        let mut next = 0u64;
        for round in 0..10u64 {
            // Fill it, one more is lost, then take all.
            for k in 0..4 {
                assert_eq!(q.push((next + k, 7)), Ok(()));
            }
            assert_eq!(q.push((99, 9)), Err((99, 9)));
            assert!(q.maybe_pending());
            for k in 0..4 {
                assert_eq!(q.pop(), Some((next + k, 7)), "round {round}");
            }
            assert_eq!(q.pop(), None);
            assert!(!q.maybe_pending());
            next += 4;
        }
        assert_eq!(q.take_lost(), 10);
        assert_eq!(q.take_lost(), 0);
    }

    #[test]
    fn threads_push_and_pop_every_value_once() {
        const PER: u64 = 20_000;
        let q: &'static SignalQueue<(u64, u64), 64> = Box::leak(Box::new(SignalQueue::new()));
        let producers: Vec<_> = (0..2u64)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut lost = 0;
                    for i in 0..PER {
                        // The second field checks the record is whole.
                        if q.push((t << 32 | i, !(t << 32 | i))).is_err() {
                            lost += 1;
                        }
                    }
                    lost
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    let mut idle = 0;
                    while idle < 1_000_000 {
                        match q.pop() {
                            Some(v) => {
                                got.push(v);
                                idle = 0;
                            }
                            None => idle += 1,
                        }
                    }
                    got
                })
            })
            .collect();
        let lost: u64 = producers.into_iter().map(|h| h.join().unwrap()).sum();
        let mut got: Vec<(u64, u64)> = consumers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        while let Some(v) = q.pop() {
            got.push(v);
        }
        assert!(got.iter().all(|&(a, b)| b == !a), "a torn record");
        let n = got.len();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), n, "a value popped twice");
        assert_eq!(n as u64 + lost, 2 * PER);
        assert_eq!(q.take_lost(), lost);
    }
}

// Every role runs in a spawned thread; the model's main thread only sets up and joins.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two threads fault at once (two producers) while a wrapped call drains (a consumer): each
    /// record comes out once and whole.
    #[test]
    fn two_producers_and_a_consumer() {
        loom::model(|| {
            let q: Arc<SignalQueue<(u64, u64), 2>> = Arc::new(SignalQueue::new());
            let producers: Vec<_> = [(1, 10), (2, 20)]
                .into_iter()
                .map(|v| {
                    let q = q.clone();
                    thread::spawn(move || q.push(v))
                })
                .collect();
            let consumer = {
                let q = q.clone();
                thread::spawn(move || q.pop())
            };
            for p in producers {
                assert_eq!(p.join().unwrap(), Ok(()));
            }
            let mut got: Vec<(u64, u64)> = consumer.join().unwrap().into_iter().collect();
            while let Some(v) = q.pop() {
                got.push(v);
            }
            got.sort_unstable();
            assert_eq!(got, [(1, 10), (2, 20)]);
            assert_eq!(q.take_lost(), 0);
        });
    }

    /// Two drains at once (two consumers): each record is taken by one of them.
    #[test]
    fn two_consumers() {
        loom::model(|| {
            let q: Arc<SignalQueue<u64, 2>> = Arc::new(SignalQueue::new());
            q.push(1).unwrap();
            let producer = {
                let q = q.clone();
                thread::spawn(move || q.push(2))
            };
            let consumers: Vec<_> = (0..2)
                .map(|_| {
                    let q = q.clone();
                    thread::spawn(move || q.pop())
                })
                .collect();
            assert_eq!(producer.join().unwrap(), Ok(()));
            let mut got: Vec<u64> = consumers
                .into_iter()
                .filter_map(|c| c.join().unwrap())
                .collect();
            while let Some(v) = q.pop() {
                got.push(v);
            }
            got.sort_unstable();
            assert_eq!(got, [1, 2]);
        });
    }

    /// A full queue, on a later lap: a push that finds no slot is counted, and a push racing a
    /// pop of the slot it needs either fails (counted) or follows the pop; nothing is lost
    /// uncounted and nothing read twice.
    #[test]
    fn overflow_is_counted() {
        loom::model(|| {
            let q: Arc<SignalQueue<u64, 2>> = Arc::new(SignalQueue::new());
            // A lap done, so the positions are not the initial ones; then full.
            for v in [100, 101] {
                q.push(v).unwrap();
            }
            assert_eq!((q.pop(), q.pop()), (Some(100), Some(101)));
            for v in [1, 2] {
                q.push(v).unwrap();
            }
            let producers: Vec<_> = [3, 4]
                .into_iter()
                .map(|v| {
                    let q = q.clone();
                    thread::spawn(move || q.push(v).is_ok())
                })
                .collect();
            let consumer = {
                let q = q.clone();
                thread::spawn(move || q.pop())
            };
            let pushed = producers
                .into_iter()
                .map(|p| p.join().unwrap())
                .filter(|&ok| ok)
                .count() as u64;
            let mut got: Vec<u64> = consumer.join().unwrap().into_iter().collect();
            while let Some(v) = q.pop() {
                got.push(v);
            }
            assert_eq!(
                got[..2],
                [1, 2],
                "the queued values first, in order: {got:?}"
            );
            assert!(pushed <= 1, "two slots, one pop: at most one more fits");
            assert_eq!(got.len() as u64, 2 + pushed);
            assert_eq!(
                q.take_lost(),
                2 - pushed,
                "every push that failed is counted"
            );
        });
    }
}
