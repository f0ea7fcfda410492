//! Completion-queue events: what each CQ got through ibv_get_cq_event and what was acked for it
//! through ibv_ack_cq_events. libibverbs' ibv_destroy_cq waits until the CQ's acked count equals
//! the count the kernel handed out (exactly equal: more acks than events hang it as surely as
//! fewer), so the two counts per CQ are all it takes to say before the destroy whether it will
//! return.
//!
//! Its own lock, never held while libibverbs runs or while the CM tracker's lock is taken: the
//! findings are built here and handed to the tracker (which says and counts them) after this
//! lock is dropped. One entry per CQ the program got or acked events of, removed when its
//! ibv_destroy_cq returns; destroyed CQs are remembered in a short ring only, to name acks that
//! come after the destroy.

use crate::audit::findings::{Finding, Kind};
use crate::verbs::counted::{derefs_to_count, Count, Counted, Tally};
use crate::verbs::family::{AtExit, Family};

/// One CQ's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cq {
    /// Its completion channel (where its events are read).
    pub channel: usize,
    /// Got through ibv_get_cq_event, acked through ibv_ack_cq_events.
    pub count: Count,
}

derefs_to_count!(Cq);

impl Cq {
    /// "thread 12" / "threads 12, 13" / ..., for messages.
    pub fn getters(&self) -> String {
        self.threads.describe()
    }
}

/// What an ibv_ack_cq_events call was found to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckIssue {
    /// More acked than got from this CQ; no other CQ of its channel owes an ack.
    OverAck { before: Cq, n: u64 },
    /// More acked than got from this CQ, while `other`, on the same completion channel, owes
    /// `other_owed` acks: the events were acked against the wrong CQ.
    WrongCq {
        before: Cq,
        n: u64,
        other: usize,
        other_owed: u64,
    },
    /// An ack of a CQ whose ibv_destroy_cq returned; `prepaid`: what safe mode had acked for the
    /// program there.
    AfterDestroy { prepaid: u64 },
}

/// The outcome of an ack: how many to pass on to libibverbs, how many were absorbed, and the
/// misuse found, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckVerdict {
    pub pass: u64,
    pub absorbed: u64,
    pub issue: Option<AckIssue>,
}

/// What ibv_destroy_cq of a CQ meets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DestroyIssue {
    /// Events got and never acked: the destroy waits for them.
    Unacked(Cq),
    /// More acked than got: the destroy waits for counts that can never be equal.
    OverAcked(Cq),
}

#[derive(Default)]
pub struct Cqs {
    table: Counted<usize, Cq>,
}

impl Cqs {
    /// ibv_get_cq_event returned an event of `cq`, read from `channel`, in `thread`, called from
    /// `place`.
    pub fn got(&mut self, cq: usize, channel: usize, thread: i32, place: usize) {
        self.table.got(cq, thread, place).channel = channel;
    }

    /// The program acks `n` events of `cq`; `channel` tells its completion channel, asked only
    /// for a CQ neither tracked nor destroyed (so never of freed memory we know of). In safe mode
    /// (`absorb`) acks that libibverbs must not see are kept from it: those safe mode made for
    /// the program already, those beyond the events got, those of a destroyed CQ.
    pub fn ack(
        &mut self,
        cq: usize,
        channel: impl FnOnce() -> usize,
        n: u64,
        absorb: bool,
    ) -> AckVerdict {
        let acked = self.table.ack(cq, n, absorb, |c| c.channel = channel());
        let (pass, absorbed) = (acked.pass, acked.absorbed);
        let issue = if let Some(prepaid) = acked.after_destroy {
            Some(AckIssue::AfterDestroy { prepaid })
        } else if let Some(before) = acked.over {
            let channel = before.channel;
            let other = self
                .table
                .iter()
                .filter(|(&o, oc)| o != cq && oc.channel == channel && oc.owed() > 0)
                .min_by_key(|(&o, _)| o)
                .map(|(&o, oc)| (o, oc.owed()));
            Some(match other {
                Some((other, other_owed)) => AckIssue::WrongCq {
                    before,
                    n,
                    other,
                    other_owed,
                },
                None => AckIssue::OverAck { before, n },
            })
        } else {
            None
        };
        AckVerdict {
            pass,
            absorbed,
            issue,
        }
    }

    /// `cq`'s counts, if the program got or acked any of its events.
    #[cfg(test)]
    pub fn get(&self, cq: usize) -> Option<&Cq> {
        self.table.get(cq)
    }

    /// What ibv_destroy_cq(cq) would wait for, if anything.
    pub fn destroying(&self, cq: usize) -> Option<DestroyIssue> {
        let c = self.table.get(cq)?;
        if c.owed() > 0 {
            Some(DestroyIssue::Unacked(c.clone()))
        } else if c.over() > 0 {
            Some(DestroyIssue::OverAcked(c.clone()))
        } else {
            None
        }
    }

    /// A finding named `cq`'s unacked events.
    pub fn mark_reported(&mut self, cq: usize) {
        self.table.mark_reported(cq);
    }

    /// Safe mode, before ibv_destroy_cq(cq): the acks the program owes, counted as passed on now
    /// (the caller passes them on, after this lock is dropped). Returns how many.
    pub fn prepay(&mut self, cq: usize) -> u64 {
        self.table.prepay(cq).map_or(0, |(owed, _)| owed)
    }

    /// ibv_destroy_cq(cq) returned `rc`: on success the CQ is gone, and remembered a while.
    pub fn destroyed(&mut self, cq: usize, rc: i32) {
        self.table.destroyed(cq, rc);
    }

    /// At exit: the CQs whose events were got and never acked, no finding having named them,
    /// by address.
    pub fn never_acked(&self) -> Vec<(usize, Cq)> {
        self.table.never_acked(|&cq| cq)
    }

    /// How many CQs are tracked (live, and destroyed ones remembered).
    #[cfg(test)]
    pub fn sizes(&self) -> (usize, usize) {
        self.table.sizes()
    }
}

/// The process's CQs.
pub static CQS: Family<Cqs> = Family::new();

impl AtExit for Cqs {
    const EVENTS: &'static str = "completion events";

    fn tally(&self) -> &Tally {
        &self.table.tally
    }

    fn never_acked_findings(&self) -> Vec<Finding> {
        self.never_acked()
            .into_iter()
            .map(|(cq, c)| {
                Finding::about_object(
                    Kind::CqNeverAcked,
                    "COMPLETION",
                    cq,
                    c.threads.first(),
                    "exit".to_string(),
                    format!(
                        "{} completion events of this CQ never acked (got {}, acked {}; got by {}): ibv_destroy_cq(cq {cq:#x}) would wait for them forever",
                        c.owed(),
                        c.got,
                        c.acked,
                        c.getters()
                    ),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: usize = 0xa000;
    const B: usize = 0xb000;
    const CH: usize = 0xc000;

    #[test]
    fn gets_and_acks_balance() {
        let mut q = Cqs::default();
        q.got(A, CH, 7, 0x100);
        q.got(A, CH, 7, 0x104);
        q.got(A, CH, 8, 0x108);
        let c = q.get(A).unwrap();
        assert_eq!((c.got, c.acked, c.owed(), c.last_get), (3, 0, 3, 0x108));
        assert_eq!(c.getters(), "threads 7, 8");
        assert_eq!(q.destroying(A), Some(DestroyIssue::Unacked(c.clone())));
        let v = q.ack(A, || CH, 2, false);
        assert_eq!(
            v,
            AckVerdict {
                pass: 2,
                absorbed: 0,
                issue: None
            }
        );
        assert_eq!(q.get(A).unwrap().owed(), 1);
        assert_eq!(q.ack(A, || CH, 1, true).pass, 1);
        assert_eq!(q.destroying(A), None);
        assert!(q.never_acked().is_empty());
        q.destroyed(A, 0);
        assert_eq!(q.sizes(), (0, 1));
        assert_eq!(
            (q.tally().got, q.tally().acked, q.tally().absorbed),
            (3, 3, 0)
        );
    }

    #[test]
    fn over_ack_passes_in_audit_and_is_absorbed_in_safe() {
        let mut audit = Cqs::default();
        audit.got(A, CH, 7, 0);
        let v = audit.ack(A, || CH, 3, false);
        assert_eq!((v.pass, v.absorbed), (3, 0));
        let Some(AckIssue::OverAck { before, n }) = v.issue else {
            panic!("not an over-ack: {v:?}")
        };
        assert_eq!((before.got, before.acked, n), (1, 0, 3));
        // libibverbs now counts 3 acks for 1 event: its destroy waits for ever.
        let c = audit.get(A).unwrap().clone();
        assert_eq!((c.acked, c.over()), (3, 2));
        assert_eq!(audit.destroying(A), Some(DestroyIssue::OverAcked(c)));

        let mut safe = Cqs::default();
        safe.got(A, CH, 7, 0);
        let v = safe.ack(A, || CH, 3, true);
        assert_eq!((v.pass, v.absorbed), (1, 2));
        assert!(matches!(v.issue, Some(AckIssue::OverAck { n: 3, .. })));
        assert_eq!(safe.get(A).unwrap().acked, 1);
        assert_eq!(safe.destroying(A), None);
        assert_eq!(safe.tally().absorbed, 2);
    }

    #[test]
    fn ack_of_a_cq_never_got_from_is_an_over_ack() {
        let mut q = Cqs::default();
        let v = q.ack(B, || CH, 1, false);
        assert!(matches!(v.issue, Some(AckIssue::OverAck { n: 1, ref before }) if before.got == 0));
        assert_eq!(q.get(B).unwrap().over(), 1);
    }

    #[test]
    fn ack_against_the_other_cq_of_the_channel() {
        let mut q = Cqs::default();
        q.got(A, CH, 7, 0);
        q.got(A, CH, 7, 0);
        // A CQ on another channel owing acks is no excuse.
        q.got(0xd000, 0xe000, 7, 0);
        let v = q.ack(B, || CH, 1, false);
        assert_eq!(v.pass, 1);
        match v.issue {
            Some(AckIssue::WrongCq {
                before,
                n,
                other,
                other_owed,
            }) => {
                assert_eq!((before.got, before.acked, n), (0, 0, 1));
                assert_eq!((other, other_owed), (A, 2));
            }
            other => panic!("not a wrong-CQ ack: {other:?}"),
        }
        // Both destroys would wait: A for its acks, B for its extra one.
        assert!(matches!(q.destroying(A), Some(DestroyIssue::Unacked(c)) if c.owed() == 2));
        assert!(matches!(q.destroying(B), Some(DestroyIssue::OverAcked(c)) if c.over() == 1));
        // Safe mode keeps the wrong ack from libibverbs.
        let mut s = Cqs::default();
        s.got(A, CH, 7, 0);
        let v = s.ack(B, || CH, 1, true);
        assert_eq!((v.pass, v.absorbed), (0, 1));
        assert!(matches!(
            v.issue,
            Some(AckIssue::WrongCq {
                other: A,
                other_owed: 1,
                ..
            })
        ));
        assert_eq!(s.destroying(B), None);
    }

    #[test]
    fn safe_destroy_prepays_then_absorbs_later_acks() {
        let mut q = Cqs::default();
        q.got(A, CH, 7, 0);
        q.got(A, CH, 7, 0);
        q.ack(A, || CH, 1, true);
        assert_eq!(q.prepay(A), 1);
        assert_eq!(q.get(A).unwrap().owed(), 0);
        assert_eq!(q.tally().cmsafe_acked, 1);
        // The destroy failed (a QP still uses the CQ): the program's own ack later is the one
        // safe mode made already: absorbed, no finding.
        q.destroyed(A, -1);
        let v = q.ack(A, || CH, 1, true);
        assert_eq!(
            v,
            AckVerdict {
                pass: 0,
                absorbed: 1,
                issue: None
            }
        );
        assert_eq!(q.get(A).unwrap().prepaid, 0);
        // Again, and this time the destroy returns: a late ack is named and kept from the freed CQ.
        q.got(A, CH, 7, 0);
        assert_eq!(q.prepay(A), 1);
        q.destroyed(A, 0);
        assert!(q.get(A).is_none());
        let v = q.ack(A, || panic!("a destroyed CQ's memory read"), 1, true);
        assert_eq!(v.pass, 0);
        assert_eq!(v.issue, Some(AckIssue::AfterDestroy { prepaid: 1 }));
        // Audit passes it on, as the program would without cmsafe.
        let v = q.ack(A, || CH, 2, false);
        assert_eq!((v.pass, v.absorbed), (2, 0));
        assert_eq!(q.tally().absorbed, 2);
        // A new CQ at the same address starts afresh.
        q.got(A, CH, 9, 0);
        assert_eq!(
            q.ack(A, || CH, 1, true),
            AckVerdict {
                pass: 1,
                absorbed: 0,
                issue: None
            }
        );
    }

    #[test]
    fn never_acked_skips_reported_and_balanced() {
        let mut q = Cqs::default();
        q.got(A, CH, 7, 0);
        q.got(B, CH, 8, 0);
        q.got(B, CH, 8, 0);
        q.got(0xf000, CH, 8, 0);
        q.ack(0xf000, || CH, 1, false);
        q.mark_reported(A);
        let left = q.never_acked();
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].0, left[0].1.owed()), (B, 2));
        assert_eq!(left[0].1.getters(), "thread 8");
    }

    #[test]
    fn memory_stays_bounded() {
        let mut q = Cqs::default();
        for i in 0..10_000usize {
            let cq = 0x1_0000 + i * 0x100;
            q.got(cq, CH, 7, 0);
            q.ack(cq, || CH, 1, false);
            q.destroyed(cq, 0);
        }
        assert_eq!(q.sizes(), (0, crate::verbs::counted::DESTROYED_CAP));
        assert_eq!((q.tally().got, q.tally().acked), (10_000, 10_000));
    }
}
