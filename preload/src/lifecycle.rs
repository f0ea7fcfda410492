//! Exit and fork: the summary is said at exit, and a child after fork(2) gets its own report.

use std::sync::Once;

use crate::audit::pages::RING_PAGES;
use crate::cm::track::STATE;
use crate::cm::watch::WATCH;
use crate::verbs::async_events::ASYNCS;
use crate::verbs::cq::CQS;

static REGISTER: Once = Once::new();

/// Run by the dynamic loader when the preload is loaded, before the program's main: which file
/// stderr is (our lines go to that one only: cmsafe_core::stderr), and the exit and fork
/// handlers. Registered this early, the exit handler runs after every one the program
/// registers (atexit runs them last in, first out), so the summary sees what the program's own
/// clean-up acked.
extern "C" fn at_load() {
    cmsafe_core::stderr::remember();
    // SAFETY: registering plain extern "C" functions with no arguments.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        );
    }
}

// Not under Miri (make miri), which runs the unit tests of the ledgers and tables: the load-time
// setup asks the process's files and the dynamic loader, which it cannot.
#[cfg(not(miri))]
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

/// What the first call that touches librdmacm or a completion event sets up, once (`quietly`
/// calls this first): the fork marks, and cancel.rs's panic hook.
fn register() {
    REGISTER.call_once(|| {
        crate::sys::forked::init();
        crate::sys::cancel::install_panic_hook();
    });
}

/// A wrapper's own work: the exit and fork handlers registered first, then run with errno kept
/// and no panic escaping (`sys::quiet::run`).
pub fn quietly(f: impl FnOnce()) {
    register();
    crate::sys::quiet::run(f);
}

extern "C" fn at_exit() {
    crate::sys::quiet::run(|| {
        // exit(3) called by a signal handler that interrupted this very thread inside one of
        // the preload's locks (a service's SIGTERM handler that exits): the tables are
        // mid-update and their locks are this thread's own, so waiting would be forever. The
        // summary is left out, and said to be.
        if STATE.held_here()
            || CQS.held_here()
            || ASYNCS.held_here()
            || WATCH.held_here()
            || crate::audit::sink::held_here()
            || crate::sys::alloc::held_here()
        {
            // Written from the stack: the allocator may be the lock this thread is inside.
            cmsafe_core::stderr::line(format_args!(
                "==cmsafe== no summary: exit was called from a signal handler that interrupted \
                 the preload inside a librdmacm or libibverbs call"
            ));
            return;
        }
        // The CQ and async counts first: their never-acked findings go into the tracker's
        // summary.
        let lines: Vec<String> = [CQS.at_exit(), ASYNCS.at_exit()]
            .into_iter()
            .flatten()
            .collect();
        let lines = (!lines.is_empty()).then(|| lines.concat());
        crate::cm::track::finish(lines);
    });
}

// Every lock is taken before the fork, so the child never inherits one held by a thread it does
// not have; a lock the forking thread is inside already (a fork from a signal handler that
// interrupted the preload) is left to that interrupted frame (fork_lock.rs). Nothing holds two
// of the preload's own at once; the tracker releases safe mode's copies into cmsafe's pool
// while it holds STATE, so the pool's lists come after it.
extern "C" fn before_fork() {
    WATCH.lock_for_fork();
    STATE.lock_for_fork();
    CQS.lock_for_fork();
    ASYNCS.lock_for_fork();
    crate::audit::sink::lock_for_fork();
    RING_PAGES.lock_for_fork();
    cmsafe_core::event::lock_for_fork();
    crate::sys::alloc::lock_for_fork();
}

extern "C" fn after_fork_parent() {
    crate::sys::alloc::unlock_after_fork();
    cmsafe_core::event::unlock_after_fork();
    RING_PAGES.unlock_after_fork();
    crate::audit::sink::unlock_after_fork();
    ASYNCS.unlock_after_fork();
    CQS.unlock_after_fork();
    STATE.unlock_after_fork();
    WATCH.unlock_after_fork();
}

/// The child's: each table forgets what is the parent's (its events, its watcher, its report)
/// as its lock is released, or at its next lock when the forking thread was inside it.
extern "C" fn after_fork_child() {
    crate::sys::alloc::unlock_after_fork();
    // A fork from a signal handler that interrupted the preload's allocator: what the tables
    // free at their reset waits for their next lock, after the interrupted frame left it.
    let later = crate::sys::alloc::held_here();
    crate::sys::this_thread::forget_id();
    crate::audit::report_file::after_fork_in_child();
    crate::cm::readers::after_fork_in_child();
    cmsafe_core::event::unlock_after_fork();
    RING_PAGES.unlock_after_fork();
    crate::audit::sink::after_fork_in_child(later);
    ASYNCS.after_fork_in_child(later);
    CQS.after_fork_in_child(later);
    STATE.after_fork_in_child(
        |s| {
            if let Some(s) = s.as_mut() {
                s.after_fork_in_child();
            }
        },
        later,
    );
    WATCH.after_fork_in_child(crate::cm::watch::reset_in_child, later);
}
