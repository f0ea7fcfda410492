//! The deep copy of a librdmacm event: what points into librdmacm's block is copied out,
//! everything else is kept by value.
//!
//! Which member of `param` is live follows librdmacm's `rdma_get_cm_event` (librdmacm/cma.c):
//! CONNECT_RESPONSE, REJECTED and DISCONNECTED always fill `param.conn`; MULTICAST_JOIN and
//! MULTICAST_ERROR fill `param.ud` with the user's own context as `private_data`; USER
//! (rdma-core 60+) fills `param.arg` with `rdma_write_cm_event(3)`'s value; ADDRINFO_RESOLVED
//! and ADDRINFO_ERROR leave `param` zeroed; every other event of librdmacm's header fills
//! `param.ud` when the id's QP type is UD and `param.conn` otherwise. An event number this list
//! does not know (INTERNAL, or one a later librdmacm adds) is copied byte for byte: its `param`
//! is never read as a pointer, since nothing says it holds one.

use crate::cm::{ibv_qp_type, rdma_cm_event, rdma_cm_event_type::*, EventType};

/// Which member of `rdma_cm_event.param` an event carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Conn,
    Ud,
    /// `param.ud` whose `private_data` is the context given to `rdma_join_multicast`.
    MulticastContext,
    /// `param.arg`: the value given to `rdma_write_cm_event(3)` (RDMA_CM_EVENT_USER).
    Arg,
    /// Bytes cmsafe does not interpret (ADDRINFO_RESOLVED and ADDRINFO_ERROR, whose `param`
    /// librdmacm zeroes; INTERNAL; numbers a later librdmacm adds): kept as they were.
    Opaque,
}

/// The member of `param` librdmacm filled for this event type and QP type.
pub fn param_kind(event: EventType, qp_type: ibv_qp_type::Type) -> ParamKind {
    match event {
        RDMA_CM_EVENT_MULTICAST_JOIN | RDMA_CM_EVENT_MULTICAST_ERROR => ParamKind::MulticastContext,
        RDMA_CM_EVENT_CONNECT_RESPONSE | RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED => {
            ParamKind::Conn
        }
        RDMA_CM_EVENT_USER => ParamKind::Arg,
        t if t > RDMA_CM_EVENT_TIMEWAIT_EXIT => ParamKind::Opaque,
        _ if qp_type == ibv_qp_type::IBV_QPT_UD => ParamKind::Ud,
        _ => ParamKind::Conn,
    }
}

/// What the copy of `raw` needs to know before copying: which member of `param` is live and
/// where its private data is (still in librdmacm's block).
pub(crate) struct Copied<'a> {
    /// The private data bytes to copy, or `None` when the event carries none. A length without
    /// bytes (a NULL pointer) gives an empty buffer, never a read through NULL.
    pub private_data: Option<&'a [u8]>,
    pub kind: ParamKind,
}

/// Finds `raw`'s live `param` member and private data; copies and allocates nothing (the
/// caller copies the struct straight into its slot, then the bytes, and redirects the copy's
/// `private_data` pointer, which still points into `raw`).
///
/// # Safety
/// `raw` is a valid event that has not been acked; `raw.id`, when not NULL, is a live cm_id;
/// `'a` ends before `raw` is acked.
pub(crate) unsafe fn copy_event<'a>(raw: *const rdma_cm_event) -> Copied<'a> {
    // SAFETY: the caller guarantees `raw` is valid; the struct is plain data.
    let cm: &rdma_cm_event = unsafe { &*raw };
    let qp_type = if cm.id.is_null() {
        ibv_qp_type::IBV_QPT_RC
    } else {
        // SAFETY: a non-NULL id of an unacked event is a live cm_id owned by the application.
        unsafe { (*cm.id).qp_type }
    };
    let kind = param_kind(cm.event, qp_type);
    // SAFETY: `kind` names the member librdmacm wrote; both are plain data.
    let (ptr, len) = unsafe {
        match kind {
            ParamKind::Conn => (cm.param.conn.private_data, cm.param.conn.private_data_len),
            ParamKind::Ud => (cm.param.ud.private_data, cm.param.ud.private_data_len),
            ParamKind::MulticastContext | ParamKind::Arg | ParamKind::Opaque => {
                (std::ptr::null(), 0)
            }
        }
    };
    let private_data = match (ptr.is_null(), len) {
        (_, 0) => None,
        (true, _) => Some(&[][..]),
        // SAFETY: librdmacm's block holds `len` bytes at `ptr` until the ack.
        (false, len) => Some(unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) }),
    };
    Copied { private_data, kind }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::rdma_cm_id;

    fn event(kind: EventType, id: *mut rdma_cm_id, ptr: *const u8, len: u8) -> rdma_cm_event {
        // SAFETY: rdma_cm_event is plain data; all-zero is a valid value.
        let mut ev: rdma_cm_event = unsafe { std::mem::zeroed() };
        ev.event = kind;
        ev.id = id;
        ev.param.conn.private_data = ptr.cast();
        ev.param.conn.private_data_len = len;
        ev
    }

    fn ud_id() -> Box<rdma_cm_id> {
        // SAFETY: rdma_cm_id is plain data; all-zero is a valid value.
        let mut id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        id.qp_type = ibv_qp_type::IBV_QPT_UD;
        id
    }

    #[test]
    fn conn_event_bytes_are_copied() {
        let bytes: Vec<u8> = (0..56).collect();
        let raw = event(
            RDMA_CM_EVENT_CONNECT_REQUEST,
            std::ptr::null_mut(),
            bytes.as_ptr(),
            56,
        );
        // SAFETY: `raw` is a valid event whose private data lives in `bytes`.
        let copy = unsafe { copy_event(&raw) };
        assert_eq!(copy.kind, ParamKind::Conn);
        assert_eq!(copy.private_data.unwrap(), &bytes[..]);
    }

    #[test]
    fn ud_ids_use_the_ud_member() {
        let mut id = ud_id();
        let bytes = [9u8; 20];
        let raw = event(RDMA_CM_EVENT_ESTABLISHED, &mut *id, bytes.as_ptr(), 20);
        // SAFETY: as above; `id` is a live cm_id.
        let copy = unsafe { copy_event(&raw) };
        assert_eq!(copy.kind, ParamKind::Ud);
        assert_eq!(copy.private_data.unwrap(), &bytes);
        // DISCONNECTED is always conn, even on a UD id (librdmacm/cma.c).
        let raw = event(RDMA_CM_EVENT_DISCONNECTED, &mut *id, bytes.as_ptr(), 20);
        // SAFETY: as above.
        assert_eq!(unsafe { copy_event(&raw) }.kind, ParamKind::Conn);
    }

    #[test]
    fn multicast_context_is_kept_and_not_read() {
        let mut id = ud_id();
        // A context pointer that must never be read through: a dangling, unaligned address.
        let context = 0x10 as *const u8;
        for kind in [RDMA_CM_EVENT_MULTICAST_JOIN, RDMA_CM_EVENT_MULTICAST_ERROR] {
            let raw = event(kind, &mut *id, context, 200);
            // SAFETY: the copy must not dereference `context`.
            let copy = unsafe { copy_event(&raw) };
            assert_eq!(copy.kind, ParamKind::MulticastContext);
            assert!(copy.private_data.is_none());
            // The whole copy keeps the context as it was, and has no buffer.
            // SAFETY: as above.
            let ev = unsafe { crate::event::Event::copy_of(&raw) }.unwrap();
            assert!(ev.private_data().is_none());
            // SAFETY: a multicast event: `param.ud` is the live member.
            assert_eq!(unsafe { ev.cm().param.ud.private_data } as usize, 0x10);
            assert_eq!(ev.src_addr().sa_family as i32, libc::AF_UNSPEC);
        }
    }

    #[test]
    fn a_user_events_arg_is_kept_and_not_read() {
        // The arg lies over `private_data`; `private_data_len` stays 0 in librdmacm's event,
        // but a non-zero length must not make the copy read through the arg either.
        for len in [0u8, 56] {
            let arg = 0x1122_3344_5566_7788u64;
            // SAFETY: rdma_cm_event is plain data; all-zero is a valid value.
            let mut raw: rdma_cm_event = unsafe { std::mem::zeroed() };
            raw.event = RDMA_CM_EVENT_USER;
            raw.status = 7;
            raw.param.arg = arg;
            // Writing a union field is safe: every member is plain data.
            raw.param.conn.private_data_len = len;
            // SAFETY: the copy must not dereference the arg.
            let copy = unsafe { copy_event(&raw) };
            assert_eq!(copy.kind, ParamKind::Arg);
            assert!(copy.private_data.is_none());
            // SAFETY: as above.
            let ev = unsafe { crate::event::Event::copy_of(&raw) }.unwrap();
            assert_eq!(ev.arg(), Some(arg));
            assert_eq!(ev.status(), 7);
            assert_eq!(ev.event_type_name(), "USER");
            assert!(ev.private_data().is_none());
            // SAFETY: the live member of a USER event.
            assert_eq!(unsafe { ev.cm().param.arg }, arg);
        }
    }

    #[test]
    fn an_unknown_events_param_is_copied_byte_for_byte() {
        // SAFETY: rdma_cm_event is plain data; all-zero is a valid value.
        let mut raw: rdma_cm_event = unsafe { std::mem::zeroed() };
        let pattern: Vec<u8> = (1..=std::mem::size_of_val(&raw.param) as u8).collect();
        for t in [
            RDMA_CM_EVENT_ADDRINFO_RESOLVED,
            RDMA_CM_EVENT_ADDRINFO_ERROR,
            RDMA_CM_EVENT_INTERNAL,
            20,
            1000,
        ] {
            raw.event = t;
            // SAFETY: the union is plain data of exactly `pattern.len()` bytes; its first
            // word becomes 0x0807060504030201, an address that must never be read.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    pattern.as_ptr(),
                    std::ptr::addr_of_mut!(raw.param) as *mut u8,
                    pattern.len(),
                )
            };
            // SAFETY: the copy must not dereference anything in `param`.
            let copy = unsafe { copy_event(&raw) };
            assert_eq!(copy.kind, ParamKind::Opaque, "type {t}");
            assert!(copy.private_data.is_none());
            // SAFETY: as above.
            let ev = unsafe { crate::event::Event::copy_of(&raw) }.unwrap();
            assert_eq!(ev.event_type(), t);
            assert_eq!(ev.arg(), None);
            assert!(ev.private_data().is_none());
            // SAFETY: reading the copy's union as the plain bytes it is.
            let copied = unsafe {
                std::slice::from_raw_parts(
                    std::ptr::addr_of!(ev.cm().param) as *const u8,
                    pattern.len(),
                )
            };
            assert_eq!(copied, &pattern[..], "type {t}");
        }
    }

    #[test]
    fn null_pointer_with_a_length_gives_an_empty_buffer() {
        let raw = event(
            RDMA_CM_EVENT_REJECTED,
            std::ptr::null_mut(),
            std::ptr::null(),
            148,
        );
        // SAFETY: the copy must not read through the NULL pointer.
        let copy = unsafe { copy_event(&raw) };
        assert_eq!(copy.private_data.unwrap().len(), 0);
    }

    #[test]
    fn no_length_gives_no_buffer() {
        let bytes = [1u8; 4];
        let raw = event(
            RDMA_CM_EVENT_ADDR_RESOLVED,
            std::ptr::null_mut(),
            bytes.as_ptr(),
            0,
        );
        // SAFETY: as above.
        assert!(unsafe { copy_event(&raw) }.private_data.is_none());
    }

    #[test]
    fn param_kind_follows_librdmacm() {
        use ibv_qp_type::{IBV_QPT_RC, IBV_QPT_UD};
        assert_eq!(
            param_kind(RDMA_CM_EVENT_CONNECT_REQUEST, IBV_QPT_UD),
            ParamKind::Ud
        );
        assert_eq!(
            param_kind(RDMA_CM_EVENT_CONNECT_REQUEST, IBV_QPT_RC),
            ParamKind::Conn
        );
        assert_eq!(
            param_kind(RDMA_CM_EVENT_CONNECT_RESPONSE, IBV_QPT_UD),
            ParamKind::Conn
        );
        assert_eq!(
            param_kind(RDMA_CM_EVENT_REJECTED, IBV_QPT_UD),
            ParamKind::Conn
        );
        assert_eq!(
            param_kind(RDMA_CM_EVENT_UNREACHABLE, IBV_QPT_UD),
            ParamKind::Ud
        );
        assert_eq!(
            param_kind(RDMA_CM_EVENT_TIMEWAIT_EXIT, IBV_QPT_RC),
            ParamKind::Conn
        );
        assert_eq!(param_kind(RDMA_CM_EVENT_USER, IBV_QPT_UD), ParamKind::Arg);
        for t in [16, 17, 19, 20, u32::MAX] {
            assert_eq!(param_kind(t, IBV_QPT_UD), ParamKind::Opaque);
            assert_eq!(param_kind(t, IBV_QPT_RC), ParamKind::Opaque);
        }
    }
}
