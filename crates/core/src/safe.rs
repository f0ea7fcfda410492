//! Safe mode's copies, shared by the LD_PRELOAD library and `cmsafe_compat.h`: old code that
//! acks an event and then reads it keeps working, because what it got is cmsafe's copy, which
//! outlives the program's ack.
//!
//! A copy stays valid after the program acks it until the event's id (or, for CONNECT_REQUEST,
//! its listen id) is destroyed, or until [`ACKED_CAP`] newer acks push it out, whichever comes
//! first. librdmacm's own event is acked the moment it is copied, so rdma_destroy_id and
//! rdma_migrate_id never wait on an event the program forgot.

use crate::PtrMap;
use smallvec::SmallVec;
use std::collections::VecDeque;

use crate::cm::{rdma_cm_event, rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST};
use crate::event::Event;
use crate::pool::AllocError;

/// Acked copies kept alive at most, oldest released first (under Miri, whose every step is
/// interpreted, few: the tests that fill it then finish in seconds).
pub const ACKED_CAP: usize = if cfg!(miri) { 64 } else { 4096 };

/// Entries of the per-id index before `compact_index` runs: the copies kept take at most two
/// each (a CONNECT_REQUEST is listed under its listen id too), so at least as many again are
/// stale by then and compaction stays amortized O(1).
const INDEX_MAX: usize = 4 * ACKED_CAP + 128;

/// Places in the ring before its holes are dropped: at least half are holes by then, so
/// dropping them stays amortized O(1).
const RING_MAX: usize = 2 * ACKED_CAP + 64;

/// An acked copy, kept, with what its caller knew of it at the ack: what a double ack of it is
/// told with.
pub struct Kept {
    pub event: Event,
    /// The caller's number for the event (the preload numbers events itself).
    pub seq: u64,
    /// When the program acked it, in ns of the caller's clock (0: not known).
    pub acked_ns: u64,
}

/// What an ack of a pointer meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// One of our copies, now acked by the program; nothing for librdmacm to do.
    Acked,
    /// One of our copies, acked before: a double ack (librdmacm's event is long acked).
    AlreadyAcked,
    /// Not ours: librdmacm must judge it.
    Unknown,
}

/// A place in the ring of acked copies: its position (how many copies were kept before it),
/// and the copy, or a hole once its id was destroyed.
struct Place {
    pos: u64,
    kept: Option<Kept>,
}

/// An id's acked copies, by position: most ids see a handful of events in their life
/// (address, route, established, disconnected), which fit without an allocation per id.
type IdEntries = SmallVec<[u64; 4]>;

/// The copies the program holds, and those it acked, kept in ack order. The acked ones are
/// found by position, not by a table keyed by pointer: keeping one costs a push and its id's
/// index entry, and only a double ack (a misuse, said at length anyway) scans for a pointer.
#[derive(Default)]
pub struct SafeCopies {
    live: PtrMap<usize, Event>,
    /// Acked copies, oldest first, at most [`ACKED_CAP`] of them present; positions ascend, and
    /// the front is never a hole.
    ring: VecDeque<Place>,
    /// The position the next kept copy takes.
    next_pos: u64,
    /// Copies in `ring` (places that are not holes).
    present: usize,
    /// The acked copies each id's destruction releases (for CONNECT_REQUEST, the id and the
    /// listen id); entries whose copy already left are skipped.
    by_id: PtrMap<usize, IdEntries>,
    /// Entries in `by_id`, stale ones included (see `compact_index`).
    indexed: usize,
}

/// The pointer a program reads an event copy through (what `insert` returns for it).
pub fn handle(ev: &Event) -> *mut rdma_cm_event {
    ev.cm() as *const rdma_cm_event as *mut rdma_cm_event
}

impl SafeCopies {
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies `raw` and returns the pointer to hand the program. The caller acks `raw` with
    /// librdmacm right after (on error, `raw` is untouched and still the caller's).
    ///
    /// # Safety
    /// `raw` is a valid, unacked event from librdmacm.
    pub unsafe fn adopt(
        &mut self,
        raw: *const rdma_cm_event,
    ) -> Result<*mut rdma_cm_event, AllocError> {
        // SAFETY: forwarded from the caller, who acks `raw` right after.
        let ev = unsafe { Event::copy_to_ack(raw) }?;
        Ok(self.insert(ev))
    }

    /// Takes a copy made with [`Event::copy_from_raw`] (outside any lock the caller holds) and
    /// returns the pointer to hand the program.
    pub fn insert(&mut self, ev: Event) -> *mut rdma_cm_event {
        let p = handle(&ev);
        self.live.insert(p as usize, ev);
        p
    }

    pub fn ack(&mut self, ptr: *mut rdma_cm_event) -> Ack {
        if let Some(ev) = self.live.remove(&(ptr as usize)) {
            let seq = ev.seq();
            self.keep(ev, seq, 0);
            return Ack::Acked;
        }
        // Every copy, kept or long gone, lies in cmsafe's own memory, which librdmacm's ack
        // would free as its own.
        if Event::is_copy_address(ptr) {
            Ack::AlreadyAcked
        } else {
            Ack::Unknown
        }
    }

    /// Keeps a copy the program has just acked, until its id is destroyed or newer acks push
    /// it out. For a caller that held the copy itself from the fetch to the ack (the preload's
    /// tracker keeps it in its own record), so that no second map holds every copy in flight;
    /// `seq` and `acked_ns` are told back by [`SafeCopies::kept`], so that the caller need not
    /// remember acked events of its own (a second table, written for every event).
    pub fn keep(&mut self, ev: Event, seq: u64, acked_ns: u64) {
        let pos = self.next_pos;
        self.next_pos += 1;
        self.by_id.entry(ev.id() as usize).or_default().push(pos);
        self.indexed += 1;
        if ev.event_type() == RDMA_CM_EVENT_CONNECT_REQUEST && !ev.listen_id().is_null() {
            self.by_id
                .entry(ev.listen_id() as usize)
                .or_default()
                .push(pos);
            self.indexed += 1;
        }
        if self.ring.capacity() == 0 {
            self.ring.reserve_exact(RING_MAX + 1);
        }
        let kept = Kept {
            event: ev,
            seq,
            acked_ns,
        };
        self.ring.push_back(Place {
            pos,
            kept: Some(kept),
        });
        self.present += 1;
        // The copy pushed out by the cap is released here (the front is never a hole).
        if self.present > ACKED_CAP {
            drop(self.ring.pop_front());
            self.present -= 1;
            self.trim_front();
        }
        if self.ring.len() > RING_MAX {
            self.drop_holes();
        }
        self.compact_index();
    }

    /// Where in the ring the copy at `pos` is, while it has a place.
    fn find(&self, pos: u64) -> Option<usize> {
        let first = self.ring.front()?.pos;
        let guess = usize::try_from(pos.checked_sub(first)?).ok()?;
        match self.ring.get(guess) {
            Some(p) if p.pos == pos => Some(guess),
            // Holes were dropped since: the positions still ascend.
            _ => self.ring.binary_search_by_key(&pos, |p| p.pos).ok(),
        }
    }

    fn holds(&self, pos: u64) -> bool {
        self.find(pos).is_some_and(|i| self.ring[i].kept.is_some())
    }

    fn trim_front(&mut self) {
        while self.ring.front().is_some_and(|p| p.kept.is_none()) {
            self.ring.pop_front();
        }
    }

    /// Drops the ring's holes, once they outnumber the copies: amortized O(1). Copies that
    /// outlive the ids acked after them (a connection that lives on while others come and go)
    /// would otherwise keep a hole per event behind them for good.
    #[cold]
    fn drop_holes(&mut self) {
        self.ring.retain(|p| p.kept.is_some());
    }

    /// Drops index entries whose copy already left, once they outnumber the copies: amortized
    /// O(1). An id that lives on while its events come and go (a listen id, a UD id joining
    /// groups) would otherwise gain an entry per event for good.
    fn compact_index(&mut self) {
        if self.indexed <= INDEX_MAX {
            return;
        }
        let mut by_id = std::mem::take(&mut self.by_id);
        let mut indexed = 0;
        by_id.retain(|_, v| {
            v.retain(|pos| self.holds(*pos));
            indexed += v.len();
            !v.is_empty()
        });
        self.by_id = by_id;
        self.indexed = indexed;
    }

    /// After rdma_destroy_id(id): acked copies of its events may go. Copies the program never
    /// acked stay valid: it may still read them.
    pub fn id_destroyed(&mut self, id: usize) {
        let Some(entries) = self.by_id.remove(&id) else {
            return;
        };
        self.indexed -= entries.len();
        for pos in entries {
            if let Some(i) = self.find(pos) {
                if self.ring[i].kept.take().is_some() {
                    self.present -= 1;
                }
            }
        }
        self.trim_front();
    }

    /// The acked copy the program read through `ptr`, while it is kept. A scan, newest first:
    /// only a double ack asks.
    pub fn kept(&self, ptr: *mut rdma_cm_event) -> Option<&Kept> {
        self.ring
            .iter()
            .rev()
            .filter_map(|p| p.kept.as_ref())
            .find(|k| handle(&k.event) == ptr)
    }

    /// Copies handed out and not acked yet, and acked copies still kept.
    pub fn counts(&self) -> (usize, usize) {
        (self.live.len(), self.present)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::{rdma_cm_event_type::*, rdma_cm_id};

    fn raw(kind: u32, id: usize, listen: usize) -> rdma_cm_event {
        // SAFETY: all-zero is a valid rdma_cm_event.
        let mut ev: rdma_cm_event = unsafe { std::mem::zeroed() };
        ev.event = kind;
        ev.id = id as *mut rdma_cm_id;
        ev.listen_id = listen as *mut rdma_cm_id;
        ev
    }

    #[test]
    fn acked_copies_live_until_their_id_is_destroyed() {
        // Zeroed cm_ids: the copy reads their addresses and (NULL) device.
        let ids: Vec<Box<rdma_cm_id>> = (0..3)
            // SAFETY: all-zero is a valid rdma_cm_id.
            .map(|_| Box::new(unsafe { std::mem::zeroed() }))
            .collect();
        let (a, b, listen) = (
            &*ids[0] as *const _ as usize,
            &*ids[1] as *const _ as usize,
            &*ids[2] as *const _ as usize,
        );
        let mut c = SafeCopies::new();
        // SAFETY: valid events whose ids are live (zeroed) cm_ids.
        let (p1, p2, p3) = unsafe {
            (
                c.adopt(&raw(RDMA_CM_EVENT_ESTABLISHED, a, 0)).unwrap(),
                c.adopt(&raw(RDMA_CM_EVENT_ESTABLISHED, b, 0)).unwrap(),
                c.adopt(&raw(RDMA_CM_EVENT_CONNECT_REQUEST, b, listen))
                    .unwrap(),
            )
        };
        assert_eq!(c.counts(), (3, 0));
        assert_eq!(c.ack(p1), Ack::Acked);
        assert_eq!(c.ack(p1), Ack::AlreadyAcked);
        assert_eq!(c.ack(p2), Ack::Acked);
        assert_eq!(c.ack(p3), Ack::Acked);
        assert_eq!(c.ack(0x1000 as *mut rdma_cm_event), Ack::Unknown);
        assert_eq!(c.counts(), (0, 3));
        // Still readable after the ack.
        // SAFETY: p1 is a kept copy.
        assert_eq!(unsafe { (*p1).event }, RDMA_CM_EVENT_ESTABLISHED);
        c.id_destroyed(a);
        assert_eq!(c.counts(), (0, 2));
        // The CONNECT_REQUEST goes with its listen id too; the other with its id.
        c.id_destroyed(listen);
        assert_eq!(c.counts(), (0, 1));
        c.id_destroyed(b);
        assert_eq!(c.counts(), (0, 0));
    }

    #[test]
    fn at_most_the_cap_is_kept() {
        // SAFETY: all-zero is a valid rdma_cm_id.
        let id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        let idp = &*id as *const _ as usize;
        let mut c = SafeCopies::new();
        for _ in 0..ACKED_CAP + 100 {
            // SAFETY: a valid event with a live id.
            let p = unsafe { c.adopt(&raw(RDMA_CM_EVENT_DISCONNECTED, idp, 0)) }.unwrap();
            assert_eq!(c.ack(p), Ack::Acked);
        }
        assert_eq!(c.counts(), (0, ACKED_CAP));
        c.id_destroyed(idp);
        assert_eq!(c.counts(), (0, 0));
    }

    #[test]
    fn a_kept_copy_tells_the_number_and_ack_time_its_caller_gave() {
        // SAFETY: all-zero is a valid rdma_cm_id.
        let id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        let idp = &*id as *const _ as usize;
        let mut c = SafeCopies::new();
        // SAFETY: a valid event with a live id.
        let ev = unsafe { Event::copy_from_raw(&raw(RDMA_CM_EVENT_ESTABLISHED, idp, 0)) }.unwrap();
        let p = handle(&ev);
        c.keep(ev, 42, 1_000);
        let k = c.kept(p).expect("kept until its id is destroyed");
        assert_eq!(
            (
                k.seq,
                k.acked_ns,
                k.event.event_type(),
                k.event.id() as usize
            ),
            (42, 1_000, RDMA_CM_EVENT_ESTABLISHED, idp)
        );
        assert_eq!(c.ack(p), Ack::AlreadyAcked);
        c.id_destroyed(idp);
        assert!(c.kept(p).is_none());
    }

    #[test]
    fn a_copy_acked_again_after_it_left_is_never_unknown() {
        // SAFETY: all-zero is a valid rdma_cm_id.
        let id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        let idp = &*id as *const _ as usize;
        let mut c = SafeCopies::new();
        // SAFETY: a valid event with a live id.
        let p = unsafe { c.adopt(&raw(RDMA_CM_EVENT_ESTABLISHED, idp, 0)) }.unwrap();
        assert_eq!(c.ack(p), Ack::Acked);
        c.id_destroyed(idp);
        assert_eq!(c.counts(), (0, 0));
        // Its copy is gone (its slot released), but the pointer is cmsafe's memory still:
        // librdmacm must not be given it.
        assert_eq!(c.ack(p), Ack::AlreadyAcked);
        let local = 0u64;
        assert_eq!(
            c.ack(&local as *const u64 as *mut rdma_cm_event),
            Ack::Unknown
        );
    }

    #[test]
    fn copies_that_outlive_later_ids_leave_a_bounded_ring() {
        // SAFETY: all-zero is a valid rdma_cm_id.
        let ids: Vec<Box<rdma_cm_id>> = (0..3)
            .map(|_| Box::new(unsafe { std::mem::zeroed() }))
            .collect();
        let [a, b, c_id] = [0, 1, 2].map(|i| &*ids[i] as *const _ as usize);
        let mut c = SafeCopies::new();
        let acked = |c: &mut SafeCopies, kind, id| {
            // SAFETY: a valid event whose id is live.
            let p = unsafe { c.adopt(&raw(kind, id, 0)) }.unwrap();
            assert_eq!(c.ack(p), Ack::Acked);
            p
        };
        // `a` lives on at the front; `b` comes and goes behind it, leaving holes; every 100th
        // event is `c_id`'s and stays, so that after the holes are dropped its copies lie at
        // other places than their positions say.
        let first = acked(&mut c, RDMA_CM_EVENT_ESTABLISHED, a);
        let mut of_c = Vec::new();
        for i in 0..3 * RING_MAX {
            if i % 100 == 0 {
                of_c.push(acked(&mut c, RDMA_CM_EVENT_ESTABLISHED, c_id));
            }
            acked(&mut c, RDMA_CM_EVENT_DISCONNECTED, b);
            c.id_destroyed(b);
            assert!(c.ring.len() <= RING_MAX + 1, "{} places", c.ring.len());
        }
        assert_eq!(c.counts(), (0, 1 + of_c.len()));
        let k = c.kept(first).expect("kept until its id is destroyed");
        assert_eq!(k.event.event_type(), RDMA_CM_EVENT_ESTABLISHED);
        assert!(of_c.iter().all(|&p| c.kept(p).is_some()));
        // Found by position after the holes were dropped: each of them released.
        c.id_destroyed(c_id);
        assert_eq!(c.counts(), (0, 1));
        assert!(of_c.iter().all(|&p| c.kept(p).is_none()));
        c.id_destroyed(a);
        assert_eq!(c.counts(), (0, 0));
        assert!(c.ring.is_empty());
    }

    #[test]
    fn an_id_that_lives_on_keeps_a_bounded_index() {
        // SAFETY: all-zero is a valid rdma_cm_id.
        let ids: Vec<Box<rdma_cm_id>> = (0..2)
            .map(|_| Box::new(unsafe { std::mem::zeroed() }))
            .collect();
        let (id, listen) = (&*ids[0] as *const _ as usize, &*ids[1] as *const _ as usize);
        let mut c = SafeCopies::new();
        // A listen id never destroyed, and CONNECT_REQUESTs on one id: nothing but the cap
        // ever drops a copy, so the index's stale entries must be dropped by compaction.
        for _ in 0..3 * INDEX_MAX {
            // SAFETY: a valid event whose ids are live.
            let p = unsafe { c.adopt(&raw(RDMA_CM_EVENT_CONNECT_REQUEST, id, listen)) }.unwrap();
            assert_eq!(c.ack(p), Ack::Acked);
            assert!(c.indexed <= INDEX_MAX + 2, "{} index entries", c.indexed);
        }
        let listed: usize = c.by_id.values().map(|v| v.len()).sum();
        assert_eq!(listed, c.indexed);
        assert_eq!(c.counts(), (0, ACKED_CAP));
        c.id_destroyed(listen);
        assert_eq!(c.counts(), (0, 0));
        assert_eq!(c.by_id.values().map(|v| v.len()).sum::<usize>(), c.indexed);
    }
}
