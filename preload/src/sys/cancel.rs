//! Thread cancellation. Programs cancel their CM threads (libiscsi at every disconnect, rping at
//! exit), and a deferred cancel acts at the next cancellation point: write(2), nanosleep(2),
//! open(2), close(2)… The preload's own cancellation points are few, and each runs with
//! cancellation disabled (`uncancellable`): its lines on stderr (`say_err!`), the report file's
//! open and writes, its sleeps while a destroy waits (`sleep`), the first look-up of a real
//! function, the child's report after fork. So it never unwinds halfway with a lock held or a
//! record half made, and a pending cancel acts where it would without the preload. The rest of
//! its work, the path of every event included, reaches no cancellation point, and runs without
//! the two pthread_setcancelstate calls a region costs (`the_cancellation_points_are_the_known_ones`
//! keeps new ones from creeping in). The calls into librdmacm stay cancellable exactly as they
//! are raw: the wrappers around them are "C-unwind" functions with nothing to drop across the
//! call, so a forced unwind passes through them as through C frames.

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

/// A line on stderr (eprintln!'s arguments), written by `write_stderr`: never a panic, with
/// cancellation disabled.
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::sys::cancel::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use say_err;

/// Writes `text` on stderr, with cancellation disabled (write(2) is a cancellation point). A
/// stderr that fails (closed, a pipe whose reader is gone, a full disk) loses the text: eprint!
/// would panic there, and the preload writes from functions C calls, where no panic may go (an
/// unwind into C aborts the program, or worse). The config's first use is one of them: it is
/// forced before any panic shield, by the first wrapped call.
///
/// Written with write(2) itself, not std's stderr, whose lock a signal handler's exit (or
/// another thread blocked writing to a full pipe) would make this thread wait for. Text from
/// outside is made `printable` by whoever puts it in.
pub fn write_stderr(text: std::fmt::Arguments<'_>) {
    let text = text.to_string();
    uncancellable(|| {
        cmsafe_core::stderr::text(&text);
    })
}

/// Sleeps for `d`, with cancellation disabled (nanosleep(2) is a cancellation point).
pub fn sleep(d: std::time::Duration) {
    uncancellable(|| std::thread::sleep(d))
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

/// Makes this library's std say a panic's message with cancellation disabled: the message is
/// written where the panic happens, a lock of ours perhaps held, and a cancel acting there would
/// unwind into `quietly`'s catch_unwind, which aborts on a forced unwind. The preload's std has
/// a hook of its own; the program's, if it has one, is not touched. Called once, by
/// `lifecycle::register`.
pub fn install_panic_hook() {
    let say = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| uncancellable(|| say(info))));
}

#[cfg(test)]
mod tests {
    /// Calls that are, or may be, cancellation points (pthreads(7)), as written in the sources.
    const POINTS: &[&str] = &[
        "eprintln!(",
        "eprint!(",
        "println!(",
        "print!(",
        "thread::sleep(",
        "libc::open(",
        "libc::openat(",
        "libc::close(",
        "libc::read(",
        "libc::write(",
        "libc::poll(",
        "libc::nanosleep(",
        "libc::usleep(",
        "libc::fsync(",
        "libc::fdatasync(",
        "libc::waitpid(",
        "libc::open64(",
        "libc::pread(",
        "libc::pwrite(",
        "io::stderr(",
        "libc::readv(",
        "libc::writev(",
        "libc::send(",
        "libc::recv(",
        "libc::select(",
        "libc::epoll_wait(",
        "libc::fcntl(",
        "libc::sigwait(",
        "libc::pause(",
        "libc::pthread_join(",
        "libc::pthread_cond_wait(",
        "libc::pthread_cond_timedwait(",
        "libc::pthread_testcancel(",
        "libc::fopen(",
        "libc::fprintf(",
        "libc::syslog(",
        "libc::dlopen(",
        ".write_all(",
        ".flush(",
        "File::open(",
        "File::create(",
        "OpenOptions",
        "fs::read",
        "fs::write(",
        "log::error!(",
        "log::warn!(",
        "log::info!(",
    ];

    /// Where each may appear, and why it cannot act on a pending cancel there.
    const KNOWN: &[(&str, &str, usize)] = &[
        // write_stderr (say_err!'s) and sleep, the wrappers themselves. No eprint! or
        // eprintln! anywhere: they panic when stderr fails.
        ("sys/cancel.rs", "thread::sleep(", 1),
        // Inside uncancellable: the report's open, writes and close (also the child's close of
        // its parent's report), the look-up of a real function in a library loaded RTLD_LOCAL.
        ("sys/real.rs", "libc::dlopen(", 1),
        // (the open and the writes are cmsafe_core::outfile's, called there).
        ("audit/report_file.rs", "libc::close(", 2),
        // userfaultfd: its descriptor closed inside uncancellable (a refused API, handed over
        // to the fault thread); the fault thread's closes (its table's, a stderr copy's, /proc's)
        // and reads of faults and of /proc (its own thread: never cancelled).
        ("audit/uffd.rs", "libc::close(", 5),
        ("audit/pages.rs", "libc::close(", 1),
        // Inside uncancellable: whether a seccomp filter is in force, read once.
        ("sys/seccomp.rs", "fs::read", 1),
        ("audit/uffd.rs", "libc::open(", 1),
        ("audit/uffd.rs", "libc::read(", 2),
    ];

    /// Occurrences of `pat` in `src` outside comments; a name is not counted inside a longer
    /// one (`print!(` does not count `eprint!(`), a method is counted on any receiver.
    fn count(src: &str, pat: &str) -> usize {
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let whole_name = pat.starts_with(ident);
        src.lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .map(|l| {
                l.match_indices(pat)
                    .filter(|&(i, _)| !whole_name || !l[..i].ends_with(ident))
                    .count()
            })
            .sum()
    }

    #[test]
    fn counting_tells_the_calls_apart() {
        assert_eq!(
            count("eprint!(a); eprintln!(b); // print!(c)", "print!("),
            0
        );
        assert_eq!(count("eprint!(a); eprintln!(b);", "eprint!("), 1);
        assert_eq!(
            count("std::thread::sleep(d); thread::sleep(e)", "thread::sleep("),
            2
        );
        assert_eq!(count("let _ = f.write_all(b);", ".write_all("), 1);
    }

    /// The preload's source files, every room's: paths from `src`, with `/` between folders.
    fn sources(src: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("the preload's sources") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                sources(src, &path, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let name = path.strip_prefix(src).expect("below src");
            let name: Vec<_> = name.iter().map(|c| c.to_string_lossy()).collect();
            let text = std::fs::read_to_string(&path).expect("a source file");
            out.push((name.join("/"), text));
        }
    }

    #[test]
    fn the_cancellation_points_are_the_known_ones() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&dir, &dir, &mut files);
        for (name, src) in &files {
            // A file's unit tests, at its end, are not the preload's work (test-only items
            // before them are scanned: they share the code's lines).
            let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            for &pat in POINTS {
                let known = KNOWN
                    .iter()
                    .find(|&&(f, p, _)| f == name && p == pat)
                    .map_or(0, |&(_, _, n)| n);
                assert_eq!(
                    count(code, pat),
                    known,
                    "{name}: {pat} is a cancellation point; run it under cancel::uncancellable \
                     (say_err!, cancel::sleep) and list it here"
                );
            }
        }
        // Every room is read: a file in each, and the listed places among them.
        for room in ["audit/", "cm/", "sys/", "verbs/"] {
            assert!(
                files.iter().any(|(n, _)| n.starts_with(room)),
                "no file read in {room}"
            );
        }
        for &(f, _, _) in KNOWN {
            assert!(files.iter().any(|(n, _)| n == f), "{f} not read");
        }
        assert!(
            files.len() > 20,
            "read {} files of {}",
            files.len(),
            dir.display()
        );
    }
}
