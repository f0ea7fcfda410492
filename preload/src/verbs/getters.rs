//! The threads that got an object's events (completion or async), for findings, and the grace a
//! destroy gives those threads to ack before it is judged.

use crate::sys::this_thread;

/// Getter threads remembered per object (the first ones; more are counted only).
pub const THREADS: usize = 4;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Getters {
    ids: [i32; THREADS],
    n: usize,
    more: bool,
}

impl Getters {
    /// `ids` as the getters, in order (tests).
    #[cfg(test)]
    pub fn of(ids: &[i32]) -> Self {
        let mut g = Getters::default();
        ids.iter().for_each(|&t| g.add(t));
        g
    }

    pub fn add(&mut self, t: i32) {
        if self.ids[..self.n].contains(&t) {
            return;
        }
        if self.n < THREADS {
            self.ids[self.n] = t;
            self.n += 1;
        } else {
            self.more = true;
        }
    }

    /// The first thread that got one (0: none).
    pub fn first(&self) -> i32 {
        self.ids[0]
    }

    /// True when `t` got them all (tests).
    #[cfg(test)]
    pub fn only(&self, t: i32) -> bool {
        self.n == 1 && !self.more && self.ids[0] == t
    }

    /// Whether a thread other than `me` that got them may still ack them: one of those
    /// remembered is alive, or more threads got them than are remembered. A thread that exited
    /// never will, so a destroy need not give it CMSAFE_LATE_ACK_MS.
    pub fn others_may_ack(&self, me: i32) -> bool {
        self.more || self.ids[..self.n].iter().any(|&t| t != me && alive(t))
    }

    /// How many are remembered, and whether there were more (tests).
    #[cfg(test)]
    pub fn count(&self) -> (usize, bool) {
        (self.n, self.more)
    }

    /// "thread 12" / "threads 12, 13" / "threads 12, 13, 14, 15 and others", for messages.
    pub fn describe(&self) -> String {
        let known: Vec<String> = self.ids[..self.n].iter().map(|t| t.to_string()).collect();
        match (known.len(), self.more) {
            (0, _) => "no thread".to_string(),
            (1, false) => format!("thread {}", known[0]),
            (_, false) => format!("threads {}", known.join(", ")),
            (_, true) => format!("threads {} and others", known.join(", ")),
        }
    }
}

/// Whether thread `tid` of this process still runs (0: not known, taken as running).
fn alive(tid: i32) -> bool {
    if tid <= 0 {
        return true;
    }
    // SAFETY: tgkill with signal 0 sends nothing; it only looks the thread up in this process.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, 0) };
    rc == 0 || cmsafe_core::errno::get() != libc::ESRCH
}

/// What a destroy would wait for (`probe`), once threads other than the caller that got the
/// unacked events (`getters` of the issue, None when no thread owes an ack) had
/// CMSAFE_LATE_ACK_MS to ack them: an event thread may be finishing its handler, as CM events get.
/// Threads that exited are not waited for: the finding then comes at once, not after the grace.
pub fn settled<T>(
    probe: impl Fn() -> Option<T>,
    getters: impl Fn(&T) -> Option<Getters>,
) -> Option<T> {
    let me = this_thread::id();
    let may_ack = |issue: &Option<T>| {
        issue
            .as_ref()
            .and_then(&getters)
            .is_some_and(|g| g.others_may_ack(me))
    };
    crate::sys::wait::for_acks(probe(), may_ack, |_| probe()).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_described() {
        let mut g = Getters::default();
        assert_eq!(g.describe(), "no thread");
        g.add(7);
        g.add(7);
        assert!(g.only(7));
        assert_eq!(g.describe(), "thread 7");
        for t in 1..=10 {
            g.add(t);
        }
        assert_eq!(g.count(), (THREADS, true));
        assert_eq!(g.describe(), "threads 7, 1, 2, 3 and others");
        assert_eq!(Getters::of(&[7, 8]).describe(), "threads 7, 8");
    }

    #[test]
    fn only_a_running_other_thread_may_still_ack() {
        let me = this_thread::id();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tid_tx.send(this_thread::id()).unwrap();
            go_rx.recv().unwrap();
        });
        let other = tid_rx.recv().unwrap();
        assert!(Getters::of(&[other]).others_may_ack(me));
        assert!(Getters::of(&[me, other]).others_may_ack(me));
        assert!(
            !Getters::of(&[me]).others_may_ack(me),
            "the caller is not waited for"
        );
        go_tx.send(()).unwrap();
        t.join().unwrap();
        // A tid that names no thread of this process: our parent's (a process of its own, so
        // never a thread of ours). Not the joined thread's: pthread_join returns when the
        // kernel clears the tid as the thread lets go of its memory, before the thread is
        // unhashed, so tgkill can still find it for a moment; `alive` then says it runs and
        // the destroy waits its grace, a later finding but never a wrong one.
        let gone = std::os::unix::process::parent_id() as i32;
        assert!(!Getters::of(&[gone]).others_may_ack(me));
        assert!(!Getters::of(&[me, gone]).others_may_ack(me));
        // Getters beyond those remembered may still ack.
        let mut many = Getters::of(&[other]);
        (1..=THREADS as i32).for_each(|t| many.add(-t));
        assert!(many.others_may_ack(me));
    }
}
