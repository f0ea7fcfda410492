//! Whether a seccomp filter is in force in this process (/proc/self/status, "Seccomp: 2"): a
//! filter may kill the process at a system call it does not list, so the preload then makes
//! none it can do without (userfaultfd(2), process_vm_readv(2)). Read once.

use once_cell::sync::OnceCell;

pub fn filtered() -> bool {
    static FILTERED: OnceCell<bool> = OnceCell::new();
    *FILTERED.get_or_init(|| {
        crate::sys::cancel::uncancellable(|| std::fs::read_to_string("/proc/self/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim() != "0"))
            })
            // Unknown (no /proc): as if filtered, the careful side.
            .unwrap_or(true)
    })
}
