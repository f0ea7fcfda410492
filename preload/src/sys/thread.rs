//! The preload's own threads (the hang watcher, the userfaultfd thread): each starts with every
//! signal blocked, so that a signal meant for the program is never delivered on one of ours
//! (the kernel picks any thread that does not block a process-directed signal).

/// Starts `f` on a thread named `name` with `stack` bytes of stack and every signal blocked;
/// None when it could not be started.
pub fn spawn_blocked<F>(name: &str, stack: usize, f: F) -> Option<std::thread::Thread>
where
    F: FnOnce() + Send + 'static,
{
    // SAFETY: sigset operations on a local set; pthread_sigmask on the calling thread, restored
    // right after the spawn (the new thread inherits the blocked mask).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .stack_size(stack)
            .spawn(f)
            .ok()
            .map(|h| h.thread().clone());
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned
    }
}
