//! userfaultfd(2) for audit's pages: an acked copy's page is emptied (its bytes kept aside), and
//! any read of it, by the program's code or by the kernel for a system call (write(2) of the
//! private data to a log, send(2) to a peer), waits for this module's thread, which names the
//! reader and fills the page again with the kept bytes. The read then returns what it returns
//! without the preload; a page closed by mprotect(2) would instead fail the system call with
//! EFAULT and be seen by no handler.
//!
//! The descriptor is the fault thread's alone: the thread unshares its descriptor table
//! (unshare(2), CLONE_FILES), keeps nothing in it but the descriptor and a pidfd of its process,
//! and the descriptor is then closed in the program's table. So a program that closes every
//! descriptor it did not open (close_range(2), a daemon's start), sets them all O_NONBLOCK, or
//! forks without running fork handlers (_Fork(3), clone(2)) can neither end the thread, nor
//! have it read the program's own files, nor work the parent's memory from a child. Free pages
//! are filled on their first touch, a run at a time: the ring reads the first page of each run
//! it opens, and the thread fills the run (pages.rs, `first_touch`).
//!
//! The thread blocks every signal (the program's signals are not for it), takes no lock and
//! allocates nothing between a fault's message and its answer: the thread that faulted may hold
//! any lock (malloc's, a FILE's), and waits for the answer. A read by a system call, or by a
//! thread whose state cannot be read (/proc unmounted, privileges dropped), is said on stderr
//! only after the answer: the call may hold the very pipe's or file's lock that our write to
//! stderr needs. The thread writes its lines to the program's stderr as it is at that moment
//! (pidfd_getfd(2)).
//!
//! The kernel gives it to root (CAP_SYS_PTRACE), or to anyone with `vm.unprivileged_userfaultfd
//! = 1`; otherwise, from Linux 5.11, for faults of the program's own code only
//! (UFFD_USER_MODE_ONLY): a system call's read then still fails, and that is said once at
//! start. Where even that is refused (older kernels, seccomp filters), audit closes pages with
//! mprotect and handles SIGSEGV instead (segv.rs).

use std::fmt::Write as _;

use crate::audit::faults::{self, Fault};

// linux/userfaultfd.h: the API, its one feature used here, the ioctls and the message.
const UFFD_API: u64 = 0xaa;
const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
const UFFD_FEATURE_EXACT_ADDRESS: u64 = 1 << 11;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_COPY: libc::c_ulong = 0xc028_aa03;
const UFFDIO_WAKE: libc::c_ulong = 0x8010_aa02;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Range {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: Range,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

/// struct uffd_msg, as a page fault's: the event, then (at 8) flags, address, thread id.
#[repr(C)]
struct Msg {
    event: u8,
    _reserved: [u8; 7],
    flags: u64,
    address: u64,
    ptid: u32,
    _pad: u32,
}

/// What the kernel granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Faults of the program's code and of the kernel's, for its system calls.
    All,
    /// Faults of the program's code only (UFFD_USER_MODE_ONLY).
    UserOnly,
}

/// Why userfaultfd cannot serve, as said on stderr.
pub struct Refused {
    pub errno: i32,
}

/// A descriptor for the `len` bytes at `start`, registered for missing pages, with the kernel's
/// API agreed: all faults where the kernel allows it, the program's own otherwise.
pub fn open(start: usize, len: usize) -> Result<(Reach, i32), Refused> {
    let mut last = 0;
    // The exact address of a fault (Linux 5.18 and later) names the byte read; before, the
    // page's first.
    for (flags, reach, features) in [
        (0, Reach::All, UFFD_FEATURE_EXACT_ADDRESS),
        (0, Reach::All, 0),
        (
            UFFD_USER_MODE_ONLY,
            Reach::UserOnly,
            UFFD_FEATURE_EXACT_ADDRESS,
        ),
        (UFFD_USER_MODE_ONLY, Reach::UserOnly, 0),
    ] {
        // SAFETY: userfaultfd(2) with flags only.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | flags) } as i32;
        if fd < 0 {
            last = cmsafe_core::errno::get();
            continue;
        }
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_THREAD_ID | features,
            ioctls: 0,
        };
        let mut reg = UffdioRegister {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_MISSING,
            ioctls: 0,
        };
        // SAFETY: the ioctls of our own descriptor, with their structures.
        let ok = unsafe {
            libc::ioctl(fd, UFFDIO_API, &mut api) == 0
                && libc::ioctl(fd, UFFDIO_REGISTER, &mut reg) == 0
        };
        if !ok {
            last = cmsafe_core::errno::get();
            // SAFETY: our own descriptor.
            crate::sys::cancel::uncancellable(|| unsafe { libc::close(fd) });
            continue;
        }
        return Ok((reach, fd));
    }
    Err(Refused { errno: last })
}

/// Starts the thread that answers the faults of descriptor `fd` (from `open`) with `answer`
/// (pages.rs), and hands `fd` over to it: on success the descriptor is closed in the program's
/// table, and lives on in the thread's alone. False when the thread could not be started or
/// could not make its table its own (the descriptor is the caller's to close then).
pub fn start(fd: i32, answer: fn(usize, i32) -> (Answer, Option<Fault>)) -> bool {
    let (ready, taken) = std::sync::mpsc::sync_channel::<bool>(1);
    let spawned = crate::sys::thread::spawn_blocked("cmsafe-uffd", 128 * 1024, move || {
        if let Some(own) = Own::table(fd) {
            let _ = ready.send(true);
            serve(own, answer);
        } else {
            let _ = ready.send(false);
        }
    });
    if spawned.is_none() || taken.recv() != Ok(true) {
        return false;
    }
    // SAFETY: our descriptor, whose copy the thread keeps in its own table.
    crate::sys::cancel::uncancellable(|| unsafe { libc::close(fd) });
    true
}

/// The fault thread's own descriptors, in a table of its own.
struct Own {
    uffd: i32,
    /// A pidfd of this process, for its current stderr (-1: none to be had).
    pidfd: i32,
}

impl Own {
    /// Makes the calling thread's descriptor table its own and closes in it everything but
    /// `uffd` and a new pidfd of the process; None when the table cannot be unshared.
    fn table(uffd: i32) -> Option<Own> {
        // SAFETY: unshare(2) of this thread's descriptor table, a copy of the process's.
        if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
            return None;
        }
        // SAFETY: pidfd_open(2) of our own process, no flags.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
        let (low, high) = (uffd.min(pidfd.max(-1)), uffd.max(pidfd));
        let keep: &[i32] = if pidfd < 0 { &[uffd] } else { &[low, high] };
        close_all_but(keep);
        Some(Own { uffd, pidfd })
    }

    /// Writes `line` to the process's stderr as it is now, if that is still the file it started
    /// with (cmsafe_core::stderr's rule), without blocking.
    fn say(&self, f: &Fault) {
        if self.pidfd < 0 {
            return;
        }
        // SAFETY: pidfd_getfd(2) of the process's fd 2 into this thread's own table.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.pidfd, 2, 0) } as i32;
        if fd < 0 {
            return;
        }
        faults::say_on(f, fd);
        // SAFETY: the copy we just got, in our own table.
        unsafe { libc::close(fd) };
    }
}

/// Closes every descriptor of the calling thread's table but those in `keep` (ascending).
fn close_all_but(keep: &[i32]) {
    let mut from: u32 = 0;
    for &k in keep {
        if k as u32 > from {
            close_range(from, k as u32 - 1);
        }
        from = k as u32 + 1;
    }
    close_range(from, u32::MAX);
}

fn close_range(first: u32, last: u32) {
    // SAFETY: close_range(2) of our own table's descriptors, no flags.
    if unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) } == 0 {
        return;
    }
    // Before Linux 5.9: one by one, up to the table's size.
    // SAFETY: sysconf has no preconditions.
    let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(0, 1 << 20) as u32;
    for fd in first..=last.min(max) {
        // SAFETY: a descriptor of this thread's own table.
        unsafe { libc::close(fd as i32) };
    }
}

/// How a fault is answered.
pub enum Answer {
    /// Fill the page with these bytes: its acked copy, kept aside (the rest of the page zero).
    Fill(*const u8, usize),
    /// The page is there already (filled for another fault, or taken for a new event): wake.
    Wake,
    /// A free page or a page just taken for a new event, touched first: these `len` bytes of
    /// zeros (the page and the free ones after it, a run the ring takes next) from `src`.
    Zeros(*const u8, usize),
}

/// The fault thread's loop: one message at a time, answered before anything is said. It ends
/// only with the process.
fn serve(own: Own, answer: fn(usize, i32) -> (Answer, Option<Fault>)) {
    let fd = own.uffd;
    let page = cmsafe_core::page::size();
    // One page of the fault's bytes, the rest zero: made once, never freed.
    let mut scratch = vec![0u8; page];
    loop {
        let mut msg = std::mem::MaybeUninit::<Msg>::zeroed();
        // SAFETY: a read of one message into our own buffer of its size, from our descriptor,
        // which no other table holds (it stays blocking).
        let n = unsafe { libc::read(fd, msg.as_mut_ptr().cast(), std::mem::size_of::<Msg>()) };
        if n < 0 && cmsafe_core::errno::get() == libc::EINTR {
            continue;
        }
        if n != std::mem::size_of::<Msg>() as isize {
            crate::sys::cancel::say_err!(
                "==cmsafe== userfaultfd: reading a fault failed ({}): reads after an ack are no \
                 longer caught",
                std::io::Error::last_os_error()
            );
            return;
        }
        // SAFETY: the kernel wrote a whole message.
        let msg = unsafe { msg.assume_init() };
        if msg.event != UFFD_EVENT_PAGEFAULT {
            continue;
        }
        let at = msg.address as usize & !(page - 1);
        let (how, finding) = answer(msg.address as usize, msg.ptid as i32);
        // Queued before the answer, so that the reader's next call finds it; said before it too
        // when the program's own code read, as known from /proc (the line then comes before
        // anything the program says next, as the SIGSEGV handler's does), after it when the
        // kernel did or nothing is known: a system call that reads the page may hold what our
        // write to stderr needs (the pipe's or the file's lock, when the program writes the
        // very bytes to its stderr).
        let before = finding.as_ref().is_some_and(|f| f.syscall == faults::USER);
        if let Some(f) = &finding {
            faults::queue(*f);
            if before {
                own.say(f);
            }
        }
        match how {
            Answer::Fill(bytes, len) => {
                let len = len.min(page);
                // SAFETY: `bytes` holds `len` bytes (pages.rs keeps them until the page's next
                // seal, which cannot come before this answer: the page is not free).
                unsafe { std::ptr::copy_nonoverlapping(bytes, scratch.as_mut_ptr(), len) };
                fill(fd, at, scratch.as_ptr(), page);
                scratch[..len].fill(0);
            }
            Answer::Wake => wake(fd, at, page),
            Answer::Zeros(src, len) => fill(fd, at, src, len),
        }
        if let Some(f) = finding.filter(|_| !before) {
            own.say(&f);
        }
    }
}

/// Maps fresh pages with `src`'s `len` bytes at `dst` (a multiple of the page size), waking the
/// threads that wait for them; a page already there is left as it is (and its waiters woken).
fn fill(fd: i32, dst: usize, src: *const u8, len: usize) {
    let page = cmsafe_core::page::size();
    let (mut at, mut end) = (dst, dst + len);
    // EAGAIN (the mapping changing meanwhile) is tried again, a few times.
    let mut again = 16;
    while at < end {
        let mut copy = UffdioCopy {
            dst: at as u64,
            src: src as u64 + (at - dst) as u64,
            len: (end - at) as u64,
            mode: 0,
            copy: 0,
        };
        // SAFETY: a copy into our own registered range from our own readable buffer.
        if unsafe { libc::ioctl(fd, UFFDIO_COPY, &mut copy) } == 0 {
            return;
        }
        if copy.copy > 0 {
            at += copy.copy as usize;
            continue;
        }
        match cmsafe_core::errno::get() {
            // A page there already: left as it is, its waiters woken.
            libc::EEXIST => {
                wake(fd, at, page);
                at += page;
            }
            libc::EAGAIN if again > 0 => again -= 1,
            // A run that reaches pages not yet made accessible (another mapping: ENOENT): the
            // faulting page alone, which is.
            _ if end - at > page => end = at + page,
            _ => {
                wake(fd, at, end - at);
                return;
            }
        }
    }
}

fn wake(fd: i32, at: usize, len: usize) {
    let mut r = Range {
        start: at as u64,
        len: len as u64,
    };
    // SAFETY: our own registered range.
    unsafe { libc::ioctl(fd, UFFDIO_WAKE, &mut r) };
}

/// The state of thread `tid` blocked on a fault: the system call it is in (`faults::USER` for
/// none: its own code faulted; `faults::UNKNOWN` when it cannot be read), its stack pointer and
/// its instruction pointer, from /proc/self/task/TID/syscall
/// ("NR ARGS... SP PC", or "-1 SP PC"). No allocation: the thread may hold malloc's lock.
pub fn blocked_thread(tid: i32) -> (i64, usize, usize) {
    // The path, formatted into a buffer of its own (core's formatting allocates nothing).
    let mut path = match cmsafe_core::outfile::Path::new(b"") {
        Ok(p) => p,
        Err(_) => return (faults::UNKNOWN, 0, 0),
    };
    if write!(path, "/proc/self/task/{tid}/syscall").is_err() {
        return (faults::UNKNOWN, 0, 0);
    }
    let mut buf = [0u8; 256];
    // SAFETY: a NUL-terminated path of our own; a read into our own buffer; our descriptor. A
    // thread blocked on a fault is at no cancellation point of ours: this one, the fault
    // thread, is never cancelled.
    let n = unsafe {
        let fd = libc::open(path.as_c_str().as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return (faults::UNKNOWN, 0, 0);
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    if n <= 0 {
        return (faults::UNKNOWN, 0, 0);
    }
    parse_syscall(&buf[..n as usize])
}

/// "NR ARG1..ARG6 SP PC" or "-1 SP PC".
fn parse_syscall(text: &[u8]) -> (i64, usize, usize) {
    let mut fields = text
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty());
    let Some(nr) = fields.next().and_then(number) else {
        return (faults::UNKNOWN, 0, 0);
    };
    let rest: [Option<i64>; 8] = std::array::from_fn(|_| fields.next().and_then(number));
    let last = rest.iter().rposition(Option::is_some);
    match last {
        Some(i) if i >= 1 => (
            nr,
            rest[i - 1].unwrap_or(0) as usize,
            rest[i].unwrap_or(0) as usize,
        ),
        _ => (faults::UNKNOWN, 0, 0),
    }
}

/// A decimal (maybe negative) or 0x-hexadecimal number.
fn number(f: &[u8]) -> Option<i64> {
    if let Some(hex) = f.strip_prefix(b"0x") {
        let mut v: u64 = 0;
        for &c in hex {
            v = v.checked_mul(16)? + (c as char).to_digit(16)? as u64;
        }
        return Some(v as i64);
    }
    let (neg, digits) = match f.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, f),
    };
    let mut v: i64 = 0;
    for &c in digits {
        v = v.checked_mul(10)? + (c as char).to_digit(10)? as i64;
    }
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_lines_give_the_call_and_the_registers() {
        assert_eq!(
            parse_syscall(b"1 0x3 0x7f00 0x10 0x0 0x0 0x0 0x7ffd1000 0x401234\n"),
            (1, 0x7ffd_1000, 0x40_1234)
        );
        assert_eq!(
            parse_syscall(b"-1 0x7ffd2000 0x402000\n"),
            (-1, 0x7ffd_2000, 0x40_2000)
        );
        assert_eq!(parse_syscall(b"running\n"), (faults::UNKNOWN, 0, 0));
        assert_eq!(parse_syscall(b""), (faults::UNKNOWN, 0, 0));
    }

    #[test]
    fn a_thread_in_a_system_call_is_seen_in_it() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (p0, p1) = {
            let mut p = [0; 2];
            // SAFETY: a valid array for pipe(2).
            assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
            (p[0], p[1])
        };
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let mut b = [0u8; 1];
            // SAFETY: a read of our pipe into our buffer: blocks until the test writes.
            unsafe { libc::read(p0, b.as_mut_ptr().cast(), 1) };
        });
        let tid = rx.recv().unwrap();
        let mut seen = (faults::UNKNOWN, 0, 0);
        for _ in 0..200 {
            seen = blocked_thread(tid);
            if seen.0 == libc::SYS_read {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: a write to our pipe.
        unsafe { libc::write(p1, b"x".as_ptr().cast(), 1) };
        t.join().unwrap();
        assert_eq!(seen.0, libc::SYS_read, "{seen:?}");
        assert_ne!(seen.1, 0, "its stack pointer");
        assert_ne!(seen.2, 0, "its instruction pointer");
    }
}
