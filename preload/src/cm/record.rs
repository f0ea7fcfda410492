//! One event the program got: what the tracker keeps of it, and what stands behind the pointer
//! the program holds; and what the report and the probes say of it (`EventLine`).

use cmsafe_core::cm::event_type_name;

use crate::audit::record::{EventLine, EventSource};

/// What stands behind the pointer the program got.
pub enum Holder {
    /// librdmacm's own event (no copy could be made): acked when the program acks.
    Raw(usize),
    /// Audit: a copy on a guarded page; librdmacm's event is acked when the program acks.
    Guarded { page: u32, raw: usize },
    /// Safe: cmsafe's copy (librdmacm's event was acked at once), held here until the program
    /// acks it, then moved to `State::copies` with the record's number and ack time (the
    /// record itself is not kept).
    Safe(cmsafe_core::Event),
    /// Safe: a copy the program never acked, released when rdma_destroy_id of the id it counts
    /// against returned (librdmacm's event was acked at once); its record is kept a while for
    /// the program's late ack.
    Released,
}

pub struct Record {
    pub seq: u64,
    pub event_type: u32,
    pub status: i32,
    pub id: usize,
    /// The id whose rdma_destroy_id waits for this event: the listen id for CONNECT_REQUEST.
    pub owner: usize,
    /// The owner's other unacked events, newer (`prev`) and older (`next`) than this one, by
    /// the pointers the program got (0: none): the owner's list (cm/unacked.rs).
    pub prev: usize,
    pub next: usize,
    pub channel: usize,
    pub thread: i32,
    pub get_ns: u64,
    pub ack_ns: u64,
    pub pd_len: u8,
    /// Got by librdmacm for itself (synchronous ids, rsockets): librdmacm acks it.
    pub internal: bool,
    /// The calls whose findings already named this event (`Reported` bits): each call is
    /// judged on its own, so a finding at rdma_destroy_qp never hides the one at the
    /// rdma_destroy_id after it; any of them spares it the never-acked line at exit.
    pub reported: u8,
    pub holder: Holder,
}

/// A rdma_destroy_qp that met an event another thread held unacked, judged at the event's ack
/// or at exit (cm/judge.rs, `note_qp_destroy`).
pub struct QpDestroyed {
    /// The event.
    pub ptr: usize,
    pub at_ns: u64,
    /// The thread that called rdma_destroy_qp, and from where (described only for a finding:
    /// most such events are acked in time).
    pub thread: i32,
    pub caller: usize,
}

/// Which findings named an event already: one bit per judged call.
pub mod reported {
    pub const DESTROY_ID: u8 = 1;
    pub const MIGRATE_ID: u8 = 2;
    pub const DESTROY_QP: u8 = 4;
    pub const DESTROY_CHANNEL: u8 = 8;
    /// Inherited across fork(2): not the child's doing.
    pub const INHERITED: u8 = 0x80;
}

impl Record {
    /// Whether a finding of the call `bit` (or an inherited event) named it already.
    pub fn reported_for(&self, bit: u8) -> bool {
        self.reported & (bit | reported::INHERITED) != 0
    }

    pub fn type_name(&self) -> &'static str {
        event_type_name(self.event_type)
    }
}

impl EventSource for Record {
    fn line(&self) -> EventLine {
        EventLine {
            seq: self.seq,
            event_type: self.event_type,
            status: self.status,
            id: self.id,
            // A CONNECT_REQUEST's listen id (its owner), so a reader can tell which listener
            // each connection came through; none for every other event.
            listen_id: if self.owner != self.id { self.owner } else { 0 },
            thread: self.thread,
            get_ns: self.get_ns,
            ack_ns: self.ack_ns,
            pd_len: self.pd_len,
            internal: self.internal,
        }
    }
}
