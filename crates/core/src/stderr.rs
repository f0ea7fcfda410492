//! Lines to stderr, or another file descriptor, that cannot panic.
//!
//! `eprintln!` panics when its write fails (fd 2 a pipe whose reader is gone with SIGPIPE
//! ignored, a full disk, a terminal hung up). On the paths that report a misuse or log, such a
//! panic would unwind to the C boundary, whose `catch_unwind` turns it into a normal return: a
//! misuse that must abort would return instead. These writes go out with write(2), from a
//! buffer on the stack: nothing here allocates, so a misuse's abort path may use it.

use std::fmt::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// Room for one line: a line that fits goes out in one write(2), so lines of concurrent
/// threads do not interleave (a pipe writes up to PIPE_BUF bytes at once); a longer one goes
/// out in pieces.
const LINE: usize = 1024;

/// Text for a file descriptor, in writes of up to [`LINE`] bytes; the first write(2) error is
/// kept (see [`FdOut::error`]) and what follows it is dropped.
pub(crate) struct FdOut {
    fd: i32,
    buf: [u8; LINE],
    len: usize,
    error: i32,
    /// Our own lines on the program's stderr: written only to the stderr the program started
    /// with, and never waited on (`ours`).
    ours: bool,
}

impl FdOut {
    /// For a caller's descriptor (cmsafe_flight_dump's): written as it asks, blocking or not.
    pub(crate) fn new(fd: i32) -> Self {
        FdOut {
            fd,
            buf: [0; LINE],
            len: 0,
            error: 0,
            ours: false,
        }
    }

    /// For our lines on stderr (`fd` 2, or a copy of it): never waited on (`ours`).
    pub(crate) fn stderr(fd: i32) -> Self {
        FdOut {
            ours: true,
            ..FdOut::new(fd)
        }
    }

    /// Room left before the next write(2): a caller that keeps its lines whole in one write
    /// flushes first when a line may not fit.
    pub(crate) fn room(&self) -> usize {
        LINE - self.len
    }

    /// Writes out what is buffered (retrying EINTR and short writes); nothing after an error.
    pub(crate) fn flush(&mut self) {
        if self.error == 0 && self.len > 0 {
            let done = if self.ours {
                ours(self.fd, &self.buf[..self.len])
            } else {
                crate::outfile::write_all(self.fd, &self.buf[..self.len])
            };
            if let Err(e) = done {
                self.error = e;
            }
        }
        self.len = 0;
    }

    /// The errno of the first write(2) that failed, 0 if none did.
    pub(crate) fn error(&self) -> i32 {
        self.error
    }
}

impl Write for FdOut {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut s = s.as_bytes();
        while !s.is_empty() {
            if self.len == LINE {
                self.flush();
            }
            let n = s.len().min(LINE - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
            self.len += n;
            s = &s[n..];
        }
        Ok(())
    }
}

/// The identity (device, inode) of the file the process's stderr was when the library was
/// loaded; 0 for none remembered (`remember` not called), u64::MAX when fd 2 was closed then.
static STARTED_WITH: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Our lines that were not written: stderr would have blocked (a pipe nobody drains, a
/// terminal stopped by ^S), or it is no longer the file it was at load.
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: all-zero is a valid `stat`, which fstat(2) fills; any fd is fine.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live out pointer.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// Remembers which file the process's stderr is: called when a library of ours is loaded,
/// before the program runs. A daemon that later closes its stderr and gets a socket or a file of
/// its own at fd 2 then never finds our lines in it.
pub fn remember() {
    let (dev, ino) = identity(2).unwrap_or((u64::MAX, u64::MAX));
    STARTED_WITH[0].store(dev, Ordering::Relaxed);
    STARTED_WITH[1].store(ino, Ordering::Relaxed);
}

/// How many of our lines were not written (`DROPPED`).
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Writes `buf`, our own text, to `fd` (stderr or a copy of it): only when it is the file the
/// process started with, and never waiting, since an exit or a misuse's abort must not hang on
/// a stderr nobody drains. What cannot be written now is dropped and counted.
fn ours(fd: i32, buf: &[u8]) -> Result<(), i32> {
    let dev = STARTED_WITH[0].load(Ordering::Relaxed);
    if dev != 0 {
        let started = (dev, STARTED_WITH[1].load(Ordering::Relaxed));
        if identity(fd) != Some(started) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return Err(libc::EBADF);
        }
    }
    let r = write_nowait(fd, buf);
    if r.is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// write(2) of `buf` that never blocks, whatever the descriptor's own flags: RWF_NOWAIT
/// (pipes and sockets honour it), else a poll(2) for room first on what may block (a FIFO, a
/// socket, a terminal); a regular file is written as it is. EAGAIN when it would block.
fn write_nowait(fd: i32, mut buf: &[u8]) -> Result<(), i32> {
    while !buf.is_empty() {
        let iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: one iovec over a live buffer; offset -1: the file's own position.
        let n = unsafe { libc::pwritev2(fd, &iov, 1, -1, libc::RWF_NOWAIT) };
        let n = if n < 0 && matches!(crate::errno::get(), libc::EOPNOTSUPP | libc::EINVAL) {
            if may_block(fd) && !room(fd) {
                return Err(libc::EAGAIN);
            }
            // SAFETY: as above.
            unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) }
        } else {
            n
        };
        match n {
            n if n > 0 => buf = &buf[n as usize..],
            0 => return Err(libc::EIO),
            _ => match crate::errno::get() {
                libc::EINTR => continue,
                e => return Err(e),
            },
        }
    }
    Ok(())
}

fn may_block(fd: i32) -> bool {
    // SAFETY: as in `identity`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live out pointer.
    let failed = unsafe { libc::fstat(fd, &mut st) } != 0;
    failed || st.st_mode & libc::S_IFMT != libc::S_IFREG
}

fn room(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd of our own, no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLOUT != 0 }
}

/// Writes `args` and a newline to stderr, ignoring errors. Never panics, never allocates, never
/// blocks (`ours`).
pub fn line(args: fmt::Arguments<'_>) {
    line_on(2, args)
}

/// The same on `fd`, a copy of the process's stderr (pidfd_getfd's).
pub fn line_on(fd: i32, args: fmt::Arguments<'_>) {
    let mut out = FdOut::stderr(fd);
    // A Display that fails only cuts the line short: the error is not ours to report.
    let _ = out.write_fmt(args);
    let _ = out.write_str("\n");
    out.flush();
}

/// Writes `text` as it is to stderr, in writes of up to 1 KiB, ignoring errors. Never panics,
/// never allocates, never blocks (`ours`).
pub fn text(text: &str) {
    let mut out = FdOut::stderr(2);
    let _ = out.write_str(text);
    out.flush();
}

/// For tests of this crate and the C ABI's: a test that runs itself again as a child process,
/// where stderr can be made to fail. Not part of the API.
#[doc(hidden)]
pub mod test_child {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output, Stdio};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    /// The part a test asked for when it runs again as a child (see [`rerun`]).
    pub fn child_part() -> Option<String> {
        std::env::var("CMSAFE_TEST_CHILD").ok()
    }

    /// Runs the test `name` again, alone, in a process of its own with CMSAFE_TEST_CHILD set to
    /// `part`. Without libtest's output capture, which stands in for fd 2 in a test's threads
    /// (also in a forked child): there `eprintln!` writes fd 2 as in a C program.
    pub fn rerun(name: &str, part: &str) -> Output {
        rerun_with(name, part, &[])
    }

    /// [`rerun`], with the variables `env` set in the child.
    pub fn rerun_with(name: &str, part: &str, env: &[(&str, &OsStr)]) -> Output {
        child(&std::env::current_exe().unwrap(), name, part, env)
            .output()
            .unwrap()
    }

    /// [`rerun_with`], given `limit` to finish: None when it did not (the child is killed),
    /// for a test of something that must not block.
    pub fn rerun_within(
        name: &str,
        part: &str,
        env: &[(&str, &OsStr)],
        limit: Duration,
    ) -> Option<Output> {
        let mut c = child(&std::env::current_exe().unwrap(), name, part, env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + limit;
        // What the child says is small (a pipe holds it all until it ends).
        while c.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(c.wait_with_output().unwrap())
    }

    fn child(exe: &Path, name: &str, part: &str, env: &[(&str, &OsStr)]) -> Command {
        let mut c = Command::new(exe);
        c.args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env("CMSAFE_TEST_CHILD", part)
            .envs(env.iter().copied());
        c
    }

    /// [`rerun_with`] in a process the kernel starts with AT_SECURE: a copy of the test binary,
    /// setuid root, run by the user nobody. None when this process is not root (nothing else
    /// can make a setuid root program) or the temporary directory is on a nosuid filesystem
    /// (the kernel would ignore the bit). The copy is made by install(1), in a process of its own:
    /// a descriptor open for writing on it in this one would reach the children other tests
    /// fork meanwhile, and its exec would fail with ETXTBSY.
    pub fn rerun_setuid(name: &str, part: &str, env: &[(&str, &OsStr)]) -> Option<Output> {
        use std::os::unix::process::CommandExt;
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        // Removed when dropped, whatever fails first.
        let dir = TestDir::new("setuid");
        let c_dir = std::ffi::CString::new(dir.join("").into_os_string().into_vec()).unwrap();
        // SAFETY: all-zero is a valid statvfs, which statvfs(3) fills from a NUL-terminated path.
        let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::statvfs(c_dir.as_ptr(), &mut fs) }, 0);
        if fs.f_flag & libc::ST_NOSUID != 0 {
            return None;
        }
        let exe = dir.join("setuid-test");
        let installed = Command::new("install")
            .args(["-m", "4755", "-o", "root"])
            .arg(std::env::current_exe().unwrap())
            .arg(&exe)
            .status()
            .unwrap();
        assert!(
            installed.success(),
            "install {}: {installed}",
            exe.display()
        );
        let out = child(&exe, name, part, env)
            .current_dir("/")
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .unwrap();
        Some(out)
    }

    /// A directory of a test's own in the temporary directory, that every user may read (a
    /// setuid child runs as nobody); removed, with what it holds, when dropped.
    pub struct TestDir(PathBuf);

    impl TestDir {
        /// A new directory, `what` in its name.
        pub fn new(what: &str) -> TestDir {
            static N: AtomicU32 = AtomicU32::new(0);
            let d = std::env::temp_dir().join(format!(
                "cmsafe-{what}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            TestDir(d)
        }

        pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
            self.0.join(name)
        }

        /// The names in the directory, sorted.
        pub fn names(&self) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            v.sort();
            v
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The user and group ids of nobody on Debian.
    const NOBODY: u32 = 65534;

    /// In a child: fd 2 becomes a pipe whose reader is gone, with SIGPIPE ignored, so every
    /// write to stderr fails with EPIPE.
    pub fn break_stderr() {
        let mut p = [0; 2];
        // SAFETY: a valid array for pipe(2); then plain descriptor and signal calls on the
        // child's own descriptors.
        unsafe {
            assert_eq!(libc::pipe(p.as_mut_ptr()), 0);
            libc::close(p[0]);
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            assert_eq!(libc::dup2(p[1], 2), 2);
            libc::close(p[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_child::{break_stderr, child_part, rerun};
    use super::*;

    const FAILING: &str = "stderr::tests::a_failing_stderr_makes_eprintln_panic_but_not_a_line";

    #[test]
    fn a_failing_stderr_makes_eprintln_panic_but_not_a_line() {
        if let Some(part) = child_part() {
            match part.as_str() {
                "eprintln" => {
                    break_stderr();
                    eprintln!("lost");
                }
                "line" => {
                    break_stderr();
                    line(format_args!("lost {}", 1));
                }
                "closed" => {
                    // SAFETY: closes this child's own fd 2.
                    unsafe { libc::close(2) };
                    line(format_args!("lost {}", 2));
                }
                _ => unreachable!("{part}"),
            }
            return;
        }
        // The hazard, so that the setup is known to make stderr fail: `eprintln!` panics
        // (libtest's exit status for a failed test).
        let out = rerun(FAILING, "eprintln");
        assert_eq!(out.status.code(), Some(101), "{out:?}");
        // A line returns, whether fd 2 is a broken pipe or closed.
        for part in ["line", "closed"] {
            let out = rerun(FAILING, part);
            assert_eq!(out.status.code(), Some(0), "{part}: {out:?}");
        }
    }

    /// A line longer than the buffer arrives whole, in order, with its newline.
    #[test]
    fn a_long_line_arrives_whole() {
        let text: String = (0..3000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        if child_part().is_some() {
            line(format_args!("{text}"));
            return;
        }
        let out = rerun("stderr::tests::a_long_line_arrives_whole", "long");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stderr.len(), 3001);
        assert_eq!(&out.stderr[..3000], text.as_bytes());
        assert_eq!(out.stderr[3000], b'\n');
    }
}
