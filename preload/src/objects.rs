//! The lifecycles of cm_ids and event channels: which the program destroyed (so a later call on
//! one is named before librdmacm reads freed memory), which are alive (counted at exit), and ids
//! of connection requests that were rejected and never destroyed (each keeps a kernel cm_id).
//!
//! Only objects whose creation the preload saw are judged: a pointer librdmacm freed can come back
//! from malloc as a new id or channel, and every way one is made (rdma_create_id,
//! rdma_create_event_channel, a CONNECT_REQUEST's new id) clears its destroyed mark.

use std::sync::atomic::{AtomicBool, Ordering};

use cmsafe::recent::Recent;
use cmsafe::PtrMap;

/// Set once the program destroyed an event channel it made: until then rdma_get_cm_event, the
/// hot path, and rdma_create_id skip the check (and its lock). librdmacm's own channels never
/// set it: its set-up destroys one (a probe id's) in every process.
pub static ANY_CHANNEL_GONE: AtomicBool = AtomicBool::new(false);

/// The same for cm_ids, checked before rdma_connect, rdma_accept, rdma_disconnect and
/// rdma_reject.
pub static ANY_ID_GONE: AtomicBool = AtomicBool::new(false);

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
    fn insert(&mut self, p: usize) {
        if !self.marks.contains(p) {
            self.marks.insert(p, self.next, drop);
            self.next += 1;
        }
    }

    /// Made anew: no longer destroyed.
    fn remove(&mut self, p: usize) {
        self.marks.remove(p);
    }

    fn contains(&self, p: usize) -> bool {
        self.marks.contains(p)
    }
}

#[derive(Clone, Copy, Default)]
struct Id {
    /// Made by librdmacm for itself (rsockets, rdma_create_ep's probes): not counted at exit.
    internal: bool,
    /// A CONNECT_REQUEST's new id.
    from_request: bool,
    rejected: bool,
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
    channels: PtrMap<usize, bool>,
    gone_ids: Gone,
    gone_channels: Gone,
    /// Rejected request ids not destroyed yet.
    rejected: usize,
    /// The count at which the next rejected-id finding is due.
    next_rejected_finding: usize,
    threshold: usize,
}

impl Objects {
    /// `threshold`: rejected ids alive at once that make a finding (and every multiple of it).
    pub fn new(threshold: usize) -> Objects {
        let threshold = threshold.max(1);
        Objects {
            ids: PtrMap::default(),
            channels: PtrMap::default(),
            gone_ids: Gone::default(),
            gone_channels: Gone::default(),
            rejected: 0,
            next_rejected_finding: threshold,
            threshold,
        }
    }

    pub fn id_created(&mut self, id: usize, internal: bool, from_request: bool) {
        self.gone_ids.remove(id);
        if let Some(old) = self.ids.insert(
            id,
            Id {
                internal,
                from_request,
                rejected: false,
            },
        ) {
            // Never destroyed through us, yet made again: it was freed behind our back.
            self.forget_rejected(old);
        }
    }

    /// `id` came in an event: it is alive, whoever made it (made unseen: not counted at exit).
    pub fn id_seen(&mut self, id: usize) {
        if id != 0 && !self.ids.contains_key(&id) {
            self.id_created(id, true, false);
        }
    }

    /// True when the id was the program's (not librdmacm's own): the checks are on from then.
    pub fn id_destroyed(&mut self, id: usize) -> bool {
        let Some(old) = self.ids.remove(&id) else {
            return false;
        };
        self.forget_rejected(old);
        self.gone_ids.insert(id);
        if !old.internal {
            ANY_ID_GONE.store(true, Ordering::Relaxed);
        }
        !old.internal
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
        self.gone_channels.remove(channel);
        self.channels.insert(channel, internal);
    }

    /// True when the channel was the program's (not librdmacm's own): the checks are on from
    /// then.
    pub fn channel_destroyed(&mut self, channel: usize) -> bool {
        let Some(internal) = self.channels.remove(&channel) else {
            return false;
        };
        self.gone_channels.insert(channel);
        if !internal {
            ANY_CHANNEL_GONE.store(true, Ordering::Relaxed);
        }
        !internal
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

    #[test]
    fn a_destroyed_id_is_gone_until_made_again() {
        let mut o = Objects::new(64);
        o.id_created(0x10, false, false);
        assert!(!o.id_gone(0x10));
        o.id_destroyed(0x10);
        assert!(o.id_gone(0x10));
        o.id_created(0x10, false, true);
        assert!(!o.id_gone(0x10));
        // An id whose creation was never seen is never judged.
        o.id_destroyed(0x20);
        assert!(!o.id_gone(0x20));
        // An id that comes in an event is alive, whoever made it.
        o.id_destroyed(0x10);
        o.id_seen(0x10);
        assert!(!o.id_gone(0x10));
        assert_eq!(
            o.leftover().ids,
            0,
            "an id made unseen is not counted at exit"
        );
    }

    #[test]
    fn a_destroyed_channel_is_gone_until_made_again() {
        let mut o = Objects::new(64);
        o.channel_created(0x30, false);
        o.channel_destroyed(0x30);
        assert!(o.channel_gone(0x30));
        o.channel_created(0x30, false);
        assert!(!o.channel_gone(0x30));
        assert_eq!(o.leftover().channels, 1);
    }

    #[test]
    fn only_the_programs_own_destroys_turn_the_checks_on() {
        let mut o = Objects::new(64);
        // librdmacm's set-up: a probe id on its own channel, made and destroyed inside it.
        o.channel_created(0x40, true);
        o.id_created(0x50, true, false);
        assert!(!o.id_destroyed(0x50));
        assert!(!o.channel_destroyed(0x40));
        // Still remembered, for when the checks are on.
        assert!(o.id_gone(0x50) && o.channel_gone(0x40));
        // Never made, or already destroyed: nothing.
        assert!(!o.id_destroyed(0x50) && !o.channel_destroyed(0x41));
        o.channel_created(0x60, false);
        o.id_created(0x70, false, false);
        o.id_created(0x80, false, true);
        assert!(o.id_destroyed(0x70));
        assert!(o.id_destroyed(0x80));
        assert!(o.channel_destroyed(0x60));
        assert!(ANY_ID_GONE.load(Ordering::Relaxed) && ANY_CHANNEL_GONE.load(Ordering::Relaxed));
    }

    #[test]
    fn destroyed_pointers_are_remembered_up_to_the_cap() {
        let mut o = Objects::new(64);
        for p in 1..=GONE_CAP + 10 {
            o.id_created(p, false, false);
            o.id_destroyed(p);
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
        let mut o = Objects::new(64);
        // 0x10 destroyed, made again (the malloc reused it), then destroyed again later.
        o.id_created(0x10, false, false);
        o.id_destroyed(0x10);
        o.id_created(0x10, false, false);
        for p in 1..=GONE_CAP / 2 {
            o.id_created(p << 8, false, false);
            o.id_destroyed(p << 8);
        }
        o.id_destroyed(0x10);
        // Enough newer marks that the first entry of 0x10 ages out, not its second.
        for p in GONE_CAP / 2 + 1..=GONE_CAP {
            o.id_created(p << 8, false, false);
            o.id_destroyed(p << 8);
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
        let mut o = Objects::new(3);
        let mut due = Vec::new();
        for id in 1..=7 {
            o.id_created(id, false, true);
            due.push(o.id_rejected(id));
        }
        assert_eq!(due, [None, None, Some(3), None, None, Some(6), None]);
        // Rejecting twice, or an id that is not a request's, counts nothing.
        assert_eq!(o.id_rejected(7), None);
        o.id_created(100, false, false);
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
            o.id_destroyed(id);
        }
        assert_eq!(o.leftover().rejected, 0);
        let again: Vec<_> = (200..203)
            .map(|id| {
                o.id_created(id, false, true);
                o.id_rejected(id)
            })
            .collect();
        assert_eq!(again, [None, None, Some(3)]);
    }

    #[test]
    fn internal_objects_are_not_counted_at_exit() {
        let mut o = Objects::new(64);
        o.id_created(1, true, false);
        o.channel_created(2, true);
        o.id_created(3, false, false);
        assert_eq!(
            o.leftover(),
            Leftover {
                ids: 1,
                rejected: 0,
                channels: 0
            }
        );
    }
}
