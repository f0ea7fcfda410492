//! The flight recorder: the process's last N events, each with its sequence number, type,
//! status, cm_id, listen id and its fetch, ack and release times, in a fixed ring that a dump
//! copies out as JSON lines while events are still being recorded.
//!
//! The ring (`ring`) is one mapping made when its size is first set (`set_size`: at load by
//! libcmsafe, from `CMSAFE_FLIGHT_EVENTS` or the default), and reused when a size of its power
//! of two is set again, so recording an event allocates nothing and makes no system call.
//! Records go to the slot their sequence number names (the ring's length is a power of two),
//! so the ring holds the latest records in sequence order with no shared index to contend on.
//! Each slot is a `cmsafe_sync::SeqRecord`: many writers, a reader that skips a record being
//! written.
//!
//! An event is recorded once, when its copy's last reference is released: until then the copy
//! holds everything the record would, and the dump reads the copies still held from their
//! slots, in one walk of the pool (`event::for_each_held`, `held`). So each event costs one
//! ring write, with its release time.
//!
//! The dumps at exit and on a misuse's abort go to `CMSAFE_FLIGHT_DUMP`, a new file of the
//! process's own (`outfile`).
//!
//! Times: the fetch time is the copy's own (CLOCK_MONOTONIC_COARSE). The API acks in the call
//! that fetched, before it returns and microseconds after the copy, well inside the coarse
//! clock's tick, so the ack time is the fetch time. The release time is read from the CPU's
//! counter (the TSC on x86-64, the generic timer's virtual count on arm64) and converted to
//! CLOCK_MONOTONIC nanoseconds at the dump, between the counter and clock readings taken when
//! the ring was made and at the dump. Where the counter is not the kernel's clocksource, or the
//! process made it fault (prctl PR_SET_TSC), the release reads the coarse clock instead.

mod held;
pub(crate) mod ring;

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use crate::errno::Errno;
use crate::outfile::{self, Template, WriteFailures};
use crate::setting::Parsed;
use crate::stderr::FdOut;
use ring::{Ring, Scale, RING};

/// The default size: an hour's events of a quiet service, and the whole life of a thousand
/// connections of a busy one (CONNECT_REQUEST, ESTABLISHED, DISCONNECTED, TIMEWAIT_EXIT: four
/// events each), in 256 KiB that fill only as events come.
pub const DEFAULT_FLIGHT_EVENTS: usize = 4096;

/// The largest size: 64 MiB of records.
pub const MAX_FLIGHT_EVENTS: usize = 1 << 20;

/// The size `CMSAFE_FLIGHT_EVENTS` (its text, `None` when unset) asks for: a count from 0 to
/// [`MAX_FLIGHT_EVENTS`].
pub fn events_setting(text: Option<&str>) -> Parsed<usize> {
    crate::setting::number(text, 0..=MAX_FLIGHT_EVENTS as u64).map(|n| n as usize)
}

/// Where the dump at exit and on a misuse's abort goes (`CMSAFE_FLIGHT_DUMP`); read without a
/// lock or an allocation on the abort path.
static DUMP_PATH: OnceLock<Template> = OnceLock::new();

/// The dumps at exit and on a misuse's abort that failed.
static DUMP_FAILURES: WriteFailures = WriteFailures::new();

/// Sets the ring's size to `events` records (0 turns the recorder off). A new size starts an
/// empty ring: the records of the one it replaces are dropped. Each power of two of sizes has
/// one ring, mapped at its first use and reused from then on, never unmapped (a writer may
/// still be in it): the rings' address space stays within twice the largest one's and a page
/// for each power of two ([`mapped`]). Setting the size the ring has keeps it and its records.
/// Errors: EINVAL (more than [`MAX_FLIGHT_EVENTS`]), ENOMEM (the mapping failed: the ring in
/// place stays).
pub fn set_size(events: usize) -> Result<(), Errno> {
    if events > MAX_FLIGHT_EVENTS {
        return Err(libc::EINVAL);
    }
    // A misuse's abort dumps the ring (the pool imports nothing of this module).
    let _ = crate::pool::ABORT_DUMP.set(|| dump_to_path(true));
    if events == 0 {
        RING.store(std::ptr::null_mut(), Ordering::Release);
        return Ok(());
    }
    if ring::ring().is_some_and(|r| r.events() == events as u64) {
        return Ok(());
    }
    let ring = ring::of_size(events)?;
    ring.start(events, crate::event::copied() + 1);
    // Release: the ring's start is seen by whoever loads the pointer.
    RING.store(ring as *const Ring as *mut Ring, Ordering::Release);
    Ok(())
}

/// The address space of the rings mapped so far, in bytes as asked of mmap(2): at most twice
/// the largest ring's (64 bytes a slot, the size rounded up to a power of two) and the header
/// of each power of two used (the kernel rounds each up to whole pages).
pub fn mapped() -> usize {
    ring::mapped()
}

/// The records a dump prints at most: the size set (0: off).
pub fn size() -> usize {
    ring::ring().map_or(0, |r| r.events() as usize)
}

/// Records the ring in place dropped (see `Ring::dropped`); 0 when the recorder is off.
pub fn dropped() -> u64 {
    ring::ring().map_or(0, |r| r.dropped.load(Ordering::Relaxed))
}

/// Writes the last N events, oldest first, as JSON lines to `fd`: those released from the ring
/// (one being written meanwhile is skipped), those still held from their copies. Returns how
/// many were written; Err(errno) of the first write(2) that failed, or ENOMEM when the index of
/// the copies held could not be mapped (nothing written). Allocates nothing and takes no lock:
/// the misuse's abort path calls it. One walk of the pool and two of the ring: linear in both.
pub fn dump(fd: i32) -> Result<u64, Errno> {
    dump_into(FdOut::new(fd))
}

/// `dump`, into `out`: a caller's descriptor, written as it asks, or our own stderr, never
/// waited on (a pipe nobody drains must not stop a misuse's abort).
fn dump_into(out: FdOut) -> Result<u64, Errno> {
    match ring::ring() {
        Some(ring) => dump_ring(ring, out, crate::event::for_each_held),
        None => Ok(0),
    }
}

/// The dump of `ring`, with the copies still held that `walk` gives (each with its sequence
/// number and record), in one call.
fn dump_ring(
    ring: &Ring,
    mut out: FdOut,
    walk: impl FnOnce(&mut dyn FnMut(u64, ring::Words)),
) -> Result<u64, Errno> {
    let scale = Scale::of(ring);
    let (since, events) = (ring.since(), ring.events());
    let held = held::HeldIndex::build(ring.mask, walk)?;
    // The newest event, released or held: the last N sequence numbers up to it.
    let last = ring.last(since).max(held.newest());
    let first = last.saturating_sub(events - 1).max(1);
    let mut written = 0;
    for seq in first..=last {
        // Released during the dump, a copy may be in both: the ring's record has its release.
        if let Some(w) = ring.read(seq, since).or_else(|| held.get(seq)) {
            ring::line(&mut out, seq, &w, &scale);
            written += 1;
        }
    }
    out.flush();
    match out.error() {
        0 => Ok(written),
        e => Err(e),
    }
}

/// Sets where the dump at exit and on a misuse's abort goes (`CMSAFE_FLIGHT_DUMP`, `%p` the
/// pid), owned by the calling process (see `outfile::Template`); the first path set stays, an
/// empty one sets none.
pub fn set_dump_path(path: CString) {
    if let Some(t) = Template::new(path) {
        let _ = DUMP_PATH.set(t);
    }
}

/// The dumps at exit and on a misuse's abort that failed (a write(2), or the index of the
/// copies held could not be mapped), the first said on stderr.
pub fn dump_failures() -> &'static WriteFailures {
    &DUMP_FAILURES
}

/// The dump at exit, or on a misuse's abort: to a new file of this process's own at the path
/// set (`outfile::create`: beside a name that exists, said on stderr), else (`or_stderr`) to
/// stderr. A failure is said on stderr; a failed write is counted and said once. No allocation
/// and no lock.
pub fn dump_to_path(or_stderr: bool) {
    if size() == 0 {
        return;
    }
    let Some(template) = DUMP_PATH.get() else {
        if or_stderr {
            dump_counted(2, None);
        }
        return;
    };
    let path = match template.path() {
        Ok(p) => p,
        Err(e) => {
            crate::stderr::line(format_args!(
                "cmsafe: flight recorder: no dump: CMSAFE_FLIGHT_DUMP {} (errno {e})",
                template.text().to_bytes().escape_ascii()
            ));
            return;
        }
    };
    let made = outfile::create(path);
    let file = match made.file {
        Ok(f) => f,
        Err(e) => {
            // The errno's number: its text (io::Error's Display) would allocate.
            crate::stderr::line(format_args!(
                "cmsafe: flight recorder: cannot create the dump {} (errno {e})",
                made.path.escaped()
            ));
            return;
        }
    };
    if made.renamed {
        if let Ok(asked) = template.path() {
            crate::stderr::line(format_args!(
                "cmsafe: flight recorder: {} exists: the dump goes to {}",
                asked.escaped(),
                made.path.escaped()
            ));
        }
    }
    dump_counted(file.as_raw_fd(), Some(&made.path));
}

/// `dump(fd)`, its failure counted in [`dump_failures`] and said once, naming the file at
/// `path` (None: stderr, where nothing could be said).
fn dump_counted(fd: i32, path: Option<&outfile::Path>) {
    let out = match path {
        Some(_) => FdOut::new(fd),
        None => FdOut::stderr(fd),
    };
    if let Err(e) = dump_into(out) {
        dump_failed(&DUMP_FAILURES, e, path);
    }
}

/// Counts a failed dump in `failures`; the first is said on stderr, naming the file at `path`
/// (None: stderr itself, where nothing can be said). True when it was the first.
fn dump_failed(failures: &WriteFailures, e: Errno, path: Option<&outfile::Path>) -> bool {
    let first = failures.count(e);
    if let (true, Some(path)) = (first, path) {
        crate::stderr::line(format_args!(
            "cmsafe: flight recorder: the dump to {} failed (errno {e}): it is cut short",
            path.escaped()
        ));
    }
    first
}

#[cfg(test)]
mod tests {
    use super::ring::{words, Words};
    use super::*;
    use crate::cm::event_type_name;
    use crate::cm::rdma_cm_event_type::*;
    use std::sync::atomic::AtomicU64;

    /// What `fd` holds, from its start (a memfd a dump wrote).
    fn contents(fd: i32) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        // SAFETY: our own memfd and a live buffer.
        unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
        loop {
            // SAFETY: as above.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            assert!(n >= 0);
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        String::from_utf8(out).unwrap()
    }

    fn memfd() -> i32 {
        // SAFETY: a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"flight-test".as_ptr(), 0) };
        assert!(fd >= 0);
        fd
    }

    /// `dump` (or a ring's dump) into a memfd, as lines.
    fn lines_of(dump: impl FnOnce(i32) -> Result<u64, Errno>) -> (u64, Vec<String>) {
        let fd = memfd();
        let n = dump(fd).unwrap();
        let text = contents(fd);
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        (n, text.lines().map(str::to_owned).collect())
    }

    fn no_held(_: &mut dyn FnMut(u64, Words)) {}

    fn dump_lines(ring: &Ring) -> (u64, Vec<String>) {
        lines_of(|fd| dump_ring(ring, FdOut::new(fd), no_held))
    }

    /// Record `seq`'s words: each a function of `seq`, so a line shows whether it is whole; a
    /// release count of 0 (still held).
    fn w(seq: u64) -> Words {
        let listen = if seq % 2 == 0 { 0x10 } else { 0 };
        let status = -((seq % 7) as i32);
        let acked = if seq % 3 != 0 { ring::ACKED } else { 0 };
        words(
            ring::type_status((seq % 16) as u32, status),
            acked,
            (0x1000 * seq as usize, listen),
            1_000_000 * seq,
            0,
        )
    }

    /// The line record `seq` of [`w`] makes.
    fn line_of(seq: u64) -> String {
        let listen = if seq % 2 == 0 {
            "\"0x10\"".to_owned()
        } else {
            "null".to_owned()
        };
        let ack = if seq % 3 != 0 {
            (1_000_000 * seq).to_string()
        } else {
            "null".to_owned()
        };
        format!(
            "{{\"record\":\"flight\",\"seq\":{seq},\"type\":\"{}\",\"status\":{},\"id\":\"{:#x}\",\"listen_id\":{listen},\"fetch_ns\":{},\"ack_ns\":{ack},\"release_ns\":null}}",
            event_type_name((seq % 16) as u32),
            -((seq % 7) as i32),
            0x1000 * seq,
            1_000_000 * seq,
        )
    }

    #[test]
    fn the_ring_keeps_the_last_n_in_order_as_it_wraps() {
        let ring = Ring::new(4).unwrap();
        for seq in 1..=10 {
            ring.record(seq, |_| w(seq));
        }
        let (n, lines) = dump_lines(ring);
        assert_eq!(n, 4);
        let want: Vec<String> = (7..=10).map(line_of).collect();
        assert_eq!(lines, want);
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 0);
        // An older record than a slot holds is dropped, and counted.
        ring.record(5, |_| w(5));
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(dump_lines(ring).1, want);
    }

    #[test]
    fn a_size_not_a_power_of_two_dumps_that_many() {
        let ring = Ring::new(3).unwrap();
        assert_eq!(ring.mask, 3);
        for seq in 1..=9 {
            ring.record(seq, |_| w(seq));
        }
        let (n, lines) = dump_lines(ring);
        assert_eq!(n, 3);
        assert_eq!(lines, (7..=9).map(line_of).collect::<Vec<_>>());
    }

    #[test]
    fn gaps_and_torn_records_are_skipped() {
        let ring = Ring::new(8).unwrap();
        for seq in [1, 2, 4, 5] {
            ring.record(seq, |_| w(seq));
        }
        // Record 6 stopped midway by its writer: skipped, never printed.
        assert!(ring.slot(6).claim_and_stop(6));
        let (n, lines) = dump_lines(ring);
        assert_eq!(n, 4);
        assert_eq!(lines, [1, 2, 4, 5].map(line_of));
        // A writer of 14 (same slot) finds it busy and drops its record.
        ring.record(14, |_| w(14));
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(dump_lines(ring).1, [1, 2, 4, 5].map(line_of));
    }

    /// Copies still held come from their slots, in sequence order among the released ones, in
    /// the window of the last N.
    #[test]
    fn held_copies_are_merged_in_order() {
        let ring = Ring::new(4).unwrap();
        for seq in [1, 2, 4] {
            ring.record(seq, |_| w(seq));
        }
        // Given in any order, as a walk of the pool finds them; 1 is outside the window.
        let held = |f: &mut dyn FnMut(u64, Words)| {
            for s in [5u64, 1, 3] {
                f(s, w(s));
            }
        };
        let (n, lines) = lines_of(|fd| dump_ring(ring, FdOut::new(fd), held));
        assert_eq!(n, 4);
        assert_eq!(lines, [2, 3, 4, 5].map(line_of));
        // A copy released while the dump runs is in both: printed once, from the ring.
        let held = |f: &mut dyn FnMut(u64, Words)| f(4, w(4));
        assert_eq!(
            lines_of(|fd| dump_ring(ring, FdOut::new(fd), held)).1,
            [1, 2, 4].map(line_of)
        );
    }

    #[test]
    fn a_release_time_is_converted_to_the_monotonic_clock() {
        let ring = Ring::new(4).unwrap();
        let before = crate::clock::monotonic_ns();
        ring.record(1, |now| {
            words(
                ring::type_status(RDMA_CM_EVENT_ESTABLISHED, 0),
                ring::ACKED,
                (0x20, 0),
                7,
                now,
            )
        });
        let after = crate::clock::monotonic_ns();
        let (_, lines) = dump_ring_lines(ring);
        let released: u64 = lines[0]
            .split("\"release_ns\":")
            .nth(1)
            .and_then(|r| r.trim_end_matches('}').parse().ok())
            .unwrap_or_else(|| panic!("no release time in {}", lines[0]));
        assert_eq!(
            lines[0],
            format!("{{\"record\":\"flight\",\"seq\":1,\"type\":\"ESTABLISHED\",\"status\":0,\"id\":\"0x20\",\"listen_id\":null,\"fetch_ns\":7,\"ack_ns\":7,\"release_ns\":{released}}}")
        );
        // Between clock readings around it (the coarse fallback may lag by one tick).
        let tick = 10_000_000;
        assert!(
            released + tick >= before && released <= after,
            "{before} {released} {after}"
        );
    }

    fn dump_ring_lines(ring: &Ring) -> (u64, Vec<String>) {
        dump_lines(ring)
    }

    #[test]
    fn writers_on_many_threads_and_a_dump_meanwhile_print_only_whole_records() {
        const THREADS: u64 = 4;
        const EACH: u64 = 20_000;
        let ring = Ring::new(64).unwrap();
        let next = AtomicU64::new(1);
        let done = std::sync::atomic::AtomicBool::new(false);
        let checked = std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..EACH {
                        let seq = next.fetch_add(1, Ordering::Relaxed);
                        ring.record(seq, |_| w(seq));
                    }
                });
            }
            let dumper = s.spawn(|| {
                let mut lines = 0;
                while !done.load(Ordering::Relaxed) || lines == 0 {
                    let (n, got) = dump_lines(ring);
                    assert_eq!(n as usize, got.len());
                    for l in got {
                        let seq: u64 = l["{\"record\":\"flight\",\"seq\":".len()..]
                            .split(',')
                            .next()
                            .unwrap()
                            .parse()
                            .unwrap();
                        assert_eq!(l, line_of(seq), "a torn record printed");
                        lines += 1;
                    }
                }
                lines
            });
            while next.load(Ordering::Relaxed) <= THREADS * EACH {
                std::thread::yield_now();
            }
            done.store(true, Ordering::Relaxed);
            dumper.join().unwrap()
        });
        assert!(checked > 0);
        // Once the writers are done: the last 64, less any a late writer dropped.
        let (n, lines) = dump_lines(ring);
        let dropped = ring.dropped.load(Ordering::Relaxed);
        assert!(
            n + dropped >= 64 && n <= 64,
            "{n} records, {dropped} dropped"
        );
        let last = THREADS * EACH;
        let seqs: Vec<u64> = lines
            .iter()
            .map(|l| l.split(',').nth(1).unwrap()[6..].parse().unwrap())
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
        assert!(seqs.iter().all(|&s| s > last - 64 && s <= last));
    }

    /// A dump to a full device fails with ENOSPC, each failure counted, the first said.
    #[test]
    fn a_dump_to_a_full_device_is_counted() {
        let ring = Ring::new(4).unwrap();
        for seq in 1..=4 {
            ring.record(seq, |_| w(seq));
        }
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let failures = WriteFailures::new();
        for first in [true, false] {
            let e = dump_ring(ring, FdOut::new(full.as_raw_fd()), no_held).unwrap_err();
            assert_eq!(e, libc::ENOSPC);
            assert_eq!(dump_failed(&failures, e, None), first);
        }
        assert_eq!(
            (failures.failed(), failures.first_errno()),
            (2, libc::ENOSPC)
        );
    }

    /// The tests of the process's recorder (`set_size`, `dump`), one at a time.
    static PROCESS_RING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn process_ring() -> std::sync::MutexGuard<'static, ()> {
        PROCESS_RING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `n` copies of events, held, made as an API fetch makes them; the cm_ids they name.
    fn held_copies(n: usize) -> (Vec<crate::event::Event>, Box<crate::cm::rdma_cm_id>) {
        // SAFETY: plain data; all-zero is valid (an id with no addresses yet).
        let mut id: Box<crate::cm::rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        let copies = (0..n)
            .map(|_| {
                // SAFETY: plain data; all-zero is valid.
                let mut raw: crate::cm::rdma_cm_event = unsafe { std::mem::zeroed() };
                raw.event = RDMA_CM_EVENT_ESTABLISHED;
                raw.id = &mut *id;
                // SAFETY: a valid event; its id outlives the copy (the caller keeps both).
                unsafe { crate::event::Event::copy_to_ack(&raw) }.unwrap()
            })
            .collect();
        (copies, id)
    }

    /// The copies still held are found in one walk of the pool, however many there are (a walk
    /// per copy made the dump quadratic: 32,000 held copies took 23.5 s).
    #[test]
    fn held_copies_are_found_in_one_walk_of_the_pool() {
        let _ring = process_ring();
        set_size(4096).unwrap();
        const HELD: usize = 1000;
        let (copies, _id) = held_copies(HELD);
        crate::pool::WALKED.set(0);
        let (_, lines) = lines_of(dump);
        let walked = crate::pool::WALKED.get();
        // One walk now: no fewer slots than the dump's walks met (slots are only ever added).
        crate::pool::WALKED.set(0);
        crate::event::live_events();
        let one_walk = crate::pool::WALKED.get();
        assert!(one_walk >= HELD as u64);
        assert!(
            walked <= one_walk,
            "the dump visited {walked} slots, one walk {one_walk}"
        );
        // And each copy held is there, once.
        let dumped = seqs(&lines);
        for c in &copies {
            let times = dumped.iter().filter(|&&s| s == c.seq()).count();
            assert_eq!(times, 1, "copy {} dumped {times} times", c.seq());
        }
    }

    /// The process's address space, from /proc/self/status.
    fn vm_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:"))
            .and_then(|v| v.trim().strip_suffix(" kB"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap();
        kb << 10
    }

    /// The sequence numbers of the dump's lines.
    fn seqs(lines: &[String]) -> Vec<u64> {
        lines
            .iter()
            .map(|l| {
                l.split(',').nth(1).unwrap()["\"seq\":".len()..]
                    .parse()
                    .unwrap()
            })
            .collect()
    }

    /// 2,000 changes of size, off and on and between sizes, each with an event recorded: the
    /// rings are reused, so the address space stays within the bound (a ring mapped per change
    /// took 131 GB for 2,000 cycles at the largest size), and the records made after the last
    /// change are the dump's, those of before none of it.
    #[test]
    fn size_changes_reuse_rings_within_the_bound() {
        let _ring = process_ring();
        // The pool reserves its address space at its first copy: before the count.
        drop(held_copies(1));
        let before = vm_size();
        let sizes = [
            MAX_FLIGHT_EVENTS,
            0,
            4096,
            3,
            MAX_FLIGHT_EVENTS - 1,
            0,
            1000,
            1,
        ];
        let mut earlier = Vec::new();
        for i in 0..2000 {
            set_size(sizes[i % sizes.len()]).unwrap();
            let (copies, _id) = held_copies(1);
            earlier.push(copies[0].seq());
        }
        let grown = vm_size().saturating_sub(before);
        // The recorder's count: one ring per power of two, twice the largest at most.
        let bound = 2 * 64 * MAX_FLIGHT_EVENTS + 21 * std::mem::size_of::<Ring>();
        assert!(mapped() <= bound, "{} bytes mapped", mapped());
        assert!(
            mapped() >= 64 * MAX_FLIGHT_EVENTS,
            "the largest ring counted"
        );
        // The kernel's: the process's address space grew by the rings' at most, and what the
        // tests running meanwhile map (their threads' stacks and malloc arenas: a few hundred
        // MB), far from a ring a change (32 GB).
        assert!(
            grown as usize <= bound + (1 << 30),
            "the address space grew by {grown} bytes, {} mapped",
            mapped()
        );
        // Records after the changes: those made since the last, whole; none of before.
        set_size(4096).unwrap();
        let (copies, _id) = held_copies(5);
        let mine: Vec<u64> = copies.iter().map(|c| c.seq()).collect();
        drop(copies);
        let (_, lines) = lines_of(dump);
        let dumped = seqs(&lines);
        for (l, seq) in lines.iter().zip(&dumped) {
            if mine.contains(seq) {
                assert!(l.contains("\"type\":\"ESTABLISHED\""), "{l}");
                assert!(!l.ends_with("\"release_ns\":null}"), "released: {l}");
            }
        }
        assert_eq!(
            dumped.iter().filter(|s| mine.contains(s)).count(),
            mine.len(),
            "{lines:?}"
        );
        let stale: Vec<&u64> = dumped.iter().filter(|s| earlier.contains(s)).collect();
        assert!(stale.is_empty(), "records of before the change: {stale:?}");
    }

    /// A ring reused for a new size: what it held from its earlier use is not printed, nor is
    /// what a writer still in it from then puts there now (a record its writer claimed before
    /// and fills after), nor can such a writer replace a record of the present use; records
    /// of the present use are printed whole.
    #[test]
    fn a_writer_from_a_ring_s_earlier_use_never_shows_in_its_dump() {
        let _ring = process_ring();
        // Sequence numbers far above any copy's: other tests' copies released into the
        // process's ring meanwhile never replace these.
        const BASE: u64 = 1 << 40;
        set_size(8).unwrap();
        let ring = ring::ring().unwrap();
        let with_release = |seq: u64, release: u64| {
            let mut words = w(seq);
            words[5] = release;
            words
        };
        // The earlier use: records BASE+1 to BASE+6, released long ago (time 1), and a writer
        // of BASE+7 that claimed its slot and stopped.
        for seq in BASE + 1..=BASE + 6 {
            assert!(ring.slot(seq).write(seq, with_release(seq, 1)));
        }
        let late = ring.slot(BASE + 7).claim_older(BASE + 7).unwrap();
        set_size(16).unwrap();
        set_size(8).unwrap();
        let again = ring::ring().unwrap();
        assert!(std::ptr::eq(ring, again), "the ring of 8 reused");
        let since = ring.since();
        // The present use: BASE+9, BASE+10, BASE+13, released after it began.
        for seq in [BASE + 9, BASE + 10, BASE + 13] {
            assert!(ring.slot(seq).write(seq, with_release(seq, since.time + 1)));
        }
        // The writer from the earlier use fills its record (its release time read then), and
        // another one's BASE+5 finds BASE+13 in its slot.
        late.fill(with_release(BASE + 7, since.time - 1));
        assert!(!ring
            .slot(BASE + 5)
            .write(BASE + 5, with_release(BASE + 5, since.time + 2)));
        let (n, lines) = dump_lines(ring);
        assert_eq!(seqs(&lines), [BASE + 9, BASE + 10, BASE + 13], "{lines:?}");
        assert_eq!(n, 3);
        for (l, seq) in lines.iter().zip([BASE + 9, BASE + 10, BASE + 13]) {
            let whole = line_of(seq);
            assert!(l.starts_with(&whole[..whole.len() - "null}".len()]), "{l}");
        }
    }

    /// A record is the ring's present use's when released after it began, or in its tick by
    /// a copy made since.
    #[test]
    fn a_record_of_the_present_use_is_told_by_its_release_then_its_seq() {
        let ring = Ring::new(4).unwrap();
        ring.start(4, 100);
        let since = ring.since();
        let at = |release: u64| {
            let mut words = w(1);
            words[5] = release;
            words
        };
        assert!(since.current(1, &at(since.time + 1)), "released after");
        assert!(!since.current(1000, &at(since.time - 1)), "released before");
        assert!(
            since.current(100, &at(since.time)),
            "same tick, copied after"
        );
        assert!(
            !since.current(99, &at(since.time)),
            "same tick, copied before"
        );
        // A ring never reused: every record is its own.
        let fresh = Ring::new(4).unwrap().since();
        assert!(fresh.current(1, &at(0)) && fresh.current(1, &at(5)));
    }

    /// The dump's time with many copies held, for bench/README.md ("The dump's time"):
    /// `cargo test --release -p cmsafe-core dump_time -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn dump_time_with_copies_held() {
        let _ring = process_ring();
        set_size(32768).unwrap();
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        for held in [1000, 8000, 32000] {
            let (copies, _id) = held_copies(held);
            let start = std::time::Instant::now();
            let n = dump(null.as_raw_fd()).unwrap();
            println!(
                "flight dump: {held} copies held, {n} records: {:.1} ms",
                start.elapsed().as_secs_f64() * 1e3
            );
            drop(copies);
        }
        set_size(0).unwrap();
    }

    /// The process's recorder, through the copy and release an API fetch makes.
    #[test]
    fn a_copy_is_dumped_while_held_and_recorded_at_its_release() {
        use crate::cm::rdma_cm_event;
        let _ring = process_ring();
        set_size(4096).unwrap();
        assert_eq!(size(), 4096);
        // SAFETY: plain data; all-zero is valid.
        let mut raw: rdma_cm_event = unsafe { std::mem::zeroed() };
        raw.event = RDMA_CM_EVENT_CONNECT_REQUEST;
        raw.status = -110;
        // SAFETY: plain data; all-zero is valid (an id with no addresses yet).
        let mut ids: Box<[crate::cm::rdma_cm_id; 2]> = Box::new(unsafe { std::mem::zeroed() });
        raw.id = &mut ids[0];
        raw.listen_id = &mut ids[1];
        // SAFETY: a valid event; its ids outlive the copy.
        let ev = unsafe { crate::event::Event::copy_to_ack(&raw) }.unwrap();
        let (seq, fetched) = (ev.seq(), ev.fetched_ns());
        let find = || {
            let key = format!("\"seq\":{seq},");
            lines_of(dump).1.into_iter().find(|l| l.contains(&key))
        };
        let held = find().expect("dumped from its copy");
        assert_eq!(
            held,
            format!(
                "{{\"record\":\"flight\",\"seq\":{seq},\"type\":\"CONNECT_REQUEST\",\"status\":-110,\"id\":\"{:p}\",\"listen_id\":\"{:p}\",\"fetch_ns\":{fetched},\"ack_ns\":{fetched},\"release_ns\":null}}",
                raw.id, raw.listen_id
            )
        );
        let buf = ev.private_data().cloned();
        assert!(buf.is_none(), "no private data");
        drop(ev);
        let released = find().expect("recorded at its release");
        assert!(released.starts_with(&held[..held.len() - "null}".len()]));
        assert!(!released.ends_with("null}"), "{released}");
        assert_eq!(set_size(MAX_FLIGHT_EVENTS + 1), Err(libc::EINVAL));
        // Off: nothing dumped.
        set_size(0).unwrap();
        assert_eq!(size(), 0);
        assert_eq!(lines_of(dump), (0, vec![]));
    }
}
