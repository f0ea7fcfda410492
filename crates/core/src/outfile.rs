//! The files cmsafe writes inside other people's processes (the flight recorder's dump, the
//! preload's JSON-lines report), most of them root's: each is new, ours alone, never reached
//! through a symlink, never a FIFO or a device that could block us, one per process, and a
//! write that fails is counted and said.
//!
//! - [`Template`]: the path a setting gives, `%p` replaced by the pid. The process that read
//!   the setting owns the plain name; any other (a forked child) writes `NAME.<pid>` when the
//!   template has no `%p`, so that a child never touches its parent's file.
//! - [`create`]: the file, new, with O_EXCL and O_NOFOLLOW, mode 0600; when the name exists,
//!   whatever it is, `NAME.<pid>` instead, once.
//! - [`write_all`]: a whole buffer, in write(2)s.
//! - [`WriteFailures`]: the count of failed writes, and whether they were said.
//!
//! Nothing here allocates or takes a lock: a path is built in a buffer of its own, and the
//! calls are system calls and atomics, so they may run on any thread, at exit, and on a
//! misuse's abort.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use crate::errno::{self, Errno};

/// The longest path, its NUL included (PATH_MAX).
pub const PATH_MAX: usize = libc::PATH_MAX as usize;

/// The calling process's id.
fn getpid() -> libc::pid_t {
    // SAFETY: getpid(2) has no preconditions; glibc asks the kernel each time, so a forked
    // child gets its own.
    unsafe { libc::getpid() }
}

/// A path in a buffer of its own, NUL-terminated: made and passed around with no allocation.
pub struct Path {
    buf: [u8; PATH_MAX],
    /// The bytes before the NUL.
    len: usize,
}

impl Path {
    /// `bytes` (no NUL among them) as a path; ENAMETOOLONG when they do not fit.
    pub fn new(bytes: &[u8]) -> Result<Path, Errno> {
        let mut p = Path {
            buf: [0; PATH_MAX],
            len: 0,
        };
        p.push(bytes)?;
        Ok(p)
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), Errno> {
        if bytes.contains(&0) {
            return Err(libc::EINVAL);
        }
        // One byte stays for the NUL.
        if bytes.len() >= PATH_MAX - self.len {
            return Err(libc::ENAMETOOLONG);
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        self.buf[self.len] = 0;
        Ok(())
    }

    /// `pid` in decimal (core's formatting, which allocates nothing).
    fn push_pid(&mut self, pid: libc::pid_t) -> Result<(), Errno> {
        fmt::Write::write_fmt(self, format_args!("{pid}")).map_err(|_| libc::ENAMETOOLONG)
    }

    /// This path with `.<pid>` after it.
    pub fn with_pid(&self, pid: libc::pid_t) -> Result<Path, Errno> {
        let mut p = Path::new(self.as_bytes())?;
        p.push(b".")?;
        p.push_pid(pid)?;
        Ok(p)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn as_c_str(&self) -> &CStr {
        // SAFETY: `buf[len]` is the NUL `push` wrote, and no byte before it is one.
        unsafe { CStr::from_bytes_with_nul_unchecked(&self.buf[..=self.len]) }
    }

    /// The path for a line on stderr: it came from the environment, so every byte that is not
    /// printable ASCII is escaped (`\xNN`, `\n`), as are quotes and backslashes.
    pub fn escaped(&self) -> impl fmt::Display + '_ {
        self.as_bytes().escape_ascii()
    }
}

/// Text pushed on the path (a pid's digits); an error when it does not fit.
impl fmt::Write for Path {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes()).map_err(|_| fmt::Error)
    }
}

impl fmt::Debug for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.escaped())
    }
}

/// A path setting, as read: `%p` in it becomes the pid of the process that writes. Read by one
/// process, its owner, which writes the plain name; any other process, a child forked after
/// the setting was read, writes `NAME.<pid>` when the template has no `%p` (with one, the name
/// is already its own). Nothing but `%p` is special: `%%p` is a percent sign and the pid.
pub struct Template {
    text: CString,
    owner: libc::pid_t,
}

impl Template {
    /// `text`, owned by the calling process; None when it is empty (no file).
    pub fn new(text: CString) -> Option<Template> {
        Template::owned_by(text, getpid())
    }

    /// `text`, owned by process `owner`.
    pub fn owned_by(text: CString, owner: libc::pid_t) -> Option<Template> {
        (!text.is_empty()).then_some(Template { text, owner })
    }

    /// The setting as given, `%p` and all.
    pub fn text(&self) -> &CStr {
        &self.text
    }

    /// The process that owns the plain name.
    pub fn owner(&self) -> libc::pid_t {
        self.owner
    }

    /// The name for the calling process (see [`Template::path_for`]).
    pub fn path(&self) -> Result<Path, Errno> {
        self.path_for(getpid())
    }

    /// The name for process `pid`: each `%p` becomes `pid`; with none, a process other than the
    /// owner gets `.<pid>` after the name. ENAMETOOLONG when it is longer than PATH_MAX.
    pub fn path_for(&self, pid: libc::pid_t) -> Result<Path, Errno> {
        let mut rest = self.text.to_bytes();
        let mut p = Path::new(b"")?;
        let mut expanded = false;
        while let Some(at) = rest.windows(2).position(|w| w == b"%p") {
            p.push(&rest[..at])?;
            p.push_pid(pid)?;
            rest = &rest[at + 2..];
            expanded = true;
        }
        p.push(rest)?;
        if expanded || pid == self.owner {
            Ok(p)
        } else {
            p.with_pid(pid)
        }
    }
}

/// What [`create`] did: the name it tried last, `NAME.<pid>` when `renamed` (the name asked for
/// existed), and the file made there (closed when dropped), or the errno of the open(2) that
/// failed.
pub struct Creation {
    pub path: Path,
    pub renamed: bool,
    pub file: Result<OwnedFd, Errno>,
}

/// Creates `path`, for writing, as a new file of our own: open with O_CREAT|O_EXCL, so an
/// existing name of any kind (a file, a symlink, dangling or not, a FIFO, a device) is never
/// opened, let alone truncated or followed; O_NOFOLLOW and O_NONBLOCK besides, so that nothing
/// could make the open follow a link or wait on a FIFO, and no symbolic link in a directory of
/// the path either (openat2(2) RESOLVE_NO_SYMLINKS: ELOOP); O_CLOEXEC; mode 0600 (the file may hold
/// heap addresses), which the umask can only narrow, never widen. Then fstat(2): anything but a
/// regular file is refused (EINVAL), though O_EXCL already makes one.
///
/// When the name exists (EEXIST), the file is `path.<pid>` instead (this process's pid),
/// created by the same rules, tried once: the caller learns the name used (`renamed`) and says
/// it on stderr. Any other error, or a second EEXIST, is returned with the name tried.
pub fn create(path: Path) -> Creation {
    match open_new(path.as_c_str()) {
        Err(libc::EEXIST) => match path.with_pid(getpid()) {
            Ok(aside) => Creation {
                file: open_new(aside.as_c_str()),
                path: aside,
                renamed: true,
            },
            Err(e) => Creation {
                path,
                renamed: false,
                file: Err(e),
            },
        },
        file => Creation {
            path,
            renamed: false,
            file,
        },
    }
}

/// struct open_how (linux/openat2.h).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// openat2(2)'s RESOLVE_NO_SYMLINKS: no symbolic link anywhere on the path.
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// The new file at `path` (see [`create`]).
fn open_new(path: &CStr) -> Result<OwnedFd, Errno> {
    let file = open_no_symlinks(path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)?;
    regular(file.as_raw_fd())?;
    Ok(file)
}

/// A file's identity: its device and inode numbers and, where the filesystem keeps one, its
/// birth time: an inode number freed by a removed file and given to a new one (the program's,
/// made at the number of a descriptor of ours it closed) differs by its birth time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    dev: u64,
    ino: u64,
    /// Seconds and nanoseconds; (0, 0) where there is none.
    born: (i64, u32),
}

/// The identity of the file open at `fd`: statx(2), or fstat(2) (no birth time) where statx is
/// missing (before Linux 4.11) or refused; else the errno.
pub fn identity(fd: RawFd) -> Result<Identity, Errno> {
    // SAFETY: all-zero is a valid `statx`, which statx(2) fills.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH names `fd`; a live out pointer.
    let done = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_INO | libc::STATX_BTIME,
            &mut stx,
        )
    };
    if done == 0 {
        let born = if stx.stx_mask & libc::STATX_BTIME != 0 {
            (stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec)
        } else {
            (0, 0)
        };
        return Ok(Identity {
            dev: libc::makedev(stx.stx_dev_major, stx.stx_dev_minor),
            ino: stx.stx_ino,
            born,
        });
    }
    match errno::get() {
        libc::ENOSYS | libc::EPERM => {}
        e => return Err(e),
    }
    // SAFETY: all-zero is a valid `stat`, which fstat(2) fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live out pointer; any fd is fine (a bad one fails).
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(errno::get());
    }
    Ok(Identity {
        dev: st.st_dev,
        ino: st.st_ino,
        born: (0, 0),
    })
}

/// The file [`create`] made at `path` (identity `made`), opened again for appending, when the
/// descriptor we had of it is gone (a program that closes every descriptor it does not know
/// of). Opened by the same rules but never created (no O_CREAT), and kept only when it is the
/// very file made (ESTALE otherwise: another file put at the name since, which is not ours to
/// write).
pub fn reopen(path: &CStr, made: Identity) -> Result<OwnedFd, Errno> {
    let file = open_no_symlinks(path, libc::O_WRONLY | libc::O_APPEND)?;
    if identity(file.as_raw_fd())? != made {
        return Err(libc::ESTALE);
    }
    Ok(file)
}

/// `path` opened with `flags` and O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC besides, mode 0600 when
/// it creates the file, and no symbolic link anywhere on the path where the kernel can refuse
/// one (see `create`).
fn open_no_symlinks(path: &CStr, flags: libc::c_int) -> Result<OwnedFd, Errno> {
    let flags = flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let how = OpenHow {
        flags: flags as u64,
        mode: if flags & libc::O_CREAT != 0 { 0o600 } else { 0 },
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // A symbolic link in a directory of the path would let whoever made it choose where a
    // privileged program's file is made: openat2(2) refuses any (ELOOP). Before Linux 5.6, or
    // where a seccomp filter refuses the call, open(2) refuses one at the name itself only.
    // SAFETY: a NUL-terminated path and an open_how of its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    } as i32;
    let fd = if fd < 0 && matches!(errno::get(), libc::ENOSYS | libc::EPERM) {
        // SAFETY: a NUL-terminated path; flags and mode are plain integers.
        unsafe { libc::open(path.as_ptr(), flags, 0o600 as libc::c_uint) }
    } else {
        fd
    };
    if fd < 0 {
        return Err(errno::get());
    }
    // SAFETY: a descriptor open(2) just gave us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Ok when `fd` is a regular file; EINVAL when it is anything else, or fstat(2)'s errno.
fn regular(fd: RawFd) -> Result<(), Errno> {
    // SAFETY: all-zero is a valid `stat`, which fstat(2) fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live out pointer; any fd is fine (a bad one fails).
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(errno::get());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// Writes all of `buf` to `fd`, in as many write(2)s as it takes; EINTR is retried. The errno of
/// the write that failed otherwise (what came before it is written), EIO for a write of
/// nothing, EFBIG (written up to the limit, no SIGXFSZ) when it would pass RLIMIT_FSIZE. No
/// allocation, no lock.
pub fn write_all(fd: RawFd, buf: &[u8]) -> Result<(), Errno> {
    let room = room(fd, buf.len());
    write_whole(fd, &buf[..room])?;
    if room < buf.len() {
        return Err(libc::EFBIG);
    }
    Ok(())
}

fn write_whole(fd: RawFd, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        // SAFETY: reads `buf.len()` bytes of a live buffer; any fd is fine (a bad one fails).
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n > 0 {
            buf = &buf[n as usize..];
        } else if n == 0 {
            return Err(libc::EIO);
        } else {
            match errno::get() {
                libc::EINTR => continue,
                e => return Err(e),
            }
        }
    }
    Ok(())
}

/// How many of `len` more bytes at `fd`'s position stay within RLIMIT_FSIZE. Past it, write(2)
/// raises SIGXFSZ, whose default action kills the process: a program with a size limit would die
/// of our report or dump, where it lives without them; the file is cut there instead, as a full
/// disk cuts it. A descriptor with no position (a pipe, a socket) has no size to limit.
fn room(fd: RawFd, len: usize) -> usize {
    // SAFETY: all-zero is a valid rlimit, which getrlimit(2) fills.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a live out pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return len;
    }
    // SAFETY: lseek(2) that only reads the position.
    let at = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
    if at < 0 {
        return len;
    }
    lim.rlim_cur.saturating_sub(at as u64).min(len as u64) as usize
}

/// Writes to one of our files that failed: counted, for a caller's exit summary, with the
/// first one's errno, and a flag so that the caller says the failure on stderr once, not once a
/// write. Atomics alone: any thread, a signal handler, exit.
pub struct WriteFailures {
    failed: AtomicU64,
    first_errno: AtomicI32,
    said: AtomicBool,
}

impl WriteFailures {
    pub const fn new() -> Self {
        WriteFailures {
            failed: AtomicU64::new(0),
            first_errno: AtomicI32::new(0),
            said: AtomicBool::new(false),
        }
    }

    /// Counts a write that failed with `errno`. True once, for the first failure counted (or the
    /// first since [`WriteFailures::reset`]): the caller says it on stderr then.
    pub fn count(&self, errno: Errno) -> bool {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .first_errno
            .compare_exchange(0, errno, Ordering::Relaxed, Ordering::Relaxed);
        !self.said.swap(true, Ordering::Relaxed)
    }

    /// Failed writes counted.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// The errno of the first failed write counted, 0 for none.
    pub fn first_errno(&self) -> Errno {
        self.first_errno.load(Ordering::Relaxed)
    }

    /// Back to none counted and none said: a forked child's file is its own, and so are its
    /// failures.
    pub fn reset(&self) {
        self.failed.store(0, Ordering::Relaxed);
        self.first_errno.store(0, Ordering::Relaxed);
        self.said.store(false, Ordering::Relaxed);
    }
}

impl Default for WriteFailures {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symbolic link to a directory, anywhere on the path, is refused (ELOOP), so whoever
    /// made it cannot choose where the file is made; the same path without the link works.
    #[test]
    fn no_file_is_made_through_a_linked_directory() {
        let dir = std::env::temp_dir().join(format!("cmsafe-linkdir-{}", std::process::id()));
        let real = dir.join("real");
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.join("link")).unwrap();
        let path = |p: &std::path::Path| Path::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let through = create(path(&dir.join("link").join("r.json")));
        assert_eq!(through.file.err(), Some(libc::ELOOP));
        assert!(
            !real.join("r.json").exists(),
            "nothing made behind the link"
        );
        assert!(create(path(&real.join("r.json"))).file.is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file made is opened again by its name only while it is the very file made: not after
    /// it was removed and another made at its name, whose inode number may be the removed
    /// file's own (the birth time tells them apart), and not through a symbolic link.
    #[test]
    fn a_file_is_reopened_only_while_it_is_the_one_made() {
        let dir = std::env::temp_dir().join(format!("cmsafe-reopen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let name = dir.join("r.json");
        let path = Path::new(name.as_os_str().as_encoded_bytes()).unwrap();
        let made = create(Path::new(name.as_os_str().as_encoded_bytes()).unwrap())
            .file
            .unwrap();
        let was = identity(made.as_raw_fd()).unwrap();
        write_all(made.as_raw_fd(), b"one\n").unwrap();
        let again = reopen(path.as_c_str(), was).unwrap();
        assert_eq!(identity(again.as_raw_fd()), Ok(was));
        write_all(again.as_raw_fd(), b"two\n").unwrap();
        assert_eq!(
            std::fs::read(&name).unwrap(),
            b"one\ntwo\n",
            "appended, not truncated"
        );
        drop((made, again));
        // Removed, and a file of someone else's made at the name: the inode number freed is
        // often the one the new file gets.
        std::fs::remove_file(&name).unwrap();
        std::fs::write(&name, b"theirs\n").unwrap();
        assert_eq!(reopen(path.as_c_str(), was).err(), Some(libc::ESTALE));
        assert_eq!(std::fs::read(&name).unwrap(), b"theirs\n");
        // A symbolic link at the name, to the file made: not followed.
        std::fs::remove_file(&name).unwrap();
        let other = dir.join("other.json");
        let other_path = Path::new(other.as_os_str().as_encoded_bytes()).unwrap();
        let made = create(other_path).file.unwrap();
        let was = identity(made.as_raw_fd()).unwrap();
        std::os::unix::fs::symlink(&other, &name).unwrap();
        assert_eq!(reopen(path.as_c_str(), was).err(), Some(libc::ELOOP));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Past RLIMIT_FSIZE a write fails with EFBIG and raises no SIGXFSZ (whose default kills):
    /// in a child, so that the limit and the signal stay there.
    #[test]
    fn a_write_past_the_size_limit_fails_and_kills_nothing() {
        let dir = std::env::temp_dir().join(format!("cmsafe-fsize-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let name = CString::new(dir.join("r").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: fork(2) in a test: the child makes plain system calls and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let lim = libc::rlimit {
                rlim_cur: 100,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: plain calls on the child's own limit and a new file of its own.
            let code = unsafe {
                libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
                let fd = libc::open(name.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o600);
                match (write_all(fd, &[b'x'; 60]), write_all(fd, &[b'y'; 60])) {
                    (Ok(()), Err(libc::EFBIG)) => 0,
                    _ => 1,
                }
            };
            // SAFETY: leaving the child.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "killed: {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 0);
        // Cut at the limit, as a full disk cuts it.
        assert_eq!(std::fs::metadata(dir.join("r")).unwrap().len(), 100);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    use crate::stderr::test_child::TestDir;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    fn path(p: &std::path::Path) -> Path {
        use std::os::unix::ffi::OsStrExt;
        Path::new(p.as_os_str().as_bytes()).unwrap()
    }

    fn template(p: &std::path::Path) -> Template {
        use std::os::unix::ffi::OsStrExt;
        Template::new(CString::new(p.as_os_str().as_bytes()).unwrap()).unwrap()
    }

    fn write_str(c: &Creation, s: &str) {
        let fd = c.file.as_ref().expect("created").as_raw_fd();
        write_all(fd, s.as_bytes()).unwrap();
    }

    /// A file someone else made at `p`: `text`, mode `mode`.
    fn someone_s(p: &std::path::Path, text: &str, mode: u32) {
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn pid() -> i32 {
        std::process::id() as i32
    }

    #[test]
    fn pct_p_becomes_the_pid_and_a_child_without_it_gets_a_name_of_its_own() {
        let t = Template::owned_by(c"/r/dump.%p.json".into(), 100).unwrap();
        assert_eq!(t.path_for(100).unwrap().as_bytes(), b"/r/dump.100.json");
        // With %p, another process's name is already its own.
        assert_eq!(t.path_for(4242).unwrap().as_bytes(), b"/r/dump.4242.json");
        let t = Template::owned_by(c"%p/%%p-%p%".into(), 7).unwrap();
        assert_eq!(t.path_for(7).unwrap().as_bytes(), b"7/%7-7%");
        let t = Template::owned_by(c"/r/dump".into(), 100).unwrap();
        assert_eq!(t.path_for(100).unwrap().as_bytes(), b"/r/dump");
        assert_eq!(t.path_for(101).unwrap().as_bytes(), b"/r/dump.101");
        assert_eq!(t.text(), c"/r/dump");
        assert_eq!(t.owner(), 100);
        assert!(Template::new(c"".into()).is_none(), "empty: no file");
        // The calling process owns what it reads.
        let t = Template::new(c"/r/x".into()).unwrap();
        assert_eq!(t.owner(), pid());
        assert_eq!(t.path().unwrap().as_bytes(), b"/r/x");
        // Too long, before or after the pid.
        let long = vec![b'a'; PATH_MAX - 2];
        let t = Template::owned_by(CString::new(long.clone()).unwrap(), 1).unwrap();
        assert_eq!(t.path_for(1).unwrap().as_bytes(), &long[..]);
        assert_eq!(t.path_for(2).err(), Some(libc::ENAMETOOLONG));
        assert_eq!(Path::new(&[b'a'; PATH_MAX]).err(), Some(libc::ENAMETOOLONG));
        assert_eq!(Path::new(b"a\0b").err(), Some(libc::EINVAL));
    }

    #[test]
    fn a_new_file_is_0600_even_with_umask_0() {
        let d = TestDir::new("outfile-umask");
        for (umask, name) in [(0, "u0"), (0o077, "u077"), (0o022, "u022")] {
            let p = d.join(name);
            // The umask is the process's: set in a child of its own.
            // SAFETY: the child makes system calls only (no allocation: `create` makes none)
            // and leaves with _exit.
            let child = unsafe { libc::fork() };
            if child == 0 {
                // SAFETY: umask(2) and _exit(2) have no preconditions.
                unsafe { libc::umask(umask) };
                let c = create(path(&p));
                let ok = c.file.is_ok() && !c.renamed;
                // SAFETY: as above.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            assert_eq!(wait(child), 0, "umask {umask:o}");
            assert_eq!(mode(&p), 0o600, "umask {umask:o}");
        }
    }

    /// The exit status of our child `pid`.
    fn wait(pid: libc::pid_t) -> i32 {
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: our own child; a live out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "status {status:#x}");
        libc::WEXITSTATUS(status)
    }

    #[test]
    fn an_existing_file_is_left_as_it_is_and_the_dump_goes_beside_it() {
        let d = TestDir::new("outfile-exists");
        let theirs = d.join("dump");
        someone_s(&theirs, "not ours\n", 0o644);
        let c = create(path(&theirs));
        assert!(c.renamed);
        let aside = d.join(format!("dump.{}", pid()));
        assert_eq!(c.path.as_bytes(), path(&aside).as_bytes());
        write_str(&c, "ours\n");
        drop(c);
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "not ours\n");
        assert_eq!(mode(&theirs), 0o644);
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "ours\n");
        assert_eq!(mode(&aside), 0o600);
        // Both names taken: nothing opened, the second name said.
        let e = create(path(&theirs));
        assert!(e.renamed);
        assert_eq!(e.file.err(), Some(libc::EEXIST));
        assert_eq!(e.path.as_bytes(), path(&aside).as_bytes());
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "ours\n");
        // Any other error is the first name's.
        let e = create(path(&d.join("no/such/dir")));
        assert!(!e.renamed);
        assert_eq!(e.file.err(), Some(libc::ENOENT));
        assert_eq!(e.path.as_bytes(), path(&d.join("no/such/dir")).as_bytes());
    }

    #[test]
    fn a_symlink_is_never_followed() {
        let d = TestDir::new("outfile-symlink");
        let target = d.join("target");
        someone_s(&target, "target\n", 0o640);
        let link = d.join("dump");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink(d.join("made"), &dangling).unwrap();
        for (name, l) in [("dump", &link), ("dangling", &dangling)] {
            let c = create(path(l));
            assert!(c.renamed, "{name}");
            write_str(&c, name);
            assert_eq!(
                std::fs::read_to_string(d.join(format!("{name}.{}", pid()))).unwrap(),
                name
            );
            assert!(std::fs::symlink_metadata(l).unwrap().is_symlink());
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "target\n");
        assert_eq!(mode(&target), 0o640);
        let p = pid();
        assert_eq!(
            d.names(),
            [
                "dangling".to_string(),
                format!("dangling.{p}"),
                "dump".into(),
                format!("dump.{p}"),
                "target".into()
            ],
            "the dangling link's target never made"
        );
    }

    #[test]
    fn a_fifo_is_never_opened_and_never_blocks() {
        let d = TestDir::new("outfile-fifo");
        let fifo = d.join("dump");
        let c = CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path(&fifo);
        // A FIFO opened for writing with no reader would block for good: in a thread, with a
        // deadline (the thread is left behind if it blocks).
        std::thread::spawn(move || {
            let c = create(p);
            let _ = tx.send((c.file.is_ok(), c.renamed, c.path.as_bytes().to_vec()));
        });
        let (made, renamed, name) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the create blocked on the FIFO");
        assert!(made && renamed);
        assert_eq!(name, path(&d.join(format!("dump.{}", pid()))).as_bytes());
        let meta = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(meta.file_type().is_fifo());
        // And a FIFO's or a device's descriptor is refused by the check after the open.
        // SAFETY: a NUL-terminated path; O_RDWR does not wait for a peer.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        assert!(fd >= 0);
        assert_eq!(regular(fd), Err(libc::EINVAL));
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        let null = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(regular(null.as_raw_fd()), Err(libc::EINVAL));
        let file = std::fs::File::open(d.join(format!("dump.{}", pid()))).unwrap();
        assert_eq!(regular(file.as_raw_fd()), Ok(()));
    }

    #[test]
    fn a_forked_child_writes_a_name_of_its_own() {
        let d = TestDir::new("outfile-fork");
        let t = template(&d.join("dump"));
        // SAFETY: the child makes system calls only (no allocation: `path`, `create` and
        // `write_all` make none) and leaves with _exit.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let ok = t.path().is_ok_and(|p| {
                let c = create(p);
                !c.renamed
                    && c.file
                        .is_ok_and(|f| write_all(f.as_raw_fd(), b"child\n").is_ok())
            });
            // SAFETY: _exit(2) has no preconditions.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert_eq!(wait(child), 0);
        assert_eq!(
            d.names(),
            [format!("dump.{child}")],
            "the parent's name untouched"
        );
        assert_eq!(
            std::fs::read_to_string(d.join(format!("dump.{child}"))).unwrap(),
            "child\n"
        );
        let c = create(t.path().unwrap());
        assert!(c.file.is_ok() && !c.renamed);
        assert_eq!(c.path.as_bytes(), path(&d.join("dump")).as_bytes());
    }

    #[test]
    fn a_write_to_a_full_device_fails_and_is_counted_once_said() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let failures = WriteFailures::new();
        assert_eq!((failures.failed(), failures.first_errno()), (0, 0));
        for i in 0..3 {
            let e = write_all(full.as_raw_fd(), b"record\n").unwrap_err();
            assert_eq!(e, libc::ENOSPC);
            assert_eq!(failures.count(e), i == 0, "said the first time only");
        }
        assert!(!failures.count(libc::EIO));
        assert_eq!(
            (failures.failed(), failures.first_errno()),
            (4, libc::ENOSPC)
        );
        failures.reset();
        assert_eq!((failures.failed(), failures.first_errno()), (0, 0));
        assert!(failures.count(libc::EBADF), "said again after a reset");
        assert_eq!(write_all(-1, b"x"), Err(libc::EBADF));
        assert_eq!(write_all(full.as_raw_fd(), b""), Ok(()), "nothing to write");
    }

    /// A write interrupted by a signal (no SA_RESTART) before it wrote anything is retried: the
    /// whole buffer arrives.
    #[test]
    fn a_write_interrupted_by_a_signal_goes_on() {
        static CAUGHT: AtomicU32 = AtomicU32::new(0);
        extern "C" fn on_signal(_: libc::c_int) {
            CAUGHT.fetch_add(1, Ordering::Relaxed);
        }
        let mut p = [0; 2];
        // SAFETY: a live array for pipe2(2); then our own descriptors, a handler of ours
        // for a signal no other test uses.
        unsafe {
            assert_eq!(libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC), 0);
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
        // SAFETY: fresh descriptors of our own.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        // Fill the pipe, so the next write blocks before writing anything.
        // SAFETY: fcntl(2) on our own descriptor.
        unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let mut filled = 0;
        // SAFETY: a live buffer of 4096 bytes.
        while unsafe { libc::write(w.as_raw_fd(), [1u8; 4096].as_ptr().cast(), 4096) } > 0 {
            filled += 4096;
        }
        // SAFETY: as above.
        unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, 0) };
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            // SAFETY: pthread_self(3) has no preconditions.
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            write_all(w.as_raw_fd(), &[2u8; 100_000])
        });
        let thread = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: the writer thread is alive: it is blocked in write(2) until we read.
        assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR2) }, 0);
        while CAUGHT.load(Ordering::Relaxed) == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            // SAFETY: a live buffer.
            let n = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            assert!(n >= 0);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n as usize]);
            if got.len() == filled + 100_000 {
                break;
            }
        }
        assert_eq!(writer.join().unwrap(), Ok(()));
        assert_eq!(got.len(), filled + 100_000);
        assert!(got[filled..].iter().all(|&b| b == 2));
    }
}
