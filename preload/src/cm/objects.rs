//! The lifecycles of cm_ids and event channels: which the program destroyed (so a later call on
//! one is named before librdmacm reads freed memory), which are alive (counted at exit), and ids
//! of connection requests that were rejected and never destroyed (each keeps a kernel cm_id).
//!
//! Only objects whose creation the preload saw are judged: a pointer librdmacm freed can come back
//! from malloc as a new id or channel, and every way one is made (rdma_create_id,
//! rdma_create_event_channel, a CONNECT_REQUEST's new id) clears its destroyed mark.

use std::sync::atomic::{AtomicU8, Ordering};

use cmsafe_core::recent::Recent;
use cmsafe_core::PtrMap;
use cmsafe_sync::gone_channels::GoneChannels;

/// The process's destroyed channels, for `ids::channel_may_be_gone`: mirrored from the tracker's
/// set for a check that takes no lock (cmsafe_sync::gone_channels), written only under the
/// tracker's lock.
pub static GONE_CHANNELS: GoneChannels = GoneChannels::new();

/// Buckets of `GoneIds`.
const ID_BUCKETS: usize = 1024;

/// The destroyed ids, counted by bucket and readable without the tracker's lock, so that a call
/// on an id (rdma_resolve_addr, rdma_connect, ...) takes the lock for the check only when its id
/// may be one: most programs' ids come back from malloc at the addresses of the ids they
/// destroyed, so few are ever remembered at once. A bucket that reached its maximum stays
/// there, and so does the count of an id the cap pushed out: the check may then take the lock
/// for nothing, but never misses a destroyed id. Written only under the tracker's lock.
pub struct GoneIds {
    buckets: [AtomicU8; ID_BUCKETS],
}

/// An id's bucket: ids are malloc'd, 16-byte aligned, each in a struct of several hundred bytes.
fn bucket(id: usize) -> usize {
    (id >> 4 ^ id >> 14) & (ID_BUCKETS - 1)
}

impl GoneIds {
    pub const fn new() -> Self {
        GoneIds {
            buckets: [const { AtomicU8::new(0) }; ID_BUCKETS],
        }
    }

    /// False only when `id` is surely not a destroyed one.
    #[inline]
    pub fn may_hold(&self, id: usize) -> bool {
        self.buckets[bucket(id)].load(Ordering::Acquire) != 0
    }

    fn add(&self, id: usize) {
        let b = &self.buckets[bucket(id)];
        let n = b.load(Ordering::Relaxed);
        if n != u8::MAX {
            b.store(n + 1, Ordering::Release);
        }
    }

    fn removed(&self, id: usize) {
        let b = &self.buckets[bucket(id)];
        let n = b.load(Ordering::Relaxed);
        if n != u8::MAX && n != 0 {
            b.store(n - 1, Ordering::Release);
        }
    }
}

/// The process's destroyed ids, for `ids::id_refused`.
pub static GONE_IDS: GoneIds = GoneIds::new();

/// Destroyed ids and channels remembered, each kind: bounded, the oldest forgotten first.
pub const GONE_CAP: usize = 4096;

/// Pointers destroyed lately, at most [`GONE_CAP`], the oldest forgotten first. Each mark is
/// the number of its destruction: a pointer destroyed, made again and destroyed again is told
/// apart from its first time.
struct Gone {
    marks: Recent<u64>,
    next: u64,
}

impl Default for Gone {
    fn default() -> Self {
        Gone {
            marks: Recent::new(GONE_CAP),
            next: 0,
        }
    }
}

impl Gone {
    /// True when `p` was not there yet.
    fn insert(&mut self, p: usize) -> bool {
        if self.marks.contains(p) {
            return false;
        }
        self.marks.insert(p, self.next, drop);
        self.next += 1;
        true
    }

    /// Made anew: no longer destroyed. True when it was there.
    fn remove(&mut self, p: usize) -> bool {
        self.marks.remove(p).is_some()
    }

    fn contains(&self, p: usize) -> bool {
        self.marks.contains(p)
    }
}

#[derive(Clone, Copy, Default)]
struct Id {
    /// Its event channel (0: not known), for the count of each channel's live ids.
    channel: usize,
    /// The newest unacked event counted against it (0: none), whose tracker record links the
    /// others (cm/unacked.rs): here, in the entry every event looks up anyway, so that keeping
    /// an id's events at hand costs no table of its own.
    unacked: usize,
    /// Made by librdmacm for itself (rsockets, rdma_create_ep's probes): not counted at exit.
    internal: bool,
    /// A CONNECT_REQUEST's new id.
    from_request: bool,
    rejected: bool,
}

/// A channel's ids: how many are alive, and the destroy that took the last one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnChannel {
    pub live: usize,
    /// The id destroyed last, by which thread, called from where (a return address).
    pub last_id: usize,
    pub last_thread: i32,
    pub last_at: usize,
}

/// What is left at exit, the program's own objects only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leftover {
    pub ids: usize,
    pub rejected: usize,
    pub channels: usize,
}

pub struct Objects {
    ids: PtrMap<usize, Id>,
    /// Ids by event channel: a channel whose ids were all destroyed can get no event any more.
    /// Its entry stays (no insert and remove per id life) until the channel is destroyed.
    ids_on: PtrMap<usize, OnChannel>,
    channels: PtrMap<usize, bool>,
    gone_ids: Gone,
    gone_channels: Gone,
    /// `gone_channels`, for the checks that take no lock.
    mirror: &'static GoneChannels,
    /// `gone_ids`, the same.
    id_mirror: &'static GoneIds,
    /// Rejected request ids not destroyed yet.
    rejected: usize,
    /// The count at which the next rejected-id finding is due.
    next_rejected_finding: usize,
    threshold: usize,
}

impl Objects {
    /// `threshold`: rejected ids alive at once that make a finding (and every multiple of it).
    pub fn new(threshold: usize) -> Objects {
        Self::mirrored_in(threshold, &GONE_CHANNELS, &GONE_IDS)
    }

    /// The same, its destroyed channels and ids mirrored in `mirror` and `id_mirror` (tests: ones
    /// of their own).
    fn mirrored_in(
        threshold: usize,
        mirror: &'static GoneChannels,
        id_mirror: &'static GoneIds,
    ) -> Objects {
        let threshold = threshold.max(1);
        Objects {
            mirror,
            id_mirror,
            ids: PtrMap::default(),
            ids_on: PtrMap::default(),
            channels: PtrMap::default(),
            gone_ids: Gone::default(),
            gone_channels: Gone::default(),
            rejected: 0,
            next_rejected_finding: threshold,
            threshold,
        }
    }

    /// `id` made on event `channel` (0: not known).
    pub fn id_created(&mut self, id: usize, channel: usize, internal: bool, from_request: bool) {
        if self.gone_ids.remove(id) {
            self.id_mirror.removed(id);
        }
        self.count_on(channel, true);
        if let Some(old) = self.ids.insert(
            id,
            Id {
                channel,
                unacked: 0,
                internal,
                from_request,
                rejected: false,
            },
        ) {
            // Never destroyed through us, yet made again: it was freed behind our back (or it is
            // rdma_get_request's id, librdmacm's until now). Its unacked events stay its own.
            self.count_on(old.channel, false);
            self.forget_rejected(old);
            if let Some(i) = self.ids.get_mut(&id) {
                i.unacked = old.unacked;
            }
        }
    }

    /// One more (`up`) or one less live id on `channel`; the entry, when it has one.
    fn count_on(&mut self, channel: usize, up: bool) -> Option<&mut OnChannel> {
        if channel == 0 {
            return None;
        }
        let e = self.ids_on.entry(channel).or_default();
        if up {
            e.live += 1;
        } else {
            e.live = e.live.saturating_sub(1);
        }
        Some(e)
    }

    /// `id` came in an event on `channel`: it is alive, whoever made it (made unseen: not
    /// counted at exit).
    pub fn id_seen(&mut self, id: usize, channel: usize) {
        if id != 0 && !self.ids.contains_key(&id) {
            self.id_created(id, channel, true, false);
        }
    }

    /// A new unacked event `ptr`, counted against `owner`, read from `channel`: it is the id's
    /// newest, and the one it was before (0: none) is returned, for the new record to link. An
    /// owner never seen made is alive from here on, as `id_seen` has it.
    #[inline]
    pub fn hold(&mut self, owner: usize, channel: usize, ptr: usize) -> usize {
        if let Some(i) = self.ids.get_mut(&owner) {
            return std::mem::replace(&mut i.unacked, ptr);
        }
        self.id_seen(owner, channel);
        if let Some(i) = self.ids.get_mut(&owner) {
            i.unacked = ptr;
        }
        0
    }

    /// `owner`'s newest unacked event (0: none, or no such id).
    pub fn unacked(&self, owner: usize) -> usize {
        self.ids.get(&owner).map_or(0, |i| i.unacked)
    }

    /// `owner`'s newest unacked event becomes `now`, if it is `was` still: an event that
    /// outlived its id (the id destroyed, or made again since) never moves a newer id's.
    #[inline]
    pub fn replace_unacked(&mut self, owner: usize, was: usize, now: usize) {
        if let Some(i) = self.ids.get_mut(&owner) {
            if i.unacked == was {
                i.unacked = now;
            }
        }
    }

    /// rdma_migrate_id moved `id` to `channel`.
    pub fn id_migrated(&mut self, id: usize, channel: usize) {
        let Some(old) = self.ids.get(&id).map(|i| i.channel) else {
            return;
        };
        if old != channel {
            self.count_on(old, false);
            self.count_on(channel, true);
            if let Some(i) = self.ids.get_mut(&id) {
                i.channel = channel;
            }
        }
    }

    /// `id` destroyed by `thread`, called from `at`. When it was the last live id on its
    /// channel, no event can come on that channel any more (the kernel drops a destroyed id's
    /// unread events) until an id is made on it again: `emptied` tells.
    pub fn id_destroyed(&mut self, id: usize, thread: i32, at: usize) {
        let Some(old) = self.ids.remove(&id) else {
            return;
        };
        self.forget_rejected(old);
        if self.gone_ids.insert(id) {
            self.id_mirror.add(id);
        }
        if let Some(e) = self.count_on(old.channel, false) {
            (e.last_id, e.last_thread, e.last_at) = (id, thread, at);
        }
    }

    /// When `channel` had ids and all were destroyed, none made since: the last destroy.
    pub fn emptied(&self, channel: usize) -> Option<OnChannel> {
        self.ids_on.get(&channel).filter(|e| e.live == 0).copied()
    }

    fn forget_rejected(&mut self, old: Id) {
        if old.rejected {
            self.rejected -= 1;
            if self.rejected + self.threshold < self.next_rejected_finding {
                self.next_rejected_finding -= self.threshold;
            }
        }
    }

    /// True when the program destroyed `id` and nothing made it again since.
    pub fn id_gone(&self, id: usize) -> bool {
        self.gone_ids.contains(id)
    }

    /// rdma_reject of `id`. Some(count of rejected ids alive) when that count just reached the
    /// threshold or a multiple of it.
    pub fn id_rejected(&mut self, id: usize) -> Option<usize> {
        let e = self.ids.get_mut(&id)?;
        if !e.from_request || e.rejected {
            return None;
        }
        e.rejected = true;
        self.rejected += 1;
        if self.rejected >= self.next_rejected_finding {
            self.next_rejected_finding += self.threshold;
            return Some(self.rejected);
        }
        None
    }

    pub fn channel_created(&mut self, channel: usize, internal: bool) {
        // One freed at this address before (a synchronous id's, which librdmacm frees unseen
        // with the id) is not this one.
        self.ids_on.remove(&channel);
        if self.gone_channels.contains(channel) {
            self.gone_channels.remove(channel);
            let now = &self.gone_channels;
            self.mirror.removed(channel, || now.marks.keys());
        }
        self.channels.insert(channel, internal);
    }

    pub fn channel_destroyed(&mut self, channel: usize) {
        self.ids_on.remove(&channel);
        if self.channels.remove(&channel).is_some() {
            // Past the cap the mirror is in overflow already: what the cap pushes out needs no
            // slot cleared.
            self.gone_channels.insert(channel);
            self.mirror.add(channel);
        }
    }

    /// True when the program destroyed `channel` and nothing made it again since.
    pub fn channel_gone(&self, channel: usize) -> bool {
        self.gone_channels.contains(channel)
    }

    pub fn leftover(&self) -> Leftover {
        let mine = self.ids.values().filter(|i| !i.internal);
        Leftover {
            ids: mine.clone().count(),
            rejected: mine.filter(|i| i.rejected).count(),
            channels: self
                .channels
                .values()
                .filter(|&&internal| !internal)
                .count(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmsafe_sync::gone_channels::SLOTS as MIRRORED;

    fn bit(channel: usize) -> u64 {
        GoneChannels::bit(channel)
    }

    /// Objects with a mirror of their own: tests run in parallel, and the process's mirror is
    /// written only under the tracker's lock.
    fn fresh(threshold: usize) -> Objects {
        Objects::mirrored_in(
            threshold,
            Box::leak(Box::new(GoneChannels::new())),
            own_ids(),
        )
    }

    fn own_ids() -> &'static GoneIds {
        Box::leak(Box::new(GoneIds::new()))
    }

    /// Where `channel` is in `mirror`'s slots.
    fn slot_of(mirror: &GoneChannels, channel: usize) -> Option<usize> {
        mirror.slot_of(channel)
    }

    /// What the preload keeps of each live id: one table entry of this size; with the table's
    /// control byte and its spare room (a power of two of buckets, at most 7/8 full), 38 to 76
    /// bytes an id. A field more is paid by every id of a program holding tens of thousands.
    #[test]
    fn a_live_ids_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<(usize, Id)>(), 32);
    }

    #[test]
    fn a_destroyed_id_is_gone_until_made_again() {
        let mut o = fresh(64);
        o.id_created(0x10, 0, false, false);
        assert!(!o.id_gone(0x10));
        o.id_destroyed(0x10, 0, 0);
        assert!(o.id_gone(0x10));
        o.id_created(0x10, 0, false, true);
        assert!(!o.id_gone(0x10));
        // An id whose creation was never seen is never judged.
        o.id_destroyed(0x20, 0, 0);
        assert!(!o.id_gone(0x20));
        // An id that comes in an event is alive, whoever made it.
        o.id_destroyed(0x10, 0, 0);
        o.id_seen(0x10, 0);
        assert!(!o.id_gone(0x10));
        assert_eq!(
            o.leftover().ids,
            0,
            "an id made unseen is not counted at exit"
        );
    }

    #[test]
    fn a_channel_is_told_when_its_last_id_is_destroyed() {
        let mut o = fresh(64);
        let (ch, other) = (0x7000, 0x8000);
        let last = |o: &Objects, c| o.emptied(c).map(|e| (e.last_id, e.last_thread, e.last_at));
        o.id_created(0x10, ch, false, false);
        // A connection request's id, on its listen id's channel.
        o.id_created(0x20, ch, false, true);
        o.id_seen(0x30, other);
        assert_eq!((o.emptied(ch), o.emptied(other)), (None, None));
        o.id_destroyed(0x10, 7, 0x100);
        assert_eq!(o.emptied(ch), None, "0x20 is still on it");
        // Moved to the other channel: none left on ch, though its last destroy was 0x10's.
        o.id_migrated(0x20, other);
        assert_eq!(last(&o, ch), Some((0x10, 7, 0x100)));
        o.id_destroyed(0x30, 8, 0x200);
        assert_eq!(o.emptied(other), None);
        o.id_destroyed(0x20, 9, 0x300);
        assert_eq!(last(&o, other), Some((0x20, 9, 0x300)));
        // Destroyed twice, or never seen made: nothing changes.
        o.id_destroyed(0x20, 10, 0x400);
        o.id_destroyed(0x40, 10, 0x400);
        assert_eq!(last(&o, other), Some((0x20, 9, 0x300)));
        // Made again on the channel: it has an id again.
        o.id_created(0x10, other, false, false);
        assert_eq!(o.emptied(other), None);
        // Made again at the same address without a destroy seen: counted once, on its new
        // channel.
        o.id_created(0x10, ch, false, false);
        assert!(o.emptied(other).is_some() && o.emptied(ch).is_none());
        // A channel that never had an id, or was made anew at the address, is not emptied.
        assert_eq!(o.emptied(0x9000), None);
        o.channel_created(other, false);
        assert_eq!(o.emptied(other), None);
    }

    #[test]
    fn a_destroyed_channel_is_gone_until_made_again() {
        let mut o = fresh(64);
        o.channel_created(0x30, false);
        o.channel_destroyed(0x30);
        assert!(o.channel_gone(0x30));
        o.channel_created(0x30, false);
        assert!(!o.channel_gone(0x30));
        assert_eq!(o.leftover().channels, 1);
    }

    #[test]
    fn the_lock_free_check_never_misses_a_destroyed_channel() {
        let mirror: &'static GoneChannels = Box::leak(Box::new(GoneChannels::new()));
        let mut o = Objects::mirrored_in(64, mirror, own_ids());
        // librdmacm's probe: its channel made and destroyed inside it.
        o.channel_created(0x40, true);
        assert!(!mirror.may_hold(0x40));
        o.channel_destroyed(0x40);
        assert!(mirror.may_hold(0x40) && o.channel_gone(0x40));
        // A live channel of the program's needs no lock.
        o.channel_created(0x1000, false);
        assert!(!mirror.may_hold(0x1000));
        // More destroyed than there are slots: every check goes to the lock.
        let many: Vec<usize> = (1..=MIRRORED + 2).map(|i| 0x2000 + 0x100 * i).collect();
        for &c in &many {
            o.channel_created(c, false);
            o.channel_destroyed(c);
        }
        assert!(many.iter().chain([&0x40]).all(|&c| mirror.may_hold(c)));
        assert!(
            mirror.may_hold(0x1000),
            "in overflow, everything goes to the lock"
        );
        // Made again until the set fits the slots: the slots hold exactly what is still gone.
        for &c in &many[..4] {
            o.channel_created(c, false);
        }
        assert!(!mirror.may_hold(0x1000));
        assert!(many[..4].iter().all(|&c| !mirror.may_hold(c)));
        assert!(many[4..]
            .iter()
            .chain([&0x40])
            .all(|&c| mirror.may_hold(c) && o.channel_gone(c)));
        // A slot freed by a channel made again takes the next one destroyed.
        o.channel_created(0x40, false);
        assert!(!mirror.may_hold(0x40));
        o.channel_destroyed(0x1000);
        assert!(mirror.may_hold(0x1000));
    }

    #[test]
    fn the_id_buckets_count_the_destroyed_ids() {
        let ids = own_ids();
        let mut o = Objects::mirrored_in(64, Box::leak(Box::new(GoneChannels::new())), ids);
        // Two ids in one bucket, one in another.
        let (a, b, c) = (0x5000_0010, 0x5000_0010 + (1 << 24), 0x5000_0020);
        assert_eq!(bucket(a), bucket(b));
        assert_ne!(bucket(a), bucket(c));
        for id in [a, b, c] {
            o.id_created(id, 0, false, false);
        }
        assert!(
            ![a, b, c].iter().any(|&i| ids.may_hold(i)),
            "nothing destroyed yet"
        );
        o.id_destroyed(a, 0, 0);
        o.id_destroyed(b, 0, 0);
        o.id_destroyed(b, 0, 0); // destroyed twice: counted once
        assert!(ids.may_hold(a) && !ids.may_hold(c));
        o.id_created(a, 0, false, false);
        assert!(ids.may_hold(b), "b still counts in the bucket");
        assert!(o.id_gone(b) && !o.id_gone(a));
        o.id_created(b, 0, false, false);
        assert!(!ids.may_hold(a) && !ids.may_hold(b));
        // Never seen made: not counted as destroyed.
        o.id_destroyed(0x6000_0000, 0, 0);
        assert!(!ids.may_hold(0x6000_0000));
    }

    #[test]
    fn the_summary_bits_follow_the_slots() {
        let mirror: &'static GoneChannels = Box::leak(Box::new(GoneChannels::new()));
        let mut o = Objects::mirrored_in(64, mirror, own_ids());
        let bits = || mirror.bits();
        assert_eq!(bits(), 0, "nothing destroyed: every check ends at the bits");
        let (a, b) = (0x7010, 0x7020);
        assert_ne!(bit(a), bit(b));
        o.channel_created(a, false);
        o.channel_created(b, false);
        o.channel_destroyed(a);
        assert_eq!(bits(), bit(a));
        assert!(mirror.may_hold(a) && !mirror.may_hold(b));
        o.channel_destroyed(b);
        assert_eq!(bits(), bit(a) | bit(b));
        o.channel_created(a, false);
        assert_eq!(bits(), bit(b));
        assert!(!mirror.may_hold(a) && mirror.may_hold(b));
        // In overflow every bit is set; refilled, the bits are the slots' again.
        let many: Vec<usize> = (1..=MIRRORED).map(|i| 0xa000 + 0x100 * i).collect();
        for &c in &many {
            o.channel_created(c, false);
            o.channel_destroyed(c);
        }
        assert_eq!(bits(), u64::MAX);
        o.channel_created(many[0], false);
        let held = many[1..].iter().fold(bit(b), |m, &c| m | bit(c));
        assert_eq!(bits(), held);
    }

    #[test]
    fn a_refill_after_overflow_leaves_every_channel_in_its_slot() {
        let mirror: &'static GoneChannels = Box::leak(Box::new(GoneChannels::new()));
        let mut o = Objects::mirrored_in(64, mirror, own_ids());
        let first: Vec<usize> = (1..=MIRRORED).map(|i| 0x5000 + 0x100 * i).collect();
        for &c in &first {
            o.channel_created(c, false);
            o.channel_destroyed(c);
        }
        let places: Vec<Option<usize>> = first.iter().map(|&c| slot_of(mirror, c)).collect();
        assert!(places.iter().all(Option::is_some));
        // Two more overflow the slots; making those two again refills them.
        for c in [0x9100, 0x9200] {
            o.channel_created(c, false);
            o.channel_destroyed(c);
        }
        for c in [0x9100, 0x9200] {
            o.channel_created(c, false);
        }
        assert!(!mirror.in_overflow());
        let after: Vec<Option<usize>> = first.iter().map(|&c| slot_of(mirror, c)).collect();
        assert_eq!(
            after, places,
            "a channel moved to another slot in the refill"
        );
        // One of the first made again meanwhile, in overflow: its slot is freed for another.
        o.channel_created(0x9300, false);
        o.channel_destroyed(0x9300);
        o.channel_created(0x9400, false);
        o.channel_destroyed(0x9400);
        o.channel_created(first[0], false);
        o.channel_created(0x9400, false);
        assert!(!mirror.in_overflow());
        assert_eq!(slot_of(mirror, first[0]), None);
        assert_eq!(slot_of(mirror, 0x9300), places[0]);
        let rest: Vec<Option<usize>> = first[1..].iter().map(|&c| slot_of(mirror, c)).collect();
        assert_eq!(rest, places[1..]);
    }

    #[test]
    fn destroyed_pointers_are_remembered_up_to_the_cap() {
        let mut o = fresh(64);
        for p in 1..=GONE_CAP + 10 {
            o.id_created(p, 0, false, false);
            o.id_destroyed(p, 0, 0);
        }
        assert!(!o.id_gone(1), "the oldest are forgotten");
        assert!(!o.id_gone(10));
        assert!(o.id_gone(11));
        assert!(o.id_gone(GONE_CAP + 10));
        assert_eq!(o.gone_ids.marks.len(), GONE_CAP);
        assert_eq!(o.gone_ids.marks.order_len(), GONE_CAP);
    }

    #[test]
    fn an_old_entry_ageing_out_keeps_a_newer_mark_of_the_same_pointer() {
        let mut o = fresh(64);
        // 0x10 destroyed, made again (the malloc reused it), then destroyed again later.
        o.id_created(0x10, 0, false, false);
        o.id_destroyed(0x10, 0, 0);
        o.id_created(0x10, 0, false, false);
        for p in 1..=GONE_CAP / 2 {
            o.id_created(p << 8, 0, false, false);
            o.id_destroyed(p << 8, 0, 0);
        }
        o.id_destroyed(0x10, 0, 0);
        // Enough newer marks that the first entry of 0x10 ages out, not its second.
        for p in GONE_CAP / 2 + 1..=GONE_CAP {
            o.id_created(p << 8, 0, false, false);
            o.id_destroyed(p << 8, 0, 0);
        }
        assert!(
            o.id_gone(0x10),
            "the newer mark of 0x10 outlived its older entry"
        );
        assert!(!o.id_gone(1 << 8), "the oldest marks are forgotten first");
        assert!(o.id_gone(GONE_CAP << 8));
    }

    #[test]
    fn rejected_ids_make_a_finding_at_each_multiple_of_the_threshold() {
        let mut o = fresh(3);
        let mut due = Vec::new();
        for id in 1..=7 {
            o.id_created(id, 0, false, true);
            due.push(o.id_rejected(id));
        }
        assert_eq!(due, [None, None, Some(3), None, None, Some(6), None]);
        // Rejecting twice, or an id that is not a request's, counts nothing.
        assert_eq!(o.id_rejected(7), None);
        o.id_created(100, 0, false, false);
        assert_eq!(o.id_rejected(100), None);
        assert_eq!(
            o.leftover(),
            Leftover {
                ids: 8,
                rejected: 7,
                channels: 0
            }
        );
        // Destroying them brings the count down; the threshold is due again when it climbs back.
        for id in 1..=7 {
            o.id_destroyed(id, 0, 0);
        }
        assert_eq!(o.leftover().rejected, 0);
        let again: Vec<_> = (200..203)
            .map(|id| {
                o.id_created(id, 0, false, true);
                o.id_rejected(id)
            })
            .collect();
        assert_eq!(again, [None, None, Some(3)]);
    }

    #[test]
    fn internal_objects_are_not_counted_at_exit() {
        let mut o = fresh(64);
        o.id_created(1, 0, true, false);
        o.channel_created(2, true);
        o.id_created(3, 0, false, false);
        assert_eq!(
            o.leftover(),
            Leftover {
                ids: 1,
                rejected: 0,
                channels: 0
            }
        );
    }

    #[test]
    fn a_request_id_librdmacm_got_is_the_programs_once_rdma_get_request_hands_it_out() {
        let mut o = fresh(64);
        // The CONNECT_REQUEST, got by librdmacm inside rdma_get_request: its id is librdmacm's.
        o.id_created(5, 0, true, true);
        assert_eq!(o.leftover().ids, 0);
        // rdma_get_request returned it to the program, which rejects it and never destroys it.
        o.id_created(5, 0, false, true);
        assert_eq!(o.id_rejected(5), None);
        assert_eq!(
            o.leftover(),
            Leftover {
                ids: 1,
                rejected: 1,
                channels: 0
            }
        );
    }
}
