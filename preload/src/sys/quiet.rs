//! The preload's own work, run inside a wrapper: errno as librdmacm left it, and no panic
//! crossing into the program.

use std::panic::{catch_unwind, AssertUnwindSafe};

use cmsafe_core::errno;

/// -1 with ENOSYS: librdmacm is not behind us.
pub fn missing() -> i32 {
    errno::set(libc::ENOSYS);
    -1
}

/// Runs the preload's own work with errno kept and no panic escaping. It reaches no
/// cancellation point but through cancel.rs's wrappers, which hold cancellation off, so a
/// pending cancel acts at the program's next cancellation point, as without the preload.
/// The wrappers call it through `lifecycle::quietly`, which registers the exit and fork
/// handlers first; the hang watcher and the exit handler, which run only once those are
/// registered, call it directly.
pub fn run(f: impl FnOnce()) {
    let saved = errno::get();
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        crate::sys::cancel::say_err!(
            "==cmsafe== internal error (caught); the call went on unchecked"
        );
    }
    errno::set(saved);
}
