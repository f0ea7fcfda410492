//! One log line per event. Private data appears as its length only: it often carries tokens.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use super::Event;
use crate::status::{reject_reason_name, StatusKind};

/// An errno's name, as glibc's `strerrorname_np(3)` gives it. Named here rather than asked of
/// glibc, which has the function from 2.32 only: the line reads the same on every glibc, and
/// libcmsafe links where glibc is older (Debian 11 has 2.31). The values are the target's, from
/// the libc crate; where two names share a value, glibc's choice comes first (EAGAIN, EDEADLK,
/// EOPNOTSUPP).
fn errno_name(errno: i32) -> Option<&'static str> {
    macro_rules! names {
        ($($name:ident)*) => {
            match errno {
                $(e if e == libc::$name => Some(stringify!($name)),)*
                _ => None,
            }
        };
    }
    names!(
        EPERM ENOENT ESRCH EINTR EIO ENXIO E2BIG ENOEXEC EBADF ECHILD EAGAIN ENOMEM EACCES EFAULT
        ENOTBLK EBUSY EEXIST EXDEV ENODEV ENOTDIR EISDIR EINVAL ENFILE EMFILE ENOTTY ETXTBSY EFBIG
        ENOSPC ESPIPE EROFS EMLINK EPIPE EDOM ERANGE EDEADLK ENAMETOOLONG ENOLCK ENOSYS ENOTEMPTY
        ELOOP ENOMSG EIDRM ECHRNG EL2NSYNC EL3HLT EL3RST ELNRNG EUNATCH ENOCSI EL2HLT EBADE EBADR
        EXFULL ENOANO EBADRQC EBADSLT EBFONT ENOSTR ENODATA ETIME ENOSR ENONET ENOPKG EREMOTE
        ENOLINK EADV ESRMNT ECOMM EPROTO EMULTIHOP EDOTDOT EBADMSG EOVERFLOW ENOTUNIQ EBADFD EREMCHG
        ELIBACC ELIBBAD ELIBSCN ELIBMAX ELIBEXEC EILSEQ ERESTART ESTRPIPE EUSERS ENOTSOCK
        EDESTADDRREQ EMSGSIZE EPROTOTYPE ENOPROTOOPT EPROTONOSUPPORT ESOCKTNOSUPPORT EOPNOTSUPP
        EPFNOSUPPORT EAFNOSUPPORT EADDRINUSE EADDRNOTAVAIL ENETDOWN ENETUNREACH ENETRESET
        ECONNABORTED ECONNRESET ENOBUFS EISCONN ENOTCONN ESHUTDOWN ETOOMANYREFS ETIMEDOUT
        ECONNREFUSED EHOSTDOWN EHOSTUNREACH EALREADY EINPROGRESS ESTALE EUCLEAN ENOTNAM ENAVAIL
        EISNAM EREMOTEIO EDQUOT ENOMEDIUM EMEDIUMTYPE ECANCELED ENOKEY EKEYEXPIRED EKEYREVOKED
        EKEYREJECTED EOWNERDEAD ENOTRECOVERABLE ERFKILL
    )
}

pub(super) fn line(ev: &Event) -> String {
    let mut s = String::with_capacity(160);
    let _ = write!(
        s,
        "seq={} {} status={} id={:p}",
        ev.seq(),
        ev.event_type_name(),
        status_text(ev.status_kind(), ev.status()),
        ev.id()
    );
    if !ev.listen_id().is_null() {
        let _ = write!(s, " listen_id={:p}", ev.listen_id());
    }
    if let Some(arg) = ev.arg() {
        let _ = write!(s, " arg={arg:#x}");
    }
    let (src, dst) = ev.addr_ptrs();
    // SAFETY: the copy keeps each address at its family's length (`addr_len`), in its slot.
    let (src, dst) = unsafe { (addr_text(src), addr_text(dst)) };
    let _ = write!(
        s,
        " src={src} dst={dst} private_data_len={}",
        ev.private_data().map_or(0, |p| p.len())
    );
    s
}

/// The status with its meaning, e.g. `-110 (ETIMEDOUT: Connection timed out)` or
/// `28 (IB_CM_REJ_CONSUMER_DEFINED)`.
pub(crate) fn status_text(kind: StatusKind, status: i32) -> String {
    match kind {
        StatusKind::Ok => "0 (ok)".to_string(),
        // i32::MIN is no errno's negation (and negating it overflows).
        StatusKind::Errno | StatusKind::IwarpReject => match status.checked_neg() {
            Some(errno) => format!("{status} ({})", errno_text(errno)),
            None => format!("{status} (unknown)"),
        },
        StatusKind::IbRejectReason => format!(
            "{status} ({})",
            reject_reason_name(status).unwrap_or("unknown IB CM reject reason")
        ),
        StatusKind::Other => format!("{status} (unknown)"),
    }
}

fn errno_text(errno: i32) -> String {
    let message = std::io::Error::from_raw_os_error(errno).to_string();
    let message = message.split(" (os error").next().unwrap_or("");
    match errno_name(errno) {
        Some(name) => format!("{name}: {message}"),
        None => message.to_string(),
    }
}

/// `ip:port`, `[ip6]:port`, `familyN` for another family, or `-` for no address.
///
/// # Safety
/// `sa` points to an address stored at least at its family's length: a `sockaddr_in` for
/// AF_INET, a `sockaddr_in6` for AF_INET6, the family alone for any other. A
/// `sockaddr_storage` (a cm_id's route) is, and so is each address of an event's copy
/// ([`Event::src_addr`]); a bare `struct sockaddr` is only 16 bytes, short of an IPv6 one.
///
/// ```
/// // A cm_id's route holds each address in a sockaddr_storage.
/// let ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
/// let sa = &ss as *const libc::sockaddr_storage as *const libc::sockaddr;
/// assert_eq!(unsafe { cmsafe_core::event::addr_text(sa) }, "-");
/// ```
///
/// ```compile_fail,E0133
/// // Not callable without `unsafe`: a `&sockaddr` promises 16 bytes, an IPv6 address is 28
/// // (the addr_text fuzz target read past a 16-byte one).
/// let sa: libc::sockaddr = unsafe { std::mem::zeroed() };
/// cmsafe_core::event::addr_text(&sa);
/// ```
pub unsafe fn addr_text(sa: *const libc::sockaddr) -> String {
    // SAFETY: forwarded from the caller.
    match unsafe { socket_addr(sa) } {
        Some(a) => a.to_string(),
        // SAFETY: the family is always there (the caller).
        None => match unsafe { (*sa).sa_family } {
            f if f as i32 == libc::AF_UNSPEC => "-".to_string(),
            f => format!("family{f}"),
        },
    }
}

/// The address `sa` holds, for AF_INET and AF_INET6.
///
/// # Safety
/// As [`addr_text`].
pub(crate) unsafe fn socket_addr(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: the family is always there (the caller).
    match unsafe { (*sa).sa_family } as i32 {
        libc::AF_INET => {
            // SAFETY: the family says `sa` holds a sockaddr_in (the caller).
            let sin = unsafe { &*(sa as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says `sa` holds a sockaddr_in6 (the caller).
            let sin6 = unsafe { &*(sa as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_errno_status_is_named_and_explained() {
        assert_eq!(
            status_text(StatusKind::Errno, -libc::ETIMEDOUT),
            "-110 (ETIMEDOUT: Connection timed out)"
        );
        assert_eq!(
            status_text(StatusKind::IwarpReject, -libc::ECONNREFUSED),
            "-111 (ECONNREFUSED: Connection refused)"
        );
        assert_eq!(status_text(StatusKind::Ok, 0), "0 (ok)");
    }

    /// A page's last `len` bytes, the page after it inaccessible: a read past them faults.
    struct PageEnd {
        map: *mut libc::c_void,
        page: usize,
    }

    impl PageEnd {
        fn new() -> PageEnd {
            let page = crate::page::size();
            // SAFETY: a fresh anonymous mapping of two pages; the second made inaccessible.
            let map = unsafe {
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    2 * page,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(map, libc::MAP_FAILED);
                assert_eq!(
                    libc::mprotect(map.cast::<u8>().add(page).cast(), page, libc::PROT_NONE),
                    0
                );
                map
            };
            PageEnd { map, page }
        }

        /// `bytes`, put so that they end where the page does: where they begin.
        fn put(&self, bytes: &[u8]) -> *const libc::sockaddr {
            // SAFETY: the last `bytes.len()` bytes of the first page, ours and writable;
            // every length here keeps the address 2-aligned, as a sockaddr is.
            unsafe {
                let at = self.map.cast::<u8>().add(self.page - bytes.len());
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len());
                at.cast()
            }
        }
    }

    impl Drop for PageEnd {
        fn drop(&mut self) {
            // SAFETY: our own mapping.
            unsafe { libc::munmap(self.map, 2 * self.page) };
        }
    }

    /// Each family's address is read at its struct's length and no further: each here ends
    /// where readable memory does. The addr_text fuzz target's input was AF_INET6 in a 16-byte
    /// `struct sockaddr`, which the safe `addr_text(&sockaddr)` read 12 bytes past; such an
    /// address is 28 bytes long, as it is given here, and the function is now `unsafe` with
    /// that contract (its doctest holds that a `&sockaddr` alone no longer compiles).
    #[test]
    fn addresses_are_read_at_their_familys_length_only() {
        let end = PageEnd::new();
        let family = |f: i32| (f as libc::sa_family_t).to_ne_bytes();
        // SAFETY: each address is stored at its family's length, before the inaccessible page.
        let text = |bytes: &[u8]| unsafe { addr_text(end.put(bytes)) };

        let mut v4 = [0u8; 16];
        v4[..2].copy_from_slice(&family(libc::AF_INET));
        v4[2..4].copy_from_slice(&7471u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[192, 0, 2, 1]);
        assert_eq!(text(&v4), "192.0.2.1:7471");

        // The fuzz target's input: family 10, the rest zeros; then a whole address.
        let mut v6 = [0u8; 28];
        v6[..2].copy_from_slice(&family(libc::AF_INET6));
        assert_eq!(text(&v6), "[::]:0");
        v6[2..4].copy_from_slice(&9000u16.to_be_bytes());
        v6[8..24].copy_from_slice(&Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2).octets());
        v6[24..28].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(text(&v6), "[fe80::2%3]:9000");

        // Any other family: the family alone.
        assert_eq!(text(&family(libc::AF_UNSPEC)), "-");
        assert_eq!(text(&family(27)), "family27");
        assert_eq!(text(&65535u16.to_ne_bytes()), "family65535");
    }

    /// A negative status with no errno's negation (i32::MIN, found by the event_copy fuzz
    /// target) reads as unknown; negating it overflowed, a panic where overflow is checked.
    #[test]
    fn a_status_with_no_negation_is_unknown() {
        for kind in [StatusKind::Errno, StatusKind::IwarpReject] {
            assert_eq!(status_text(kind, i32::MIN), "-2147483648 (unknown)");
        }
        assert_eq!(
            status_text(StatusKind::Errno, -i32::MAX),
            "-2147483647 (Unknown error 2147483647)"
        );
        // The whole line, as the fuzz target's input made it (fuzz/regressions/event_copy/
        // status-i32-min): an ADDR_RESOLVED without an id, its status i32::MIN.
        // SAFETY: plain data; all-zero is valid.
        let mut raw: crate::cm::rdma_cm_event = unsafe { std::mem::zeroed() };
        raw.event = crate::cm::rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED;
        raw.status = i32::MIN;
        // SAFETY: a valid event without an id or private data.
        let ev = unsafe { Event::copy_of(&raw) }.unwrap();
        let line = ev.describe();
        assert_eq!(
            line.split_once(' ').map(|(_, rest)| rest),
            Some(
                "ADDR_RESOLVED status=-2147483648 (unknown) id=0x0 src=- dst=- private_data_len=0"
            ),
            "{line}"
        );
    }

    /// The table names every errno as this machine's glibc does, where it has strerrorname_np
    /// (looked up, not linked, so that this test builds on any glibc).
    #[test]
    fn the_names_are_glibcs() {
        // SAFETY: dlsym(3) with a NUL-terminated name, in the global scope.
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"strerrorname_np".as_ptr()) };
        if f.is_null() {
            return;
        }
        // SAFETY: glibc's strerrorname_np has this signature.
        let glibc: unsafe extern "C" fn(libc::c_int) -> *const libc::c_char =
            unsafe { std::mem::transmute(f) };
        let mut named = 0;
        for e in 1..134 {
            // SAFETY: returns NULL or a static NUL-terminated string.
            let p = unsafe { glibc(e) };
            // SAFETY: non-NULL: a static NUL-terminated string.
            let theirs = (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) });
            let theirs = theirs.map(|c| c.to_str().unwrap());
            if let Some(ours) = errno_name(e) {
                assert_eq!(Some(ours), theirs, "errno {e}");
                named += 1;
            }
        }
        assert_eq!(named, 130);
    }
}
