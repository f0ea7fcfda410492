//! Calls that can block forever inside librdmacm (rdma_destroy_id and rdma_migrate_id wait until
//! every event the kernel reported for the id is acked) are watched by a thread of ours. One
//! still blocked after CMSAFE_HANG_MS while the program holds no unacked event of that id is
//! waiting for an event nobody can ack: it gets a finding while it blocks, so no such hang goes
//! unnamed. (Unacked events the program holds are named before the call blocks: judge_wait.)
//!
//! The other call that can block forever is rdma_get_cm_event on a channel whose cm_ids were
//! all destroyed: the kernel drops a destroyed id's unread events, so a thread that saw an event
//! with poll(2) and reads it after another thread destroyed the id waits for good (rping's
//! cm_thread). At each tick the watcher also looks at the reads in progress (readers.rs): one on
//! such a channel, no id made on it since, is followed while the watcher stays awake, and named
//! once it has blocked CMSAFE_HANG_MS. The destroy that emptied the channel woke the watcher (it
//! is a watched call), so a read that blocks right after it is seen at the next tick.
//!
//! The watcher costs nothing per event: it ticks (every CMSAFE_HANG_MS/2) only while calls are
//! being watched or begin, and parks after a tick in which none was, until the next watched
//! call wakes it (one futex(2) per burst of calls, none per call).

use std::time::Duration;

use crate::cm::track::{now_ns, with_state, Op, Wait};
use crate::sys::config::CONFIG;
use crate::sys::this_thread;
use crate::sys::whereis::Caller;
use cmsafe_core::fork_lock::{ForkSafeGuard, ForkSafeMutex};

/// A watched call in progress.
#[derive(Clone, Copy, Debug)]
struct Blocked {
    token: u64,
    wait: Wait,
    reported: bool,
}

pub struct Watch {
    calls: Vec<Blocked>,
    next_token: u64,
    /// This process's watcher thread was started. Cleared in a child after fork(2), which starts
    /// its own: the pthread_atfork handler says so, where asking getpid(2) at each watched call
    /// would be a system call raw librdmacm does not make. (A child made by a raw clone(2) runs
    /// no fork handler and keeps the parent's word: it has no watcher, and inherits the
    /// preload's locks as they were, which no preload survives.)
    started: bool,
    watcher: Option<std::thread::Thread>,
    /// The watcher is parked until a call to watch arrives.
    idle: bool,
    /// A call began since the watcher's last tick: it parks only after a whole tick without
    /// one, so a program that destroys ids steadily never pays a wake-up (futex(2)) per call.
    begun: bool,
}

pub static WATCH: ForkSafeMutex<Watch> = ForkSafeMutex::new(Watch {
    calls: Vec::new(),
    next_token: 1,
    started: false,
    watcher: None,
    idle: false,
    begun: false,
});

fn watch() -> ForkSafeGuard<'static, Watch> {
    WATCH.lock()
}

/// Starts watching `op` on `id`, called by the current thread from `caller`.
pub fn begin(op: Op, id: usize, channel: usize, caller: Caller) -> u64 {
    let mut w = watch();
    if !w.started {
        w.watcher = spawn_watcher();
        w.idle = false;
        w.started = w.watcher.is_some();
    } else if std::mem::take(&mut w.idle) {
        if let Some(t) = &w.watcher {
            t.unpark();
        }
    }
    w.begun = true;
    let token = w.next_token;
    w.next_token += 1;
    w.calls.push(Blocked {
        token,
        wait: Wait {
            op,
            id,
            channel,
            thread: this_thread::id(),
            start_ns: now_ns(),
            caller,
        },
        reported: false,
    });
    token
}

/// The call `token` returned.
pub fn end(token: u64) {
    watch().calls.retain(|b| b.token != token);
}

/// In a child after fork(2): only the forking thread exists there.
pub fn reset_in_child(w: &mut Watch) {
    w.calls.clear();
    w.started = false;
    w.watcher = None;
}

/// The watcher: a thread with every signal blocked (the program's signals are not for it).
fn spawn_watcher() -> Option<std::thread::Thread> {
    crate::sys::thread::spawn_blocked("cmsafe-watch", 256 * 1024, watcher)
}

/// A read in progress on a channel without ids, as the watcher follows it.
struct Stuck {
    slot: usize,
    channel: usize,
    thread: i32,
    at: usize,
    since_ns: u64,
    reported: bool,
}

/// The reads in progress on channels whose ids were all destroyed: `stuck` updated (those that
/// ended, or whose channel got an id, leave; new ones come with `now`), and those blocked
/// `hang_ns` named. True while one is followed and not yet named: the watcher stays awake.
fn follow_reads(stuck: &mut Vec<Stuck>, now: u64, hang_ns: u64) -> bool {
    let reads = crate::cm::readers::all();
    if reads.is_empty() && stuck.is_empty() {
        return false;
    }
    let mut emptied = Vec::new();
    crate::sys::quiet::run(|| {
        emptied = with_state(|s| {
            reads
                .iter()
                .copied()
                .filter(|r| s.channel_emptied(r.channel))
                .collect::<Vec<_>>()
        })
    });
    stuck.retain(|s| {
        emptied
            .iter()
            .any(|r| (r.slot, r.channel, r.thread) == (s.slot, s.channel, s.thread))
    });
    for r in emptied {
        if !stuck
            .iter()
            .any(|s| (s.slot, s.channel, s.thread) == (r.slot, r.channel, r.thread))
        {
            stuck.push(Stuck {
                slot: r.slot,
                channel: r.channel,
                thread: r.thread,
                at: r.at,
                since_ns: now,
                reported: false,
            });
        }
    }
    for s in stuck.iter_mut() {
        if !s.reported && now.saturating_sub(s.since_ns) >= hang_ns {
            s.reported = true;
            let waited_ms = now.saturating_sub(s.since_ns) / 1_000_000;
            let (channel, thread, at) = (s.channel, s.thread, s.at);
            crate::sys::quiet::run(|| {
                with_state(|st| st.report_read_without_ids(channel, thread, at, waited_ms))
            });
        }
    }
    stuck.iter().any(|s| !s.reported)
}

fn watcher() {
    let hang_ns = CONFIG.hang_ns;
    let tick = Duration::from_nanos((hang_ns / 2).clamp(10_000_000, 2_500_000_000));
    let mut stuck = Vec::new();
    loop {
        crate::sys::cancel::sleep(tick);
        let now = now_ns();
        let following = follow_reads(&mut stuck, now, hang_ns);
        let (due, idle) = {
            let mut w = watch();
            let mut due = Vec::new();
            for b in w.calls.iter_mut() {
                if !b.reported && now.saturating_sub(b.wait.start_ns) >= hang_ns {
                    b.reported = true;
                    due.push(b.wait);
                }
            }
            let begun = std::mem::take(&mut w.begun);
            w.idle = w.calls.is_empty() && !begun && !following;
            (due, w.idle)
        };
        for wait in due {
            let waited_ms = now.saturating_sub(wait.start_ns) / 1_000_000;
            crate::sys::quiet::run(|| {
                with_state(|s| {
                    if !s.holds_events_of(wait.id) {
                        s.report_lost_event(&wait, waited_ms);
                    }
                })
            });
        }
        if idle {
            // Until begin() clears `idle` and unparks (a stray wake-up only costs a tick).
            std::thread::park();
        }
    }
}
