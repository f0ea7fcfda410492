//! Where an event copy lives: one pooled slot holding librdmacm's struct, then the private data
//! bytes, then the id's two addresses, each at its own length. Slots come in five size classes,
//! so a copy takes about what it holds (an event with IPv4 addresses and no private data: 136
//! bytes).
//!
//! The slot's header (`cmsafe_sync::SlotRefs`) counts every reference, to the event and to its
//! private data buffer, and in the same word those held on the buffer alone, so the event's own
//! are the difference ([`event_refs`], what misuse checks and statistics need), read in one load
//! while other threads take and give back buffer references. A buffer made on its own
//! (`PrivateData::copy_from`) is a slot whose references are all buffer references.
//!
//! Layout of a slot: the pool's header (the references), [`Head`], then the tail: private data at
//! [`BYTES_OFFSET`] (so a buffer handle, which points at its bytes, finds its slot), the source
//! address 8-aligned after it, the destination address after that.

use std::sync::atomic::Ordering;

use cmsafe_sync::Released;

use super::copy::ParamKind;
use super::local::Local;
use crate::cm::rdma_cm_event;
use crate::flight::ring;
use crate::pool::{AllocError, Slab, SlotState, CLASSES, VALUE_OFFSET};
use crate::stats::COUNTERS;
use crate::status::Transport;

#[repr(C)]
pub(crate) struct Head {
    /// The view handed to C: librdmacm's struct with `private_data` pointing into this slot and
    /// `private_data_len` its length (the buffer's length: see `pd_len`).
    pub cm: rdma_cm_event,
    /// The sequence number, and the flags in the top byte: a sequence number reaches 2^56 only
    /// after 2^56 events (a thousand years at two billion a second), and the slot stays 8 bytes
    /// smaller.
    pub seq_flags: u64,
    pub fetched_ns: u64,
}

const FLAGS_SHIFT: u32 = 56;

impl Head {
    pub(crate) fn seq(&self) -> u64 {
        self.seq_flags & ((1 << FLAGS_SHIFT) - 1)
    }

    /// `ParamKind` (bits 0-2), `Transport` (bits 3-4), HAS_PD.
    pub(crate) fn flags(&self) -> u8 {
        (self.seq_flags >> FLAGS_SHIFT) as u8
    }

    /// The private data's length: `private_data_len` of the live member (both members begin
    /// with `private_data` and `private_data_len`); 0 without private data.
    pub(crate) fn pd_len(&self) -> usize {
        if self.flags() & HAS_PD == 0 {
            return 0;
        }
        // SAFETY: with private data, `param.conn` or `param.ud` is live, and both hold the
        // length at this place (asserted below); plain data either way.
        unsafe { self.cm.param.conn.private_data_len as usize }
    }
}

/// `seq_flags` for a copy.
pub(crate) fn seq_flags(seq: u64, flags: u8) -> u64 {
    seq | (flags as u64) << FLAGS_SHIFT
}

const _: () = {
    use crate::cm::{rdma_conn_param, rdma_ud_param};
    use std::mem::offset_of;
    assert!(offset_of!(rdma_conn_param, private_data) == offset_of!(rdma_ud_param, private_data));
    assert!(
        offset_of!(rdma_conn_param, private_data_len)
            == offset_of!(rdma_ud_param, private_data_len)
    );
};

/// Where the private data bytes begin, from the slot's address.
pub(crate) const BYTES_OFFSET: usize = VALUE_OFFSET + std::mem::size_of::<Head>();
const _: () = assert!(BYTES_OFFSET % 8 == 0);

pub(crate) const HAS_PD: u8 = 0x20;
/// cmsafe acked the event in the call that copied it (for the flight recorder's record).
pub(crate) const ACKED: u8 = 0x40;

/// Tail sizes of the classes: enough for IPv4 addresses alone (32), then with the 56 bytes of an
/// IB/RoCE CONNECT_REQUEST or IPv6 addresses (88), and up to 255 bytes of private data with two
/// `sockaddr_storage` (512).
const TAILS: [usize; CLASSES] = [32, 88, 160, 288, 512];

/// Slot sizes: header, head, tail (every tail keeps the slot 8-aligned).
const fn slot_sizes() -> [usize; CLASSES] {
    let mut sizes = [0; CLASSES];
    let mut i = 0;
    while i < CLASSES {
        assert!(TAILS[i] % 8 == 0);
        sizes[i] = BYTES_OFFSET + TAILS[i];
        i += 1;
    }
    sizes
}

/// Where every event copy and private data buffer lives.
static SLAB: Slab = Slab::new(slot_sizes(), "cmsafe_event");

/// Bytes committed for event copies and private data, the most they ever took (the preload's
/// exit summary says it).
pub fn copies_committed() -> usize {
    SLAB.committed()
}

/// The slab's shared lists, held across a fork (see `event::lock_for_fork`).
pub(crate) fn lock_for_fork() {
    SLAB.lock_for_fork();
}

pub(crate) fn unlock_after_fork() {
    SLAB.unlock_after_fork();
}

/// The sizes of what goes in the tail.
#[derive(Clone, Copy)]
pub(crate) struct Sizes {
    pub pd: usize,
    pub src: usize,
    pub dst: usize,
}

impl Sizes {
    pub(crate) fn src_offset(pd: usize) -> usize {
        pd.next_multiple_of(8)
    }
    fn dst_offset(&self) -> usize {
        Self::src_offset(self.pd) + self.src.next_multiple_of(8)
    }
    fn tail(&self) -> usize {
        self.dst_offset() + self.dst
    }
}

/// A fresh slot big enough for `sizes`, with one reference (held on the buffer alone when `buf`,
/// else the event's), its head and tail written by `init` (given the head and the tail's first
/// byte). `local`: this thread's block, if any.
///
/// # Safety
/// `init` writes every field of the head, and nothing past the tail.
pub(crate) unsafe fn alloc(
    sizes: Sizes,
    buf: bool,
    local: Option<&Local>,
    init: impl FnOnce(*mut Head, *mut u8),
) -> Result<*const u8, AllocError> {
    let need = sizes.tail();
    let class = TAILS.iter().position(|&t| t >= need).ok_or(AllocError);
    // SAFETY: `init` writes the head (and we the rest of it) and the tail within the class's
    // size; the tail's bytes beyond what `init` writes are slot memory, always initialized
    // (mapped zeroed, then only ever written), and never read.
    let slot = class.and_then(|class| unsafe {
        SLAB.alloc_with(class, local.map(|l| &l.slots), buf, |slot| {
            let head = slot.add(VALUE_OFFSET) as *mut Head;
            init(head, slot.add(BYTES_OFFSET));
        })
    });
    slot.inspect_err(|_| {
        COUNTERS.alloc_failures.fetch_add(1, Ordering::Relaxed);
    })
}

/// Where the source and destination addresses of a slot holding `pd_len` bytes begin.
pub(crate) fn addr_offsets(pd_len: usize, src_len: usize) -> (usize, usize) {
    let sizes = Sizes {
        pd: pd_len,
        src: src_len,
        dst: 0,
    };
    (Sizes::src_offset(pd_len), sizes.dst_offset())
}

/// The head of a live slot.
///
/// # Safety
/// `slot` is a live slot (a reference is held).
pub(crate) unsafe fn head<'a>(slot: *const u8) -> &'a Head {
    // SAFETY: per the contract; the head follows the pool's header.
    unsafe { &*(slot.add(VALUE_OFFSET) as *const Head) }
}

/// One more reference to the event of a live slot.
pub(crate) fn retain(slot: *const u8) {
    Slab::retain(slot);
}

/// Gives one of the event's references back; `local`: this thread's block, if any. The last
/// reference of the slot (the event's, or its buffer's in [`release_buf`]) records the copy in
/// the flight recorder, from the slot, before the slot is freed.
pub(crate) fn release(slot: *const u8, local: Option<&Local>, op: &str) {
    SLAB.release(slot, local.map(|l| &l.slots), op, || record(slot));
}

/// The flight recorder's record of a copy whose last reference is going, when the recorder
/// is on.
#[inline(always)]
fn record(slot: *const u8) {
    if let Some(ring) = ring::ring() {
        record_in(slot, ring);
    }
    if super::probes::on() {
        // SAFETY: the caller holds the slot's last reference: live, and its alone.
        let h = unsafe { head(slot) };
        super::probes::released(h.seq(), h.cm.event, h.cm.id as usize);
    }
}

/// `record`, out of line: inlined, its registers made the release path spill and call what it
/// had inlined (bench/README.md, "The flight recorder").
#[inline(never)]
fn record_in(slot: *const u8, ring: &ring::Ring) {
    // SAFETY: the caller holds the slot's last reference: live, and its alone.
    let head = unsafe { head(slot) };
    let seq = head.seq();
    if seq == 0 {
        // A buffer made on its own, of no event.
        return;
    }
    // The closure holds `head` alone: one register, out of line too.
    ring.record(seq, move |now| {
        let cm = &head.cm;
        ring::words(
            type_status(cm),
            head.seq_flags,
            (cm.id as usize, cm.listen_id as usize),
            head.fetched_ns,
            now,
        )
    });
}

/// Marks a copy acked by cmsafe in the call that made it, for the flight recorder.
///
/// # Safety
/// `slot` is a live event slot that no other thread holds yet.
pub(crate) unsafe fn mark_acked(slot: *const u8) {
    // SAFETY: per the contract, the head is ours to write.
    unsafe { (*(slot.add(VALUE_OFFSET) as *mut Head)).seq_flags |= (ACKED as u64) << FLAGS_SHIFT };
}

/// `event` and `status`, side by side in librdmacm's struct, in one load.
#[inline(always)]
fn type_status(cm: *const rdma_cm_event) -> u64 {
    // SAFETY: the two 4-byte fields are adjacent (asserted below) in a live struct.
    unsafe { (std::ptr::addr_of!((*cm).event) as *const u64).read_unaligned() }
}

const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(rdma_cm_event, status) == offset_of!(rdma_cm_event, event) + 4);
    // The flight recorder reads ACKED from the slot's `seq_flags` as it is.
    assert!((ACKED as u64) << FLAGS_SHIFT == ring::ACKED);
};

/// Calls `f` with each copy still held (an event reference) and its record, for the flight
/// recorder's dump, in one walk of the slots, which allocates nothing and takes no lock (the
/// dump runs on a misuse's abort path too).
pub(crate) fn for_each_held(f: &mut dyn FnMut(u64, ring::Words)) {
    SLAB.for_each_live(&mut |s| {
        if let Some((seq, w)) = held_record(s) {
            f(seq, w);
        }
    });
}

/// A live slot's record, if it is an event still referenced. Another thread may free the slot
/// and make another event in it meanwhile: the reads are checked by reading the references
/// and the sequence number again after them, and a copy that changed is left out.
fn held_record(s: *const u8) -> Option<(u64, ring::Words)> {
    let refs = Slab::refs_of(s);
    if refs.event_refs() == 0 {
        return None;
    }
    let head = s.wrapping_add(VALUE_OFFSET) as *const Head;
    // SAFETY: a committed slot stays mapped and holds a Head; its fields are plain data, read
    // whole (aligned words) though a new owner may be writing them: what such a read returns
    // is discarded below.
    let (seq_flags, words) = unsafe {
        let seq_flags = std::ptr::read_volatile(std::ptr::addr_of!((*head).seq_flags));
        let cm = std::ptr::addr_of!((*head).cm);
        let words = ring::words(
            ring::type_status(
                std::ptr::read_volatile(std::ptr::addr_of!((*cm).event)),
                std::ptr::read_volatile(std::ptr::addr_of!((*cm).status)),
            ),
            seq_flags,
            (
                std::ptr::read_volatile(std::ptr::addr_of!((*cm).id)) as usize,
                std::ptr::read_volatile(std::ptr::addr_of!((*cm).listen_id)) as usize,
            ),
            std::ptr::read_volatile(std::ptr::addr_of!((*head).fetched_ns)),
            0,
        );
        (seq_flags, words)
    };
    // Acquire: a store of a new owner read above makes its freeing of the slot (the references
    // at 0) or its new sequence number visible below.
    std::sync::atomic::fence(Ordering::Acquire);
    // SAFETY: as above.
    let again = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*head).seq_flags)) };
    let seq = seq_flags & ((1 << FLAGS_SHIFT) - 1);
    (seq != 0 && again == seq_flags && refs.event_refs() > 0).then_some((seq, words))
}

/// One more reference held on the private data buffer alone, of a live slot.
pub(crate) fn retain_buf(slot: *const u8) {
    Slab::refs_of(slot).retain_buf();
}

/// Gives back a reference held on the buffer alone, freeing the slot when it was the last; a
/// [`Released::Misuse`] (the buffer held none) is the caller's to report.
pub(crate) fn release_buf(slot: *const u8, local: Option<&Local>) -> Released {
    let released = Slab::refs_of(slot).release_buf();
    if released == Released::Last {
        record(slot);
        SLAB.free(slot, local.map(|l| &l.slots));
    }
    released
}

/// References held on the private data buffer alone (also counted in the slot's refs).
#[cfg(test)]
pub(crate) fn buf_refs(slot: *const u8) -> u32 {
    Slab::refs_of(slot).buf_refs()
}

/// References to the event itself (not to its buffer alone).
pub(crate) fn event_refs(slot: *const u8) -> u32 {
    Slab::refs_of(slot).event_refs()
}

/// What `ptr` is: a live slot, a freed one, or none of ours.
pub(crate) fn classify(ptr: *const u8) -> SlotState {
    SLAB.classify(ptr)
}

/// Live slots for which `f` holds.
pub(crate) fn count_live(f: &dyn Fn(*const u8) -> bool) -> u64 {
    SLAB.count_live(f)
}

pub(crate) fn flags(kind: ParamKind, transport: Transport, has_pd: bool) -> u8 {
    let k = match kind {
        ParamKind::Conn => 0,
        ParamKind::Ud => 1,
        ParamKind::MulticastContext => 2,
        ParamKind::Arg => 3,
        ParamKind::Opaque => 4,
    };
    let t = match transport {
        Transport::Ib => 0,
        Transport::Iwarp => 1,
        Transport::Unknown => 2,
    };
    k | t << 3 | if has_pd { HAS_PD } else { 0 }
}

pub(crate) fn kind_of(flags: u8) -> ParamKind {
    match flags & 7 {
        0 => ParamKind::Conn,
        1 => ParamKind::Ud,
        2 => ParamKind::MulticastContext,
        3 => ParamKind::Arg,
        _ => ParamKind::Opaque,
    }
}

pub(crate) fn transport_of(flags: u8) -> Transport {
    match flags >> 3 & 3 {
        0 => Transport::Ib,
        1 => Transport::Iwarp,
        _ => Transport::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_event_without_private_data_takes_136_bytes() {
        assert_eq!(std::mem::size_of::<Head>(), 96);
        assert_eq!(BYTES_OFFSET, 104);
        let v4 = Sizes {
            pd: 0,
            src: 16,
            dst: 16,
        };
        assert_eq!(v4.tail(), 32);
        assert_eq!(slot_sizes()[0], 136);
        // A CONNECT_REQUEST's 56 bytes cost 56 more.
        let creq = Sizes { pd: 56, ..v4 };
        assert_eq!(creq.tail(), 88);
        assert_eq!(slot_sizes()[1], 192);
        // The largest: 255 bytes and two sockaddr_storage.
        let max = Sizes {
            pd: 255,
            src: 128,
            dst: 128,
        };
        assert_eq!(max.tail(), 512);
    }

    /// The fork handlers a library registers (libcmsafe.so's `ffi::fork` at load, the preload's
    /// after its own locks) wait for a thread that holds a shared list, so the child gets it
    /// free: without them the child's copy of the lock stays held by a thread the child does not
    /// have, and its next refill waits for good. This test registers them as libcmsafe.so does.
    #[test]
    #[cfg_attr(miri, ignore = "fork(2): Miri runs one process")]
    fn a_child_never_inherits_a_list_another_thread_holds() {
        use std::sync::mpsc;
        use std::time::Duration;
        extern "C" fn prepare() {
            crate::event::lock_for_fork();
        }
        extern "C" fn after() {
            crate::event::unlock_after_fork();
        }
        // SAFETY: plain extern "C" functions with no arguments; registered once by this test.
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(after), Some(after)) };
        assert_eq!(rc, 0);
        let (held, is_held) = mpsc::channel();
        let holder = std::thread::spawn(move || {
            SLAB.with_list_held(0, || {
                held.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(300));
            })
        });
        is_held.recv().unwrap();
        // SAFETY: the child only tries a lock and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = if SLAB.list_is_free(0) { 0 } else { 1 };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: our own child; a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        holder.join().unwrap();
        assert!(libc::WIFEXITED(status), "child status {status:#x}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child inherited the list held"
        );
    }

    #[test]
    fn flags_round_trip() {
        for kind in [
            ParamKind::Conn,
            ParamKind::Ud,
            ParamKind::MulticastContext,
            ParamKind::Arg,
            ParamKind::Opaque,
        ] {
            for t in [Transport::Ib, Transport::Iwarp, Transport::Unknown] {
                for pd in [false, true] {
                    let f = flags(kind, t, pd);
                    assert_eq!(kind_of(f), kind);
                    assert_eq!(transport_of(f), t);
                    assert_eq!(f & HAS_PD != 0, pd);
                }
            }
        }
    }
}
