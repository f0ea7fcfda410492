//! Settings from the environment, for libcmsafe and the preload alike: every `CMSAFE_*` read goes
//! through here, so that none has any effect in a process the kernel started with AT_SECURE
//! (a setuid or setgid program, or one that gained file capabilities).
//!
//! Such a process runs with the environment of a less privileged user, who must not be able to
//! steer it: a dump path would let them truncate or create any file the program may write. So
//! the value comes from glibc's secure_getenv(3), which answers as getenv(3) does, but NULL
//! under AT_SECURE, whatever the environment holds: the defaults apply.
//!
//! What is read is copied out: the environment entry is the program's, and setenv(3),
//! putenv(3) or unsetenv(3) on another thread may replace it; the copy allocates, so a value is
//! read once, when the setting is (at load, or on first use), never on an exit or abort path.

use std::ffi::{CStr, CString};

extern "C" {
    // glibc 2.17 and later; the libc crate binds it on Solaris only.
    fn secure_getenv(name: *const libc::c_char) -> *mut libc::c_char;
}

/// The value of `name`, byte for byte; None when it is unset, and always None under AT_SECURE.
/// For values that are names of files, whose bytes need not be UTF-8.
pub fn var_bytes(name: &CStr) -> Option<CString> {
    // Under Miri (make miri), which has no secure_getenv, the unit tests it runs see no setting:
    // the defaults apply, as under AT_SECURE.
    if cfg!(miri) {
        return None;
    }
    // SAFETY: a NUL-terminated name; the result is NULL or a NUL-terminated string of the
    // environment, copied at once.
    let p = unsafe { secure_getenv(name.as_ptr()) };
    // SAFETY: non-NULL, NUL-terminated (above).
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_owned())
}

/// The value of `name` as text (a byte that is not UTF-8 becomes U+FFFD); None when it is unset,
/// and always None under AT_SECURE.
pub fn var(name: &CStr) -> Option<String> {
    var_bytes(name).map(|v| v.to_string_lossy().into_owned())
}

/// Whether the kernel started this process with AT_SECURE, where [`var`] and [`var_bytes`]
/// give None for every name.
pub fn secure() -> bool {
    // SAFETY: getauxval(3) reads the auxiliary vector; it has no preconditions.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stderr::test_child::{child_part, rerun_setuid, rerun_with};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    const NAME: &str = "env::tests::a_setuid_process_reads_no_setting";

    /// The settings the child is given: text, and bytes that are not UTF-8.
    fn settings() -> [(&'static str, &'static OsStr); 2] {
        [
            ("CMSAFE_ENV_TEST_TEXT", OsStr::new("caf\u{e9}")),
            (
                "CMSAFE_ENV_TEST_BYTES",
                OsStr::from_bytes(b"/d\xe9j\xe0/dump.%p"),
            ),
        ]
    }

    fn stdout(out: &std::process::Output) -> String {
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The same values are read in a plain run, bytes kept or replaced, and hidden in a setuid
    /// one (the test binary, copied setuid root and run by an unprivileged user: needs root, as
    /// CI runs).
    #[test]
    fn a_setuid_process_reads_no_setting() {
        if child_part().is_some() {
            // What the child saw, one line on stdout.
            println!(
                "secure {} text {:?} bytes {:?} lossy {:?} unset {:?}",
                secure(),
                var(c"CMSAFE_ENV_TEST_TEXT"),
                var_bytes(c"CMSAFE_ENV_TEST_BYTES"),
                var(c"CMSAFE_ENV_TEST_BYTES"),
                var(c"CMSAFE_ENV_TEST_UNSET"),
            );
            return;
        }
        let plain = rerun_with(NAME, "plain", &settings());
        assert!(
            stdout(&plain).contains(
                "secure false text Some(\"caf\u{e9}\") bytes Some(\"/d\\xe9j\\xe0/dump.%p\") \
                 lossy Some(\"/d\u{fffd}j\u{fffd}/dump.%p\") unset None"
            ),
            "{plain:?}"
        );
        let Some(setuid) = rerun_setuid(NAME, "setuid", &settings()) else {
            eprintln!("{NAME}: no setuid run (not root, or a nosuid temporary directory)");
            return;
        };
        assert!(
            stdout(&setuid).contains("secure true text None bytes None lossy None unset None"),
            "{setuid:?}"
        );
    }
}
