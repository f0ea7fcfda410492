//! Each id's unacked events, linked: what a rdma_destroy_id or rdma_migrate_id of the id waits
//! for, and what safe mode releases with it, found without a pass over every event the program
//! holds (a program holding thousands while it destroys ids would pay for all of them at each
//! destroy).
//!
//! The newest event of an owner (the id whose destroy waits for it: the listen id for a
//! CONNECT_REQUEST) is named by the owner's entry among the ids (objects.rs, `Id::unacked`);
//! each record links the owner's next newer and older ones (`Record::prev`, `Record::next`).
//! The links are exact; the name in the owner's entry may be stale: the ack of an owner's only
//! event leaves it there, so that the usual ack touches no table but the events'. A stale name
//! is either no event held, or another owner's event at the same pointer since: every use of it
//! checks that the record is held and the owner's, and a new event links it only then.
//! Getting an event costs the owner's entry, which the tracker looks up anyway, and a look for
//! its previous one among the events held; walking an id's events costs those events only.

use crate::cm::record::Record;
use crate::cm::track::State;

impl State {
    /// The event about to be handed out as `ptr`, counted against `owner` and read from
    /// `channel`, becomes the owner's newest: returns the one it was (0: none), which the new
    /// record links as its `next` (its `prev` is 0). The record is built in place by the
    /// caller: moved through here, its hundred-odd bytes would be copied at every event.
    #[inline]
    pub(super) fn link_newest(&mut self, ptr: usize, owner: usize, channel: usize) -> usize {
        let older = self.objects.hold(owner, channel, ptr);
        // Nothing held, the usual case: no look.
        if older == 0 || self.live.is_empty() {
            return 0;
        }
        match self.live.get_mut(&older) {
            Some(o) if o.owner == owner => {
                o.prev = ptr;
                older
            }
            // None held (acked since), or another owner's event at that pointer now.
            _ => 0,
        }
    }

    /// The record of the unacked event `ptr`, taken out of the events held and out of its
    /// owner's list.
    #[inline(always)]
    pub(super) fn take_live(&mut self, ptr: usize) -> Option<Record> {
        let r = self.live.remove(&ptr);
        // An owner's only event, the usual case, has no neighbour to tell; its name in the
        // owner's entry goes stale. (The record is handed back as it came out: rebuilt, its
        // bytes would be copied again.)
        if let Some(rec) = &r {
            if rec.prev != 0 || rec.next != 0 {
                self.unlink(ptr, rec.owner, rec.prev, rec.next);
            }
        }
        r
    }

    /// The event at `ptr`, counted against `owner`, left its owner's list: its neighbours
    /// `prev` and `next` link each other.
    #[inline(never)]
    fn unlink(&mut self, ptr: usize, owner: usize, prev: usize, next: usize) {
        match prev {
            0 => self.objects.replace_unacked(owner, ptr, next),
            _ => {
                if let Some(p) = self.live.get_mut(&prev) {
                    p.next = next;
                }
            }
        }
        if let Some(n) = self.live.get_mut(&next) {
            n.prev = prev;
        }
    }

    /// The unacked events counted against `owner`, newest first. At most as many steps as
    /// events are held, whatever the links say: a walk under the tracker's lock never loops.
    pub(super) fn events_of(&self, owner: usize) -> impl Iterator<Item = (usize, &Record)> + '_ {
        // Nothing held, the usual case at a destroy: no look.
        let mut at = match self.live.is_empty() {
            true => 0,
            false => self.objects.unacked(owner),
        };
        std::iter::from_fn(move || {
            if at == 0 {
                return None;
            }
            let r = self.live.get(&at).filter(|r| r.owner == owner)?;
            let here = at;
            at = r.next;
            Some((here, r))
        })
        .take(self.live.len())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cm::track::new_state;
    use crate::cm::track::tests::acked;
    use crate::sys::config::CONFIG;

    /// `r` kept for the event handed out at `ptr`, as `State::got` keeps it.
    pub(crate) fn hold(s: &mut State, ptr: usize, r: Record) {
        let next = s.link_newest(ptr, r.owner, r.channel);
        s.live.insert(ptr, Record { next, ..r });
    }

    /// Event `seq` handed out at `ptr`, counted against `owner`.
    fn got(s: &mut State, ptr: usize, owner: usize, seq: u64) {
        let r = Record {
            owner,
            id: owner,
            ..acked(seq)
        };
        hold(s, ptr, r);
    }

    fn of(s: &State, owner: usize) -> Vec<u64> {
        s.events_of(owner).map(|(_, r)| r.seq).collect()
    }

    #[test]
    fn an_ids_events_are_found_among_thousands_held_by_others() {
        let mut s = new_state(&CONFIG);
        let (id, other) = (0x7000_0010, 0x7000_0020);
        // Fewer under Miri, whose every step is interpreted: the lists are the same.
        let others: u64 = if cfg!(miri) { 500 } else { 10_000 };
        for i in 0..others {
            got(
                &mut s,
                0x10_0000 + 16 * i as usize,
                0x20_0000 + 16 * i as usize,
                i + 100,
            );
        }
        got(&mut s, 0x1000, id, 1);
        got(&mut s, 0x2000, other, 2);
        got(&mut s, 0x3000, id, 3);
        got(&mut s, 0x4000, id, 4);
        assert_eq!(of(&s, id), [4, 3, 1], "newest first");
        // Acked from the middle, then the newest, then the last: the list stays exact.
        assert_eq!(s.take_live(0x3000).map(|r| r.seq), Some(3));
        assert_eq!(of(&s, id), [4, 1]);
        got(&mut s, 0x5000, id, 5);
        assert_eq!(s.take_live(0x5000).map(|r| r.seq), Some(5));
        assert_eq!(of(&s, id), [4, 1]);
        assert_eq!(s.take_live(0x1000).map(|r| r.seq), Some(1));
        assert_eq!(of(&s, id), [4]);
        assert_eq!(s.take_live(0x4000).map(|r| r.seq), Some(4));
        assert!(of(&s, id).is_empty());
        assert_eq!(of(&s, other), [2]);
        assert_eq!(s.live.len() as u64, others + 1);
        // Held again, after its list emptied.
        got(&mut s, 0x6000, id, 6);
        assert_eq!(of(&s, id), [6]);
    }

    #[test]
    fn a_pointer_acked_and_handed_out_again_for_another_id_is_not_the_first_ids() {
        let mut s = new_state(&CONFIG);
        let (a, b) = (0x7000_0010, 0x7000_0020);
        got(&mut s, 0x1000, a, 1);
        // a's only event acked: its entry still names 0x1000, which comes back for b's event.
        s.take_live(0x1000);
        got(&mut s, 0x1000, b, 2);
        assert!(of(&s, a).is_empty());
        assert_eq!(of(&s, b), [2]);
        // a's next event does not link b's.
        got(&mut s, 0x2000, a, 3);
        assert_eq!((of(&s, a), of(&s, b)), (vec![3], vec![2]));
        assert_eq!(s.live[&0x2000].next, 0);
        // The pointer back for a's own event after its ack: a list of one, not a loop.
        s.take_live(0x2000);
        got(&mut s, 0x3000, a, 4);
        got(&mut s, 0x2000, a, 5);
        assert_eq!(of(&s, a), [5, 4]);
        s.take_live(0x3000);
        s.take_live(0x2000);
        assert!(of(&s, a).is_empty());
        assert_eq!(of(&s, b), [2]);
    }

    #[test]
    fn an_event_that_outlived_its_id_never_moves_a_newer_ids_list() {
        let mut s = new_state(&CONFIG);
        let caller = crate::sys::whereis::Caller {
            addr: 0,
            in_librdmacm: false,
        };
        let id = 0x7000_0010;
        s.id_created(id, 0, caller, false);
        got(&mut s, 0x1000, id, 1);
        got(&mut s, 0x2000, id, 2);
        // Destroyed (its destroy failed: the events stay), and an id made at its address.
        s.destroyed(id, 0, 0, -1);
        s.id_created(id, 0, caller, false);
        got(&mut s, 0x3000, id, 3);
        assert_eq!(of(&s, id), [3]);
        // The old events acked: the newest of them was the old id's, not the new one's.
        s.take_live(0x2000);
        s.take_live(0x1000);
        assert_eq!(of(&s, id), [3]);
    }

    #[test]
    fn a_walk_takes_no_more_steps_than_events_are_held() {
        let mut s = new_state(&CONFIG);
        let id = 0x7000_0010;
        got(&mut s, 0x1000, id, 1);
        got(&mut s, 0x2000, id, 2);
        // Links that loop (no code makes them): the walk ends all the same.
        if let Some(r) = s.live.get_mut(&0x1000) {
            r.next = 0x2000;
        }
        assert_eq!(of(&s, id), [2, 1]);
    }
}
