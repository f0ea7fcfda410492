//! Thread cancellation. Programs cancel their CM threads (libiscsi at every disconnect, rping at
//! exit), and a deferred cancel acts at the next cancellation point: write(2), nanosleep(2),
//! open(2)… The preload's own work (reports, findings on stderr, the sleeps while a destroy
//! waits, dlopen) runs with cancellation disabled, so it never unwinds halfway with a lock held
//! or a record half made; a pending cancel then acts where it would without the preload. The
//! calls into librdmacm stay cancellable exactly as they are raw: the wrappers around them are
//! "C-unwind" functions with nothing to drop across the call, so a forced unwind passes through
//! them as through C frames.

// glibc's <pthread.h>; the libc crate binds none of these on Linux.
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

/// An old-style cleanup record (`struct _pthread_cleanup_buffer`): glibc runs its routine when a
/// cancellation unwinds the frame that holds it.
#[repr(C)]
pub struct CleanupBuffer {
    routine: Option<unsafe extern "C" fn(*mut libc::c_void)>,
    arg: *mut libc::c_void,
    canceltype: libc::c_int,
    prev: *mut CleanupBuffer,
}

extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
    fn _pthread_cleanup_push(
        buf: *mut CleanupBuffer,
        routine: unsafe extern "C" fn(*mut libc::c_void),
        arg: *mut libc::c_void,
    );
    fn _pthread_cleanup_pop(buf: *mut CleanupBuffer, execute: libc::c_int);
}

impl CleanupBuffer {
    pub const fn new() -> Self {
        CleanupBuffer {
            routine: None,
            arg: std::ptr::null_mut(),
            canceltype: 0,
            prev: std::ptr::null_mut(),
        }
    }
}

/// Calls `f`, and `on_cancel(arg)` if a cancellation unwinds the thread out of it. No Drop is
/// involved: the frame stays plain for the forced unwind.
///
/// # Safety
/// `f` may unwind only by cancellation; `on_cancel` must not unwind.
#[inline(always)]
pub unsafe fn watching_cancel<R>(
    on_cancel: unsafe extern "C" fn(*mut libc::c_void),
    arg: *mut libc::c_void,
    f: impl FnOnce() -> R,
) -> R {
    let mut buf = CleanupBuffer::new();
    // SAFETY: `buf` lives in this frame until the pop below, or until the unwind leaves it.
    unsafe { _pthread_cleanup_push(&mut buf, on_cancel, arg) };
    let r = f();
    // SAFETY: the record pushed above, the innermost one; 0: do not run it.
    unsafe { _pthread_cleanup_pop(&mut buf, 0) };
    r
}

/// Runs `f` with the calling thread's cancellation disabled, then puts the program's setting
/// back (a cancel that arrived meanwhile stays pending).
pub fn uncancellable<R>(f: impl FnOnce() -> R) -> R {
    let mut old = 0;
    // SAFETY: pthread_setcancelstate(3) with a valid out pointer; not a cancellation point.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
    let r = f();
    let mut ignored = 0;
    // SAFETY: as above, restoring the state the program had.
    unsafe { pthread_setcancelstate(old, &mut ignored) };
    r
}
