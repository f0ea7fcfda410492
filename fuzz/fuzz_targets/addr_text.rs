//! `cmsafe_core::event::addr_text` on addresses built from the fuzzer's bytes, of any family,
//! each in a heap block of exactly the length its contract promises (a `sockaddr_in` for
//! AF_INET, a `sockaddr_in6` for AF_INET6, the family alone for any other), so that
//! AddressSanitizer reports a read past it; and in a whole `sockaddr_storage`, as a cm_id's
//! route holds it. The text must say what the bytes hold.
//!
//! This target found that `addr_text` took a `&sockaddr` as a safe function and read an
//! AF_INET6 address's 28 bytes past its 16: it is `unsafe` now, with that contract
//! (regressions/addr_text/ keeps the input).
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV6};

use cmsafe_core::event::addr_text;
use libfuzzer_sys::fuzz_target;

/// The text `addr_text` must give for an address whose bytes begin with `bytes` (128 of them).
fn expected(bytes: &[u8]) -> String {
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    let port = u16::from_be_bytes([bytes[2], bytes[3]]);
    match family as i32 {
        libc::AF_UNSPEC => "-".to_string(),
        libc::AF_INET => {
            let ip = Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]);
            format!("{ip}:{port}")
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = bytes[8..24].try_into().unwrap();
            let scope = u32::from_ne_bytes(bytes[24..28].try_into().unwrap());
            SocketAddrV6::new(Ipv6Addr::from(ip), port, 0, scope).to_string()
        }
        _ => format!("family{family}"),
    }
}

/// A heap block of exactly `len` bytes (its alignment at least a sockaddr's), holding the
/// first `len` of `bytes`.
fn block(bytes: &[u8], len: usize) -> Vec<u16> {
    let mut b = vec![0u16; len.div_ceil(2)];
    for (i, pair) in bytes[..len].chunks(2).enumerate() {
        b[i] = u16::from_ne_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
    }
    b
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = [0u8; 128];
    let n = data.len().min(128);
    bytes[..n].copy_from_slice(&data[..n]);
    let want = expected(&bytes);

    // Exactly its family's length.
    let len = match u16::from_ne_bytes([bytes[0], bytes[1]]) as i32 {
        libc::AF_INET => size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
        _ => size_of::<libc::sa_family_t>(),
    };
    let exact = block(&bytes, len);
    assert_eq!(exact.len() * 2, len, "every length is even");
    // SAFETY: the block holds the address at its family's length.
    let text = unsafe { addr_text(exact.as_ptr().cast()) };
    assert_eq!(text, want);

    // In a whole sockaddr_storage.
    // SAFETY: plain data, any bit pattern valid; read unaligned from the array.
    let storage: Box<libc::sockaddr_storage> =
        Box::new(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) });
    // SAFETY: a sockaddr_storage holds any family's address at its length.
    let text = unsafe { addr_text((&*storage as *const libc::sockaddr_storage).cast()) };
    assert_eq!(text, want);
});
