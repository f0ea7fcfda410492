//! Settings, read once from the environment. Under AT_SECURE (setuid, setgid, file capabilities)
//! secure_getenv(3) hides them and the defaults apply.

use std::ffi::CStr;

use cmsafe_core::setting::{self, Parsed};
use once_cell::sync::Lazy;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Report misuse; behave exactly as without the preload.
    Audit,
    /// Ack at once, hand out copies that outlive the program's ack; report misuse.
    Safe,
    /// Pass every call through untouched.
    Off,
}

/// How audit closes an acked copy's page (audit/pages.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// userfaultfd where the kernel gives it, else mprotect and SIGSEGV.
    Userfaultfd,
    /// mprotect and SIGSEGV, never a thread of the preload's for faults.
    Mprotect,
}

pub struct Config {
    pub mode: Mode,
    /// CMSAFE_GUARD.
    pub guard: Guard,
    /// CMSAFE_REPORT, `%p` not yet replaced; its plain name this process's (a forked child
    /// writes NAME.<pid>: cmsafe_core::outfile).
    pub report: Option<cmsafe_core::outfile::Template>,
    pub late_ack_ns: u64,
    /// CMSAFE_HANG_MS: how long rdma_destroy_id/rdma_migrate_id may block before a finding.
    pub hang_ns: u64,
    /// CMSAFE_REJECTED_IDS: rejected connection-request ids alive at once that make a finding.
    pub rejected_ids: usize,
}

/// A setting: secure_getenv(3), so that none has any effect under AT_SECURE (cmsafe_core::env).
fn var(name: &CStr) -> Option<String> {
    cmsafe_core::env::var(name)
}

/// The settings. Forced by the first wrapped call, before its panic shield (`quietly`): its
/// initializer must not panic (an unwind into C), so its one message is written by `say_err!`,
/// which cannot.
pub static CONFIG: Lazy<Config> = Lazy::new(|| {
    let mode = choice(
        c"CMSAFE_MODE",
        &[
            ("audit", Mode::Audit),
            ("safe", Mode::Safe),
            ("off", Mode::Off),
        ],
    );
    let guard = choice(
        c"CMSAFE_GUARD",
        &[
            ("userfaultfd", Guard::Userfaultfd),
            ("mprotect", Guard::Mprotect),
        ],
    );
    let late_ms = number(c"CMSAFE_LATE_ACK_MS", 0, 1000);
    let hang_ms = number(c"CMSAFE_HANG_MS", 0, 5000);
    let rejected_ids = number(c"CMSAFE_REJECTED_IDS", 1, 64) as usize;
    if let Some(level) = var(c"CMSAFE_LOG").and_then(|v| cmsafe_core::logging::parse_level(&v)) {
        cmsafe_core::logging::set_level(level);
    }
    Config {
        mode,
        guard,
        report: cmsafe_core::env::var_bytes(c"CMSAFE_REPORT")
            .and_then(cmsafe_core::outfile::Template::new),
        late_ack_ns: late_ms.saturating_mul(1_000_000),
        hang_ns: hang_ms.saturating_mul(1_000_000),
        rejected_ids,
    }
});

/// The value of the word of `words` in the variable `name`; the first word's when it is unset
/// or empty, and, said once on stderr, when it is something else.
fn choice<T: Copy>(name: &CStr, words: &[(&str, T)]) -> T {
    let v = var(name);
    let (first, default) = words[0];
    match setting::word(v.as_deref(), words) {
        Parsed::Value(value) => value,
        Parsed::Unset => default,
        Parsed::Invalid => {
            let names: Vec<&str> = words.iter().map(|&(w, _)| w).collect();
            let (last, rest) = names.split_last().unwrap_or((&first, &[]));
            crate::sys::cancel::say_err!(
                "==cmsafe== {}={:?} is not {} or {last}: using {first}",
                name.to_string_lossy(),
                v.as_deref().map_or("", str::trim),
                rest.join(", ")
            );
            default
        }
    }
}

/// The whole number in the variable `name`, at least `min`; `default` when it is unset or
/// empty, and, said once on stderr as CMSAFE_MODE's mistakes are, when it is something else: a
/// setting mistyped is not silently a different one.
fn number(name: &CStr, min: u64, default: u64) -> u64 {
    let v = var(name);
    match setting::number(v.as_deref(), min..=u64::MAX) {
        Parsed::Value(n) => n,
        Parsed::Unset => default,
        Parsed::Invalid => {
            let v = v.unwrap_or_default();
            let name = name.to_string_lossy();
            let floor = if min > 0 {
                format!(" of at least {min}")
            } else {
                String::new()
            };
            crate::sys::cancel::say_err!(
                "==cmsafe== {name}={v:?} is not a whole number{floor}: using {default}"
            );
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::{Command, Stdio};

    /// Set in the child the test runs: how its stderr fails ("pipe": given a pipe whose reader
    /// is gone; "closed": it closes its fd 2 first; "open": it works).
    const CHILD: &str = "CMSAFE_CONFIG_TEST_CHILD";
    const NAME: &str = "sys::config::tests::a_bogus_mode_with_a_failing_stderr_means_audit";

    /// The child's part: forces the config (a panic there fails the child's run of the test)
    /// and says the mode it chose on stdout.
    fn child(how: &str) -> ! {
        if how == "closed" {
            // SAFETY: closing our own stderr descriptor.
            unsafe { libc::close(2) };
        }
        let c = &*CONFIG;
        println!(
            "child: mode {:?} late_ack_ns {} hang_ns {} rejected_ids {}",
            c.mode, c.late_ack_ns, c.hang_ns, c.rejected_ids
        );
        std::process::exit(0)
    }

    /// This test's binary, running this test alone as the child, with CMSAFE_MODE=bogus and
    /// `stderr`: its exit status, stdout and stderr.
    fn run_child(how: &str, stderr: Stdio) -> (Option<i32>, String, String) {
        let out = Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, how)
            .env("CMSAFE_MODE", "bogus")
            .env("CMSAFE_LATE_ACK_MS", "abc")
            .env("CMSAFE_HANG_MS", " 250 ")
            .env("CMSAFE_REJECTED_IDS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .output()
            .expect("the child runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// CMSAFE_MODE=bogus is said on stderr and means audit (the documented fallback), as are
    /// numbers that are not (CMSAFE_LATE_ACK_MS=abc, CMSAFE_REJECTED_IDS=0), and when
    /// stderr fails (EPIPE, EBADF) the config is still made, in audit mode, with no panic: the
    /// config is first forced outside any panic shield, so a panic there would unwind into the
    /// C program. (The test binary ignores SIGPIPE, as a C service that writes to sockets does:
    /// the write fails with EPIPE instead of killing it.)
    #[test]
    fn a_bogus_mode_with_a_failing_stderr_means_audit() {
        if let Ok(how) = std::env::var(CHILD) {
            child(&how);
        }
        let (code, out, err) = run_child("open", Stdio::piped());
        assert_eq!(code, Some(0), "stdout: {out}\nstderr: {err}");
        // Numbers mistyped are said and fall back to their defaults; a right one is taken.
        assert!(
            out.contains(
                "child: mode Audit late_ack_ns 1000000000 hang_ns 250000000 rejected_ids 64"
            ),
            "stdout: {out}"
        );
        assert!(
            err.contains("==cmsafe== CMSAFE_MODE=\"bogus\" is not audit, safe or off: using audit"),
            "stderr: {err}"
        );
        assert!(
            err.contains("==cmsafe== CMSAFE_LATE_ACK_MS=\"abc\" is not a whole number: using 1000"),
            "stderr: {err}"
        );
        assert!(
            err.contains(
                "==cmsafe== CMSAFE_REJECTED_IDS=\"0\" is not a whole number of at least 1: \
                 using 64"
            ),
            "stderr: {err}"
        );
        assert!(!err.contains("CMSAFE_HANG_MS"), "stderr: {err}");

        let mut fds = [0; 2];
        // SAFETY: pipe2(2) with a valid array of two descriptors.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: two fresh descriptors we own.
        let (reader, writer) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(reader);
        let (code, out, _) = run_child("pipe", Stdio::from(writer));
        assert_eq!(code, Some(0), "stderr a pipe without reader: stdout: {out}");
        assert!(out.contains("child: mode Audit"), "stdout: {out}");

        let (code, out, _) = run_child("closed", Stdio::null());
        assert_eq!(code, Some(0), "stderr closed: stdout: {out}");
        assert!(out.contains("child: mode Audit"), "stdout: {out}");
    }
}
