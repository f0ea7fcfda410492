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
    let _ = write!(
        s,
        " src={} dst={} private_data_len={}",
        addr_text(ev.src_addr()),
        addr_text(ev.dst_addr()),
        ev.private_data().map_or(0, |p| p.len())
    );
    s
}

/// The status with its meaning, e.g. `-110 (ETIMEDOUT: Connection timed out)` or
/// `28 (IB_CM_REJ_CONSUMER_DEFINED)`.
pub(crate) fn status_text(kind: StatusKind, status: i32) -> String {
    match kind {
        StatusKind::Ok => "0 (ok)".to_string(),
        StatusKind::Errno | StatusKind::IwarpReject => {
            format!("{status} ({})", errno_text(-status))
        }
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
pub fn addr_text(sa: &libc::sockaddr) -> String {
    match socket_addr(sa) {
        Some(a) => a.to_string(),
        None if sa.sa_family as i32 == libc::AF_UNSPEC => "-".to_string(),
        None => format!("family{}", sa.sa_family),
    }
}

/// `sa` is stored at least at its family's length (an event's addresses are: `addr_len`).
pub(crate) fn socket_addr(sa: &libc::sockaddr) -> Option<SocketAddr> {
    let ss = sa;
    match ss.sa_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
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
