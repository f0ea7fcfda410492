//! The report's file: opened by the first thread that has lines for it, written by each thread
//! after it released the tracker's lock, never under a lock of ours. The file is new (never an
//! existing file, FIFO, device or symlink), 0600, and this process's own: a forked child writes
//! a file of its own, whatever the template. A write that fails stops the report there (what
//! was written is a whole prefix but for its last line), and is said once on stderr and counted
//! in the summary.
//!
//! Lines of threads that write at once may land in either order: each record carries its own
//! times and sequence numbers, by which readers order them.

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, Ordering};

use crate::sys::config::CONFIG;

/// The file descriptor, or one of the states before and after it.
static FD: AtomicI32 = AtomicI32::new(UNOPENED);
const UNOPENED: i32 = -1;
/// A thread took the turn to open it and has not finished.
const OPENING: i32 = -2;
/// No report: it could not be opened, or a write failed.
const OFF: i32 = -3;

/// Records made but not in the file (a failed write, a file that could not be opened), and the
/// errno of the first failure.
static NOT_WRITTEN: AtomicU64 = AtomicU64::new(0);
static FIRST_ERRNO: AtomicI32 = AtomicI32::new(0);

/// The name the file was opened under (leaked: one per process), for the messages.
static NAME: AtomicPtr<String> = AtomicPtr::new(std::ptr::null_mut());

/// What the thread that made lines does with them once the tracker's lock is released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Write them.
    Write,
    /// Open the file first: this thread's turn.
    Open,
    /// Another thread is opening the file: the lines stay with the tracker for the next turn.
    Keep,
    /// There is no file: count them as not written.
    Drop,
}

/// Whose turn it is. Called under the tracker's lock, so one thread at a time takes the turn to
/// open.
pub fn turn() -> Turn {
    match FD.load(Ordering::Acquire) {
        UNOPENED => {
            FD.store(OPENING, Ordering::Relaxed);
            Turn::Open
        }
        OPENING => Turn::Keep,
        OFF => Turn::Drop,
        _ => Turn::Write,
    }
}

/// Writes `lines` (whole lines) as `turn` says, after the tracker's lock was released.
pub fn write(turn: Turn, lines: &[u8]) {
    if lines.is_empty() && turn != Turn::Open {
        return;
    }
    crate::sys::cancel::uncancellable(|| {
        if turn == Turn::Open {
            open();
        }
        let fd = FD.load(Ordering::Acquire);
        if fd < 0 {
            lost(lines, 0);
            return;
        }
        if let Err((errno, rest)) = write_all(fd, lines) {
            FD.store(OFF, Ordering::Release);
            lost(rest, errno);
            // SAFETY: closing our own descriptor, which no other thread writes after OFF
            // (a thread that loaded it before may still fail on it: counted the same).
            unsafe { libc::close(fd) };
        }
    });
}

/// Counts `rest` (a torn line counts whole) as not written, and says the first failure.
fn lost(rest: &[u8], errno: i32) {
    let n = rest.iter().filter(|&&b| b == b'\n').count() as u64;
    NOT_WRITTEN.fetch_add(n.max(u64::from(!rest.is_empty())), Ordering::Relaxed);
    if errno != 0
        && FIRST_ERRNO
            .compare_exchange(0, errno, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        crate::sys::cancel::say_err!(
            "==cmsafe== report {}: write failed ({}): the report stops here",
            name(),
            std::io::Error::from_raw_os_error(errno)
        );
    }
}

fn name() -> String {
    // Acquire: the string was written before its pointer was published.
    let p = NAME.load(Ordering::Acquire);
    if p.is_null() {
        return "?".to_string();
    }
    // SAFETY: a leaked String, never freed.
    crate::sys::printable::printable(unsafe { &*p }).into_owned()
}

fn open() {
    let Some(template) = CONFIG.report.as_deref() else {
        FD.store(OFF, Ordering::Release);
        return;
    };
    match create(template) {
        Ok(created) => {
            let name = Box::into_raw(Box::new(created.name.to_string_lossy().into_owned()));
            NAME.store(name, Ordering::Release);
            if created.renamed {
                crate::sys::cancel::say_err!(
                    "==cmsafe== report {} exists: this process writes {} instead",
                    crate::sys::printable::printable(template),
                    self::name()
                );
            }
            FD.store(created.fd, Ordering::Release);
        }
        Err((name, errno)) => {
            FD.store(OFF, Ordering::Release);
            crate::sys::cancel::say_err!(
                "==cmsafe== cannot write the report {}: {}",
                crate::sys::printable::printable(&name.to_string_lossy()),
                std::io::Error::from_raw_os_error(errno)
            );
        }
    }
}

/// A file made by `create`.
struct Created {
    fd: i32,
    name: std::ffi::CString,
    /// The template's name existed: `name` is it with `.<pid>` after it.
    renamed: bool,
}

/// Set in a forked child: its name is the template's with `.<pid>` after it, unless the template
/// has `%p`.
static FORKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Creates this process's report from `template`: `%p` becomes the pid (a forked child adds
/// `.<pid>` when there is none); the file is new (O_EXCL: never an existing file, a FIFO, a
/// device, or a symlink's target), 0600, opened without blocking; a name that exists is left
/// alone and `.<pid>` tried once instead.
fn create(template: &str) -> Result<Created, (std::ffi::CString, i32)> {
    use std::ffi::CString;
    let pid = std::process::id();
    let mut name = template.replace("%p", &pid.to_string());
    if FORKED.load(Ordering::Relaxed) && !template.contains("%p") {
        name = format!("{name}.{pid}");
    }
    let open = |name: &str| -> Result<i32, (CString, i32)> {
        let c = CString::new(name).map_err(|_| (CString::default(), libc::EINVAL))?;
        // SAFETY: a valid C string; flags and mode as documented in open(2).
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_WRONLY
                    | libc::O_CREAT
                    | libc::O_EXCL
                    | libc::O_NOFOLLOW
                    | libc::O_NONBLOCK
                    | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            Err((c, cmsafe_core::errno::get()))
        } else {
            Ok(fd)
        }
    };
    match open(&name) {
        Ok(fd) => Ok(Created {
            fd,
            name: CString::new(name).unwrap_or_default(),
            renamed: false,
        }),
        Err((_, libc::EEXIST)) => {
            let other = format!("{name}.{pid}");
            let fd = open(&other)?;
            Ok(Created {
                fd,
                name: CString::new(other).unwrap_or_default(),
                renamed: true,
            })
        }
        Err(e) => Err(e),
    }
}

/// write(2) of the whole of `buf`, EINTR retried; the errno and what was left unwritten
/// when it fails.
fn write_all(fd: i32, mut buf: &[u8]) -> Result<(), (i32, &[u8])> {
    while !buf.is_empty() {
        // SAFETY: a write from a live buffer of its length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n > 0 {
            buf = &buf[n as usize..];
            continue;
        }
        let errno = if n == 0 {
            libc::EIO
        } else {
            cmsafe_core::errno::get()
        };
        if errno != libc::EINTR {
            return Err((errno, buf));
        }
    }
    Ok(())
}

/// The summary's line on records that are not in the report, if any.
pub fn summary_line() -> Option<String> {
    let n = NOT_WRITTEN.load(Ordering::Relaxed);
    if n == 0 {
        return None;
    }
    let why = match FIRST_ERRNO.load(Ordering::Relaxed) {
        0 => "it could not be opened".to_string(),
        e => std::io::Error::from_raw_os_error(e).to_string(),
    };
    Some(format!(
        "==cmsafe==   report: {n} records not written ({why})\n"
    ))
}

/// In a child after fork(2): the parent's file is not the child's, which opens its own when it
/// has lines. Async-signal-safe: close(2) and atomics.
pub fn after_fork_in_child() {
    let fd = FD.swap(UNOPENED, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: the child's copy of our own descriptor.
        crate::sys::cancel::uncancellable(|| unsafe { libc::close(fd) });
    }
    NOT_WRITTEN.store(0, Ordering::Relaxed);
    FIRST_ERRNO.store(0, Ordering::Relaxed);
    FORKED.store(true, Ordering::Relaxed);
}
