//! The owned copy of a connection-manager event.

mod copy;
mod describe;
mod private_data;

use std::sync::atomic::{AtomicU64, Ordering};

pub use copy::{param_kind, ParamKind};
pub use private_data::{PrivateData, MAX_PRIVATE_DATA};

use crate::cm::{event_type_name, rdma_cm_event, rdma_cm_id, EventType};
use crate::pool::{AllocError, Handle, Pool, Pooled};
use crate::status::{self, StatusKind, Transport};

/// Process-wide fetch order; starts at 1 so 0 never names an event.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

pub(crate) static EVENTS: Pool<EventData> = Pool::new(0, "cmsafe_event", 0xc5e7_e7e7);

impl Pooled for EventData {
    fn pool() -> &'static Pool<Self> {
        &EVENTS
    }
    const RELEASE: &'static str = "cmsafe_event_release";
}

pub(crate) struct EventData {
    /// The view handed to C: librdmacm's struct with `private_data` pointing into our buffer.
    cm: rdma_cm_event,
    private_data: Option<PrivateData>,
    kind: ParamKind,
    transport: Transport,
    seq: u64,
    fetched_ns: u64,
    src: libc::sockaddr_storage,
    dst: libc::sockaddr_storage,
}

// SAFETY: immutable after the copy; the raw pointers inside (`id`, `listen_id`, a multicast
// context) are the application's and are never dereferenced through the copy, and
// `private_data` points into our own refcounted buffer.
unsafe impl Send for EventData {}
// SAFETY: as above.
unsafe impl Sync for EventData {}

/// An immutable, refcounted copy of one event; the original was acked when this was made.
/// Cloning is cheap (a refcount), and the copy may be sent to and shared with other threads.
#[derive(Clone)]
pub struct Event(Handle<EventData>);

/// Events copied so far: every copy took one sequence number, and only a copy takes one.
pub(crate) fn copied() -> u64 {
    NEXT_SEQ.load(Ordering::Relaxed) - 1
}

pub(crate) fn live_events() -> u64 {
    EVENTS.live()
}

pub(crate) fn live_buffers() -> u64 {
    private_data::BUFS.live()
}

impl Event {
    /// Copies everything `raw` carries and stamps it with the next sequence number.
    /// `raw` is not acked here; on failure nothing was consumed and `raw` is untouched.
    ///
    /// # Safety
    /// `raw` is a valid, unacked event from `rdma_get_cm_event`.
    pub(crate) unsafe fn copy_of(raw: *const rdma_cm_event) -> Result<Event, AllocError> {
        // SAFETY: forwarded from the caller.
        let copy::Copied {
            mut cm,
            private_data,
            kind,
        } = unsafe { copy::copy_event(raw) }?;
        if kind != ParamKind::MulticastContext {
            let (ptr, len) = match &private_data {
                Some(buf) => (buf.as_bytes().as_ptr().cast(), buf.len() as u8),
                None => (std::ptr::null(), 0),
            };
            // Write the member that is live (both begin with private_data/private_data_len).
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
        let event_type = cm.event;
        // SAFETY: every field is written; `id_facts` reads a live cm_id (an unacked event's).
        let event = unsafe {
            EVENTS.alloc_with(|p| {
                use std::ptr::addr_of_mut;
                let id = cm.id;
                addr_of_mut!((*p).cm).write(cm);
                addr_of_mut!((*p).private_data).write(private_data);
                addr_of_mut!((*p).kind).write(kind);
                let transport = id_facts(id, addr_of_mut!((*p).src), addr_of_mut!((*p).dst));
                addr_of_mut!((*p).transport).write(transport);
                // Taken only once the slot is ours, so sequence numbers count copies exactly.
                addr_of_mut!((*p).seq).write(NEXT_SEQ.fetch_add(1, Ordering::Relaxed));
                addr_of_mut!((*p).fetched_ns).write(monotonic_ns());
            })
        }?;
        crate::stats::count_type(event_type);
        Ok(Event(Handle::new(event)))
    }

    /// Copies an event obtained from librdmacm by other means (the LD_PRELOAD library gets
    /// them from the real `rdma_get_cm_event`). `raw` is left as it is: the caller acks it.
    ///
    /// # Safety
    /// `raw` is a valid, unacked event from `rdma_get_cm_event`.
    pub unsafe fn copy_from_raw(raw: *const rdma_cm_event) -> Result<Event, AllocError> {
        // SAFETY: forwarded from the caller.
        unsafe { Self::copy_of(raw) }
    }

    fn data(&self) -> &EventData {
        self.0.get()
    }

    /// librdmacm's view of the copy; its `private_data` points into [`Event::private_data`].
    pub fn cm(&self) -> &rdma_cm_event {
        &self.data().cm
    }

    pub fn event_type(&self) -> EventType {
        self.data().cm.event
    }

    pub fn event_type_name(&self) -> &'static str {
        event_type_name(self.event_type())
    }

    pub fn status(&self) -> i32 {
        self.data().cm.status
    }

    /// What `status` means for this event type on this transport.
    pub fn status_kind(&self) -> StatusKind {
        status::kind(self.event_type(), self.status(), self.data().transport)
    }

    /// The event's cm_id (owned by the application; for CONNECT_REQUEST, the new id).
    pub fn id(&self) -> *mut rdma_cm_id {
        self.data().cm.id
    }

    /// The listen id a CONNECT_REQUEST arrived on; NULL for other events.
    pub fn listen_id(&self) -> *mut rdma_cm_id {
        self.data().cm.listen_id
    }

    /// The copied private data; `None` when the event carries none, and always for
    /// MULTICAST_JOIN/ERROR (whose `private_data` is the user's context pointer).
    pub fn private_data(&self) -> Option<&PrivateData> {
        self.data().private_data.as_ref()
    }

    pub fn param_kind(&self) -> ParamKind {
        self.data().kind
    }

    /// Strictly increasing across the process, in fetch order; the first event is 1.
    pub fn seq(&self) -> u64 {
        self.data().seq
    }

    /// When the event was fetched: CLOCK_MONOTONIC, nanoseconds.
    pub fn fetched_ns(&self) -> u64 {
        self.data().fetched_ns
    }

    /// The id's source address when the event was fetched (`rdma_get_local_addr(3)`);
    /// family AF_UNSPEC when the id had none.
    pub fn src_addr(&self) -> &libc::sockaddr_storage {
        &self.data().src
    }

    /// The id's destination address when the event was fetched (`rdma_get_peer_addr(3)`).
    pub fn dst_addr(&self) -> &libc::sockaddr_storage {
        &self.data().dst
    }

    /// One log line: sequence number, type, status decoded, id, addresses and the private data
    /// *length* (never its bytes).
    pub fn describe(&self) -> String {
        describe::line(self)
    }

    /// The handle C sees; it carries the reference this value held.
    #[cfg(feature = "capi")]
    pub(crate) fn into_raw(self) -> *const u8 {
        self.0.into_raw()
    }

    /// Takes over the reference a C handle carries, after checking the handle.
    #[cfg(feature = "capi")]
    pub(crate) fn from_raw(ptr: *const u8, op: &str) -> Self {
        Event(Handle::from_raw(ptr, op))
    }

    /// Borrows a C handle without taking its reference.
    #[cfg(feature = "capi")]
    pub(crate) fn with_raw<R>(ptr: *const u8, op: &str, f: impl FnOnce(&Event) -> R) -> R {
        f(&std::mem::ManuallyDrop::new(Self::from_raw(ptr, op)))
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Writes the id's addresses to `src` and `dst` and returns its transport, read while the id
/// is certainly alive.
///
/// # Safety
/// `id` is NULL or a live cm_id; `src` and `dst` are writable.
unsafe fn id_facts(
    id: *mut rdma_cm_id,
    src: *mut libc::sockaddr_storage,
    dst: *mut libc::sockaddr_storage,
) -> Transport {
    if id.is_null() {
        // SAFETY: writable per the contract; all-zero is AF_UNSPEC.
        unsafe {
            src.write_bytes(0, 1);
            dst.write_bytes(0, 1);
        }
        return Transport::Unknown;
    }
    // SAFETY: a live cm_id; `route.addr` holds both addresses as sockaddr_storage, which is
    // what rdma_get_local_addr/rdma_get_peer_addr point into (rdma_cma.h).
    unsafe {
        let addr = &(*id).route.addr;
        std::ptr::copy_nonoverlapping(&addr.src_addr_union.src_storage, src, 1);
        std::ptr::copy_nonoverlapping(&addr.dst_addr_union.dst_storage, dst, 1);
        status::transport_of((*id).verbs)
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
