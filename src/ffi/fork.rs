//! libcmsafe.so across fork(2): the compat header's copies and the pool's shared lists are taken
//! before a fork and released in both processes after, so a child that goes on using cmsafe
//! never waits for a lock held by a thread it does not have. Registered at load, so that the
//! handlers exist before any program thread can hold one of these locks.

use super::compat::COPIES;

/// The compat copies first: they are held while slots are made and released.
extern "C" fn prepare() {
    COPIES.lock_for_fork();
    cmsafe_core::event::lock_for_fork();
}

extern "C" fn after() {
    cmsafe_core::event::unlock_after_fork();
    COPIES.unlock_after_fork();
}

extern "C" fn register() {
    // SAFETY: plain extern "C" functions with no arguments.
    unsafe { libc::pthread_atfork(Some(prepare), Some(after), Some(after)) };
}

/// Run by the dynamic loader when libcmsafe.so (or a test binary) is loaded.
#[used]
#[link_section = ".init_array"]
static REGISTER_AT_LOAD: extern "C" fn() = register;
