//! Audit's SIGSEGV handler, where userfaultfd is not to be had (pages.rs): a fault on one of
//! audit's pages is theirs to handle; any other reaches the program exactly as it would without
//! the preload.
//!
//! The program's own action for SIGSEGV is kept here, not in the kernel, once ours is installed:
//! the program sets it through the interposed sigaction(2) and signal(3), under each of glibc's
//! names for them (__sigaction, ssignal, bsd_signal, sysv_signal, __sysv_signal), which pass every
//! other signal through, so a crash reporter, a JIT or a runtime that installs its handler after the
//! first CM event does not take audit's faults from it. A fault that is not ours is then
//! delivered as the kernel would have delivered it to the program's action:
//! - a handler runs with the mask the kernel would give it (the interrupted mask, its sa_mask,
//!   and SIGSEGV unless SA_NODEFER), so a handler that leaves by longjmp leaves that mask; ours
//!   is installed with SA_NODEFER and an empty mask, so that nothing of ours is left in it;
//! - SA_RESETHAND resets the program's action to SIG_DFL before its handler runs;
//! - SA_ONSTACK and SA_RESTART are mirrored onto ours, which the kernel applies;
//! - SIG_DFL: the default action is restored in the kernel and the faulting access runs again
//!   (a fault sent by kill(2) is sent again), so the process dies of it, with its core; SIG_IGN:
//!   a fault sent by kill(2) is ignored, a real one is not (the kernel forces the default
//!   action on a synchronous fault it cannot deliver), as without us.
//!
//! A program that sets SIGSEGV's action with the raw system call (rt_sigaction), with sigset(3),
//! or through a pointer to libc's own function (dlsym(RTLD_NEXT)) goes around the interposed
//! calls: its handler then takes audit's faults (docs/preload.md). With userfaultfd, audit has
//! no SIGSEGV handler at all.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use cmsafe_core::errno;
use cmsafe_sync::latest::Latest;

use crate::audit::faults::Context;

/// Whether a fault was ours and is handled: set once, before the handler is installed, and only
/// read (a lock-free load) in the handler.
static CLAIM: OnceLock<fn(usize, &Context) -> bool> = OnceLock::new();

/// Set once ours is installed: the program's SIGSEGV action is `PROGRAM`'s from then on.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The program's SIGSEGV action, as it set it last: handler, flags, mask (signals 1 to 64).
static PROGRAM: Latest<3, 8> = Latest::new();

/// glibc's own flag for the restorer it passes the kernel (x86_64): what the kernel hands back
/// in an action read from it.
const SA_RESTORER: i32 = 0x0400_0000;

/// The program's flags that the kernel applies to whatever handler is installed: mirrored onto
/// ours.
const MIRRORED: i32 = libc::SA_ONSTACK | libc::SA_RESTART;

/// A SIGSEGV action as kept: the program's handler, flags and blocked signals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Action {
    handler: usize,
    flags: i32,
    mask: u64,
}

impl Action {
    const DEFAULT: Action = Action {
        handler: libc::SIG_DFL,
        flags: 0,
        mask: 0,
    };

    fn words(self) -> [u64; 3] {
        [self.handler as u64, self.flags as u32 as u64, self.mask]
    }

    fn from_words(w: [u64; 3]) -> Action {
        Action {
            handler: w[0] as usize,
            flags: w[1] as u32 as i32,
            mask: w[2],
        }
    }

    fn of(sa: &libc::sigaction) -> Action {
        Action {
            handler: sa.sa_sigaction,
            flags: sa.sa_flags,
            mask: mask_bits(&sa.sa_mask),
        }
    }

    /// As sigaction(2) hands an action back: with the restorer glibc gives every action it
    /// installs, as read from the kernel's copy of ours (`kernel`).
    fn to_sigaction(self, kernel: &libc::sigaction) -> libc::sigaction {
        // SAFETY: all-zero is a valid sigaction.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = self.handler;
        sa.sa_flags = self.flags | (kernel.sa_flags & SA_RESTORER);
        sa.sa_restorer = kernel.sa_restorer;
        set_mask_bits(&mut sa.sa_mask, self.mask);
        sa
    }
}

/// Signals 1 to 64 of a sigset_t: glibc keeps signal n at bit n - 1 of its first word.
fn mask_bits(set: &libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes of plain data.
    unsafe { (set as *const libc::sigset_t as *const u64).read_unaligned() }
}

fn set_mask_bits(set: &mut libc::sigset_t, bits: u64) {
    // SAFETY: as in `mask_bits`; the rest of the set (signals above 64) stays empty.
    unsafe { (set as *mut libc::sigset_t as *mut u64).write_unaligned(bits) }
}

fn bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

type SigactionFn =
    unsafe extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;
type SignalFn = unsafe extern "C" fn(libc::c_int, libc::sighandler_t) -> libc::sighandler_t;

static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);
static REAL_SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// libc's own function `name`, behind ours: found at load (where dlsym may run), or at first use
/// by a program that calls it from another library's constructor first.
fn real(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    // Relaxed: a function's address, the same whichever thread finds it.
    let f = slot.load(Ordering::Relaxed);
    if f != 0 {
        return f;
    }
    // SAFETY: dlsym with RTLD_NEXT and a valid C string: the next definition after ours.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    slot.store(f, Ordering::Relaxed);
    f
}

extern "C" fn resolve_at_load() {
    real(&REAL_SIGACTION, c"sigaction");
    for call in [&SIGNAL, &SSIGNAL, &BSD_SIGNAL, &SYSV_SIGNAL, &SYSV_SIGNAL_] {
        real(call.real, call.name);
    }
}

/// Run by the dynamic loader when the preload is loaded: libc is loaded before us.
#[used]
#[link_section = ".init_array"]
static RESOLVE_AT_LOAD: extern "C" fn() = resolve_at_load;

/// libc's sigaction(2). Async-signal-safe once resolved at load.
fn sys_sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    let f = real(&REAL_SIGACTION, c"sigaction");
    if f == 0 {
        errno::set(libc::ENOSYS);
        return -1;
    }
    // SAFETY: libc's sigaction, with the caller's pointers.
    unsafe { std::mem::transmute::<usize, SigactionFn>(f)(sig, act, old) }
}

/// The action the kernel has for SIGSEGV now.
fn kernel_action() -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction, which the call overwrites.
    let mut k: libc::sigaction = unsafe { std::mem::zeroed() };
    sys_sigaction(libc::SIGSEGV, std::ptr::null(), &mut k);
    k
}

/// Our handler's action, with the program's flags the kernel applies.
fn ours(program: Action) -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction; the mask is left empty.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_segv as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | (program.flags & MIRRORED);
    sa
}

fn program() -> Action {
    PROGRAM.get().map_or(Action::DEFAULT, Action::from_words)
}

/// Installs the handler, with `claim` to say which faults are ours (once: later calls keep the
/// first `claim`).
pub fn install_handler(claim: fn(usize, &Context) -> bool) {
    let _ = CLAIM.set(claim);
    // The program's action now; from the flag on, the program's calls set `PROGRAM` only. One
    // made in between reached the kernel, and is what our install replaces: kept then.
    let before = Action::of(&kernel_action());
    PROGRAM.set(before.words());
    INSTALLED.store(true, Ordering::SeqCst);
    // SAFETY: all-zero is a valid sigaction, which the call overwrites.
    let mut replaced: libc::sigaction = unsafe { std::mem::zeroed() };
    sys_sigaction(libc::SIGSEGV, &ours(before), &mut replaced);
    let replaced = Action::of(&replaced);
    if replaced != before {
        PROGRAM.set(replaced.words());
    }
}

/// __sigaction, glibc's other name for sigaction(2), interposed as it.
///
/// # Safety
/// As sigaction(2): `act` and `old` are NULL or valid.
pub unsafe extern "C-unwind" fn sigaction_(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
    ret: usize,
) -> libc::c_int {
    // SAFETY: forwarded from the caller.
    unsafe { sigaction(sig, act, old, ret) }
}

/// sigaction(2), interposed: SIGSEGV's action is the program's own to set and read once audit's
/// handler is installed; every other signal, and SIGSEGV before, goes to libc.
///
/// # Safety
/// As sigaction(2): `act` and `old` are NULL or valid.
pub unsafe extern "C-unwind" fn sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
    _ret: usize,
) -> libc::c_int {
    if sig != libc::SIGSEGV || !INSTALLED.load(Ordering::Acquire) {
        return sys_sigaction(sig, act, old);
    }
    let saved = errno::get();
    let kernel = kernel_action();
    let before = if act.is_null() {
        program()
    } else {
        // SAFETY: a valid action (the caller's contract).
        let new = Action::of(unsafe { &*act });
        let before = PROGRAM
            .set(new.words())
            .map_or(Action::DEFAULT, Action::from_words);
        mirror(new);
        before
    };
    if !old.is_null() {
        // SAFETY: a valid out pointer (the caller's contract).
        unsafe { *old = before.to_sigaction(&kernel) };
    }
    errno::set(saved);
    0
}

/// The signal(3) family, each name's real function and its semantics as glibc gives them:
/// signal, ssignal and bsd_signal BSD's (the handler's own signal blocked while it runs,
/// SA_RESTART); sysv_signal and __sysv_signal System V's (reset to SIG_DFL as the handler runs,
/// which runs with its signal unblocked).
pub struct SignalCall {
    name: &'static std::ffi::CStr,
    real: &'static AtomicUsize,
    flags: i32,
    blocks_itself: bool,
}

static REAL_SSIGNAL: AtomicUsize = AtomicUsize::new(0);
static REAL_BSD_SIGNAL: AtomicUsize = AtomicUsize::new(0);
static REAL_SYSV_SIGNAL: AtomicUsize = AtomicUsize::new(0);
static REAL_SYSV_SIGNAL_: AtomicUsize = AtomicUsize::new(0);

const BSD: (i32, bool) = (libc::SA_RESTART, true);
const SYSV: (i32, bool) = (libc::SA_RESETHAND | libc::SA_NODEFER, false);

pub static SIGNAL: SignalCall = SignalCall::new(c"signal", &REAL_SIGNAL, BSD);
pub static SSIGNAL: SignalCall = SignalCall::new(c"ssignal", &REAL_SSIGNAL, BSD);
pub static BSD_SIGNAL: SignalCall = SignalCall::new(c"bsd_signal", &REAL_BSD_SIGNAL, BSD);
pub static SYSV_SIGNAL: SignalCall = SignalCall::new(c"sysv_signal", &REAL_SYSV_SIGNAL, SYSV);
pub static SYSV_SIGNAL_: SignalCall = SignalCall::new(c"__sysv_signal", &REAL_SYSV_SIGNAL_, SYSV);

impl SignalCall {
    const fn new(
        name: &'static std::ffi::CStr,
        real: &'static AtomicUsize,
        (flags, blocks_itself): (i32, bool),
    ) -> Self {
        SignalCall {
            name,
            real,
            flags,
            blocks_itself,
        }
    }

    /// The call, interposed: for SIGSEGV once audit's handler is installed, the program's
    /// action is set as the real call would set it, and kept; otherwise libc's own.
    fn set(&self, sig: libc::c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
        if sig != libc::SIGSEGV || !INSTALLED.load(Ordering::Acquire) {
            let f = real(self.real, self.name);
            if f == 0 {
                errno::set(libc::ENOSYS);
                return libc::SIG_ERR;
            }
            // SAFETY: libc's own function of this name, with the caller's arguments.
            return unsafe { std::mem::transmute::<usize, SignalFn>(f)(sig, handler) };
        }
        if handler == libc::SIG_ERR {
            errno::set(libc::EINVAL);
            return libc::SIG_ERR;
        }
        let new = Action {
            handler,
            flags: self.flags,
            mask: if self.blocks_itself { bit(sig) } else { 0 },
        };
        let before = PROGRAM
            .set(new.words())
            .map_or(Action::DEFAULT, Action::from_words);
        let saved = errno::get();
        mirror(new);
        errno::set(saved);
        before.handler
    }
}

/// signal(3) and its other names (`SignalCall`), interposed.
///
/// # Safety
/// As signal(3).
pub unsafe extern "C-unwind" fn signal(
    sig: libc::c_int,
    handler: libc::sighandler_t,
    _ret: usize,
) -> libc::sighandler_t {
    SIGNAL.set(sig, handler)
}

/// ssignal(3), interposed as signal.
///
/// # Safety
/// As ssignal(3).
pub unsafe extern "C-unwind" fn ssignal(
    sig: libc::c_int,
    handler: libc::sighandler_t,
    _ret: usize,
) -> libc::sighandler_t {
    SSIGNAL.set(sig, handler)
}

/// bsd_signal(3), interposed as signal.
///
/// # Safety
/// As bsd_signal(3).
pub unsafe extern "C-unwind" fn bsd_signal(
    sig: libc::c_int,
    handler: libc::sighandler_t,
    _ret: usize,
) -> libc::sighandler_t {
    BSD_SIGNAL.set(sig, handler)
}

/// sysv_signal(3), interposed with System V's semantics.
///
/// # Safety
/// As sysv_signal(3).
pub unsafe extern "C-unwind" fn sysv_signal(
    sig: libc::c_int,
    handler: libc::sighandler_t,
    _ret: usize,
) -> libc::sighandler_t {
    SYSV_SIGNAL.set(sig, handler)
}

/// __sysv_signal, the name glibc's headers give sysv_signal, interposed as it.
///
/// # Safety
/// As sysv_signal(3).
pub unsafe extern "C-unwind" fn sysv_signal_(
    sig: libc::c_int,
    handler: libc::sighandler_t,
    _ret: usize,
) -> libc::sighandler_t {
    SYSV_SIGNAL_.set(sig, handler)
}

/// Gives ours the program's flags that the kernel applies (SA_ONSTACK, SA_RESTART), when they
/// changed.
fn mirror(program: Action) {
    let k = kernel_action();
    if k.sa_sigaction == on_segv as *const () as usize
        && k.sa_flags & MIRRORED != program.flags & MIRRORED
    {
        sys_sigaction(libc::SIGSEGV, &ours(program), std::ptr::null_mut());
    }
}

extern "C" fn on_segv(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Async-signal-safe only from here on: atomics, mprotect, write, sigprocmask.
    let saved_errno = errno::get();
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let at = Context::of_signal(ctx);
    if !CLAIM.get().is_some_and(|claim| claim(addr, &at)) {
        chain(sig, info, ctx);
    }
    errno::set(saved_errno);
}

/// A fault that is not ours, delivered as the kernel would have delivered it (module doc).
fn chain(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let p = program();
    // SAFETY: as in `on_segv`.
    let code = unsafe { (*info).si_code };
    // A fault of the CPU's (SEGV_MAPERR, SEGV_ACCERR...) has a positive code; kill(2),
    // sigqueue(3) and tgkill(2) give 0 or less.
    let from_cpu = code > 0;
    if p.handler == libc::SIG_DFL || p.handler == libc::SIG_IGN {
        if p.handler == libc::SIG_IGN && !from_cpu {
            return;
        }
        // SAFETY: all-zero is SIG_DFL with no flags and an empty mask.
        let dfl: libc::sigaction = unsafe { std::mem::zeroed() };
        sys_sigaction(libc::SIGSEGV, &dfl, std::ptr::null_mut());
        if !from_cpu {
            // Not blocked here (ours has SA_NODEFER): delivered, with the default action, as the
            // kill(2) returns.
            // SAFETY: a signal to this thread.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), sig) };
        }
        // Returning runs the faulting access again, under the default action.
        return;
    }
    if p.flags & libc::SA_RESETHAND != 0 {
        PROGRAM.set(
            Action {
                handler: libc::SIG_DFL,
                ..p
            }
            .words(),
        );
    }
    // The mask the kernel gives the program's handler: the interrupted one (what sigreturn puts
    // back), its sa_mask, and the signal itself unless SA_NODEFER.
    let interrupted = if ctx.is_null() {
        0
    } else {
        // SAFETY: for SA_SIGINFO handlers the third argument is the interrupted ucontext.
        mask_bits(unsafe { &(*(ctx as *const libc::ucontext_t)).uc_sigmask })
    };
    let mut blocked = interrupted | p.mask;
    if p.flags & libc::SA_NODEFER == 0 {
        blocked |= bit(sig);
    }
    // SAFETY: all-zero is an empty set; pthread_sigmask on this thread is async-signal-safe.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        set_mask_bits(&mut set, blocked);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
    if p.flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program registered this function as an SA_SIGINFO handler.
        let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(p.handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the program registered this function as a plain handler.
        let f: extern "C" fn(i32) = unsafe { std::mem::transmute(p.handler) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What runs in the SIGSEGV handler (this file, faults.rs's record, pages.rs's claim) and in
    /// the fault thread before it answers calls no unwinder: backtrace(3) loads libgcc_s on first
    /// use and walks the loader's and the unwinder's tables under their locks, which the
    /// interrupted thread (a dlopen, a C++ throw) may hold. The stack is copied instead
    /// (faults::stack_words) and read after.
    #[test]
    fn no_unwinding_where_a_fault_is_handled() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/audit");
        for file in ["segv.rs", "faults.rs", "pages.rs", "uffd.rs"] {
            let src = std::fs::read_to_string(dir.join(file)).expect("a source file");
            let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            for call in ["backtrace(", "_Unwind_Backtrace", "dladdr("] {
                let found = code
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .any(|l| l.contains(call));
                assert!(!found, "audit/{file} calls {call}");
            }
        }
    }

    #[test]
    fn an_action_round_trips_through_its_words_and_sigaction() {
        let a = Action {
            handler: 0x1234_5678_9abc,
            flags: libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER,
            mask: bit(libc::SIGUSR1) | bit(64),
        };
        assert_eq!(Action::from_words(a.words()), a);
        // SAFETY: all-zero is a valid sigaction.
        let kernel: libc::sigaction = unsafe { std::mem::zeroed() };
        let sa = a.to_sigaction(&kernel);
        assert_eq!(Action::of(&sa), a);
        // SAFETY: sigismember on a valid set.
        unsafe {
            assert_eq!(libc::sigismember(&sa.sa_mask, libc::SIGUSR1), 1);
            assert_eq!(libc::sigismember(&sa.sa_mask, libc::SIGUSR2), 0);
        }
    }
}
