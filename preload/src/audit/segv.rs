//! The SIGSEGV handler: a fault on one of audit mode's pages is theirs to handle (pages.rs says
//! which are); any other goes to the handler that was installed before ours.

use std::sync::OnceLock;

use cmsafe_core::errno;
use cmsafe_sync::saved_action::{SavedAction, Sigaction};

/// Whether a fault at an address, by the code at another, was ours and is handled: set once,
/// before the handler is installed, and only read (a lock-free load) in the handler.
static CLAIM: OnceLock<fn(usize, usize) -> bool> = OnceLock::new();

/// The action SIGSEGV had before ours: what faults that are not ours are handed to.
static PREVIOUS: SavedAction<libc::sigaction> = SavedAction::new();

/// sigaction(2) for SIGSEGV.
struct Segv;

impl Sigaction for Segv {
    type Action = libc::sigaction;

    fn current(&mut self) -> libc::sigaction {
        // SAFETY: all-zero is a valid sigaction (SIG_DFL); sigaction(2) with a valid out
        // pointer and no new action only reads.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut old);
            old
        }
    }

    fn replace(&mut self, new: &libc::sigaction) -> libc::sigaction {
        // SAFETY: as above, with a valid new action.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, new, &mut old);
            old
        }
    }

    fn same(a: &libc::sigaction, b: &libc::sigaction) -> bool {
        a.sa_sigaction == b.sa_sigaction && a.sa_flags == b.sa_flags
    }
}

/// Installs the handler, with `claim` to say which faults are ours (once: later calls keep the
/// first `claim`).
pub fn install_handler(claim: fn(usize, usize) -> bool) {
    let _ = CLAIM.set(claim);
    // backtrace(3) loads the unwinder on its first call: do it now, not inside the handler.
    let mut warm = [std::ptr::null_mut(); 2];
    // SAFETY: a writable array of the given size.
    unsafe { libc::backtrace(warm.as_mut_ptr(), 2) };
    // SAFETY: all-zero is a valid sigaction; sigemptyset on our own mask.
    let ours = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_segv as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        sa
    };
    // The previous action is saved and published before ours is installed (saved_action's doc).
    PREVIOUS.install(&mut Segv, &ours);
}

extern "C" fn on_segv(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Async-signal-safe only from here on: atomics, mprotect, write.
    let saved_errno = errno::get();
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    if !CLAIM.get().is_some_and(|claim| claim(addr, code_addr(ctx))) {
        chain(sig, info, ctx);
    }
    errno::set(saved_errno);
}

#[cfg(target_arch = "x86_64")]
fn code_addr(ctx: *mut libc::c_void) -> usize {
    if ctx.is_null() {
        return 0;
    }
    // SAFETY: for SA_SIGINFO handlers the third argument is the interrupted ucontext.
    unsafe {
        (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
}

#[cfg(target_arch = "aarch64")]
fn code_addr(ctx: *mut libc::c_void) -> usize {
    if ctx.is_null() {
        return 0;
    }
    // SAFETY: for SA_SIGINFO handlers the third argument is the interrupted ucontext; on
    // aarch64 its mcontext holds the faulting instruction's address in `pc`.
    unsafe { (*(ctx as *const libc::ucontext_t)).uc_mcontext.pc as usize }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn code_addr(_ctx: *mut libc::c_void) -> usize {
    0
}

/// Hands a fault that is not ours to the handler installed before ours.
fn chain(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Saved before ours was installed; None cannot be, and would mean the default action.
    let prev = PREVIOUS.get();
    let handler = prev.map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Restore the default action; returning re-runs the faulting access, which now
        // terminates the process as it would have without us.
        // SAFETY: sigaction(2) with a valid pointer.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
        }
        return;
    }
    if prev.is_some_and(|p| p.sa_flags & libc::SA_SIGINFO != 0) {
        // SAFETY: the program registered this function as an SA_SIGINFO handler.
        let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the program registered this function as a plain handler.
        let f: extern "C" fn(i32) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}
