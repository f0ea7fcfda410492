//! The misuses the preload names.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    UseAfterAck,
    NeverAcked,
    DoubleAck,
    ForeignAck,
    DestroyWithUnacked,
    DestroyInOwnHandler,
    MigrateWithUnacked,
    ChannelDestroyWithUnacked,
    LateAck,
    QpDestroyBeforeAck,
    LostEvent,
    GetEventWithoutIds,
    UseAfterDestroyId,
    NotACmId,
    UseAfterDestroyChannel,
    RejectedIdNeverDestroyed,
    CqDestroyWithUnacked,
    CqAckWrongCq,
    CqOverAck,
    CqNeverAcked,
    CqAckAfterDestroy,
    AsyncDestroyWithUnacked,
    AsyncDoubleAck,
    AsyncNeverAcked,
    AsyncAckAfterDestroy,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::UseAfterAck => "use-after-ack",
            Kind::NeverAcked => "never-acked",
            Kind::DoubleAck => "double-ack",
            Kind::ForeignAck => "foreign-ack",
            Kind::DestroyWithUnacked => "destroy-with-unacked",
            Kind::DestroyInOwnHandler => "destroy-in-own-handler",
            Kind::MigrateWithUnacked => "migrate-with-unacked",
            Kind::ChannelDestroyWithUnacked => "channel-destroy-with-unacked",
            Kind::LateAck => "late-ack",
            Kind::QpDestroyBeforeAck => "qp-destroy-before-ack",
            Kind::LostEvent => "destroy-waits-for-lost-event",
            Kind::GetEventWithoutIds => "get-event-without-ids",
            Kind::UseAfterDestroyId => "use-after-destroy-id",
            Kind::NotACmId => "not-a-cm-id",
            Kind::UseAfterDestroyChannel => "use-after-destroy-channel",
            Kind::RejectedIdNeverDestroyed => "rejected-id-never-destroyed",
            Kind::CqDestroyWithUnacked => "cq-destroy-with-unacked",
            Kind::CqAckWrongCq => "cq-ack-wrong-cq",
            Kind::CqOverAck => "cq-over-ack",
            Kind::CqNeverAcked => "cq-never-acked",
            Kind::CqAckAfterDestroy => "cq-ack-after-destroy",
            Kind::AsyncDestroyWithUnacked => "async-destroy-with-unacked",
            Kind::AsyncDoubleAck => "async-double-ack",
            Kind::AsyncNeverAcked => "async-never-acked",
            Kind::AsyncAckAfterDestroy => "async-ack-after-destroy",
        }
    }
}

/// One finding: the event it is about (seq 0 when none, e.g. a foreign ack), the thread that
/// misused it, where, and a sentence for people. Completion-queue findings (`cq-*`) have seq 0,
/// type COMPLETION and the CQ as `id`; async-event findings (`async-*`) have seq 0, the event's
/// type (e.g. SQ_DRAINED) and the object (QP, CQ, SRQ or WQ) as `id`.
#[derive(Clone, Debug)]
pub struct Finding {
    pub kind: Kind,
    pub seq: u64,
    pub event_type: &'static str,
    pub id: usize,
    pub thread: i32,
    pub place: String,
    pub message: String,
}

impl Finding {
    /// A finding the calling thread made: of the event `seq` (its type's name, its id), or of
    /// no event (seq 0, type "-"), at `place`.
    pub fn here(
        kind: Kind,
        seq: u64,
        event_type: &'static str,
        id: usize,
        place: String,
        message: String,
    ) -> Finding {
        Finding {
            kind,
            seq,
            event_type,
            id,
            thread: crate::sys::this_thread::id(),
            place,
            message,
        }
    }

    /// The same finding, of another thread's (the one that held the event, or faulted).
    pub fn of_thread(self, thread: i32) -> Finding {
        Finding { thread, ..self }
    }

    /// A finding about a libibverbs object `id` (a CQ, QP, SRQ or WQ): no CM event, seq 0.
    pub fn about_object(
        kind: Kind,
        event_type: &'static str,
        id: usize,
        thread: i32,
        place: String,
        message: String,
    ) -> Finding {
        Finding {
            kind,
            seq: 0,
            event_type,
            id,
            thread,
            place,
            message,
        }
    }

    /// The line printed on stderr (and the summary's example).
    pub fn line(&self) -> String {
        format!(
            "{}: seq={} type={} id={:#x} thread={} at {}: {}",
            self.kind.name(),
            self.seq,
            self.event_type,
            self.id,
            self.thread,
            self.place,
            self.message
        )
    }
}
