//! The owned copy of a connection-manager event.

mod copy;
mod describe;
pub use describe::addr_text;
mod local;
mod private_data;
pub mod probes;
mod slot;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

pub use copy::{param_kind, ParamKind};
pub use private_data::{PrivateData, MAX_PRIVATE_DATA};
pub use slot::copies_committed;

use crate::clock::coarse_ns;
use crate::cm::{event_type_name, rdma_cm_event, rdma_cm_id, EventType};
use crate::pool::AllocError;
use crate::pool::{misuse, SlotState};
use crate::status::{self, StatusKind, Transport};
use slot::{Head, Sizes, BYTES_OFFSET, HAS_PD};

/// Process-wide fetch order; starts at 1 so 0 never names an event.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// An immutable, refcounted copy of one event; the original was acked when this was made.
/// Cloning is cheap (a refcount), and the copy may be sent to and shared with other threads.
pub struct Event(NonNull<u8>);

// SAFETY: immutable after the copy, refcount atomic; the raw pointers inside (`id`,
// `listen_id`, a multicast context) are the application's and are never dereferenced through
// the copy, and `private_data` points into the copy's own slot.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

/// Events copied so far: every copy took one sequence number, and only a copy takes one.
pub(crate) fn copied() -> u64 {
    NEXT_SEQ.load(Ordering::Relaxed) - 1
}

/// Takes the shared free lists of the slots events and private data live in, for a
/// pthread_atfork prepare handler, until [`unlock_after_fork`] in the parent and the child
/// handler: a child never inherits one held by a thread it does not have (its next event would
/// wait for good). Lock order: whoever holds a lock of its own while events are made or
/// released (the preload's tracker, the compat header's copies) takes it before this. With the C
/// ABI, libcmsafe.so registers its own handlers at load (`ffi::fork`).
pub fn lock_for_fork() {
    slot::lock_for_fork();
}

/// For the parent and child handlers, in the thread that called [`lock_for_fork`].
pub fn unlock_after_fork() {
    slot::unlock_after_fork();
}

/// Calls `f` with each copy still held, its sequence number and flight record (release 0), in
/// one walk, for the flight recorder's dump.
pub(crate) fn for_each_held(f: &mut dyn FnMut(u64, crate::flight::ring::Words)) {
    slot::for_each_held(f)
}

/// Event copies still referenced.
pub(crate) fn live_events() -> u64 {
    slot::count_live(&|s| slot::event_refs(s) > 0)
}

/// Private data buffers still referenced, by their event or on their own.
pub(crate) fn live_buffers() -> u64 {
    // SAFETY: `count_live` passes live slots only.
    slot::count_live(&|s| unsafe { slot::head(s) }.flags() & HAS_PD != 0)
}

/// The length a `sockaddr` of `family` is stored at: its family's own struct, 16 bytes (a
/// `struct sockaddr`) for AF_UNSPEC, a whole `sockaddr_storage` for a family cmsafe does not
/// know.
pub(crate) fn addr_len(family: libc::sa_family_t) -> usize {
    match family as i32 {
        libc::AF_UNSPEC | libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        // struct sockaddr_ib (rdma/ib.h): family, pkey, flowinfo, 16-byte GID, sid, mask, scope.
        AF_IB => 48,
        _ => std::mem::size_of::<libc::sockaddr_storage>(),
    }
}

/// AF_IB, from rdma/ib.h (not in the libc crate).
const AF_IB: i32 = 27;

impl Event {
    /// Copies everything `raw` carries and stamps it with the next sequence number.
    /// `raw` is not acked here; on failure nothing was consumed and `raw` is untouched.
    ///
    /// # Safety
    /// `raw` is a valid, unacked event from `rdma_get_cm_event`.
    pub(crate) unsafe fn copy_of(raw: *const rdma_cm_event) -> Result<Event, AllocError> {
        // SAFETY: forwarded from the caller; the borrowed bytes are used before any ack.
        let copy::Copied { private_data, kind } = unsafe { copy::copy_event(raw) };
        // SAFETY: a valid event, per the contract.
        let (id, event_type) = unsafe { ((*raw).id, (*raw).event) };
        let (src, dst) = if id.is_null() {
            (std::ptr::null(), std::ptr::null())
        } else {
            // SAFETY: a live cm_id; `route.addr` holds both addresses as sockaddr_storage,
            // what rdma_get_local_addr/rdma_get_peer_addr point into (rdma_cma.h).
            unsafe {
                let addr = &(*id).route.addr;
                (
                    &addr.src_addr_union.src_storage as *const libc::sockaddr_storage,
                    &addr.dst_addr_union.dst_storage as *const libc::sockaddr_storage,
                )
            }
        };
        // SAFETY: NULL or a live id's storage.
        let family =
            |a: *const libc::sockaddr_storage| unsafe { a.as_ref() }.map_or(0, |a| a.ss_family);
        let sizes = Sizes {
            pd: private_data.map_or(0, |p| p.len()),
            src: addr_len(family(src)),
            dst: addr_len(family(dst)),
        };
        // The transport decides only how a REJECTED status reads (`status::kind`): the id's
        // device is looked up for that event alone.
        let transport = if id.is_null()
            || event_type != crate::cm::rdma_cm_event_type::RDMA_CM_EVENT_REJECTED
        {
            Transport::Unknown
        } else {
            // SAFETY: a live cm_id.
            unsafe { status::transport_of((*id).verbs) }
        };
        // One thread-local lookup for the slot and the type counter.
        local::with(|local| {
            // SAFETY: `raw` is valid per the contract; `private_data` and the addresses are
            // its own (the id's storage is 128 bytes, more than any length copied).
            let slot = unsafe {
                Self::alloc_copy(raw, local, sizes, private_data, kind, transport, (src, dst))
            }?;
            match local {
                Some(l) => l.types.count(event_type),
                None => crate::stats::count_type_shared(event_type),
            }
            // SAFETY: not NULL: a slot address.
            Ok(Event(unsafe { NonNull::new_unchecked(slot as *mut u8) }))
        })
    }

    /// As [`Event::copy_of`], for a caller that acks `raw` as soon as this returns: the copy
    /// says so to the flight recorder.
    ///
    /// # Safety
    /// As [`Event::copy_of`].
    pub(crate) unsafe fn copy_to_ack(raw: *const rdma_cm_event) -> Result<Event, AllocError> {
        // SAFETY: forwarded from the caller.
        let ev = unsafe { Self::copy_of(raw) }?;
        // SAFETY: the copy is this thread's alone until it is returned; the flag is a bit of
        // the head no reader of the event reads (a dump that reads the slot meanwhile sees
        // `seq_flags` change and leaves the copy out).
        unsafe { slot::mark_acked(ev.0.as_ptr()) };
        Ok(ev)
    }

    /// The slot of `copy_of`, written.
    ///
    /// # Safety
    /// As `copy_of`; `private_data` is `raw`'s, the addresses NULL or `raw`'s id's storage.
    #[allow(clippy::too_many_arguments)]
    unsafe fn alloc_copy(
        raw: *const rdma_cm_event,
        local: Option<&local::Local>,
        sizes: Sizes,
        private_data: Option<&[u8]>,
        kind: ParamKind,
        transport: Transport,
        (src, dst): (*const libc::sockaddr_storage, *const libc::sockaddr_storage),
    ) -> Result<*const u8, AllocError> {
        // SAFETY: per the contract; every head field is written below.
        unsafe {
            slot::alloc(sizes, false, local, |head, tail| {
                use std::ptr::{addr_of_mut, copy_nonoverlapping};
                // Taken only once the slot is ours, so sequence numbers count copies exactly;
                // and before the slot's stores, which the locked add would wait for.
                let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
                let fetched_ns = coarse_ns();
                let (src_off, dst_off) = slot::addr_offsets(sizes.pd, sizes.src);
                if let Some(bytes) = private_data {
                    copy_nonoverlapping(bytes.as_ptr(), tail, bytes.len());
                }
                for (from, off, len) in [(src, src_off, sizes.src), (dst, dst_off, sizes.dst)] {
                    let to = tail.add(off);
                    match (from.is_null(), len) {
                        (true, _) => to.write_bytes(0, len),
                        // IPv4 (and AF_UNSPEC): one 16-byte move, not a call to memmove.
                        (false, 16) => (to as *mut [u8; 16])
                            .write_unaligned((from as *const [u8; 16]).read_unaligned()),
                        (false, _) => copy_nonoverlapping(from as *const u8, to, len),
                    }
                }
                let cm = addr_of_mut!((*head).cm);
                copy_nonoverlapping(raw, cm, 1);
                // The pointer is redirected only where `param` holds private data: a multicast
                // context, a USER event's arg and bytes cmsafe does not know stay as they were.
                if matches!(kind, ParamKind::Conn | ParamKind::Ud) {
                    let (ptr, len) = match private_data {
                        Some(b) => (tail as *const libc::c_void, b.len() as u8),
                        None => (std::ptr::null(), 0),
                    };
                    // Write the member that is live (both begin with private_data and its length).
                    if kind == ParamKind::Ud {
                        (*cm).param.ud.private_data = ptr;
                        (*cm).param.ud.private_data_len = len;
                    } else {
                        (*cm).param.conn.private_data = ptr;
                        (*cm).param.conn.private_data_len = len;
                    }
                }
                let flags = slot::flags(kind, transport, private_data.is_some());
                addr_of_mut!((*head).seq_flags).write(slot::seq_flags(seq, flags));
                addr_of_mut!((*head).fetched_ns).write(fetched_ns);
            })
        }
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

    /// Whether `cm` is where a copy made here was handed out as librdmacm's struct (what
    /// [`Event::cm`] returned), whether the copy is still live or was released since: memory
    /// of cmsafe's own, which librdmacm's `rdma_ack_cm_event` must never be given.
    pub fn is_copy_address(cm: *const rdma_cm_event) -> bool {
        // Asked of the address: `cm` may come from a reference to the struct alone (a copy's
        // handle), whose provenance does not reach the slot's header before it. The slot is
        // found again from the number, as every address of the pool is (its base is kept as one).
        let slot = (cm as usize).wrapping_sub(crate::pool::VALUE_OFFSET) as *const u8;
        slot::classify(slot) != crate::pool::SlotState::Foreign
    }

    fn head(&self) -> &Head {
        // SAFETY: we hold a reference, so the slot is live.
        unsafe { slot::head(self.0.as_ptr()) }
    }

    fn tail(&self) -> *const u8 {
        // SAFETY: inside the slot we hold.
        unsafe { self.0.as_ptr().add(BYTES_OFFSET) }
    }

    /// librdmacm's view of the copy; its `private_data` points into [`Event::private_data`].
    pub fn cm(&self) -> &rdma_cm_event {
        &self.head().cm
    }

    pub fn event_type(&self) -> EventType {
        self.head().cm.event
    }

    pub fn event_type_name(&self) -> &'static str {
        event_type_name(self.event_type())
    }

    pub fn status(&self) -> i32 {
        self.head().cm.status
    }

    /// What `status` means for this event type on this transport.
    pub fn status_kind(&self) -> StatusKind {
        let transport = slot::transport_of(self.head().flags());
        status::kind(self.event_type(), self.status(), transport)
    }

    /// The event's cm_id (owned by the application; for CONNECT_REQUEST, the new id).
    pub fn id(&self) -> *mut rdma_cm_id {
        self.head().cm.id
    }

    /// The listen id a CONNECT_REQUEST arrived on; NULL for other events.
    pub fn listen_id(&self) -> *mut rdma_cm_id {
        self.head().cm.listen_id
    }

    /// The copied private data; `None` when the event carries none, and always for
    /// MULTICAST_JOIN/ERROR (whose `private_data` is the user's context pointer). Clone it to
    /// keep it beyond the event.
    pub fn private_data(&self) -> Option<&PrivateData> {
        let head = self.head();
        if head.flags() & HAS_PD == 0 {
            return None;
        }
        // SAFETY: with private data, the live member's `private_data` (the first field of both
        // `param.conn` and `param.ud`) is a non-NULL pointer to this slot's bytes, which is
        // what a `PrivateData` is (repr(transparent) over that pointer).
        Some(unsafe {
            &*(std::ptr::addr_of!(head.cm.param.conn.private_data) as *const PrivateData)
        })
    }

    /// `param.arg` of a USER event (`rdma_write_cm_event(3)`'s value, rdma-core 60+); `None`
    /// for every other type.
    pub fn arg(&self) -> Option<u64> {
        let head = self.head();
        if slot::kind_of(head.flags()) != ParamKind::Arg {
            return None;
        }
        // SAFETY: a USER event's live member is `arg` (ParamKind::Arg); plain data.
        Some(unsafe { head.cm.param.arg })
    }

    pub fn param_kind(&self) -> ParamKind {
        slot::kind_of(self.head().flags())
    }

    /// Strictly increasing across the process, in fetch order; the first event is 1.
    pub fn seq(&self) -> u64 {
        self.head().seq()
    }

    /// When the event was fetched: CLOCK_MONOTONIC_COARSE, nanoseconds (the clock advances
    /// once per kernel tick: see `clock_getres(2)`).
    pub fn fetched_ns(&self) -> u64 {
        self.head().fetched_ns
    }

    fn addr_offsets(&self) -> (usize, usize) {
        let pd = self.head().pd_len();
        let src_off = slot::addr_offsets(pd, 0).0;
        // SAFETY: the source address begins there and holds at least its family.
        let family = unsafe { (*(self.tail().add(src_off) as *const libc::sockaddr)).sa_family };
        slot::addr_offsets(pd, addr_len(family))
    }

    /// Where the slot keeps the source and the destination address, each at its family's
    /// length: pointers whose reach is all of it (a `&sockaddr` reaches 16 bytes).
    fn addr_ptrs(&self) -> (*const libc::sockaddr, *const libc::sockaddr) {
        let (src, dst) = self.addr_offsets();
        // SAFETY: both offsets are inside the slot we hold, 8-aligned.
        unsafe { (self.tail().add(src).cast(), self.tail().add(dst).cast()) }
    }

    /// The id's source address when the event was fetched (`rdma_get_local_addr(3)`); family
    /// AF_UNSPEC when the id had none. Stored at its family's length ([`addr_len`]).
    pub fn src_addr(&self) -> &libc::sockaddr {
        // SAFETY: the slot holds the source address there.
        unsafe { &*self.addr_ptrs().0 }
    }

    /// The id's destination address when the event was fetched (`rdma_get_peer_addr(3)`).
    pub fn dst_addr(&self) -> &libc::sockaddr {
        // SAFETY: as above, for the destination.
        unsafe { &*self.addr_ptrs().1 }
    }

    /// One log line: sequence number, type, status decoded, id, addresses and the private data
    /// *length* (never its bytes).
    pub fn describe(&self) -> String {
        describe::line(self)
    }

    /// The handle C sees; it carries the reference this value held.
    pub fn into_raw(self) -> *const u8 {
        std::mem::ManuallyDrop::new(self).0.as_ptr()
    }

    /// Takes over the reference a C handle carries, after checking the handle (a released or
    /// foreign one is reported and aborts).
    pub fn from_raw(ptr: *const u8, op: &str) -> Self {
        let released = || -> ! {
            misuse(format_args!(
                "{op}({ptr:p}): this cmsafe_event was already released (double release or use after release)"
            ))
        };
        match slot::classify(ptr) {
            SlotState::Live if slot::event_refs(ptr) > 0 => {}
            SlotState::Live | SlotState::Free => released(),
            SlotState::Foreign => misuse(format_args!(
                "{op}({ptr:p}): not a cmsafe_event cmsafe returned"
            )),
        }
        // SAFETY: not NULL: a live slot.
        Event(unsafe { NonNull::new_unchecked(ptr as *mut u8) })
    }

    /// Borrows a C handle without taking its reference.
    pub fn with_raw<R>(ptr: *const u8, op: &str, f: impl FnOnce(&Event) -> R) -> R {
        f(&std::mem::ManuallyDrop::new(Self::from_raw(ptr, op)))
    }
}

impl Clone for Event {
    fn clone(&self) -> Self {
        slot::retain(self.0.as_ptr());
        Event(self.0)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        local::with(|local| slot::release(self.0.as_ptr(), local, "cmsafe_event_release"));
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::rdma_cm_event_type::*;

    fn v6(port: u16, last: u8) -> libc::sockaddr_storage {
        // SAFETY: plain data; all-zero is valid.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: sockaddr_storage holds a sockaddr_in6.
        let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
        sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sin6.sin6_port = port.to_be();
        sin6.sin6_addr.s6_addr[15] = last;
        ss
    }

    #[test]
    fn addresses_and_private_data_live_in_the_slot() {
        // SAFETY: plain data; all-zero is valid.
        let mut id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        id.route.addr.src_addr_union.src_storage = v6(7471, 1);
        id.route.addr.dst_addr_union.dst_storage = v6(9000, 2);
        let bytes: Vec<u8> = (1..=196).collect();
        // SAFETY: plain data; all-zero is valid.
        let mut raw: rdma_cm_event = unsafe { std::mem::zeroed() };
        raw.event = RDMA_CM_EVENT_ESTABLISHED;
        raw.id = &mut *id;
        raw.param.conn.private_data = bytes.as_ptr().cast();
        raw.param.conn.private_data_len = 196;
        // SAFETY: a valid event; its id and bytes outlive the copy.
        let ev = unsafe { Event::copy_of(&raw) }.unwrap();
        let pd = ev.private_data().expect("private data").clone();
        // SAFETY: a conn event: `param.conn` is the live member.
        let view = unsafe { ev.cm().param.conn };
        assert_eq!(view.private_data.cast::<u8>(), pd.as_bytes().as_ptr());
        assert_eq!(view.private_data_len, 196);
        for (sa, port, last) in [(ev.src_addr(), 7471, 1), (ev.dst_addr(), 9000, 2)] {
            assert_eq!(sa.sa_family as i32, libc::AF_INET6);
            // SAFETY: an AF_INET6 address is stored at sockaddr_in6's length.
            let sin6 = unsafe { &*(sa as *const _ as *const libc::sockaddr_in6) };
            assert_eq!(u16::from_be(sin6.sin6_port), port);
            assert_eq!(sin6.sin6_addr.s6_addr[15], last);
        }
        assert!(ev.seq() > 0);
        assert_eq!(ev.param_kind(), ParamKind::Conn);
        // The buffer outlives its event, in another thread.
        drop(ev);
        let seen = std::thread::spawn(move || pd.as_bytes().to_vec())
            .join()
            .unwrap();
        assert_eq!(seen, bytes);
    }

    /// One thread takes and gives back buffer references while two others read the event's
    /// own references, as threads sharing one event handle do (each read is what a C call's
    /// handle check does): with the one reference the event holds, every read sees exactly 1.
    #[test]
    fn buffer_references_never_hide_the_event_from_a_reader() {
        use std::sync::atomic::AtomicBool;
        const ROUNDS: u32 = 200_000;
        let bytes = [0x5au8; 56];
        // SAFETY: plain data; all-zero is valid.
        let mut raw: rdma_cm_event = unsafe { std::mem::zeroed() };
        raw.event = crate::cm::rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST;
        raw.param.conn.private_data = bytes.as_ptr().cast();
        raw.param.conn.private_data_len = bytes.len() as u8;
        // SAFETY: a valid event without an id; its bytes outlive the copy.
        let ev = unsafe { Event::copy_of(&raw) }.unwrap();
        let slot = ev.0.as_ptr() as usize;
        let done = AtomicBool::new(false);
        let start = std::sync::Barrier::new(3);
        let reads = std::thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let mut reads = 0u64;
                        loop {
                            let refs = slot::event_refs(slot as *const u8);
                            assert_eq!(refs, 1, "event references read as {refs}");
                            reads += 1;
                            // Relaxed: a stop flag; nothing is read after it.
                            if done.load(Ordering::Relaxed) {
                                return reads;
                            }
                        }
                    })
                })
                .collect();
            let pd = ev.private_data().expect("private data");
            start.wait();
            for _ in 0..ROUNDS {
                drop(pd.clone());
            }
            // Relaxed: as above; the joins order the rest.
            done.store(true, Ordering::Relaxed);
            readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
        });
        eprintln!("{ROUNDS} buffer references against {reads} reads");
        assert_eq!(slot::event_refs(slot as *const u8), 1);
        assert_eq!(slot::buf_refs(slot as *const u8), 0);
        assert_eq!(ev.private_data().unwrap().as_bytes(), &bytes[..]);
    }

    #[test]
    fn addr_len_is_the_family_length() {
        assert_eq!(addr_len(libc::AF_UNSPEC as libc::sa_family_t), 16);
        assert_eq!(addr_len(libc::AF_INET as libc::sa_family_t), 16);
        assert_eq!(addr_len(libc::AF_INET6 as libc::sa_family_t), 28);
        assert_eq!(addr_len(AF_IB as libc::sa_family_t), 48);
        assert_eq!(addr_len(99), 128);
    }
}
