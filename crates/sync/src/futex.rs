//! A 32-bit word threads can sleep on: futex(2) on Linux, or under loom a model of it.
//!
//! The model keeps what the lock relies on: a wait sleeps only if the word still holds the
//! expected value when checked under the model's lock, and a wake, which takes the same lock,
//! reaches every waiter that checked before it. So a wake-up the lock's protocol loses leaves a
//! thread asleep for good, which loom reports as a deadlock.

use crate::shim::AtomicU32;

/// Why a wait ended, when not by a wake-up or a changed word.
pub(crate) type Errno = i32;

pub(crate) struct Futex {
    pub(crate) word: AtomicU32,
    #[cfg(loom)]
    queue: loom::sync::Mutex<()>,
    #[cfg(loom)]
    wakeups: loom::sync::Condvar,
}

impl Futex {
    #[cfg(not(loom))]
    pub(crate) const fn new(value: u32) -> Self {
        Futex {
            word: AtomicU32::new(value),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new(value: u32) -> Self {
        Futex {
            word: AtomicU32::new(value),
            queue: loom::sync::Mutex::new(()),
            wakeups: loom::sync::Condvar::new(),
        }
    }

    /// Sleeps while the word holds `expected`, until woken, `deadline` (absolute
    /// CLOCK_MONOTONIC nanoseconds) or a signal. Ok on a wake-up or a changed word (also
    /// spuriously: callers check the word again); ETIMEDOUT or EINTR otherwise.
    #[cfg(not(loom))]
    pub(crate) fn wait(&self, expected: u32, deadline: Option<u64>) -> Result<(), Errno> {
        let ts = deadline.map(|ns| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: a valid futex word, a valid or NULL absolute timeout; FUTEX_WAIT_BITSET
        // without FUTEX_CLOCK_REALTIME measures the deadline on CLOCK_MONOTONIC (futex(2)).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
                std::ptr::null::<u32>(),
                libc::FUTEX_BITSET_MATCH_ANY,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => Ok(()),
            Some(e) => Err(e),
            None => Err(libc::EIO),
        }
    }

    /// Wakes one thread sleeping in `wait`, if any.
    #[cfg(not(loom))]
    pub(crate) fn wake_one(&self) {
        // SAFETY: a valid futex word; waking one waiter has no other effect.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            )
        };
    }

    /// Wakes every thread sleeping in `wait`.
    #[cfg(not(loom))]
    pub(crate) fn wake_all(&self) {
        // SAFETY: a valid futex word; waking its waiters has no other effect.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            )
        };
    }

    /// The model: no time passes in loom, so a wait with a deadline finds it passed (after the
    /// check of the word, as the kernel does), and no signal comes.
    #[cfg(loom)]
    pub(crate) fn wait(&self, expected: u32, deadline: Option<u64>) -> Result<(), Errno> {
        use crate::shim::Ordering;
        let queued = self.queue.lock().unwrap();
        // SeqCst: the kernel reads the word after a full barrier, under the lock a wake takes.
        if self.word.load(Ordering::SeqCst) != expected {
            return Ok(());
        }
        if deadline.is_some() {
            return Err(libc::ETIMEDOUT);
        }
        drop(self.wakeups.wait(queued).unwrap());
        Ok(())
    }

    #[cfg(loom)]
    pub(crate) fn wake_one(&self) {
        let _queued = self.queue.lock().unwrap();
        self.wakeups.notify_one();
    }

    #[cfg(loom)]
    pub(crate) fn wake_all(&self) {
        let _queued = self.queue.lock().unwrap();
        self.wakeups.notify_all();
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of the deadlines, for the unit tests.
#[cfg(all(test, not(loom)))]
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
