//! One log line per event. Private data appears as its length only: it often carries tokens.

use std::ffi::CStr;
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use once_cell::sync::OnceCell;

use super::Event;
use crate::status::{reject_reason_name, StatusKind};

/// glibc's `strerrorname_np` (2.32 and later; the libc crate does not bind it).
type ErrnoName = unsafe extern "C" fn(libc::c_int) -> *const libc::c_char;

/// Looked up once at run time, not linked: a library built against glibc 2.32 or later must
/// still load where glibc is older (Debian 11 has 2.31), and says the message alone there.
fn strerrorname_np() -> Option<ErrnoName> {
    static NAME: OnceCell<Option<ErrnoName>> = OnceCell::new();
    *NAME.get_or_init(|| {
        // SAFETY: dlsym(3) with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"strerrorname_np".as_ptr()) };
        // SAFETY: glibc's strerrorname_np has exactly this signature.
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, ErrnoName>(f) })
    })
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
    // SAFETY: strerrorname_np returns NULL or a static string.
    let name = strerrorname_np().map_or(std::ptr::null(), |f| unsafe { f(errno) });
    let message = std::io::Error::from_raw_os_error(errno).to_string();
    let message = message.split(" (os error").next().unwrap_or("").to_string();
    if name.is_null() {
        return message;
    }
    // SAFETY: non-NULL: a static NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    format!("{name}: {message}")
}

/// `ip:port`, `[ip6]:port`, `ib`, or `-` for no address.
pub(crate) fn addr_text(sa: &libc::sockaddr) -> String {
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

    /// glibc 2.36 here: strerrorname_np is found at run time and names the errno.
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
}
