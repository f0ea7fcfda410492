//! What the report and the probes say of one event the program got: its numbers, as a plain
//! line, whatever room keeps the event (cm/record.rs).

use cmsafe_core::cm::event_type_name;

/// An event as a report's record and the probes give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventLine {
    pub seq: u64,
    pub event_type: u32,
    pub status: i32,
    pub id: usize,
    /// A CONNECT_REQUEST's listen id; 0 for every other event.
    pub listen_id: usize,
    pub thread: i32,
    pub get_ns: u64,
    /// 0 while it is not acked.
    pub ack_ns: u64,
    pub pd_len: u8,
    /// Got by librdmacm for itself (synchronous ids, rsockets).
    pub internal: bool,
}

impl EventLine {
    pub fn type_name(&self) -> &'static str {
        event_type_name(self.event_type)
    }
}

/// What an event is kept as, by the room that keeps it: its line, made only when a report is
/// written or a tracer attached (the report's and the probes' check comes first).
pub trait EventSource {
    fn line(&self) -> EventLine;
}
