//! Settings, read once from the environment. Under setuid/setgid, secure_getenv(3) hides them
//! and the defaults apply.

use std::ffi::{CStr, CString};

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

pub struct Config {
    pub mode: Mode,
    /// CMSAFE_REPORT, `%p` not yet replaced.
    pub report: Option<String>,
    pub late_ack_ns: u64,
    /// CMSAFE_HANG_MS: how long rdma_destroy_id/rdma_migrate_id may block before a finding.
    pub hang_ns: u64,
    /// CMSAFE_REJECTED_IDS: rejected connection-request ids alive at once that make a finding.
    pub rejected_ids: usize,
}

extern "C" {
    // glibc; the libc crate does not bind it.
    fn secure_getenv(name: *const libc::c_char) -> *mut libc::c_char;
}

fn var(name: &CStr) -> Option<String> {
    // SAFETY: a valid C string; the result is NULL or a NUL-terminated string from environ.
    let p = unsafe { secure_getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, NUL-terminated.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

pub static CONFIG: Lazy<Config> = Lazy::new(|| {
    let mode = match var(c"CMSAFE_MODE").as_deref().map(str::trim) {
        Some("safe") => Mode::Safe,
        Some("off") => Mode::Off,
        Some("audit") | Some("") | None => Mode::Audit,
        Some(other) => {
            crate::cancel::say_err!(
                "==cmsafe== CMSAFE_MODE={other:?} is not audit, safe or off: using audit"
            );
            Mode::Audit
        }
    };
    let late_ms = var(c"CMSAFE_LATE_ACK_MS")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1000);
    let hang_ms = var(c"CMSAFE_HANG_MS")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(5000);
    let rejected_ids = var(c"CMSAFE_REJECTED_IDS")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(64);
    if let Some(level) = var(c"CMSAFE_LOG").and_then(|v| cmsafe_core::logging::parse_level(&v)) {
        cmsafe_core::logging::set_level(level);
    }
    Config {
        mode,
        report: var(c"CMSAFE_REPORT").filter(|s| !s.is_empty()),
        late_ack_ns: late_ms.saturating_mul(1_000_000),
        hang_ns: hang_ms.saturating_mul(1_000_000),
        rejected_ids,
    }
});

/// The report path for this process: `%p` becomes the pid.
pub fn report_path(template: &str) -> CString {
    let path = template.replace("%p", &std::process::id().to_string());
    CString::new(path).unwrap_or_default()
}
