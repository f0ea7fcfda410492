//! The report's file: opened by the first thread that has lines for it, written by each thread
//! after it released the tracker's lock, never under a lock of ours. The file is new (never an
//! existing file, FIFO, device or symlink), 0600, and this process's own: a forked child writes
//! a file of its own, whatever the template. A write that fails stops the report there (what
//! was written is a whole prefix but for its last line), and is said once on stderr and counted
//! in the summary.
//!
//! Lines of threads that write at once may land in either order: each record carries its own
//! times and sequence numbers, by which readers order them.
//!
//! The descriptor lives in the program's table, where the program may close it (many services
//! close every descriptor they do not know of when they reload) and get the number back for a
//! file of its own. So each write first checks that the descriptor is still the file made (one
//! fstat(2)); when it is not, the file is opened again by its name, kept only if it is the very
//! file made, and the report goes on there; the program's descriptor is never written or closed.
//! A program that closes our descriptor between that check and the write (another thread, in
//! the microseconds between two system calls) could still receive a line.

use std::os::fd::{AsRawFd, IntoRawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};

use cmsafe_core::outfile::{self, Identity, WriteFailures};

use crate::sys::config::CONFIG;
use crate::sys::forked::{self, Mark};
use crate::sys::printable::printable;

/// The file descriptor, or one of the states before and after it.
static FD: AtomicI32 = AtomicI32::new(UNOPENED);
const UNOPENED: i32 = -1;
/// A thread took the turn to open it and has not finished.
const OPENING: i32 = -2;
/// No report: it could not be opened, or a write failed.
const OFF: i32 = -3;

/// Records made but not in the file (a failed write, a file that could not be opened), and the
/// failed writes themselves (the first one's errno, said once).
static NOT_WRITTEN: AtomicU64 = AtomicU64::new(0);
static FAILURES: WriteFailures = WriteFailures::new();
/// The report stopped because its descriptor was closed and its file could not be opened again
/// (FAILURES holds that errno).
static GONE: AtomicBool = AtomicBool::new(false);

/// The file made: its name, shown and as a path, and its identity (leaked: one per process).
static MADE: AtomicPtr<Made> = AtomicPtr::new(std::ptr::null_mut());

struct Made {
    shown: String,
    path: outfile::Path,
    identity: Identity,
}

fn made() -> Option<&'static Made> {
    // Acquire: the record was written before its pointer was published.
    let p = MADE.load(Ordering::Acquire);
    // SAFETY: a leaked Box, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

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
    // A child forked without the fork handlers (_Fork, clone): the parent's file is not its own.
    if forked::since(Mark::Report) {
        after_fork_in_child();
        forked::mark(Mark::Report);
    }
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
        let Some(fd) = still_ours(FD.load(Ordering::Acquire)) else {
            lost(lines, 0);
            return;
        };
        if let Err(errno) = outfile::write_all(fd, lines) {
            FD.store(OFF, Ordering::Release);
            // What is in the file is a whole prefix of the report but for its last line, which
            // readers drop: every line of these counts as lost.
            lost(lines, errno);
            close_if_ours(fd);
        }
    });
}

/// Counts `lines` as not written, and says the first failed write.
fn lost(lines: &[u8], errno: i32) {
    let n = lines.iter().filter(|&&b| b == b'\n').count() as u64;
    NOT_WRITTEN.fetch_add(n, Ordering::Relaxed);
    if errno != 0 && FAILURES.count(errno) {
        crate::sys::cancel::say_err!(
            "==cmsafe== report {}: write failed ({}): the report stops here",
            name(),
            std::io::Error::from_raw_os_error(errno)
        );
    }
}

fn name() -> String {
    made().map_or_else(|| "?".to_string(), |m| m.shown.clone())
}

/// `fd` when it is still the file made; else the file opened again by its name (module doc),
/// which replaces `fd` in FD. None when there is no report any more (FD is OFF; said once).
fn still_ours(fd: i32) -> Option<i32> {
    let made = made()?;
    if fd < 0 {
        return None;
    }
    if outfile::identity(fd) == Ok(made.identity) {
        return Some(fd);
    }
    match outfile::reopen(made.path.as_c_str(), made.identity) {
        Ok(file) => {
            let new = file.into_raw_fd();
            // AcqRel: another thread that saw the same loss may have reopened first: its
            // descriptor stays, ours goes.
            match FD.compare_exchange(fd, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    crate::sys::cancel::say_err!(
                        "==cmsafe== report {}: the program closed its descriptor; reopened",
                        made.shown
                    );
                    Some(new)
                }
                Err(current) => {
                    // SAFETY: the descriptor just opened, ours alone.
                    unsafe { libc::close(new) };
                    (current >= 0).then_some(current)
                }
            }
        }
        Err(errno) => {
            if FD.swap(OFF, Ordering::AcqRel) >= 0 {
                GONE.store(true, Ordering::Relaxed);
                FAILURES.count(errno);
                crate::sys::cancel::say_err!(
                    "==cmsafe== report {}: the program closed its descriptor and the file is no \
                     longer at its name ({}): the report stops here",
                    made.shown,
                    std::io::Error::from_raw_os_error(errno)
                );
            }
            None
        }
    }
}

/// Closes `fd` if it is still the file made: never a descriptor the program got back.
fn close_if_ours(fd: i32) {
    if made().is_some_and(|m| outfile::identity(fd) == Ok(m.identity)) {
        // SAFETY: our own descriptor (checked above), which no other thread writes after OFF
        // (a thread that loaded it before may still fail on it: counted the same).
        unsafe { libc::close(fd) };
    }
}

fn open() {
    let Some(template) = CONFIG.report.as_ref() else {
        FD.store(OFF, Ordering::Release);
        return;
    };
    let created = match template.path() {
        Ok(path) => outfile::create(path),
        Err(errno) => {
            FD.store(OFF, Ordering::Release);
            crate::sys::cancel::say_err!(
                "==cmsafe== cannot write the report {}: {}",
                printable(&template.text().to_string_lossy()),
                std::io::Error::from_raw_os_error(errno)
            );
            return;
        }
    };
    let shown = printable(&String::from_utf8_lossy(created.path.as_bytes())).into_owned();
    let file = created
        .file
        .and_then(|fd| outfile::identity(fd.as_raw_fd()).map(|identity| (fd, identity)));
    match file {
        Ok((fd, identity)) => {
            let made = Made {
                shown,
                path: created.path,
                identity,
            };
            MADE.store(Box::into_raw(Box::new(made)), Ordering::Release);
            if created.renamed {
                crate::sys::cancel::say_err!(
                    "==cmsafe== report {} exists: this process writes {} instead",
                    printable(&template.text().to_string_lossy()),
                    name()
                );
            }
            FD.store(fd.into_raw_fd(), Ordering::Release);
        }
        Err(errno) => {
            FD.store(OFF, Ordering::Release);
            crate::sys::cancel::say_err!(
                "==cmsafe== cannot write the report {}: {}",
                printable(&String::from_utf8_lossy(created.path.as_bytes())),
                std::io::Error::from_raw_os_error(errno)
            );
        }
    }
}

/// The summary's line on records that are not in the report, if any.
pub fn summary_line() -> Option<String> {
    let n = NOT_WRITTEN.load(Ordering::Relaxed);
    if n == 0 {
        return None;
    }
    let why = match FAILURES.first_errno() {
        0 => "it could not be opened".to_string(),
        e if GONE.load(Ordering::Relaxed) => format!(
            "the program closed its descriptor and the file is no longer at its name: {}",
            std::io::Error::from_raw_os_error(e)
        ),
        e => std::io::Error::from_raw_os_error(e).to_string(),
    };
    Some(format!(
        "==cmsafe==   report: {n} records not written ({why})\n"
    ))
}

/// In a child after fork(2): the parent's file is not the child's, which opens its own (named
/// for it: the template's owner is the parent) when it has lines. Async-signal-safe: close(2)
/// and atomics.
pub fn after_fork_in_child() {
    let fd = FD.swap(UNOPENED, Ordering::AcqRel);
    if fd >= 0 {
        crate::sys::cancel::uncancellable(|| close_if_ours(fd));
    }
    NOT_WRITTEN.store(0, Ordering::Relaxed);
    FAILURES.reset();
    GONE.store(false, Ordering::Relaxed);
}
