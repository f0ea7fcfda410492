//! Audit mode's fault queue: the reads after the ack that the SIGSEGV handler found on our
//! pages (pages.rs), each said on stderr at once and queued, to be turned into findings by the
//! tracker at any thread's next wrapped call.

use cmsafe_core::cm::rdma_cm_event_type;
use cmsafe_sync::page_state::Occupant;
use cmsafe_sync::signal_queue::SignalQueue;

/// A use-after-ack seen by the signal handler or the userfaultfd thread (pages.rs), waiting to
/// be turned into a finding.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub seq: u64,
    pub event_type: u32,
    pub id: usize,
    pub code_addr: usize,
    pub data_addr: usize,
    pub thread: i32,
    /// The system call whose kernel code read the memory (its number), or `USER` (the
    /// program's own code read it), or `UNKNOWN` (the thread's state could not be read).
    pub syscall: i64,
    /// Where the faulting code returns to when that is in a register (aarch64's x30), else 0.
    pub link: usize,
    /// The words at the faulting code's stack pointer and up (zeros past what could be read):
    /// return addresses among them name the program's frame when the faulting instruction is
    /// in a library (memcpy, strlen, printf, a system call's wrapper...). Copied, not unwound:
    /// the unwinder may take locks the interrupted thread holds.
    pub stack: [usize; STACK],
}

pub const STACK: usize = 48;

/// `Fault::syscall` of a read by the program's own code.
pub const USER: i64 = -1;
/// `Fault::syscall` when the fault thread could not read the reader's state (/proc not
/// mounted, privileges dropped, no descriptor left): a system call's read, perhaps.
pub const UNKNOWN: i64 = -2;

/// The faulting code's registers that a finding names it by.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context {
    pub code: usize,
    pub sp: usize,
    pub link: usize,
}

impl Context {
    /// From a SA_SIGINFO handler's third argument, the interrupted ucontext.
    pub fn of_signal(ctx: *mut libc::c_void) -> Context {
        if ctx.is_null() {
            return Context::default();
        }
        // SAFETY: for SA_SIGINFO handlers the third argument is the interrupted ucontext.
        let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
        #[cfg(target_arch = "x86_64")]
        let at = Context {
            code: uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize,
            sp: uc.uc_mcontext.gregs[libc::REG_RSP as usize] as usize,
            link: 0,
        };
        #[cfg(target_arch = "aarch64")]
        let at = Context {
            code: uc.uc_mcontext.pc as usize,
            sp: uc.uc_mcontext.sp as usize,
            link: uc.uc_mcontext.regs[30] as usize,
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let at = {
            let _ = uc;
            Context::default()
        };
        at
    }
}

/// Whether the stack may be copied (process_vm_readv(2)): not under a seccomp filter, which may
/// kill the process at a call it does not list. Set before the SIGSEGV handler is installed.
static STACK_COPY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// No stack copies from now on (a seccomp filter is in force).
pub fn no_stack_copies() {
    STACK_COPY.store(false, std::sync::atomic::Ordering::Relaxed);
}

/// What the preload must say once, from wherever it is found, and cannot say where it is
/// found (under a lock): said by the next delivery of findings (sink.rs).
#[derive(Clone, Copy, Debug)]
pub enum Notice {
    /// madvise(MADV_DONTNEED) refused (its errno; mlockall(2) locks pages): pages are closed
    /// by mprotect from then on.
    NoDontneed(i32),
    /// audit's pages could not be reserved (mmap's errno; RLIMIT_AS): events are handed out
    /// unguarded.
    NoPages(i32),
}

/// Notices set, each once: bit 0 NoDontneed, bit 1 NoPages; their errnos beside.
static NOTICES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static NOTICE_ERRNO: [std::sync::atomic::AtomicI32; 2] =
    [const { std::sync::atomic::AtomicI32::new(0) }; 2];
/// A notice set since the last `take_notices`: `deliver` runs only when one may
/// be unsaid (or a finding waits), so the calls with nothing to say skip it.
static NOTICES_UNSAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Notes `n`, once. Lock-free.
pub fn notice(n: Notice) {
    use std::sync::atomic::Ordering;
    let (bit, errno) = match n {
        Notice::NoDontneed(e) => (0, e),
        Notice::NoPages(e) => (1, e),
    };
    if NOTICES.load(Ordering::Relaxed) & (1 << bit) == 0 {
        NOTICE_ERRNO[bit].store(errno, Ordering::Relaxed);
        // Release: the errno is written before the bit is seen.
        NOTICES.fetch_or(1 << bit, Ordering::Release);
        NOTICES_UNSAID.store(true, Ordering::Release);
    }
}

/// Whether a notice was set that may not be said yet (one load).
#[inline]
pub fn notices_pending() -> bool {
    NOTICES.load(std::sync::atomic::Ordering::Relaxed) != 0
        && NOTICES_UNSAID.load(std::sync::atomic::Ordering::Relaxed)
}

/// The notices not said yet, as lines (each said once). One load when there are none.
pub fn take_notices() -> Option<String> {
    use std::sync::atomic::Ordering;
    static SAID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NOTICES_UNSAID.store(false, Ordering::Relaxed);
    // Acquire: pairs with `notice`'s Release.
    let set = NOTICES.load(Ordering::Acquire);
    let new = set & !SAID.fetch_or(set, Ordering::Relaxed);
    if new == 0 {
        return None;
    }
    let err =
        |bit: usize| std::io::Error::from_raw_os_error(NOTICE_ERRNO[bit].load(Ordering::Relaxed));
    let mut out = String::new();
    if new & 1 != 0 {
        out.push_str(&format!(
            "==cmsafe== madvise(MADV_DONTNEED) refused ({}; pages locked by mlockall?): audit \
             closes acked events' pages with mprotect and handles SIGSEGV from now on\n",
            err(0)
        ));
    }
    if new & 2 != 0 {
        out.push_str(&format!(
            "==cmsafe== audit could not reserve its pages ({}; RLIMIT_AS?): events are handed out \
             as librdmacm's own, and reads after an ack are not caught\n",
            err(1)
        ));
    }
    Some(out)
}

/// The words at `sp` and up, read with process_vm_readv(2) on this very process: a stack that
/// ends within the window (a coroutine's) gives an error there, never a fault inside a signal
/// handler. Async-signal-safe.
pub fn stack_words(sp: usize) -> [usize; STACK] {
    let mut words = [0usize; STACK];
    if sp == 0 || !STACK_COPY.load(std::sync::atomic::Ordering::Relaxed) {
        return words;
    }
    let local = libc::iovec {
        iov_base: words.as_mut_ptr().cast(),
        iov_len: std::mem::size_of_val(&words),
    };
    // One remote piece per page, so that a read stopped by the end of the stack's mapping keeps
    // what came before it.
    let page = cmsafe_core::page::size();
    let mut remote = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 3];
    let (mut at, end, mut n) = (sp, sp + std::mem::size_of_val(&words), 0);
    while at < end && n < remote.len() {
        let next = ((at / page) + 1) * page;
        let piece_end = next.min(end);
        remote[n] = libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: piece_end - at,
        };
        n += 1;
        at = piece_end;
    }
    // SAFETY: our own buffer; the remote pieces are only read by the kernel, which fails
    // (EFAULT, a short count) where nothing is mapped. getpid is async-signal-safe.
    unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, remote.as_ptr(), n as u64, 0) };
    words
}

/// Faults recorded by the signal handler of any thread, drained by any thread's next wrapped
/// call: a queue with many producers and many consumers, fit for a signal handler.
static FAULTS: SignalQueue<Fault, 256> = SignalQueue::new();

/// Whether a fault was recorded since the last drain: two loads, for every call's hot path.
#[inline]
pub fn faults_pending() -> bool {
    FAULTS.maybe_pending()
}

/// The faults recorded since the last call, and how many could not be recorded since (the queue
/// was full; each was still said on stderr).
pub fn drain_faults() -> (Vec<Fault>, u64) {
    let mut out = Vec::new();
    while let Some(f) = FAULTS.pop() {
        out.push(f);
    }
    (out, FAULTS.take_lost())
}

/// A read of the acked event `o` at `data_addr` by thread `thread`, in its own code (`syscall`
/// -1) or in the kernel's for that system call, at `at`: the fault to record.
pub fn fault(o: Occupant, data_addr: usize, at: &Context, thread: i32, syscall: i64) -> Fault {
    Fault {
        seq: o.seq,
        event_type: o.event_type,
        id: o.id,
        code_addr: at.code,
        data_addr,
        thread,
        syscall,
        link: at.link,
        stack: stack_words(at.sp),
    }
}

/// Records `f`: queued, and said on stderr at once (the program may crash for other reasons
/// before the report is written). Async-signal-safe: called from the SIGSEGV handler.
pub fn record(f: Fault) {
    queue(f);
    say(&f);
}

/// Queues `f` for the tracker's next call: before the reader goes on (its next call must see
/// it). A full queue counts it (drain_faults); the line is said either way.
pub fn queue(f: Fault) {
    let _ = FAULTS.push(f);
}

/// Says `f` on stderr, without allocating (core's formatting into a buffer on the stack, then
/// one write(2)): from a signal handler.
pub fn say(f: &Fault) {
    say_on(f, 2);
}

/// Says `f` on `fd`, a copy of the process's stderr (the fault thread's), as `say` does.
pub fn say_on(f: &Fault, fd: i32) {
    // Under AT_SECURE: counted only, no addresses for the caller (sink.rs).
    if cmsafe_core::env::secure() {
        return;
    }
    let event_type = cmsafe_core::cm::event_type_name(f.event_type as rdma_cm_event_type::Type);
    // A read of an acked event is no cancellation point without the preload: none here either
    // (glibc's pthread_setcancelstate is a few atomic operations on the thread's own word, safe
    // in the handler).
    crate::sys::cancel::uncancellable(|| {
        cmsafe_core::stderr::line_on(
            fd,
            format_args!(
                "==cmsafe== use-after-ack: seq={} type={event_type} id={:#x} thread={}: read of \
                 the event at {:#x} after its rdma_ack_cm_event, by {}",
                f.seq,
                f.id,
                f.thread,
                f.data_addr,
                Reader(f)
            ),
        )
    });
}

/// Who read: "code at ADDR", or "the kernel in system call NAME called from ADDR".
struct Reader<'a>(&'a Fault);

impl std::fmt::Display for Reader<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let f = self.0;
        if f.syscall == UNKNOWN {
            return write!(
                out,
                "code or a system call of that thread (its state unreadable)"
            );
        }
        if f.syscall < 0 {
            return write!(out, "code at {:#x}", f.code_addr);
        }
        match syscall_name(f.syscall) {
            Some(name) => write!(out, "the kernel in system call {name}")?,
            None => write!(out, "the kernel in system call #{}", f.syscall)?,
        }
        write!(out, " called from {:#x}", f.code_addr)
    }
}

/// A system call's name, for the calls that read or write a buffer the program passes (those a
/// program may hand its private data to); None for the others, named by number.
pub fn syscall_name(nr: i64) -> Option<&'static str> {
    let known: &[(i64, &str)] = &[
        (libc::SYS_write, "write"),
        (libc::SYS_writev, "writev"),
        (libc::SYS_pwrite64, "pwrite64"),
        (libc::SYS_pwritev, "pwritev"),
        (libc::SYS_sendto, "sendto"),
        (libc::SYS_sendmsg, "sendmsg"),
        (libc::SYS_sendmmsg, "sendmmsg"),
        (libc::SYS_read, "read"),
        (libc::SYS_readv, "readv"),
        (libc::SYS_recvfrom, "recvfrom"),
        (libc::SYS_recvmsg, "recvmsg"),
        (libc::SYS_ioctl, "ioctl"),
        (libc::SYS_setsockopt, "setsockopt"),
        (libc::SYS_connect, "connect"),
        (libc::SYS_bind, "bind"),
        (libc::SYS_openat, "openat"),
        (libc::SYS_process_vm_readv, "process_vm_readv"),
        (libc::SYS_process_vm_writev, "process_vm_writev"),
        (libc::SYS_futex, "futex"),
    ];
    known.iter().find(|&&(n, _)| n == nr).map(|&(_, name)| name)
}
