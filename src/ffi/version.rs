//! The library's version, for callers that check the header they compiled against
//! (`CMSAFE_VERSION_*`, written into include/cmsafe.h by tools/gen-header from Cargo.toml)
//! against the library the dynamic linker loaded.

use libc::c_char;

use super::guard;

/// `CARGO_PKG_VERSION` with its terminating NUL, a static C string.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The version of the cmsafe library loaded at run time: "MAJOR.MINOR.PATCH", for example
/// "0.1.0" (a pre-release adds its suffix, "0.2.0-rc.1"). `CMSAFE_VERSION_STRING` is the version
/// of the header a program was compiled with; the library runs it when both have the same
/// SONAME (0.MINOR before 1.0, then MAJOR) and the library is at least as new as the header.
///
/// Ownership: a static string; never free it. NULL: never returns NULL. Threads: any.
/// Returns the version string, NUL-terminated.
#[no_mangle]
pub extern "C" fn cmsafe_version() -> *const c_char {
    guard!(VERSION.as_ptr() as *const c_char, {
        VERSION.as_ptr() as *const c_char
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn version_is_the_crate_version() {
        // SAFETY: cmsafe_version returns a static NUL-terminated string.
        let v = unsafe { CStr::from_ptr(cmsafe_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        let triple = concat!(
            env!("CARGO_PKG_VERSION_MAJOR"),
            ".",
            env!("CARGO_PKG_VERSION_MINOR"),
            ".",
            env!("CARGO_PKG_VERSION_PATCH")
        );
        assert!(v.to_str().unwrap().starts_with(triple));
    }
}
