//! userfaultfd(2) for audit's pages: an acked copy's page is emptied (its bytes kept aside), and
//! any read of it, by the program's code or by the kernel for a system call (write(2) of the
//! private data to a log, send(2) to a peer), waits for this module's thread, which names the
//! reader and fills the page again with the kept bytes. The read then returns what it returns
//! without the preload; a page closed by mprotect(2) would instead fail the system call with
//! EFAULT and be seen by no handler.
//!
//! The thread blocks every signal (the program's signals are not for it), takes no lock and
//! allocates nothing between a fault's message and its answer: the thread that faulted may hold
//! any lock (malloc's, a FILE's), and waits for the answer. A read by a system call is said on
//! stderr only after the answer: the call may hold the very pipe's or file's lock that our
//! write to stderr needs.
//!
//! The kernel gives it to root (CAP_SYS_PTRACE), or to anyone with `vm.unprivileged_userfaultfd
//! = 1`; otherwise, from Linux 5.11, for faults of the program's own code only
//! (UFFD_USER_MODE_ONLY): a system call's read then still fails, and that is said once at
//! start. Where even that is refused (older kernels, seccomp filters), audit closes pages with
//! mprotect and handles SIGSEGV instead (segv.rs).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::audit::faults::{self, Fault};

// linux/userfaultfd.h: the API, its one feature used here, the ioctls and the message.
const UFFD_API: u64 = 0xaa;
const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
const UFFD_FEATURE_EXACT_ADDRESS: u64 = 1 << 11;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_COPY: libc::c_ulong = 0xc028_aa03;
const UFFDIO_ZEROPAGE: libc::c_ulong = 0xc020_aa04;
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

#[repr(C)]
struct UffdioZeropage {
    range: Range,
    mode: u64,
    zeropage: i64,
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

/// The descriptor of this process, -1 before `open` (and in a forked child, until it opens its
/// own).
static FD: AtomicI32 = AtomicI32::new(-1);

/// Why userfaultfd cannot serve, as said on stderr.
pub struct Refused {
    pub errno: i32,
}

/// A descriptor for the `len` bytes at `start`, registered for missing pages, with the kernel's
/// API agreed: all faults where the kernel allows it, the program's own otherwise.
pub fn open(start: usize, len: usize) -> Result<Reach, Refused> {
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
        FD.store(fd, Ordering::Release);
        return Ok(reach);
    }
    Err(Refused { errno: last })
}

/// Starts the thread that answers faults with `answer` (pages.rs): the thread of the process
/// that opened the descriptor; false when it could not be started.
pub fn start(answer: fn(usize, i32) -> (Answer, Option<Fault>)) -> bool {
    crate::sys::thread::spawn_blocked("cmsafe-uffd", 128 * 1024, move || serve(answer)).is_some()
}

/// How a fault is answered.
pub enum Answer {
    /// Fill the page with these bytes: its acked copy, kept aside (the rest of the page zero).
    Fill(*const u8, usize),
    /// The page is there already (filled for another fault, or taken for a new event): wake.
    Wake,
    /// Not a page that ever held an event: zeros.
    Zero,
}

fn fd() -> i32 {
    FD.load(Ordering::Acquire)
}

/// The fault thread's loop: one message at a time, answered before anything is said. It ends
/// only with the process (or when its descriptor fails, which is said).
fn serve(answer: fn(usize, i32) -> (Answer, Option<Fault>)) {
    let fd = fd();
    let page = cmsafe_core::page::size();
    // One page of the fault's bytes, the rest zero: made once, never freed.
    let mut scratch = vec![0u8; page];
    loop {
        let mut msg = std::mem::MaybeUninit::<Msg>::zeroed();
        // SAFETY: a read of one message into our own buffer of its size.
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
        // when the program's own code read (the line then comes before anything the program
        // says next, as the SIGSEGV handler's does), after it when the kernel did: a system
        // call that reads the page may hold what our write to stderr needs (the pipe's or the
        // file's lock, when the program writes the very bytes to its stderr).
        let kernel = finding.as_ref().is_some_and(|f| f.syscall >= 0);
        if let Some(f) = &finding {
            faults::queue(*f);
            if !kernel {
                faults::say(f);
            }
        }
        match how {
            Answer::Fill(bytes, len) => {
                let len = len.min(page);
                // SAFETY: `bytes` holds `len` bytes (pages.rs keeps them until the page's next
                // seal, which cannot come before this answer: the page is not free).
                unsafe { std::ptr::copy_nonoverlapping(bytes, scratch.as_mut_ptr(), len) };
                fill(at, scratch.as_ptr(), page);
                scratch[..len].fill(0);
            }
            Answer::Wake => wake(at, page),
            Answer::Zero => zero(at, page),
        }
        if let Some(f) = finding.filter(|_| kernel) {
            faults::say(&f);
        }
    }
}

/// Maps fresh pages with `src`'s `len` bytes at `dst` (a multiple of the page size), waking the
/// threads that wait for them; a page already there is left as it is (and its waiters woken).
pub fn fill(dst: usize, src: *const u8, len: usize) {
    let page = cmsafe_core::page::size();
    let (mut at, end) = (dst, dst + len);
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
        if unsafe { libc::ioctl(fd(), UFFDIO_COPY, &mut copy) } == 0 {
            return;
        }
        if copy.copy > 0 {
            at += copy.copy as usize;
            continue;
        }
        match cmsafe_core::errno::get() {
            // A page there already: left as it is, its waiters woken.
            libc::EEXIST => {
                wake(at, page);
                at += page;
            }
            libc::EAGAIN if again > 0 => again -= 1,
            _ => {
                wake(at, end - at);
                return;
            }
        }
    }
}

fn zero(at: usize, len: usize) {
    let mut z = UffdioZeropage {
        range: Range {
            start: at as u64,
            len: len as u64,
        },
        mode: 0,
        zeropage: 0,
    };
    // SAFETY: our own registered range.
    if unsafe { libc::ioctl(fd(), UFFDIO_ZEROPAGE, &mut z) } != 0 {
        wake(at, len);
    }
}

fn wake(at: usize, len: usize) {
    let mut r = Range {
        start: at as u64,
        len: len as u64,
    };
    // SAFETY: our own registered range.
    unsafe { libc::ioctl(fd(), UFFDIO_WAKE, &mut r) };
}

/// In a child after fork(2): the descriptor is the parent's (its memory, not the child's, whose
/// pages are no longer registered), and the thread was not copied. Async-signal-safe.
pub fn after_fork_in_child() {
    let fd = FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: the child's copy of our own descriptor.
        crate::sys::cancel::uncancellable(|| unsafe { libc::close(fd) });
    }
}

/// The state of thread `tid` blocked on a fault: the system call it is in (-1 for none: its own
/// code faulted), its stack pointer and its instruction pointer, from /proc/self/task/TID/syscall
/// ("NR ARGS... SP PC", or "-1 SP PC"). No allocation: the thread may hold malloc's lock.
pub fn blocked_thread(tid: i32) -> (i64, usize, usize) {
    // The path, formatted into a buffer of its own (core's formatting allocates nothing).
    let mut path = match cmsafe_core::outfile::Path::new(b"") {
        Ok(p) => p,
        Err(_) => return (-1, 0, 0),
    };
    if write!(path, "/proc/self/task/{tid}/syscall").is_err() {
        return (-1, 0, 0);
    }
    let mut buf = [0u8; 256];
    // SAFETY: a NUL-terminated path of our own; a read into our own buffer; our descriptor. A
    // thread blocked on a fault is at no cancellation point of ours: this one, the fault
    // thread, is never cancelled.
    let n = unsafe {
        let fd = libc::open(path.as_c_str().as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return (-1, 0, 0);
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    if n <= 0 {
        return (-1, 0, 0);
    }
    parse_syscall(&buf[..n as usize])
}

/// "NR ARG1..ARG6 SP PC" or "-1 SP PC".
fn parse_syscall(text: &[u8]) -> (i64, usize, usize) {
    let mut fields = text
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty());
    let Some(nr) = fields.next().and_then(number) else {
        return (-1, 0, 0);
    };
    let rest: [Option<i64>; 8] = std::array::from_fn(|_| fields.next().and_then(number));
    let last = rest.iter().rposition(Option::is_some);
    match last {
        Some(i) if i >= 1 => (
            nr,
            rest[i - 1].unwrap_or(0) as usize,
            rest[i].unwrap_or(0) as usize,
        ),
        _ => (-1, 0, 0),
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
        assert_eq!(parse_syscall(b"running\n"), (-1, 0, 0));
        assert_eq!(parse_syscall(b""), (-1, 0, 0));
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
        let mut seen = (-1, 0, 0);
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
