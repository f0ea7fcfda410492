//! The threads inside librdmacm's rdma_get_cm_event, by event channel, readable without the
//! tracker's lock: the hang watcher looks, at each of its ticks, for one blocked on a channel
//! whose cm_ids were all destroyed (watch.rs). Such a read never returns: the kernel drops a
//! destroyed id's unread events, so a thread that polled the channel's fd, saw an event and
//! then called rdma_get_cm_event waits forever when another thread destroyed the id in between
//! (rping's cm_thread against its main thread's rdma_destroy_id).
//!
//! The table is cmsafe-sync's `ReadTable` (loom-checked there): one compare-and-swap and three
//! stores per read, no lock, no system call, nothing allocated. When every slot is taken (more
//! threads reading at once than slots), a read is not tracked.

use cmsafe_sync::read_table::{Read, ReadTable};

pub use cmsafe_sync::read_table::Token;

/// Reads tracked at once.
const SLOTS: usize = 64;

static READERS: ReadTable<SLOTS> = ReadTable::new();

/// The calling thread (`thread`) begins reading `channel`, called from `at`.
#[inline]
pub fn enter(channel: usize, thread: i32, at: usize) -> Token {
    READERS.enter(channel, thread, at)
}

/// The read `token` ended (returned, failed, or was cancelled).
#[inline]
pub fn leave(token: Token) {
    READERS.leave(token)
}

/// Every read in progress, each read whole.
pub fn all() -> Vec<Read> {
    READERS.snapshot().collect()
}

/// In a child after fork(2): only the forking thread exists there, and it is reading nothing.
pub fn after_fork_in_child() {
    READERS.clear()
}
