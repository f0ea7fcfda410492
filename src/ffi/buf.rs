//! Private data buffers: refcounted, immutable, independent of the event they came with.

use libc::size_t;

use super::{cmsafe_buf, guard};
use cmsafe_core::event::PrivateData;

/// Takes one more reference to `buf`, so it outlives its event or moves to another thread.
///
/// Ownership: the caller owns the new reference and releases it with `cmsafe_buf_release`.
/// NULL: returns NULL. Threads: atomic.
/// Returns `buf`.
#[no_mangle]
pub extern "C" fn cmsafe_buf_retain(buf: *const cmsafe_buf) -> *const cmsafe_buf {
    guard!(std::ptr::null(), {
        if buf.is_null() {
            return std::ptr::null();
        }
        PrivateData::with_raw(buf as *const u8, "cmsafe_buf_retain", |b| {
            b.clone().into_raw() as *const cmsafe_buf
        })
    })
}

/// Releases one reference taken with `cmsafe_buf_retain`. (The reference an event holds is
/// released with the event: never release a buffer you did not retain.)
///
/// NULL: a no-op. A buffer already released, or never returned by cmsafe, is reported and the
/// process aborts (while its slot is in quarantine, as for `cmsafe_event_release`).
/// Threads: atomic; any thread may release.
#[no_mangle]
pub extern "C" fn cmsafe_buf_release(buf: *const cmsafe_buf) {
    guard!((), {
        if !buf.is_null() {
            PrivateData::from_raw(buf as *const u8, "cmsafe_buf_release")
                .release_own("cmsafe_buf_release");
        }
    })
}

/// The private data bytes: `cmsafe_buf_len(buf)` of them, immutable.
///
/// Ownership: borrowed from `buf`; valid while a reference to `buf` (or to its event) is held.
/// NULL: returns NULL. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_buf_data(buf: *const cmsafe_buf) -> *const u8 {
    guard!(std::ptr::null(), {
        if buf.is_null() {
            return std::ptr::null();
        }
        PrivateData::with_raw(buf as *const u8, "cmsafe_buf_data", |b| {
            b.as_bytes().as_ptr()
        })
    })
}

/// The number of private data bytes, in bytes (0 to 255): the length the transport reported.
/// NULL: returns 0. Threads: any.
#[no_mangle]
pub extern "C" fn cmsafe_buf_len(buf: *const cmsafe_buf) -> size_t {
    guard!(0, {
        if buf.is_null() {
            return 0;
        }
        PrivateData::with_raw(buf as *const u8, "cmsafe_buf_len", |b| b.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmsafe_core::stderr::test_child::{break_stderr, child_part, rerun};

    /// The log callback of the child below: error lines go to stdout, which the parent reads.
    unsafe extern "C" fn to_stdout(
        _user_data: *mut libc::c_void,
        level: libc::c_int,
        msg: *const libc::c_char,
    ) {
        if level == 1 {
            // SAFETY: the logger passes a NUL-terminated line, valid during the call.
            let line = unsafe { std::ffi::CStr::from_ptr(msg) }.to_bytes();
            // SAFETY: writes from a live buffer to this process's stdout.
            unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
        }
    }

    /// A double `cmsafe_buf_release` while every write to stderr fails (a pipe whose reader is
    /// gone, SIGPIPE ignored): the process aborts, as documented, whether the log goes to stderr
    /// or to a callback (which gets the report); it never returns from the misused call.
    #[test]
    fn a_misuse_aborts_when_stderr_fails() {
        if let Some(part) = child_part() {
            break_stderr();
            if part == "callback" {
                cmsafe_core::logging::set_callback(Some(to_stdout), std::ptr::null_mut());
            }
            let buf = cmsafe_core::event::PrivateData::copy_from(b"token")
                .unwrap()
                .into_raw() as *const cmsafe_buf;
            cmsafe_buf_release(buf);
            cmsafe_buf_release(buf);
            return;
        }
        for part in ["stderr", "callback"] {
            let out = rerun("ffi::buf::tests::a_misuse_aborts_when_stderr_fails", part);
            let said = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&out.status),
                Some(libc::SIGABRT),
                "{part}: {:?}, want SIGABRT; stdout: {said}",
                out.status
            );
            if part == "callback" {
                assert!(
                    said.contains("cmsafe_buf_release(0x")
                        && said.contains("this cmsafe_buf was already released"),
                    "the callback got: {said}"
                );
            }
        }
    }
}
