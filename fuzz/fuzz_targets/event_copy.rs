//! The copy of an event (`Event::copy_from_raw`) and what is read back from it (`describe`,
//! the addresses, the private data, `param_kind`), over events built from the fuzzer's bytes:
//! any event number (rdma-core 60's and unknown ones too) and status, a cm_id or none, its
//! route's addresses of any family and bytes, any QP type, private data of any length at a
//! pointer valid for exactly that length, or NULL with a length, a listen id or none.
//!
//! Every piece of memory the event reaches is allocated here at its exact size, so that
//! AddressSanitizer reports a read past it; every pointer librdmacm's contract says is never
//! read (a multicast context, a USER event's arg, an unknown event's `param`, the id's other
//! members, a listen id) points into page zero, below vm.mmap_min_addr, where nothing in this
//! process is mapped: reading it faults.
//! What the copy keeps is checked against the event, byte for byte.
#![no_main]

use std::mem::size_of;

use cmsafe_core::cm::rdma_cm_event_type::*;
use cmsafe_core::cm::sys::{ibv_context, ibv_device, rdma_cm_event_param};
use cmsafe_core::cm::{event_type_name, ibv_qp_type, rdma_cm_event, rdma_cm_id};
use cmsafe_core::event::{param_kind, ParamKind};
use cmsafe_core::Event;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// AF_IB (rdma/ib.h; not in the libc crate).
const AF_IB: u16 = 27;

/// `struct ibv_device` up to the member cmsafe reads (its binding keeps the first one
/// private: it is never built there).
#[repr(C)]
struct Device {
    ops: [usize; 2],
    node_type: i32,
    transport_type: i32,
}

/// An id's device context and its device, when it has them (kept alive while the id is read).
#[derive(Default)]
struct Verbs {
    _context: Option<Box<ibv_context>>,
    _device: Option<Box<Device>>,
}

/// The memory one event reaches, each piece a heap block of its own size.
struct Fake {
    event: Box<rdma_cm_event>,
    id: Option<Box<rdma_cm_id>>,
    _verbs: Verbs,
    /// The private data, exactly its length (`None`: a NULL pointer).
    private_data: Option<Box<[u8]>>,
    private_data_len: u8,
}

/// A pointer that must never be read: into page zero, which no mapping of this process takes
/// (vm.mmap_min_addr keeps ordinary ones above it).
fn never_read(u: &mut Unstructured) -> Result<usize> {
    u.int_in_range(1..=4095)
}

/// A `T` from the fuzzer's bytes (zero where they run out).
///
/// # Safety
/// `T` is plain data: any bit pattern is a valid `T` (a C struct of integers and pointers).
unsafe fn plain<T>(u: &mut Unstructured) -> Result<Box<T>> {
    let mut bytes = vec![0u8; size_of::<T>()];
    u.fill_buffer(&mut bytes)?;
    // SAFETY: any bytes are a `T` (the caller); the block is `T`'s size, read unaligned.
    Ok(Box::new(unsafe {
        std::ptr::read_unaligned(bytes.as_ptr().cast::<T>())
    }))
}

/// Whether librdmacm hands this event type's `param` out with private data (a pointer valid
/// for its length, or NULL) rather than a context, an arg or bytes nobody reads: librdmacm's
/// contract (librdmacm/cma.c, `rdma_get_cm_event`), written here apart from cmsafe's reading
/// of it.
fn brings_private_data(t: u32) -> bool {
    t <= RDMA_CM_EVENT_TIMEWAIT_EXIT
        && t != RDMA_CM_EVENT_MULTICAST_JOIN
        && t != RDMA_CM_EVENT_MULTICAST_ERROR
}

/// The member of `param` librdmacm fills (the same contract).
fn expected_kind(t: u32, qp_type: Option<u32>) -> ParamKind {
    match t {
        RDMA_CM_EVENT_MULTICAST_JOIN | RDMA_CM_EVENT_MULTICAST_ERROR => ParamKind::MulticastContext,
        RDMA_CM_EVENT_USER => ParamKind::Arg,
        _ if !brings_private_data(t) => ParamKind::Opaque,
        RDMA_CM_EVENT_CONNECT_RESPONSE | RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED => {
            ParamKind::Conn
        }
        _ if qp_type == Some(ibv_qp_type::IBV_QPT_UD) => ParamKind::Ud,
        _ => ParamKind::Conn,
    }
}

fn family(u: &mut Unstructured) -> Result<u16> {
    Ok(match u.int_in_range(0..=5)? {
        0 => libc::AF_UNSPEC as u16,
        1 => libc::AF_INET as u16,
        2 => libc::AF_INET6 as u16,
        3 => AF_IB,
        _ => u.arbitrary()?,
    })
}

fn build_id(u: &mut Unstructured) -> Result<(Box<rdma_cm_id>, Verbs)> {
    // SAFETY: a C struct of integers, pointers and unions of them.
    let mut id: Box<rdma_cm_id> = unsafe { plain(u) }?;
    // The addresses' bytes are the fuzzer's; their families are picked so that each kind comes.
    let src = family(u)?;
    let dst = family(u)?;
    id.route.addr.src_addr_union.src_storage.ss_family = src;
    id.route.addr.dst_addr_union.dst_storage.ss_family = dst;
    id.qp_type = match u.int_in_range(0..=3)? {
        0 => ibv_qp_type::IBV_QPT_RC,
        1 => ibv_qp_type::IBV_QPT_UD,
        _ => u.arbitrary()?,
    };
    // Members cmsafe must never read through.
    id.channel = never_read(u)? as *mut _;
    id.context = never_read(u)? as *mut _;
    id.qp = never_read(u)? as *mut _;
    id.event = never_read(u)? as *mut _;
    id.route.path_rec = never_read(u)? as *mut _;
    id.send_cq_channel = never_read(u)? as *mut _;
    id.send_cq = never_read(u)? as *mut _;
    id.recv_cq_channel = never_read(u)? as *mut _;
    id.recv_cq = never_read(u)? as *mut _;
    id.srq = never_read(u)? as *mut _;
    id.pd = never_read(u)? as *mut _;
    // The device context, read for a REJECTED's transport: none, one without a device, or
    // one with a device of any transport.
    let (verbs, device) = match u.int_in_range(0..=2)? {
        0 => (None, None),
        n => {
            let device = (n == 2)
                .then(|| -> Result<Box<Device>> {
                    Ok(Box::new(Device {
                        ops: [never_read(u)?, never_read(u)?],
                        node_type: u.arbitrary()?,
                        transport_type: u.arbitrary()?,
                    }))
                })
                .transpose()?;
            let device_ptr = device.as_ref().map_or(std::ptr::null_mut(), |d| {
                &**d as *const Device as *mut ibv_device
            });
            (Some(Box::new(ibv_context { device: device_ptr })), device)
        }
    };
    id.verbs = verbs.as_ref().map_or(std::ptr::null_mut(), |v| {
        &**v as *const ibv_context as *mut _
    });
    Ok((
        id,
        Verbs {
            _context: verbs,
            _device: device,
        },
    ))
}

fn build(u: &mut Unstructured) -> Result<Fake> {
    let t: u32 = match u.int_in_range(0..=3)? {
        0 => u.arbitrary()?,
        _ => u.int_in_range(0..=21)?,
    };
    let status: i32 = u.arbitrary()?;
    let (id, verbs) = if u.ratio(1, 8)? {
        (None, Verbs::default())
    } else {
        let (id, verbs) = build_id(u)?;
        (Some(id), verbs)
    };
    let id_ptr = id.as_ref().map_or(std::ptr::null_mut(), |i| {
        &**i as *const rdma_cm_id as *mut rdma_cm_id
    });
    // SAFETY: as above.
    let mut event: Box<rdma_cm_event> = unsafe { plain(u) }?;
    event.id = id_ptr;
    event.event = t;
    event.status = status;
    event.listen_id = match u.int_in_range(0..=2)? {
        0 => std::ptr::null_mut(),
        1 => id_ptr,
        _ => never_read(u)? as *mut _,
    };
    // `param`: the fuzzer's bytes, then a pointer valid for its length where librdmacm gives
    // private data, and one never to be read everywhere else.
    let mut private_data = None;
    let private_data_len: u8 = u.arbitrary()?;
    if brings_private_data(t) {
        if !u.ratio(1, 8)? {
            let mut bytes = vec![0u8; private_data_len as usize].into_boxed_slice();
            u.fill_buffer(&mut bytes)?;
            private_data = Some(bytes);
        }
        let ptr = private_data
            .as_ref()
            .map_or(std::ptr::null(), |b| b.as_ptr().cast());
        // Both members begin with the pointer and its length: writing one writes both.
        event.param.conn.private_data = ptr;
        event.param.conn.private_data_len = private_data_len;
    } else if !u.ratio(1, 4)? {
        event.param.conn.private_data = never_read(u)? as *const _;
        event.param.conn.private_data_len = private_data_len;
    }
    Ok(Fake {
        event,
        id,
        _verbs: verbs,
        private_data,
        private_data_len,
    })
}

/// `param`'s bytes.
fn param_bytes(cm: &rdma_cm_event) -> &[u8] {
    // SAFETY: the union is plain data of its size; read as bytes.
    unsafe {
        std::slice::from_raw_parts(
            std::ptr::addr_of!(cm.param).cast::<u8>(),
            size_of::<rdma_cm_event_param>(),
        )
    }
}

/// The length an address is kept at: its family's struct, 16 bytes for AF_UNSPEC, a whole
/// `sockaddr_storage` for a family cmsafe does not know.
fn kept_len(family: u16) -> usize {
    match family as i32 {
        libc::AF_UNSPEC | libc::AF_INET => 16,
        libc::AF_INET6 => 28,
        f if f == AF_IB as i32 => 48,
        _ => 128,
    }
}

fn storage_bytes(s: &libc::sockaddr_storage, len: usize) -> &[u8] {
    // SAFETY: `len` is at most the storage's 128 bytes.
    unsafe { std::slice::from_raw_parts((s as *const libc::sockaddr_storage).cast(), len) }
}

fn check(fake: &Fake, ev: &Event) {
    let raw = &*fake.event;
    assert_eq!(ev.event_type(), raw.event);
    assert_eq!(ev.event_type_name(), event_type_name(raw.event));
    assert_eq!(ev.status(), raw.status);
    assert_eq!(ev.id(), raw.id);
    assert_eq!(ev.listen_id(), raw.listen_id);
    let qp_type = fake.id.as_ref().map(|id| id.qp_type);
    let kind = expected_kind(raw.event, qp_type);
    assert_eq!(ev.param_kind(), kind);
    assert_eq!(
        param_kind(raw.event, qp_type.unwrap_or(ibv_qp_type::IBV_QPT_RC)),
        kind
    );
    assert_eq!(
        ev.status_kind() == cmsafe_core::StatusKind::Ok,
        raw.status == 0
    );

    // The private data: the bytes librdmacm's pointer gave, an empty buffer for NULL with a
    // length, none for no length or no private data at all.
    let expected: Option<&[u8]> = match (kind, fake.private_data_len) {
        (ParamKind::Conn | ParamKind::Ud, 0) => None,
        (ParamKind::Conn | ParamKind::Ud, _) => Some(fake.private_data.as_deref().unwrap_or(&[])),
        _ => None,
    };
    let got = ev.private_data();
    assert_eq!(got.map(|p| p.as_bytes()), expected);
    let (copy, original) = (param_bytes(ev.cm()), param_bytes(raw));
    match (kind, got) {
        (ParamKind::Conn | ParamKind::Ud, pd) => {
            // SAFETY: a conn or ud event: both members begin with the pointer and length.
            let (ptr, len) = unsafe {
                (
                    ev.cm().param.conn.private_data,
                    ev.cm().param.conn.private_data_len,
                )
            };
            assert_eq!(
                ptr.cast::<u8>(),
                pd.map_or(std::ptr::null(), |p| p.as_bytes().as_ptr())
            );
            assert_eq!(len as usize, pd.map_or(0, |p| p.len()));
            // Past the pointer and its length, the member as it was.
            assert_eq!(copy[9..], original[9..]);
        }
        _ => assert_eq!(copy, original, "param kept byte for byte"),
    }
    // SAFETY: the union is plain data, any member readable; a USER event's live one is the arg.
    let arg = (kind == ParamKind::Arg).then_some(unsafe { raw.param.arg });
    assert_eq!(ev.arg(), arg);

    // The addresses: the id's, at their family's length; AF_UNSPEC and zeros without an id.
    let zero: libc::sockaddr_storage =
        // SAFETY: plain data; all-zero is valid.
        unsafe { std::mem::zeroed() };
    let (src, dst) = match &fake.id {
        Some(id) => {
            // SAFETY: the storage member is 128 bytes of plain data, all of it written.
            unsafe {
                (
                    id.route.addr.src_addr_union.src_storage,
                    id.route.addr.dst_addr_union.dst_storage,
                )
            }
        }
        None => (zero, zero),
    };
    for (kept, from) in [(ev.src_addr(), &src), (ev.dst_addr(), &dst)] {
        let len = kept_len(from.ss_family);
        // SAFETY: the copy keeps the address at its family's length (`Event::src_addr`).
        let kept = unsafe {
            std::slice::from_raw_parts((kept as *const libc::sockaddr).cast::<u8>(), len)
        };
        assert_eq!(kept, storage_bytes(from, len));
    }

    // One line, with the length of the private data, never its bytes.
    let line = ev.describe();
    assert!(
        line.starts_with(&format!(
            "seq={} {} status={} ",
            ev.seq(),
            ev.event_type_name(),
            raw.status
        )),
        "{line}"
    );
    assert!(
        line.ends_with(&format!(
            " private_data_len={}",
            expected.map_or(0, |b| b.len())
        )),
        "{line}"
    );
    assert_eq!(
        line.contains(" listen_id="),
        !raw.listen_id.is_null(),
        "{line}"
    );
    assert_eq!(line.contains(" arg=0x"), arg.is_some(), "{line}");

    assert!(Event::is_copy_address(ev.cm()));
    assert!(!Event::is_copy_address(raw));
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(fake) = build(&mut u) else { return };
    // SAFETY: the event and all it points to that librdmacm's contract lets a reader read
    // are live until the end of this block; the rest points where nothing can be mapped.
    let ev = unsafe { Event::copy_from_raw(&*fake.event) }.expect("a slot for the copy");
    check(&fake, &ev);
    // The private data outlives its event, and the event's memory is the copy's alone.
    let pd = ev.private_data().cloned();
    let again = ev.clone();
    drop(ev);
    drop(fake);
    check_alone(&again, pd.as_ref());
});

/// After the original is gone: the copy still reads whole.
fn check_alone(ev: &Event, pd: Option<&cmsafe_core::PrivateData>) {
    assert_eq!(
        ev.private_data().map(|p| p.as_bytes()),
        pd.map(|p| p.as_bytes())
    );
    let _ = ev.describe();
}
