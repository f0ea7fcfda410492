//! Where an event copy lives: one pooled slot holding librdmacm's struct, then the private data
//! bytes, then the id's two addresses, each at its own length. Slots come in five size classes,
//! so a copy takes about what it holds (an event with IPv4 addresses and no private data: 144
//! bytes).
//!
//! One refcount per slot counts every reference, to the event and to its private data buffer;
//! `buf_refs` counts those held on the buffer alone, so the event's own are `refs - buf_refs`
//! (what misuse checks and statistics need). A buffer made on its own (`PrivateData::copy_from`)
//! is a slot whose references are all buffer references.
//!
//! Layout of a slot: the pool's header (magic, refs), [`Head`], then the tail: private data at
//! [`BYTES_OFFSET`] (so a buffer handle, which points at its bytes, finds its slot), the source
//! address 8-aligned after it, the destination address after that.

use std::sync::atomic::{AtomicU32, Ordering};

use super::copy::ParamKind;
use crate::cm::rdma_cm_event;
#[cfg(feature = "capi")]
use crate::pool::SlotState;
use crate::pool::{refs_of, AllocError, Pool, SlotPool, VALUE_OFFSET};
use crate::status::Transport;

#[repr(C)]
pub(crate) struct Head {
    /// The view handed to C: librdmacm's struct with `private_data` pointing into this slot.
    pub cm: rdma_cm_event,
    pub seq: u64,
    pub fetched_ns: u64,
    /// References held on the private data buffer alone (also counted in the slot's refs).
    pub buf_refs: AtomicU32,
    /// `ParamKind` (bits 0-1), `Transport` (bits 2-3), HAS_PD.
    pub flags: u8,
    pub pd_len: u8,
    pub class: u8,
    _pad: u8,
}

#[repr(C)]
pub(crate) struct SlotData<const N: usize> {
    head: Head,
    tail: [u8; N],
}

/// Where the private data bytes begin, from the slot's address.
pub(crate) const BYTES_OFFSET: usize = VALUE_OFFSET + std::mem::size_of::<Head>();
const _: () = assert!(BYTES_OFFSET % 8 == 0);

pub(crate) const HAS_PD: u8 = 0x10;

/// Tail sizes of the classes: enough for IPv4 addresses alone (32), then with the 56 bytes of an
/// IB/RoCE CONNECT_REQUEST or IPv6 addresses (88), and up to 255 bytes of private data with two
/// `sockaddr_storage` (512).
const TAILS: [usize; 5] = [32, 88, 160, 288, 512];

// SAFETY: immutable after the copy but for atomics; the raw pointers inside (`id`, `listen_id`,
// a multicast context) are the application's and never dereferenced through the copy, and
// `private_data` points into the slot itself.
unsafe impl<const N: usize> Send for SlotData<N> {}
// SAFETY: as above.
unsafe impl<const N: usize> Sync for SlotData<N> {}

static C0: Pool<SlotData<32>> = Pool::new(0, "cmsafe_event", 0xc5e7_e7e7);
static C1: Pool<SlotData<88>> = Pool::new(1, "cmsafe_event", 0xc5e7_e7e7);
static C2: Pool<SlotData<160>> = Pool::new(2, "cmsafe_event", 0xc5e7_e7e7);
static C3: Pool<SlotData<288>> = Pool::new(3, "cmsafe_event", 0xc5e7_e7e7);
static C4: Pool<SlotData<512>> = Pool::new(4, "cmsafe_event", 0xc5e7_e7e7);

static CLASSES: [&dyn SlotPool; 5] = [&C0, &C1, &C2, &C3, &C4];

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

/// A fresh slot big enough for `sizes`, with one reference (`buf_refs` 1 when that reference is
/// a buffer's, 0 when it is an event's), its head and tail written by `init` (given the head and
/// the tail's first byte). Class and `buf_refs` are set here.
///
/// # Safety
/// `init` writes every field of the head but `class` and `buf_refs`, and nothing past the tail.
pub(crate) unsafe fn alloc(
    sizes: Sizes,
    buf_refs: u32,
    init: impl FnOnce(*mut Head, *mut u8),
) -> Result<*const u8, AllocError> {
    let need = sizes.tail();
    let class = TAILS.iter().position(|&t| t >= need).ok_or(AllocError)?;
    macro_rules! in_class {
        ($pool:expr) => {{
            // SAFETY: `init` writes the head (and we the rest of it); the tail's bytes beyond
            // what `init` writes are slot memory, always initialized (mapped zeroed, then only
            // ever written), and never read.
            unsafe {
                $pool.alloc_with(|p| {
                    let head = std::ptr::addr_of_mut!((*p).head);
                    let tail = std::ptr::addr_of_mut!((*p).tail) as *mut u8;
                    init(head, tail);
                    std::ptr::addr_of_mut!((*head).class).write(class as u8);
                    std::ptr::addr_of_mut!((*head).buf_refs).write(AtomicU32::new(buf_refs));
                })
            }
            .map(|s| s.as_ptr() as *const u8)
        }};
    }
    match class {
        0 => in_class!(C0),
        1 => in_class!(C1),
        2 => in_class!(C2),
        3 => in_class!(C3),
        _ => in_class!(C4),
    }
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

fn class_of(slot: *const u8) -> &'static dyn SlotPool {
    // SAFETY: callers hold a reference to `slot`.
    CLASSES[unsafe { head(slot) }.class as usize]
}

pub(crate) fn retain(slot: *const u8) {
    class_of(slot).retain_at(slot);
}

pub(crate) fn release(slot: *const u8, op: &str) {
    class_of(slot).release_at(slot, op);
}

/// References to the event itself (not to its buffer alone).
pub(crate) fn event_refs(slot: *const u8) -> u32 {
    // SAFETY: a slot of ours; its head stays readable while the slot is committed.
    let buf = unsafe { head(slot) }.buf_refs.load(Ordering::Acquire);
    // SAFETY: as above.
    unsafe { refs_of(slot) }.saturating_sub(buf)
}

/// What `ptr` is: a live slot, a freed one, or none of ours.
#[cfg(feature = "capi")]
pub(crate) fn classify(ptr: *const u8) -> SlotState {
    CLASSES
        .iter()
        .map(|c| c.classify(ptr))
        .find(|s| *s != SlotState::Foreign)
        .unwrap_or(SlotState::Foreign)
}

/// Live slots, over every class, for which `f` holds.
pub(crate) fn count_live(f: &dyn Fn(*const u8) -> bool) -> u64 {
    CLASSES.iter().map(|c| c.count_live(f)).sum()
}

pub(crate) fn flags(kind: ParamKind, transport: Transport, has_pd: bool) -> u8 {
    let k = match kind {
        ParamKind::Conn => 0,
        ParamKind::Ud => 1,
        ParamKind::MulticastContext => 2,
    };
    let t = match transport {
        Transport::Ib => 0,
        Transport::Iwarp => 1,
        Transport::Unknown => 2,
    };
    k | t << 2 | if has_pd { HAS_PD } else { 0 }
}

pub(crate) fn kind_of(flags: u8) -> ParamKind {
    match flags & 3 {
        0 => ParamKind::Conn,
        1 => ParamKind::Ud,
        _ => ParamKind::MulticastContext,
    }
}

pub(crate) fn transport_of(flags: u8) -> Transport {
    match flags >> 2 & 3 {
        0 => Transport::Ib,
        1 => Transport::Iwarp,
        _ => Transport::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_event_without_private_data_takes_144_bytes() {
        assert_eq!(std::mem::size_of::<Head>(), 104);
        assert_eq!(BYTES_OFFSET, 112);
        let v4 = Sizes {
            pd: 0,
            src: 16,
            dst: 16,
        };
        assert_eq!(v4.tail(), 32);
        assert_eq!(std::mem::size_of::<crate::pool::Slot<SlotData<32>>>(), 144);
        // A CONNECT_REQUEST's 56 bytes cost 56 more.
        let creq = Sizes { pd: 56, ..v4 };
        assert_eq!(creq.tail(), 88);
        assert_eq!(std::mem::size_of::<crate::pool::Slot<SlotData<88>>>(), 200);
        // The largest: 255 bytes and two sockaddr_storage.
        let max = Sizes {
            pd: 255,
            src: 128,
            dst: 128,
        };
        assert_eq!(max.tail(), 512);
    }

    #[test]
    fn flags_round_trip() {
        for kind in [ParamKind::Conn, ParamKind::Ud, ParamKind::MulticastContext] {
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
