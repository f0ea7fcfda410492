//! The flight recorder: the process's last events, dumped as JSON lines on request, at exit
//! and on a misuse's abort. Set up at load from the environment.

use cmsafe_core::env;
use cmsafe_core::setting::Parsed;
use libc::{c_int, size_t};

use super::{fail, guard};
use cmsafe_core::flight;

/// Sets how many of the latest events the flight recorder keeps: `n` records, 0 to turn it
/// off. At load, libcmsafe sets it from `CMSAFE_FLIGHT_EVENTS` (a decimal count), else to
/// CMSAFE_FLIGHT_DEFAULT_EVENTS (4096: the four events of each of a thousand connections'
/// lives, an hour's events of a quiet service, in 256 KiB of address space that fills only as
/// events come; its cost per event is the same at any size).
///
/// Every event `cmsafe_get_event`, `cmsafe_get_event_timeout`, `cmsafe_get_events`,
/// `cmsafe_event_copy` or `cmsafe_compat_get_cm_event` copies is kept: its sequence number,
/// type, status, cm_id, listen id, fetch time, ack time (but for `cmsafe_event_copy`: cmsafe
/// acks in the same call) and release time. The copy holds all but the release time while it
/// is referenced; the release of its last reference (the event's, or its private data
/// buffer's) writes the record, with the release time, into the ring. Recording allocates
/// nothing and makes no system call (the ring is mapped here). The LD_PRELOAD library records
/// nothing here: it writes its own report (cmsafe-audit(1)).
///
/// When to call: best once, at start, before events are fetched. Each call with a new size
/// starts an empty ring: the records held so far are dropped. A call with the size in place
/// changes nothing and keeps the records. `n` is kept as given (a dump prints at most `n`
/// records); the ring holds the next power of two.
///
/// Address space: each ring size (a power of two) is mapped once, at its first use, and reused
/// whenever a size of that power of two is set again; it stays mapped until exit, since another
/// thread may still be writing in it (such a writer's late record never shows in a dump of the
/// ring's later use, nor replaces one of its records). So however often the size changes, the
/// rings take at most twice the largest ring set so far (64 bytes a record of the ring's
/// power of two) and a page for each power of two used: 128 MiB and 21 pages at most, for
/// CMSAFE_FLIGHT_MAX_EVENTS.
///
/// Threads: any; events recorded on other threads during the call go to the old ring or the
/// new one.
///
/// Returns 0, or -1 with errno: EINVAL (`n` above CMSAFE_FLIGHT_MAX_EVENTS, 1048576), ENOMEM
/// (the ring could not be mapped; the ring in place stays).
#[no_mangle]
pub extern "C" fn cmsafe_flight_set_size(n: size_t) -> c_int {
    guard!(fail(libc::EIO), {
        match flight::set_size(n) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Writes the flight recorder's records to `fd` as JSON lines, oldest first: at most the last
/// `n` events (`cmsafe_flight_set_size`), one object a line:
///
/// `{"record":"flight","seq":7,"type":"ESTABLISHED","status":0,"id":"0x5581...","listen_id":null,"fetch_ns":...,"ack_ns":...,"release_ns":...}`
///
/// `type` is librdmacm's name without RDMA_CM_EVENT_ (`rdma_event_str(3)`); `status` as
/// `cmsafe_event_status`; `id` and `listen_id` the cm_ids' addresses (`listen_id` null but for
/// CONNECT_REQUEST). Times are nanoseconds of
/// CLOCK_MONOTONIC: `fetch_ns` is `cmsafe_event_time_ns` (CLOCK_MONOTONIC_COARSE, one kernel
/// tick's resolution); `ack_ns` equals it where cmsafe acked the event in the call that fetched
/// it, microseconds later, inside the same tick (null for `cmsafe_event_copy`, whose caller
/// acks); `release_ns` is when the copy's last
/// reference was released, null while one is held, read from the CPU's counter (TSC, or arm64's
/// virtual count) and scaled to CLOCK_MONOTONIC by this dump, never before `ack_ns`.
/// `bin/cmsafe-timeline` turns a dump into a timeline.
///
/// Events released come from the ring, events still held from their copies. A record being
/// written while the dump reads it is left out, never printed torn; so is a copy being freed
/// and reused meanwhile, and a record dropped because its slot was still being written by a
/// thread as far behind as the ring is long.
///
/// Ownership: `fd` stays the caller's, open, at its new offset. NULL: none.
///
/// Threads: any, while other threads fetch and release: the dump takes no lock and stops no
/// writer. It calls no malloc, so a program may call it from its own crash handler (but
/// write(2) to a closed pipe raises SIGPIPE as any write does). Its time is linear in the
/// ring's size and cmsafe's pool: it reads each slot of both once or twice (32,000 copies held
/// take milliseconds), but it is meant for rare calls, not a loop.
///
/// System calls: write(2) on `fd`, each of whole lines and at most 1 KiB (atomic on a pipe);
/// one clock_gettime(2) (through the vDSO where the clocksource allows); while copies are still
/// held, one mmap(2) and munmap(2) of an index of them (56 bytes a ring slot).
///
/// Returns the number of records written (0 with the recorder off), or -1 with errno: EBADF
/// (`fd` < 0), ENOMEM (no memory for the index of the copies held: nothing was written), or the
/// errno of the write(2) that failed (what came before it was written).
#[no_mangle]
pub extern "C" fn cmsafe_flight_dump(fd: c_int) -> c_int {
    guard!(fail(libc::EIO), {
        if fd < 0 {
            return fail(libc::EBADF);
        }
        match flight::dump(fd) {
            Ok(n) => n.min(c_int::MAX as u64) as c_int,
            Err(e) => fail(e),
        }
    })
}

/// The default size of the flight recorder (see `cmsafe_flight_set_size`).
pub const DEFAULT_FLIGHT_EVENTS: usize = 4096;
const _: () = assert!(DEFAULT_FLIGHT_EVENTS == flight::DEFAULT_FLIGHT_EVENTS);

/// The largest size of the flight recorder: 64 MiB of records.
pub const MAX_FLIGHT_EVENTS: usize = 1 << 20;
const _: () = assert!(MAX_FLIGHT_EVENTS == flight::MAX_FLIGHT_EVENTS);

extern "C" fn dump_at_exit() {
    flight::dump_to_path(false);
}

/// Sets the recorder up: `CMSAFE_FLIGHT_EVENTS` (a count; 0 turns it off) or the default (also
/// when it is empty), and
/// `CMSAFE_FLIGHT_DUMP` (a path: the dump at exit and on a misuse's abort, which otherwise goes
/// to stderr). A value that is no count is said on stderr, and the default kept. Under
/// AT_SECURE (setuid, setgid, file capabilities) neither is read: the defaults apply.
extern "C" fn set_up() {
    // No `stderr::remember` here, unlike the preload: a program linked against libcmsafe chose
    // it, and its stderr is wherever the program points fd 2 (a daemon's log), as for glibc's
    // own abort messages.
    let events = match flight::events_setting(env::var(c"CMSAFE_FLIGHT_EVENTS").as_deref()) {
        Parsed::Unset => flight::DEFAULT_FLIGHT_EVENTS,
        Parsed::Value(n) => n,
        Parsed::Invalid => {
            cmsafe_core::stderr::line(format_args!(
                "cmsafe: CMSAFE_FLIGHT_EVENTS is not a count from 0 to {}: the flight recorder keeps {}",
                flight::MAX_FLIGHT_EVENTS,
                flight::DEFAULT_FLIGHT_EVENTS
            ));
            flight::DEFAULT_FLIGHT_EVENTS
        }
    };
    if flight::set_size(events).is_err() {
        cmsafe_core::stderr::line(format_args!(
            "cmsafe: no memory for the flight recorder: it is off"
        ));
    }
    if let Some(path) = env::var_bytes(c"CMSAFE_FLIGHT_DUMP").filter(|p| !p.is_empty()) {
        flight::set_dump_path(path);
        // SAFETY: a plain extern "C" function with no arguments.
        unsafe { libc::atexit(dump_at_exit) };
    }
}

/// Run by the dynamic loader when libcmsafe.so (or a test binary) is loaded, before any event.
#[used]
#[link_section = ".init_array"]
static SET_UP_AT_LOAD: extern "C" fn() = set_up;

#[cfg(test)]
mod tests {
    use cmsafe_core::stderr::test_child::{
        child_part, rerun_setuid, rerun_with, rerun_within, TestDir,
    };
    use std::ffi::OsStr;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    use std::os::unix::process::ExitStatusExt;
    use std::path::Path;
    use std::process::Output;
    use std::time::Duration;

    fn os(p: &Path) -> &OsStr {
        p.as_os_str()
    }

    const SETUID: &str = "ffi::flight::tests::a_setuid_program_ignores_the_environment";

    /// CMSAFE_FLIGHT_EVENTS, CMSAFE_FLIGHT_DUMP and CMSAFE_LOG, read at load (and CMSAFE_LOG on
    /// the first call), set the recorder, its dump at exit and the log level in a plain run,
    /// and nothing in a setuid one: the defaults stay and no file is made, though the program
    /// could write anywhere.
    #[test]
    fn a_setuid_program_ignores_the_environment() {
        if child_part().is_some() {
            cmsafe_core::logging::init();
            println!(
                "size {} log {}",
                cmsafe_core::flight::size(),
                log::max_level()
            );
            return;
        }
        let d = TestDir::new("flight-setuid");
        let dump = d.join("dump");
        let env = [
            ("CMSAFE_FLIGHT_EVENTS", OsStr::new("7")),
            ("CMSAFE_FLIGHT_DUMP", os(&dump)),
            ("CMSAFE_LOG", OsStr::new("trace")),
        ];
        let plain = rerun_with(SETUID, "plain", &env);
        assert!(plain.status.success(), "{plain:?}");
        let said = String::from_utf8_lossy(&plain.stdout);
        assert!(said.contains("size 7 log TRACE"), "{said}");
        assert_eq!(d.names(), ["dump"], "the plain run's dump at exit");
        std::fs::remove_file(&dump).unwrap();

        let Some(setuid) = rerun_setuid(SETUID, "setuid", &env) else {
            eprintln!("{SETUID}: no setuid run (not root, or a nosuid temporary directory)");
            return;
        };
        assert!(setuid.status.success(), "{setuid:?}");
        let said = String::from_utf8_lossy(&setuid.stdout);
        assert!(said.contains("size 4096 log WARN"), "{said}");
        assert_eq!(d.names(), Vec::<String>::new(), "no dump: {setuid:?}");
    }

    const EVENTS: &str = "ffi::flight::tests::the_size_setting_is_a_count_or_the_default";

    /// CMSAFE_FLIGHT_EVENTS, read at load: a count from 0 to CMSAFE_FLIGHT_MAX_EVENTS, white
    /// space around it ignored; empty, the default said nowhere; anything else, the default
    /// and one line on stderr.
    #[test]
    fn the_size_setting_is_a_count_or_the_default() {
        if child_part().is_some() {
            println!("size {}", cmsafe_core::flight::size());
            return;
        }
        let said = "cmsafe: CMSAFE_FLIGHT_EVENTS is not a count from 0 to 1048576: the flight \
                    recorder keeps 4096";
        for (value, size, says) in [
            (" 7\n", 7, false),
            ("+3", 3, false),
            ("0", 0, false),
            ("1048576", 1048576, false),
            ("", 4096, false),
            ("1048577", 4096, true),
            ("-1", 4096, true),
            ("seven", 4096, true),
        ] {
            let out = rerun_with(
                EVENTS,
                "events",
                &[("CMSAFE_FLIGHT_EVENTS", OsStr::new(value))],
            );
            assert!(out.status.success(), "{value:?}: {out:?}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains(&format!("size {size}\n")),
                "{value:?}: {stdout}"
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.contains(said), says, "{value:?}: {stderr}");
        }
    }

    /// The types of the events a child copies and releases: three records in its ring.
    const TYPES: [&str; 3] = ["CONNECT_REQUEST", "ESTABLISHED", "DISCONNECTED"];

    /// Copies and releases one event of each of `types` (librdmacm's numbers), as a program's
    /// fetches would: a record each in the flight recorder.
    fn make_events(types: &[u32]) {
        use cmsafe_core::cm::{rdma_cm_event, rdma_cm_id};
        // SAFETY: plain data; all-zero is valid (an id with no addresses yet).
        let mut id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        for &t in types {
            // SAFETY: plain data; all-zero is valid.
            let mut raw: rdma_cm_event = unsafe { std::mem::zeroed() };
            raw.event = t;
            raw.id = &mut *id;
            // SAFETY: a valid event whose id outlives the copy.
            drop(unsafe { cmsafe_core::Event::copy_from_raw(&raw) }.unwrap());
        }
    }

    fn make_three_events() {
        use cmsafe_core::cm::rdma_cm_event_type::*;
        make_events(&[
            RDMA_CM_EVENT_CONNECT_REQUEST,
            RDMA_CM_EVENT_ESTABLISHED,
            RDMA_CM_EVENT_DISCONNECTED,
        ]);
    }

    /// The types of the records in the dump at `path`, checked to be flight lines, in order.
    fn dumped_types(path: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        text.lines()
            .map(|l| {
                assert!(l.starts_with("{\"record\":\"flight\",\"seq\":"), "{l}");
                l.split("\"type\":\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    /// The child's pid, which it says on stdout ("pid N").
    fn pid_of(out: &Output) -> u32 {
        let said = String::from_utf8_lossy(&out.stdout);
        said.split("pid ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {out:?}"))
    }

    /// The child's lines from the flight recorder on stderr.
    fn said(out: &Output) -> Vec<String> {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("cmsafe: flight recorder"))
            .map(str::to_owned)
            .collect()
    }

    const AT_EXIT: &str = "ffi::flight::tests::the_dump_at_exit_is_a_new_file_of_its_own";

    /// What the dump at exit does with each kind of name: a new file, 0600, made; `%p` the pid;
    /// an existing file, a symlink (to a file, or dangling) or a FIFO at the name never opened,
    /// the dump beside it as NAME.<pid>, said on stderr; the exit never blocks.
    #[test]
    fn the_dump_at_exit_is_a_new_file_of_its_own() {
        if child_part().is_some() {
            println!("pid {}", std::process::id());
            return make_three_events();
        }
        let run = |setting: &Path| {
            let out = rerun_within(
                AT_EXIT,
                "exit",
                &[("CMSAFE_FLIGHT_DUMP", os(setting))],
                Duration::from_secs(20),
            )
            .expect("the exit blocked");
            assert!(out.status.success(), "{out:?}");
            let pid = pid_of(&out);
            (out, pid)
        };

        // A new name: the dump, 0600, nothing said.
        let d = TestDir::new("flight-new");
        let (out, _) = run(&d.join("dump"));
        assert_eq!(d.names(), ["dump"]);
        assert_eq!(dumped_types(&d.join("dump")), TYPES);
        assert_eq!(mode(&d.join("dump")), 0o600);
        assert_eq!(said(&out), Vec::<String>::new());

        // %p: the pid.
        let d = TestDir::new("flight-pid");
        let (_, pid) = run(&d.join("dump.%p.json"));
        assert_eq!(d.names(), [format!("dump.{pid}.json")]);
        assert_eq!(dumped_types(&d.join(format!("dump.{pid}.json"))), TYPES);

        // Names that exist: a file (left with its content and mode), a symlink to one (never
        // followed), a dangling one (its target never made), a FIFO (never opened: the exit
        // would block on it for good).
        let d = TestDir::new("flight-exists");
        let theirs = d.join("file");
        std::fs::write(&theirs, "theirs\n").unwrap();
        std::fs::set_permissions(&theirs, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        std::os::unix::fs::symlink(&theirs, d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("made"), d.join("dangling")).unwrap();
        let fifo = std::ffi::CString::new(d.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
        for name in ["file", "link", "dangling", "fifo"] {
            let at = d.join(name);
            let (out, pid) = run(&at);
            let aside = d.join(format!("{name}.{pid}"));
            assert_eq!(dumped_types(&aside), TYPES, "{name}");
            assert_eq!(mode(&aside), 0o600, "{name}");
            assert_eq!(
                said(&out),
                [format!(
                    "cmsafe: flight recorder: {} exists: the dump goes to {}",
                    at.display(),
                    aside.display()
                )],
                "{name}"
            );
        }
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs\n");
        assert_eq!(mode(&theirs), 0o644);
        assert!(!d.join("made").exists(), "the dangling link's target made");
        assert!(std::fs::symlink_metadata(d.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo());
    }

    const FORK: &str = "ffi::flight::tests::a_forked_child_dumps_to_a_file_of_its_own";

    /// A child forked after the setting was read dumps at its exit to NAME.<its pid>, never
    /// over its parent's NAME.
    #[test]
    fn a_forked_child_dumps_to_a_file_of_its_own() {
        use cmsafe_core::cm::rdma_cm_event_type::RDMA_CM_EVENT_REJECTED;
        if child_part().is_some() {
            make_three_events();
            // SAFETY: the child copies an event and exits; this test runs alone in its process.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                make_events(&[RDMA_CM_EVENT_REJECTED]);
                // SAFETY: exit(3) runs the atexit handlers: the dump.
                unsafe { libc::exit(0) };
            }
            let mut status = 0;
            // SAFETY: our own child; a live out pointer.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert_eq!(status, 0);
            println!("pid {pid}");
            return;
        }
        let d = TestDir::new("flight-fork");
        let out = rerun_with(FORK, "fork", &[("CMSAFE_FLIGHT_DUMP", os(&d.join("dump")))]);
        assert!(out.status.success(), "{out:?}");
        // The forked child's pid.
        let forked = pid_of(&out);
        assert_eq!(d.names(), ["dump".to_string(), format!("dump.{forked}")]);
        assert_eq!(dumped_types(&d.join("dump")), TYPES);
        assert_eq!(
            dumped_types(&d.join(format!("dump.{forked}"))),
            [&TYPES[..], &["REJECTED"]].concat()
        );
    }

    const ABORT: &str = "ffi::flight::tests::a_misuse_aborts_at_once_whatever_is_at_the_name";

    /// A misuse's abort dumps the recorder: with a FIFO at the name, beside it, and the abort
    /// comes (it used to block on the FIFO for good).
    #[test]
    fn a_misuse_aborts_at_once_whatever_is_at_the_name() {
        if child_part().is_some() {
            println!("pid {}", std::process::id());
            make_three_events();
            let buf = cmsafe_core::PrivateData::copy_from(b"token")
                .unwrap()
                .into_raw() as *const super::super::cmsafe_buf;
            super::super::buf::cmsafe_buf_release(buf);
            super::super::buf::cmsafe_buf_release(buf);
            return;
        }
        let d = TestDir::new("flight-abort");
        let fifo = d.join("dump");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        let out = rerun_within(
            ABORT,
            "abort",
            &[("CMSAFE_FLIGHT_DUMP", os(&fifo))],
            Duration::from_secs(20),
        )
        .expect("the abort blocked");
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{out:?}");
        let pid = pid_of(&out);
        assert_eq!(dumped_types(&d.join(format!("dump.{pid}"))), TYPES);
    }

    const FULL: &str = "ffi::flight::tests::a_dump_cut_short_by_a_full_disk_is_said_once";

    /// A dump whose write fails (a file size limit stands for a full disk: EFBIG) is said on
    /// stderr, once, with the file's name.
    #[test]
    fn a_dump_cut_short_by_a_full_disk_is_said_once() {
        if child_part().is_some() {
            let limit = libc::rlimit {
                rlim_cur: 200,
                rlim_max: 200,
            };
            // SAFETY: a live struct; SIGXFSZ ignored so that the write fails with EFBIG.
            unsafe {
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            }
            return make_three_events();
        }
        let d = TestDir::new("flight-full");
        let dump = d.join("dump");
        let out = rerun_with(FULL, "full", &[("CMSAFE_FLIGHT_DUMP", os(&dump))]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(std::fs::metadata(&dump).unwrap().len(), 200);
        assert_eq!(
            said(&out),
            [format!(
                "cmsafe: flight recorder: the dump to {} failed (errno {}): it is cut short",
                dump.display(),
                libc::EFBIG
            )]
        );
    }
}
