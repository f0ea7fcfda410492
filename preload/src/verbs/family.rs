//! One family's counts for the whole process (the CQs' completion events, the objects' async
//! events): made at first use, under a fork-safe lock, forgotten in a fork child, and read once
//! at exit for what was never acked. The two families differ only in their model; this is the
//! part they share.

use cmsafe_core::fork_lock::ForkSafeMutex;

use crate::audit::findings::Finding;
use crate::verbs::counted::Tally;

/// What a family says at exit.
pub trait AtExit {
    /// The summary's name for these events ("completion events", "async events").
    const EVENTS: &'static str;
    /// The totals, for the summary.
    fn tally(&self) -> &Tally;
    /// A never-acked finding per object with events got and never acked, none having named it.
    fn never_acked_findings(&self) -> Vec<Finding>;
}

/// The process's table of one family, `None` until the program first gets or acks one of its
/// events.
pub struct Family<T: 'static> {
    inner: ForkSafeMutex<Option<T>>,
}

impl<T: Default + AtExit + 'static> Family<T> {
    pub const fn new() -> Self {
        Family {
            inner: ForkSafeMutex::new(None),
        }
    }

    /// Runs `f` on the table, making it on first use. Never call a librdmacm or libibverbs
    /// function, or take the CM tracker's lock, inside `f`: this lock is held.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.inner.lock();
        f(guard.get_or_insert_with(T::default))
    }

    /// For the child's pthread_atfork handler, instead of `unlock_after_fork`: the parent's
    /// events are not the child's to ack.
    pub fn after_fork_in_child(&'static self, later: bool) {
        self.inner.after_fork_in_child(|t| *t = None, later);
    }

    /// For the pthread_atfork handlers (lifecycle.rs).
    pub fn lock_for_fork(&'static self) {
        self.inner.lock_for_fork();
    }

    pub fn unlock_after_fork(&'static self) {
        self.inner.unlock_after_fork();
    }

    /// Whether the calling thread is inside this lock (a signal handler that interrupted it).
    pub fn held_here(&self) -> bool {
        self.inner.held_here()
    }

    /// At exit: each never-acked finding said through the findings sink (after this lock is
    /// dropped: the two are never held together), and the summary's line on these events (None
    /// when none went through).
    pub fn at_exit(&self) -> Option<String> {
        let (findings, line) = {
            // None when exit(3) was called by a signal handler that interrupted this very
            // thread inside the lock: the counts are mid-update, and waiting would be forever.
            let guard = self.inner.lock_unless_held_here()?;
            let table = guard.as_ref()?;
            let line = table.tally().line(T::EVENTS)?;
            (table.never_acked_findings(), line)
        };
        for f in findings {
            crate::audit::sink::say(f);
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Events {
        tally: Tally,
    }

    impl AtExit for Events {
        const EVENTS: &'static str = "test events";
        fn tally(&self) -> &Tally {
            &self.tally
        }
        fn never_acked_findings(&self) -> Vec<Finding> {
            Vec::new()
        }
    }

    static EVENTS: Family<Events> = Family::new();

    #[test]
    fn made_at_first_use_and_forgotten_in_a_fork_child() {
        // Untouched: no table, no summary line.
        assert_eq!(EVENTS.at_exit(), None);
        EVENTS.with(|e| {
            e.tally.got = 3;
            e.tally.acked = 2;
        });
        assert_eq!(EVENTS.with(|e| e.tally.got), 3);
        assert_eq!(
            EVENTS.at_exit().as_deref(),
            Some("==cmsafe==   test events: 3 got, 2 acked\n")
        );
        EVENTS.lock_for_fork();
        EVENTS.after_fork_in_child(false);
        assert_eq!(EVENTS.at_exit(), None);
        assert_eq!(EVENTS.with(|e| e.tally.got), 0);
    }
}
