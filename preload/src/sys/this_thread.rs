//! What the preload keeps of the calling thread, in one thread-local (one look-up on the path
//! of an event): its id, and whether it left an rdma_get_cm_event by a longjmp.

use std::cell::Cell;

struct ThisThread {
    /// gettid(2) is a system call each time in glibc: asked once per thread (0: not yet).
    id: Cell<i32>,
    /// glibc ran our cleanup record of an rdma_get_cm_event this thread was in: a cancellation
    /// (the thread is ending) or a longjmp out of a signal handler (it goes on, and its next
    /// rdma_get_cm_event tells which: `id_and_left_read`).
    left_read: Cell<bool>,
}

thread_local! {
    static THIS: ThisThread = const {
        ThisThread {
            id: Cell::new(0),
            left_read: Cell::new(false),
        }
    };
}

fn id_of(t: &ThisThread) -> i32 {
    if t.id.get() == 0 {
        // SAFETY: gettid has no preconditions.
        t.id.set(unsafe { libc::gettid() });
    }
    t.id.get()
}

/// The calling thread's id, as ps and gdb show it.
pub fn id() -> i32 {
    THIS.with(id_of)
}

/// The calling thread's id, and whether it left an rdma_get_cm_event without returning since
/// the last call (the flag is cleared): for the start of the next one.
#[inline]
pub fn id_and_left_read() -> (i32, bool) {
    THIS.with(|t| (id_of(t), t.left_read.replace(false)))
}

/// Notes that the calling thread leaves an rdma_get_cm_event without returning (from glibc's
/// cleanup record). Async-signal-safe: a thread-local store.
pub fn note_left_read() {
    THIS.with(|t| t.left_read.set(true));
}

/// In a child after fork(2): the one thread there has a new id.
pub fn forget_id() {
    THIS.with(|t| t.id.set(0));
}
