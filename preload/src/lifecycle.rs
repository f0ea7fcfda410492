//! Exit and fork: the summary is said at exit, and a child after fork(2) gets its own report.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

use cmsafe_sync::{Deadline, Latch};

use crate::audit::pages::RING_PAGES;
use crate::cm::track::STATE;
use crate::cm::watch::WATCH;
use crate::verbs::async_events::ASYNCS;
use crate::verbs::cq::CQS;

static REGISTER: Once = Once::new();

/// The summary at exit, done once `at_exit` has returned (or when it is never to run). A second
/// thread's exit(3) meanwhile waits for it in `after_summary`.
static SUMMARY: Latch = Latch::new();

/// The thread in `at_exit` (0: none yet): a signal handler that interrupts it and calls exit(3)
/// there must not wait for its own thread.
static SUMMARY_THREAD: AtomicI32 = AtomicI32::new(0);

/// How long a concurrent exit waits for the summary, in nanoseconds. Writing it takes
/// milliseconds (no write of ours blocks); one stuck longer (a lock of ours held by a thread
/// stopped in a signal handler that does not exit) is given up, and that exit goes on as it
/// would without us.
const SUMMARY_WAIT_NS: u64 = 1_000_000_000;

/// Run by the dynamic loader when the preload is loaded, before the program's main: which file
/// stderr is (our lines go to that one only: cmsafe_core::stderr), and the exit and fork
/// handlers. Registered this early, the exit handler runs after every one the program
/// registers (atexit runs them last in, first out), so the summary sees what the program's own
/// clean-up acked.
extern "C" fn at_load() {
    cmsafe_core::stderr::remember();
    // SAFETY: registering plain extern "C" functions with no arguments.
    unsafe {
        // after_summary first, so that it runs after at_exit (both from the preload's own
        // __cxa_finalize in _dl_fini, as handlers a shared object registers are). When two
        // threads call exit(3) at once (rping's CM thread does while its main thread returns),
        // glibc hands each handler to one of them, and the one that finds none left ends the
        // process: without a
        // handler of ours left to take, the second would cut the summary off.
        libc::atexit(after_summary);
        if libc::atexit(at_exit) != 0 {
            SUMMARY.done();
        }
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
    SUMMARY_THREAD.store(crate::sys::this_thread::id(), Ordering::Relaxed);
    summary();
    SUMMARY.done();
}

/// The last exit handler of ours: a thread that calls exit(3) while another writes the summary
/// gets here and waits for it, up to SUMMARY_WAIT_NS. Alone, the summary is done by now.
extern "C" fn after_summary() {
    crate::sys::quiet::run(|| {
        // Not when this thread is inside a lock of ours (a signal handler that interrupted a
        // wrapper called exit): the summary may be waiting for that very lock.
        if SUMMARY.is_done()
            || SUMMARY_THREAD.load(Ordering::Relaxed) == crate::sys::this_thread::id()
            || inside_a_lock()
        {
            return;
        }
        let deadline = cmsafe_core::clock::monotonic_ns() + SUMMARY_WAIT_NS;
        // A signal's handler ran: wait on for what is left.
        while SUMMARY.wait(Deadline::At(deadline)) == Err(libc::EINTR) {}
    });
}

/// Whether this thread is inside one of the preload's locks: exit(3) from a signal handler that
/// interrupted a wrapper.
fn inside_a_lock() -> bool {
    STATE.held_here()
        || CQS.held_here()
        || ASYNCS.held_here()
        || WATCH.held_here()
        || crate::audit::sink::held_here()
        || crate::sys::alloc::held_here()
}

fn summary() {
    crate::sys::quiet::run(|| {
        // exit(3) called by a signal handler that interrupted this very thread inside one of
        // the preload's locks (a service's SIGTERM handler that exits): the tables are
        // mid-update and their locks are this thread's own, so waiting would be forever. The
        // summary is left out, and said to be.
        if inside_a_lock() {
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
    // Forked while another thread wrote the summary: the child's exit has no at_exit left to
    // run, so nothing of it is to wait for.
    if SUMMARY_THREAD.load(Ordering::Relaxed) != 0 {
        SUMMARY.done();
    }
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
