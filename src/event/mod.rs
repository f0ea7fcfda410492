//! The owned copy of a connection-manager event.

mod copy;
mod private_data;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use copy::{param_kind, ParamKind};
pub use private_data::{PrivateData, MAX_PRIVATE_DATA};

use crate::cm::{event_type_name, rdma_cm_event, rdma_cm_id, EventType};

/// Process-wide fetch order; starts at 1 so 0 never names an event.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

pub(crate) struct EventInner {
    /// The view handed to C: librdmacm's struct with `private_data` pointing into our buffer.
    cm: rdma_cm_event,
    private_data: Option<PrivateData>,
    kind: ParamKind,
    seq: u64,
    fetched_ns: u64,
}

// SAFETY: the raw pointers in `cm` are never dereferenced through the copy: `id`/`listen_id` are
// the application's cm_ids, and `private_data` points into our immutable, refcounted buffer.
unsafe impl Send for EventInner {}
// SAFETY: as above; nothing in an event changes after it is built.
unsafe impl Sync for EventInner {}

/// An immutable, refcounted copy of one event; the original was acked when this was made.
/// Cloning is cheap (a refcount).
#[derive(Clone)]
pub struct Event(pub(crate) Arc<EventInner>);

impl Event {
    /// Copies everything `raw` carries and stamps it with the next sequence number.
    /// `raw` is not acked here.
    ///
    /// # Safety
    /// `raw` is a valid, unacked event from `rdma_get_cm_event`.
    pub(crate) unsafe fn copy_of(raw: *const rdma_cm_event) -> Event {
        // SAFETY: forwarded from the caller.
        let copy::Copied {
            mut cm,
            private_data,
            kind,
        } = unsafe { copy::copy_event(raw) };
        if kind != ParamKind::MulticastContext {
            let (ptr, len) = match &private_data {
                Some(buf) => (buf.as_bytes().as_ptr().cast(), buf.len() as u8),
                None => (std::ptr::null(), 0),
            };
            // The conn and UD members both begin with private_data/private_data_len (checked in
            // tests/layout.rs), but write the member that is live.
            match kind {
                ParamKind::Ud => {
                    cm.param.ud.private_data = ptr;
                    cm.param.ud.private_data_len = len;
                }
                _ => {
                    cm.param.conn.private_data = ptr;
                    cm.param.conn.private_data_len = len;
                }
            }
        }
        Event(Arc::new(EventInner {
            cm,
            private_data,
            kind,
            seq: NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            fetched_ns: monotonic_ns(),
        }))
    }

    /// librdmacm's view of the copy; its `private_data` points into [`Event::private_data`].
    pub fn cm(&self) -> &rdma_cm_event {
        &self.0.cm
    }

    pub fn event_type(&self) -> EventType {
        self.0.cm.event
    }

    pub fn event_type_name(&self) -> &'static str {
        event_type_name(self.0.cm.event)
    }

    pub fn status(&self) -> i32 {
        self.0.cm.status
    }

    /// The event's cm_id (owned by the application; for CONNECT_REQUEST, the new id).
    pub fn id(&self) -> *mut rdma_cm_id {
        self.0.cm.id
    }

    /// The listen id a CONNECT_REQUEST arrived on; NULL for other events.
    pub fn listen_id(&self) -> *mut rdma_cm_id {
        self.0.cm.listen_id
    }

    /// The copied private data; `None` when the event carries none, and always for
    /// MULTICAST_JOIN/ERROR (whose `private_data` is the user's context pointer).
    pub fn private_data(&self) -> Option<&PrivateData> {
        self.0.private_data.as_ref()
    }

    pub fn param_kind(&self) -> ParamKind {
        self.0.kind
    }

    /// Strictly increasing across the process, in fetch order; the first event is 1.
    pub fn seq(&self) -> u64 {
        self.0.seq
    }

    /// When the event was fetched: CLOCK_MONOTONIC, nanoseconds.
    pub fn fetched_ns(&self) -> u64 {
        self.0.fetched_ns
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("seq", &self.seq())
            .field("type", &self.event_type_name())
            .field("status", &self.status())
            .field("id", &self.id())
            .field("private_data", &self.private_data())
            .finish()
    }
}

pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
