//! Exit and fork: the summary is said at exit, and a child after fork(2) gets its own report.

use std::sync::Once;

use crate::track::STATE;

static REGISTER: Once = Once::new();

/// Called with the state lock held, the first time the program touches librdmacm.
pub fn register() {
    REGISTER.call_once(|| {
        // SAFETY: registering plain extern "C" functions with no arguments.
        unsafe {
            libc::atexit(at_exit);
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_parent),
                Some(after_fork_child),
            );
        }
    });
}

extern "C" fn at_exit() {
    let summary = {
        let mut guard = STATE.lock();
        guard.as_mut().and_then(|s| s.finish())
    };
    if let Some(s) = summary {
        eprint!("{s}");
    }
}

extern "C" fn before_fork() {
    STATE.lock_for_fork();
}

extern "C" fn after_fork_parent() {
    STATE.unlock_after_fork();
}

extern "C" fn after_fork_child() {
    STATE.unlock_after_fork();
    if let Some(s) = STATE.lock().as_mut() {
        s.after_fork_in_child();
    }
}
