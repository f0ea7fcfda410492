//! Whether this process is a child forked since a mark was set, however it was forked: fork(3)
//! runs the pthread_atfork handlers, but _Fork(3), vfork(2) children that do not exec at once,
//! and clone(2) run none. A page with MADV_WIPEONFORK holds the marks: a child's copy of it is
//! zero, so a mark set in the parent reads unset in any child, for one load.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// The marks: one per thing a child must make its own.
#[derive(Clone, Copy)]
pub enum Mark {
    /// audit's pages (pages.rs): a child's are not registered with the parent's userfaultfd.
    Pages = 0,
    /// The report file (report_file.rs): a child writes its own.
    Report = 1,
    /// The tracker (cm/track.rs): a child's counts and findings are its own.
    Tracker = 2,
}

const MARKS: usize = 3;

/// The page, mapped at `init` (the first wrapped call) or the first mark.
static PAGE: AtomicUsize = AtomicUsize::new(0);

fn page() -> Option<&'static [AtomicU8; MARKS]> {
    let p = PAGE.load(Ordering::Acquire);
    if p != 0 {
        // SAFETY: our page, mapped for good, read and written as atomics only.
        return Some(unsafe { &*(p as *const [AtomicU8; MARKS]) });
    }
    let m = cmsafe_core::mapping::Mapping::new(cmsafe_core::page::size()).ok()?;
    let at = m.leak();
    // Every mark set in the process that maps the page: its state is its own.
    // SAFETY: our fresh page, not yet shared.
    unsafe { at.write_bytes(1, MARKS) };
    // SAFETY: our fresh page; the advice only changes what a child sees of it (Linux 4.14 and
    // later; before, the marks are never unset, as if no child were ever made).
    unsafe { libc::madvise(at.cast(), cmsafe_core::page::size(), libc::MADV_WIPEONFORK) };
    // Another thread may have mapped it first: ours then stays mapped, unused (one page, once).
    let _ = PAGE.compare_exchange(0, at as usize, Ordering::AcqRel, Ordering::Acquire);
    page()
}

/// Maps the page with every mark set: called at the first wrapped call, so that a child forked
/// after it is known as one.
pub fn init() {
    page();
}

/// Sets `mark` in this process: its state is its own.
pub fn mark(mark: Mark) {
    if let Some(p) = page() {
        // Relaxed: a flag of this process's, read by its own threads.
        p[mark as usize].store(1, Ordering::Relaxed);
    }
}

/// Whether this process was forked from one that set `mark` and has not set it since. One load.
#[inline]
pub fn since(mark: Mark) -> bool {
    let p = PAGE.load(Ordering::Acquire);
    // SAFETY: as in `page`.
    p != 0
        && unsafe { &*(p as *const [AtomicU8; MARKS]) }[mark as usize].load(Ordering::Relaxed) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_however_forked_sees_the_mark_unset() {
        mark(Mark::Report);
        assert!(!since(Mark::Report));
        // SAFETY: a raw clone(2) as fork (no pthread_atfork handlers, as _Fork): the child
        // only reads a static and _exits.
        let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) } as i32;
        if pid == 0 {
            let code = if since(Mark::Report) { 0 } else { 1 };
            // SAFETY: leaving the child at once.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(libc::WEXITSTATUS(status), 0, "the child saw its mark unset");
        assert!(!since(Mark::Report), "the parent's stays set");
    }
}
