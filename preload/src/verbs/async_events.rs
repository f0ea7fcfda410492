//! Asynchronous events: what each QP, CQ, SRQ and WQ got through ibv_get_async_event and what
//! was acked for it through ibv_ack_async_event. libibverbs counts the acks of an object's async
//! events, and its destroy (ibv_destroy_qp, ibv_destroy_cq, ibv_destroy_srq, ibv_destroy_wq)
//! waits until that count equals the number of the object's events the kernel handed out, so
//! two counts per object say before a destroy whether it will return. Port and device events
//! are counted by nobody (their ack does nothing): they only show in the summary.
//!
//! Its own lock, never held while libibverbs runs or while another of the preload's locks is
//! taken. One entry per object the program got or acked async events of, removed when its destroy
//! returns; destroyed objects are remembered in a short ring only, to name acks after the destroy.

use crate::audit::findings::{Finding, Kind};
use crate::verbs::counted::{derefs_to_count, Count, Counted, Tally};
use crate::verbs::family::{AtExit, Family};

/// The objects whose destroy waits for their async events to be acked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Object {
    Cq,
    Qp,
    Srq,
    Wq,
}

impl Object {
    /// The object an event of type `t` (enum ibv_event_type) is about, if any.
    pub fn of_event(t: i32) -> Option<Object> {
        match t {
            0 => Some(Object::Cq),
            1..=7 | 16 => Some(Object::Qp),
            14 | 15 => Some(Object::Srq),
            19 => Some(Object::Wq),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Object::Cq => "cq",
            Object::Qp => "qp",
            Object::Srq => "srq",
            Object::Wq => "wq",
        }
    }
}

/// enum ibv_event_type's names, without IBV_EVENT_.
pub fn type_name(t: i32) -> &'static str {
    const NAMES: [&str; 20] = [
        "CQ_ERR",
        "QP_FATAL",
        "QP_REQ_ERR",
        "QP_ACCESS_ERR",
        "COMM_EST",
        "SQ_DRAINED",
        "PATH_MIG",
        "PATH_MIG_ERR",
        "DEVICE_FATAL",
        "PORT_ACTIVE",
        "PORT_ERR",
        "LID_CHANGE",
        "PKEY_CHANGE",
        "SM_CHANGE",
        "SRQ_ERR",
        "SRQ_LIMIT_REACHED",
        "QP_LAST_WQE_REACHED",
        "CLIENT_REREGISTER",
        "GID_CHANGE",
        "WQ_FATAL",
    ];
    usize::try_from(t)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("UNKNOWN")
}

/// One object's async-event counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Obj {
    /// The type of the last event got.
    pub last_type: i32,
    /// Got through ibv_get_async_event (the kernel's reported count), acked through
    /// ibv_ack_async_event (libibverbs' completed count).
    pub count: Count,
}

derefs_to_count!(Obj);

/// What an ibv_ack_async_event of an object's event was found to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckIssue {
    /// More acked than got: the object's counts before this ack.
    DoubleAck(Obj),
    /// The object's destroy returned already; safe mode had acked `prepaid` for the program.
    AfterDestroy { prepaid: u64 },
}

/// Whether to pass the ack on to libibverbs, and what was wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckVerdict {
    pub pass: bool,
    pub issue: Option<AckIssue>,
}

type Key = (Object, usize);

#[derive(Default)]
pub struct Asyncs {
    table: Counted<Key, Obj>,
}

impl Asyncs {
    /// ibv_get_async_event returned an event of type `t`, in `thread`, called from `place`.
    pub fn got(&mut self, t: i32, element: usize, thread: i32, place: usize) {
        let Some(kind) = Object::of_event(t) else {
            // Counted by nobody but the summary.
            self.table.tally.got += 1;
            return;
        };
        self.table.got((kind, element), thread, place).last_type = t;
    }

    /// The program acks an event of type `t`. In safe mode (`absorb`) acks that libibverbs must
    /// not see are kept from it: one safe mode made already, one beyond the events got, one of a
    /// destroyed object.
    pub fn ack(&mut self, t: i32, element: usize, absorb: bool) -> AckVerdict {
        let Some(kind) = Object::of_event(t) else {
            self.table.tally.acked += 1;
            return AckVerdict {
                pass: true,
                issue: None,
            };
        };
        let acked = self.table.ack((kind, element), 1, absorb, |_| {});
        let issue = match (acked.after_destroy, acked.over) {
            (Some(prepaid), _) => Some(AckIssue::AfterDestroy { prepaid }),
            (None, Some(before)) => Some(AckIssue::DoubleAck(before)),
            (None, None) => None,
        };
        AckVerdict {
            pass: acked.pass == 1,
            issue,
        }
    }

    /// What destroying `kind` at `element` would wait for: its counts, when they differ.
    pub fn destroying(&self, kind: Object, element: usize) -> Option<Obj> {
        self.table
            .get((kind, element))
            .filter(|o| o.got != o.acked)
            .cloned()
    }

    /// Safe mode, before the destroy: the acks the program owes, counted as passed on now (the
    /// caller passes them on, after this lock is dropped). Returns how many, and of which type.
    pub fn prepay(&mut self, kind: Object, element: usize) -> (u64, i32) {
        let Some((owed, o)) = self.table.prepay((kind, element)) else {
            return (0, 0);
        };
        o.reported = true;
        (owed, o.last_type)
    }

    /// A finding named the object's unacked events.
    pub fn mark_reported(&mut self, kind: Object, element: usize) {
        self.table.mark_reported((kind, element));
    }

    /// The destroy returned `rc`: on success the object is gone, and remembered a while.
    pub fn destroyed(&mut self, kind: Object, element: usize, rc: i32) {
        self.table.destroyed((kind, element), rc);
    }

    /// At exit: the objects with events got and never acked, no finding having named them.
    pub fn never_acked(&self) -> Vec<(Key, Obj)> {
        self.table.never_acked(|&(_, a)| a)
    }

    #[cfg(test)]
    pub fn sizes(&self) -> (usize, usize) {
        self.table.sizes()
    }
}

/// The process's QPs, CQs, SRQs and WQs, and its device's port events.
pub static ASYNCS: Family<Asyncs> = Family::new();

impl AtExit for Asyncs {
    const EVENTS: &'static str = "async events";

    /// Every event, port and device events too.
    fn tally(&self) -> &Tally {
        &self.table.tally
    }

    fn never_acked_findings(&self) -> Vec<Finding> {
        self.never_acked()
            .into_iter()
            .map(|((kind, element), o)| {
                let what = kind.name();
                Finding::about_object(
                    Kind::AsyncNeverAcked,
                    type_name(o.last_type),
                    element,
                    o.threads.first(),
                    "exit".to_string(),
                    format!(
                        "{} async events of {what} {element:#x} never acked (got {}, acked {}, the last {}; got by {}): ibv_destroy_{what}({what}) would wait for them forever",
                        o.owed(),
                        o.got,
                        o.acked,
                        type_name(o.last_type),
                        o.threads.describe()
                    ),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QP: usize = 0xa000;
    const SQ_DRAINED: i32 = 5;
    const PORT_ERR: i32 = 10;
    const SRQ_LIMIT: i32 = 15;

    #[test]
    fn types_name_their_objects() {
        assert_eq!(Object::of_event(0), Some(Object::Cq));
        assert_eq!(Object::of_event(SQ_DRAINED), Some(Object::Qp));
        assert_eq!(Object::of_event(16), Some(Object::Qp));
        assert_eq!(Object::of_event(SRQ_LIMIT), Some(Object::Srq));
        assert_eq!(Object::of_event(19), Some(Object::Wq));
        assert_eq!(Object::of_event(PORT_ERR), None);
        assert_eq!(type_name(SQ_DRAINED), "SQ_DRAINED");
        assert_eq!(type_name(19), "WQ_FATAL");
        assert_eq!(type_name(-1), "UNKNOWN");
        assert_eq!(type_name(20), "UNKNOWN");
    }

    #[test]
    fn port_events_are_counted_never_judged() {
        let mut q = Asyncs::default();
        q.got(PORT_ERR, 1, 7, 0);
        let v = q.ack(PORT_ERR, 1, true);
        assert_eq!(
            v,
            AckVerdict {
                pass: true,
                issue: None
            }
        );
        assert_eq!(q.ack(PORT_ERR, 1, true).issue, None);
        assert_eq!(q.sizes(), (0, 0));
        assert_eq!((q.tally().got, q.tally().acked), (1, 2));
    }

    #[test]
    fn balanced_then_destroyed() {
        let mut q = Asyncs::default();
        q.got(SQ_DRAINED, QP, 7, 0x100);
        let o = q.destroying(Object::Qp, QP).unwrap();
        assert_eq!(
            (o.got, o.acked, o.last_type, o.last_get),
            (1, 0, SQ_DRAINED, 0x100)
        );
        // A CQ at the same address is another object.
        assert_eq!(q.destroying(Object::Cq, QP), None);
        assert_eq!(q.ack(SQ_DRAINED, QP, false).issue, None);
        assert_eq!(q.destroying(Object::Qp, QP), None);
        q.destroyed(Object::Qp, QP, 0);
        assert_eq!(q.sizes(), (0, 1));
        assert!(q.never_acked().is_empty());
    }

    #[test]
    fn double_ack_passes_in_audit_and_is_absorbed_in_safe() {
        let mut audit = Asyncs::default();
        audit.got(SQ_DRAINED, QP, 7, 0);
        audit.ack(SQ_DRAINED, QP, false);
        let v = audit.ack(SQ_DRAINED, QP, false);
        assert!(v.pass);
        let Some(AckIssue::DoubleAck(before)) = v.issue else {
            panic!("not a double ack: {v:?}")
        };
        assert_eq!((before.got, before.acked), (1, 1));
        assert_eq!(audit.destroying(Object::Qp, QP).unwrap().acked, 2);

        let mut safe = Asyncs::default();
        safe.got(SQ_DRAINED, QP, 7, 0);
        safe.ack(SQ_DRAINED, QP, true);
        let v = safe.ack(SQ_DRAINED, QP, true);
        assert!(!v.pass);
        assert!(matches!(v.issue, Some(AckIssue::DoubleAck(_))));
        assert_eq!(safe.destroying(Object::Qp, QP), None);
        assert_eq!(safe.tally().absorbed, 1);
    }

    #[test]
    fn safe_destroy_prepays_then_absorbs_the_late_ack() {
        let mut q = Asyncs::default();
        q.got(SRQ_LIMIT, QP, 7, 0);
        assert_eq!(q.prepay(Object::Srq, QP), (1, SRQ_LIMIT));
        assert_eq!(q.destroying(Object::Srq, QP), None);
        // The destroy failed: the program's own ack is the one safe mode made, absorbed.
        q.destroyed(Object::Srq, QP, -1);
        assert_eq!(
            q.ack(SRQ_LIMIT, QP, true),
            AckVerdict {
                pass: false,
                issue: None
            }
        );
        // Again, and the destroy returns: the late ack is named and kept from the freed SRQ.
        q.got(SRQ_LIMIT, QP, 7, 0);
        q.prepay(Object::Srq, QP);
        q.destroyed(Object::Srq, QP, 0);
        let v = q.ack(SRQ_LIMIT, QP, true);
        assert_eq!(
            v,
            AckVerdict {
                pass: false,
                issue: Some(AckIssue::AfterDestroy { prepaid: 1 })
            }
        );
        // Audit passes it on, as without cmsafe.
        assert!(q.ack(SRQ_LIMIT, QP, false).pass);
        assert_eq!((q.tally().cmsafe_acked, q.tally().absorbed), (2, 2));
        // A new SRQ at the same address starts afresh.
        q.got(SRQ_LIMIT, QP, 9, 0);
        assert_eq!(
            q.ack(SRQ_LIMIT, QP, true),
            AckVerdict {
                pass: true,
                issue: None
            }
        );
    }

    #[test]
    fn never_acked_skips_reported() {
        let mut q = Asyncs::default();
        q.got(SQ_DRAINED, QP, 7, 0);
        q.got(SRQ_LIMIT, 0xb000, 8, 0);
        q.got(0, 0xc000, 8, 0);
        q.mark_reported(Object::Cq, 0xc000);
        let left = q.never_acked();
        assert_eq!(left.len(), 2);
        assert_eq!(left[0].0, (Object::Qp, QP));
        assert_eq!(left[1].1.threads.describe(), "thread 8");
    }

    #[test]
    fn memory_stays_bounded() {
        let mut q = Asyncs::default();
        for i in 0..10_000usize {
            let qp = 0x1_0000 + i * 0x100;
            q.got(SQ_DRAINED, qp, 7, 0);
            q.ack(SQ_DRAINED, qp, false);
            q.destroyed(Object::Qp, qp, 0);
            q.got(PORT_ERR, 1, 7, 0);
        }
        assert_eq!(q.sizes(), (0, crate::verbs::counted::DESTROYED_CAP));
        assert_eq!((q.tally().got, q.tally().acked), (20_000, 10_000));
    }
}
