//! `PageState`: the life of one of audit mode's guarded pages, shared by the threads that take,
//! seal and recycle it and by the SIGSEGV handler of whichever thread faults on it.
//!
//! # States and transitions
//!
//! ```text
//!            take (the ring, under its lock)          seal (the program's ack)
//!   FREE ---------------------------------> LIVE ---------------------------> ACKED
//!    ^                                                                        |   |
//!    |                     recycle (the page leaves quarantine)               |   | fault (handler)
//!    +------------------------------------------------------------------------+   v
//!    +--------------------------------------------------------------------- REOPENED
//! ```
//!
//! Every transition is a compare-and-swap on one word that holds the state and the sequence
//! number of the page's event (its last one, while FREE), so a transition made on a stale view
//! fails instead of overwriting a newer one: a page recycled meanwhile is never marked REOPENED
//! (which would keep it from the ring for good, since the ring takes only FREE pages), and a page
//! taken for a new event is never marked anything by a fault on its old one. The sequence number
//! in the word also tells apart two lives of the page (no ABA), and guards the event's type and
//! id, read by the handler as a seqlock reads: valid only if the word did not change around them.
//!
//! # Protection in each state, and who changes it
//!
//! - FREE: closed (sealed at its ack, or closed again by `recycle`), or open: the ring opens
//!   free pages ahead of its cursor in runs, and a fault on a recycled page opens it. Either is
//!   right: a free page holds nothing of the program's.
//! - LIVE: open. The ring opens a page before `take` marks it LIVE, and nothing closes a page
//!   that can be LIVE: `seal` closes only the page it just sealed, and `recycle` closes a
//!   REOPENED page *before* it frees it (closed after, it could be taken meanwhile by another
//!   thread's new event and then closed under it: the copy's write, or the program's read,
//!   would fault on a LIVE page and never get past it).
//! - ACKED: closed, by the caller of `seal`, just after the transition. A fault in between (one
//!   taken on the page's previous life, handled late) reopens it first and the close lands after:
//!   the page is then REOPENED and closed, and the next fault on it opens it again (below).
//! - REOPENED: open, by the handler after its transition (or about to be); closed again by
//!   `recycle`.
//!
//! Only the handler opens pages outside the ring, and it never closes one.
//!
//! # What the SIGSEGV handler does (`fault`)
//!
//! It reads the word and acts on the state it finds, retrying on a newer word when its
//! compare-and-swap fails; the access it interrupted must never crash when it is a read of one
//! of our pages:
//!
//! - ACKED: the first fault since the ack. ACKED -> REOPENED; the caller records the finding
//!   (the occupant's sequence number, type and id) and opens the page.
//! - FREE, having held an event: the page was recycled (before this fault, or between the fault
//!   and the handler's look): closed, and the access must get through, so the caller records
//!   the finding and opens it. The state stays FREE: the ring will take it (a free page may be
//!   open), and it is closed again at its next event's seal.
//! - REOPENED: another thread's fault reopened it (two threads read it at once), or its seal's
//!   close landed after a late fault reopened it: the caller opens it (again), records nothing
//!   (one finding per ack).
//! - LIVE: taken for a new event since the fault; the ring opened it first, so the access can
//!   simply be retried.
//! - FREE, never used: not a page the preload ever handed out: not ours to excuse.
//!
//! What stays possible: a handler stalled between its look and its `mprotect` for a whole life
//! of the page (recycled, taken, sealed again) opens a page that now holds a newer, acked event,
//! whose use-after-ack then goes unreported until the page is recycled, or (stalled before its
//! look) reports the fault against that newer event. It never crashes the program, never keeps a
//! page from the ring and never closes a page that may be LIVE.

use crate::shim::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// A page's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Free,
    Live,
    Acked,
    /// Acked, and opened again by the fault handler after a use-after-ack.
    Reopened,
}

const FREE: u64 = 0;
const LIVE: u64 = 1;
const ACKED: u64 = 2;
const REOPENED: u64 = 3;

const fn pack(seq: u64, phase: u64) -> u64 {
    seq << 2 | phase
}

fn seq_of(word: u64) -> u64 {
    word >> 2
}

fn phase_of(word: u64) -> Phase {
    match word & 3 {
        FREE => Phase::Free,
        LIVE => Phase::Live,
        ACKED => Phase::Acked,
        _ => Phase::Reopened,
    }
}

/// The event a page holds (or held last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupant {
    pub seq: u64,
    pub event_type: u32,
    pub id: usize,
}

/// What the SIGSEGV handler found, and so what it must do (the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The first fault since the ack (now REOPENED): record it, open the page.
    Reopened(Occupant),
    /// A page recycled since its ack (still FREE): record it, open the page.
    Recycled(Occupant),
    /// Reopened by an earlier fault: open the page, record nothing.
    AlreadyOpen,
    /// Taken for a new event since the fault, and open: retry the access.
    Live,
    /// Never held an event: not one of the preload's pointers.
    NeverUsed,
}

/// The state of one guarded page (the module's doc). Sequence numbers start at 1 and fit in 62
/// bits.
pub struct PageState {
    /// `seq << 2 | state`.
    word: AtomicU64,
    event_type: AtomicU32,
    id: AtomicUsize,
}

impl PageState {
    /// A page that never held an event (const: for a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        PageState {
            word: AtomicU64::new(pack(0, FREE)),
            event_type: AtomicU32::new(0),
            id: AtomicUsize::new(0),
        }
    }

    /// A page that never held an event (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        PageState {
            word: AtomicU64::new(pack(0, FREE)),
            event_type: AtomicU32::new(0),
            id: AtomicUsize::new(0),
        }
    }

    /// The state now, and the sequence number of the page's event (0: never used).
    pub fn phase(&self) -> (Phase, u64) {
        // Acquire: a caller that acts on FREE (the ring opening the page) does so after the
        // close `recycle` made before it freed the page.
        let w = self.word.load(Ordering::Acquire);
        (phase_of(w), seq_of(w))
    }

    /// Whether the ring may take the page.
    #[inline]
    pub fn is_free(&self) -> bool {
        self.phase().0 == Phase::Free
    }

    /// FREE -> LIVE, for the event `seq`: by the ring, under its lock, on a page it opened.
    /// False when the page is not free.
    pub fn take(&self, seq: u64, event_type: u32, id: usize) -> bool {
        debug_assert!(seq != 0 && seq < 1 << 62);
        // Acquire: as in `phase`.
        let cur = self.word.load(Ordering::Acquire);
        if phase_of(cur) != Phase::Free {
            return false;
        }
        // Relaxed: only the ring moves a page out of FREE, under its lock; the load above
        // ordered this after `recycle`.
        if self
            .word
            .compare_exchange(cur, pack(seq, LIVE), Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // Release fence, then the fields (a seqlock's writer): a handler whose loads of the
        // fields see these stores sees the word changed too (its Acquire fence pairs with this
        // one), and rejects what it read.
        fence(Ordering::Release);
        // Relaxed: ordered by the fence above, and published by `seal`'s Release.
        self.event_type.store(event_type, Ordering::Relaxed);
        self.id.store(id, Ordering::Relaxed);
        true
    }

    /// LIVE -> ACKED, at the program's ack; the caller then closes the page. False when the page
    /// is not LIVE.
    pub fn seal(&self) -> bool {
        // Relaxed: only the tracker, under its lock, seals and recycles; nothing else leaves LIVE.
        let cur = self.word.load(Ordering::Relaxed);
        if phase_of(cur) != Phase::Live {
            return false;
        }
        // Release: the occupant's fields written at `take` are seen by a handler that reads
        // ACKED (or the FREE that `recycle` makes of it, an RMW that continues this release).
        self.word
            .compare_exchange(
                cur,
                pack(seq_of(cur), ACKED),
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// ACKED or REOPENED -> FREE, as the page leaves quarantine. A REOPENED page is closed by
    /// `close` first, while no one can take it. False when the page was neither.
    pub fn recycle(&self, close: impl FnOnce()) -> bool {
        let mut close = Some(close);
        // Acquire: a REOPENED page's handler is done with the fields before we free it.
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            match phase_of(cur) {
                Phase::Free | Phase::Live => return false,
                Phase::Reopened => {
                    if let Some(close) = close.take() {
                        close();
                    }
                }
                Phase::Acked => {}
            }
            // Release: the close is done before a ring that reads FREE (Acquire) opens the
            // page for a new event. Acquire on failure: the next state's look, as above.
            match self.word.compare_exchange(
                cur,
                pack(seq_of(cur), FREE),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                // A fault reopened it meanwhile (ACKED -> REOPENED): close it, then free it.
                Err(now) => cur = now,
            }
        }
    }

    /// The SIGSEGV handler's look at the page it faulted on, and its transition; the caller
    /// acts on the answer (the module's doc). Async-signal-safe: loads and compare-and-swaps.
    pub fn fault(&self) -> Fault {
        // Acquire: pairs with `seal`'s Release: the occupant's fields are those of its event.
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            let phase = phase_of(cur);
            match phase {
                Phase::Live => return Fault::Live,
                Phase::Reopened => return Fault::AlreadyOpen,
                Phase::Free if seq_of(cur) == 0 => return Fault::NeverUsed,
                Phase::Free | Phase::Acked => {}
            }
            let occupant = Occupant {
                seq: seq_of(cur),
                // Relaxed: validated below (a seqlock's reader).
                event_type: self.event_type.load(Ordering::Relaxed),
                id: self.id.load(Ordering::Relaxed),
            };
            // Acquire fence: if a load above saw a later `take`'s store, the word read below
            // shows that take (its Release fence pairs with this one), so the fields are
            // rejected with it.
            fence(Ordering::Acquire);
            if phase == Phase::Free {
                // Relaxed: the fence above orders it after the fields' loads.
                let now = self.word.load(Ordering::Relaxed);
                if now == cur {
                    return Fault::Recycled(occupant);
                }
                // Acquire: the new state's fields, as at the top.
                cur = self.word.load(Ordering::Acquire);
                continue;
            }
            // AcqRel: the read half is ordered after the fields' loads by the fence; Acquire on
            // failure: the new state's fields, as at the top. Release on success orders nothing
            // the others need but costs nothing here (a signal handler's one RMW).
            match self.word.compare_exchange(
                cur,
                pack(occupant.seq, REOPENED),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Fault::Reopened(occupant),
                Err(now) => cur = now,
            }
        }
    }
}

impl Default for PageState {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn occupant(seq: u64) -> Occupant {
        Occupant {
            seq,
            event_type: seq as u32 + 100,
            id: seq as usize * 0x1000,
        }
    }

    fn taken(p: &PageState, seq: u64) {
        let o = occupant(seq);
        assert!(p.take(o.seq, o.event_type, o.id));
    }

    #[test]
    fn a_page_goes_round_its_life() {
        let p = PageState::new();
        assert_eq!(p.phase(), (Phase::Free, 0));
        assert_eq!(p.fault(), Fault::NeverUsed);
        assert!(!p.seal() && !p.recycle(|| panic!("nothing to close")));
        taken(&p, 7);
        assert_eq!(p.phase(), (Phase::Live, 7));
        assert!(!p.take(8, 0, 0), "a live page is not taken again");
        assert_eq!(p.fault(), Fault::Live);
        assert!(p.seal());
        assert_eq!(p.phase(), (Phase::Acked, 7));
        // Recycled without a fault: nothing to close (sealed at the ack).
        assert!(p.recycle(|| panic!("an acked page is closed already")));
        assert_eq!(p.phase(), (Phase::Free, 7));
        // A read after it left quarantine: the last occupant, and the page stays free.
        assert_eq!(p.fault(), Fault::Recycled(occupant(7)));
        assert_eq!(p.phase(), (Phase::Free, 7));
        assert!(p.is_free());
    }

    #[test]
    fn one_finding_per_ack_and_a_reopened_page_is_closed_before_it_is_freed() {
        let p = PageState::new();
        taken(&p, 3);
        assert!(p.seal());
        assert_eq!(p.fault(), Fault::Reopened(occupant(3)));
        assert_eq!(p.phase(), (Phase::Reopened, 3));
        assert_eq!(p.fault(), Fault::AlreadyOpen);
        assert!(!p.seal());
        let mut closed = false;
        assert!(p.recycle(|| {
            assert_eq!(p.phase(), (Phase::Reopened, 3), "closed while not yet free");
            closed = true;
        }));
        assert!(closed);
        assert_eq!(p.phase(), (Phase::Free, 3));
        // The next life has its own occupant.
        taken(&p, 9);
        assert!(p.seal());
        assert_eq!(p.fault(), Fault::Reopened(occupant(9)));
    }
}

// Every role runs in a spawned thread; the model's main thread only sets up and joins.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::shim::AtomicBool;
    use loom::sync::Arc;
    use loom::thread;

    /// A page and its protection: `mprotect` is seen by every thread once it returns.
    struct Page {
        state: PageState,
        open: AtomicBool,
    }

    impl Page {
        fn new() -> Page {
            Page {
                state: PageState::new(),
                open: AtomicBool::new(false),
            }
        }

        fn set_open(&self, open: bool) {
            self.open.store(open, Ordering::SeqCst);
        }

        fn is_open(&self) -> bool {
            self.open.load(Ordering::SeqCst)
        }

        /// The ring's lap reaching the page: if it is free, opens it, takes it for `o` and
        /// writes the copy. Whether it took it.
        fn take_for(&self, o: Occupant) -> bool {
            if !self.state.is_free() {
                return false;
            }
            self.set_open(true);
            assert!(self.state.take(o.seq, o.event_type, o.id));
            assert!(self.is_open(), "the copy written to a closed page");
            true
        }

        /// The preload's SIGSEGV handler (its audit/pages.rs), for a fault on this page.
        fn on_segv(&self) -> Option<Occupant> {
            match self.state.fault() {
                Fault::Reopened(o) | Fault::Recycled(o) => {
                    self.set_open(true);
                    Some(o)
                }
                Fault::AlreadyOpen => {
                    self.set_open(true);
                    None
                }
                Fault::Live => None,
                Fault::NeverUsed => panic!("chained to the previous handler: the program dies"),
            }
        }

        /// A read of the page: faults until it gets through; the findings recorded.
        fn read(&self) -> Vec<Occupant> {
            let mut found = Vec::new();
            while !self.is_open() {
                found.extend(self.on_segv());
                thread::yield_now();
            }
            found
        }
    }

    fn occupant(seq: u64) -> Occupant {
        Occupant {
            seq,
            event_type: seq as u32 * 11,
            id: seq as usize * 0x100,
        }
    }

    /// An acked, closed page holding event 1.
    fn acked_page() -> Arc<Page> {
        let p = Arc::new(Page::new());
        let o = occupant(1);
        p.set_open(true);
        assert!(p.state.take(o.seq, o.event_type, o.id));
        assert!(p.state.seal());
        p.set_open(false);
        p
    }

    /// A read of an acked page faults while the tracker recycles the page and another thread's
    /// new event looks for a free page: the read gets through, its findings (none if the page
    /// was taken before the handler looked) name event 1 with its own type and id, never event
    /// 2's; the page ends LIVE for event 2 and open if the ring took it, else FREE: never lost
    /// to the ring (REOPENED for good), never closed under the new copy.
    #[test]
    fn a_fault_races_recycle_and_a_new_event() {
        loom::model(|| {
            let p = acked_page();
            let reader = {
                let p = p.clone();
                thread::spawn(move || p.read())
            };
            let tracker = {
                let p = p.clone();
                thread::spawn(move || assert!(p.state.recycle(|| p.set_open(false))))
            };
            let ring = {
                let p = p.clone();
                thread::spawn(move || p.take_for(occupant(2)))
            };
            let took = ring.join().unwrap();
            tracker.join().unwrap();
            // Two findings when the page was closed again (recycled) between the handler's
            // open and the retried read: both name event 1, with its type and id.
            let found = reader.join().unwrap();
            assert!(
                found.len() <= 2 && found.iter().all(|&o| o == occupant(1)),
                "{found:?}"
            );
            if took {
                assert_eq!(p.state.phase(), (Phase::Live, 2));
                assert!(p.is_open(), "a LIVE page left closed");
            } else {
                assert_eq!(p.state.phase(), (Phase::Free, 1), "the page left the ring");
                // A later lap takes it.
                assert!(p.take_for(occupant(2)));
            }
        });
    }

    /// Two threads read one acked page at once: one finding between them, both reads get
    /// through, the page is REOPENED and open.
    #[test]
    fn two_threads_fault_on_one_page() {
        loom::model(|| {
            let p = acked_page();
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let p = p.clone();
                    thread::spawn(move || p.read())
                })
                .collect();
            let found: Vec<Occupant> = readers
                .into_iter()
                .flat_map(|r| r.join().unwrap())
                .collect();
            assert_eq!(found, [occupant(1)]);
            assert_eq!(p.state.phase(), (Phase::Reopened, 1));
            assert!(p.is_open());
        });
    }

    /// A fault taken on the page's previous life is handled while the page's event is acked
    /// (its seal, then its close): the handler's open may land before the seal's close, leaving
    /// a REOPENED page closed, and the read must still get through (nothing else would open
    /// it). Then the page is recycled: FREE.
    #[test]
    fn a_late_fault_races_the_seal() {
        loom::model(|| {
            let p = Arc::new(Page::new());
            let o = occupant(1);
            p.set_open(true);
            assert!(p.state.take(o.seq, o.event_type, o.id));
            let reader = {
                let p = p.clone();
                thread::spawn(move || {
                    // The handler of a fault taken before the page was opened for event 1.
                    let mut found: Vec<Occupant> = p.on_segv().into_iter().collect();
                    found.extend(p.read());
                    found
                })
            };
            let tracker = {
                let p = p.clone();
                thread::spawn(move || {
                    assert!(p.state.seal());
                    p.set_open(false);
                })
            };
            tracker.join().unwrap();
            let found = reader.join().unwrap();
            assert!(
                found.len() <= 1 && found.iter().all(|&f| f == o),
                "{found:?}"
            );
            let mut closed = false;
            assert!(p.state.recycle(|| closed = true));
            assert_eq!(
                closed,
                !found.is_empty(),
                "a REOPENED page is closed before it is freed"
            );
            assert_eq!(p.state.phase(), (Phase::Free, 1));
        });
    }
}
