//! The threads inside librdmacm's rdma_get_cm_event, by event channel, readable without the
//! tracker's lock: the hang watcher looks, at each of its ticks, for one blocked on a channel
//! whose cm_ids were all destroyed (watch.rs). Such a read never returns: the kernel drops a destroyed id's unread events, so a
//! thread that polled the channel's fd, saw an event and then called rdma_get_cm_event waits
//! forever when another thread destroyed the id in between (rping's cm_thread against its main
//! thread's rdma_destroy_id).
//!
//! A fixed table of slots, claimed with one compare-and-swap per event and given back with one
//! store: no lock, no system call, nothing allocated. When every slot is taken (more threads
//! reading at once than slots), a read is not tracked.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// Reads tracked at once.
const SLOTS: usize = 64;

struct Slot {
    /// The channel read (0: a free slot).
    channel: AtomicUsize,
    /// The reading thread (0 until the claimer wrote it).
    thread: AtomicI32,
    /// The program's return address of the call.
    at: AtomicUsize,
}

static READERS: [Slot; SLOTS] = [const {
    Slot {
        channel: AtomicUsize::new(0),
        thread: AtomicI32::new(0),
        at: AtomicUsize::new(0),
    }
}; SLOTS];

/// A read in progress, for [`leave`] ([`NONE`]: not tracked).
pub type Token = usize;
pub const NONE: Token = SLOTS;

/// The calling thread (`thread`) begins reading `channel`, called from `at`.
#[inline]
pub fn enter(channel: usize, thread: i32, at: usize) -> Token {
    if channel == 0 {
        return NONE;
    }
    for (i, s) in READERS.iter().enumerate() {
        if s.channel.load(Ordering::Relaxed) == 0
            && s.channel
                .compare_exchange(0, channel, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            s.at.store(at, Ordering::Relaxed);
            s.thread.store(thread, Ordering::Release);
            return i;
        }
    }
    NONE
}

/// The read `token` ended (returned, failed, or was cancelled).
#[inline]
pub fn leave(token: Token) {
    if let Some(s) = READERS.get(token) {
        s.thread.store(0, Ordering::Relaxed);
        s.channel.store(0, Ordering::Release);
    }
}

/// Every read in progress: (slot, channel, thread, return address).
pub fn all() -> Vec<(usize, usize, i32, usize)> {
    READERS
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (
                i,
                s.channel.load(Ordering::Acquire),
                s.thread.load(Ordering::Acquire),
                s.at.load(Ordering::Relaxed),
            )
        })
        .filter(|&(_, c, t, _)| c != 0 && t != 0)
        .collect()
}

/// In a child after fork(2): only the forking thread exists there, and it is reading nothing.
pub fn after_fork_in_child() {
    for s in READERS.iter() {
        s.thread.store(0, Ordering::Relaxed);
        s.channel.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads reading `channel` now, each with the return address of its call.
    fn on(channel: usize) -> Vec<(i32, usize)> {
        all()
            .into_iter()
            .filter(|&(_, c, _, _)| c == channel)
            .map(|(_, _, t, at)| (t, at))
            .collect()
    }

    #[test]
    fn a_read_is_seen_on_its_channel_until_it_leaves() {
        // Channels of this test's own: tests run in parallel on the one table.
        let (a, b) = (0x7a00_0010, 0x7a00_0020);
        let t1 = enter(a, 101, 0x1001);
        let t2 = enter(a, 102, 0x1002);
        let t3 = enter(b, 103, 0x1003);
        assert!(t1 != NONE && t2 != NONE && t3 != NONE);
        let mut on_a = on(a);
        on_a.sort();
        assert_eq!(on_a, [(101, 0x1001), (102, 0x1002)]);
        leave(t1);
        assert_eq!(on(a), [(102, 0x1002)]);
        leave(t2);
        leave(t3);
        assert!(on(a).is_empty() && on(b).is_empty());
        assert_eq!(enter(0, 104, 0), NONE, "no channel, nothing tracked");
        leave(NONE);
    }
}
