//! The flight recorder: the process's last N events, each with its sequence number, type,
//! status, cm_id, listen id, thread and its fetch, ack and release times, in a fixed ring that
//! a dump copies out as JSON lines while events are still being recorded.
//!
//! The ring is one mapping made when its size is set (`set_size`: at load by libcmsafe, from
//! `CMSAFE_FLIGHT_EVENTS` or the default), so recording an event allocates nothing and makes no
//! system call. Records go to the slot their sequence number names (the ring's length is a power
//! of two), so the ring holds the latest records in sequence order with no shared index to
//! contend on, and the release of an event finds its record from its sequence number alone.
//! Each slot is a `cmsafe_sync::SeqRecord`: many writers, a reader that skips a record being
//! written, a release that lands on its own record or nowhere.
//!
//! Times: the fetch time is the copy's own (CLOCK_MONOTONIC_COARSE). The API acks in the call
//! that fetched, before it returns and microseconds after the copy, well inside the coarse
//! clock's tick, so the ack time is the fetch time. The release time is read from the CPU's
//! counter (the TSC on x86-64, the generic timer's virtual count on arm64: one instruction,
//! where a clock_gettime(2) through the vDSO costs as much as the rest of the record), and
//! converted to CLOCK_MONOTONIC nanoseconds at the dump, between the counter and clock readings
//! taken when the ring was made and at the dump. Where the counter is not the kernel's
//! clocksource, or the process made it fault (prctl PR_SET_TSC), the release reads the coarse
//! clock instead.

use std::ffi::CString;
use std::fmt::Write;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

use cmsafe_sync::SeqRecord;

use crate::clock::{coarse_ns, monotonic_ns};
use crate::cm::{event_type_name, EventType};
use crate::errno::Errno;
use crate::stderr::FdOut;

/// The default size: an hour's events of a quiet service, and the whole life of a thousand
/// connections of a busy one (CONNECT_REQUEST, ESTABLISHED, DISCONNECTED, TIMEWAIT_EXIT: four
/// events each), in 256 KiB that fill only as events come.
pub const DEFAULT_FLIGHT_EVENTS: usize = 4096;

/// The largest size: 64 MiB of records.
pub const MAX_FLIGHT_EVENTS: usize = 1 << 20;

/// A record's words (after the slot's stamp): [`TYPE_STATUS`] (type in the low half, status
/// in the high half), the cm_id, the listen id, the fetch time, [`THREAD_FLAGS`] (the fetching
/// thread's id in the low half, [`ACKED`] above), the release count (0: not released yet).
const WORDS: usize = 6;
const TYPE_STATUS: usize = 0;
const ID: usize = 1;
const LISTEN_ID: usize = 2;
const FETCH_NS: usize = 3;
const THREAD_FLAGS: usize = 4;
const RELEASE: usize = 5;
/// In [`THREAD_FLAGS`]: cmsafe acked the event in the call that fetched it.
pub(crate) const ACKED: u64 = 1 << 32;

type Slot = SeqRecord<WORDS>;

/// The ring's header; its slots follow it in the same mapping.
#[repr(C, align(64))]
struct Ring {
    /// Slots - 1 (a power of two less one).
    mask: u64,
    /// The records a dump prints at most: the size asked for.
    events: u64,
    /// Release times are counter readings (else CLOCK_MONOTONIC_COARSE nanoseconds).
    counter: bool,
    /// A counter reading and CLOCK_MONOTONIC then, when the ring was made.
    base_count: u64,
    base_ns: u64,
    /// Records dropped because their slot was being written by another thread (a writer as
    /// far behind as the ring is long) or already held a newer record.
    dropped: AtomicU64,
}

impl Ring {
    /// A new, empty ring for `events` records (1 to [`MAX_FLIGHT_EVENTS`]), mapped for good.
    fn new(events: usize) -> Result<&'static Ring, Errno> {
        let slots = events.next_power_of_two();
        let ring = map(slots)?;
        let use_counter = counter_usable();
        // SAFETY: a fresh mapping, zeroed, big enough for the header; not yet shared, and
        // never unmapped.
        unsafe {
            ring.write(Ring {
                mask: slots as u64 - 1,
                events: events as u64,
                counter: use_counter,
                base_count: if use_counter { counter() } else { 0 },
                base_ns: monotonic_ns(),
                dropped: AtomicU64::new(0),
            });
            Ok(&*ring)
        }
    }

    #[inline(always)]
    fn slot(&self, seq: u64) -> &Slot {
        // SAFETY: the mapping holds `mask + 1` slots after the header (`map`); the index is
        // masked into them.
        unsafe {
            &*(self as *const Ring)
                .add(1)
                .cast::<Slot>()
                .add((seq & self.mask) as usize)
        }
    }

    /// Now, in the unit of release times.
    #[inline(always)]
    fn now(&self) -> u64 {
        if self.counter {
            counter()
        } else {
            coarse_ns()
        }
    }
}

/// The ring records go to; NULL when the recorder is off. A ring is never unmapped: a writer
/// may still be in one that a new size replaced.
static RING: AtomicPtr<Ring> = AtomicPtr::new(std::ptr::null_mut());

/// Where the dump at exit and on a misuse's abort goes (`CMSAFE_FLIGHT_DUMP`); read without a
/// lock or an allocation on the abort path.
static DUMP_PATH: OnceLock<CString> = OnceLock::new();

/// The CPU's counter, read in one instruction.
#[inline(always)]
fn counter() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions; `counter_usable` checked it does not fault here.
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: Linux lets user space read the virtual count (the vDSO's own clock).
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        return v;
    }
    #[allow(unreachable_code)]
    coarse_ns()
}

/// Whether [`counter`] counts at the rate of CLOCK_MONOTONIC's own source, without faulting.
fn counter_usable() -> bool {
    if cfg!(target_arch = "aarch64") {
        // The generic timer is every arm64 kernel's clocksource, at a constant rate.
        return true;
    }
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let mut tsc = 0;
    // SAFETY: PR_GET_TSC writes an int through the pointer given.
    let faults = unsafe { libc::prctl(libc::PR_GET_TSC, &mut tsc as *mut libc::c_int) } != 0
        || tsc != libc::PR_TSC_ENABLE;
    // The kernel keeps the TSC as its clocksource only while it runs at a constant rate and in
    // step across CPUs.
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    !faults && source.is_ok_and(|s| s.trim() == "tsc")
}

/// Sets the ring's size to `events` records (0 turns the recorder off). A new ring starts
/// empty: the records of the one it replaces are dropped, and its memory stays mapped (a
/// writer may still be in it), so a program sets the size once, at start. Setting the size
/// the ring has keeps it and its records. Errors: EINVAL (more than [`MAX_FLIGHT_EVENTS`]), ENOMEM
/// (the mapping failed: the ring in place stays).
pub fn set_size(events: usize) -> Result<(), Errno> {
    if events > MAX_FLIGHT_EVENTS {
        return Err(libc::EINVAL);
    }
    if events == 0 {
        RING.store(std::ptr::null_mut(), Ordering::Release);
        return Ok(());
    }
    let old = RING.load(Ordering::Acquire);
    // SAFETY: a ring, once published, stays mapped.
    if unsafe { old.as_ref() }.is_some_and(|r| r.events == events as u64) {
        return Ok(());
    }
    let ring = Ring::new(events)?;
    // Release: the header is seen by whoever loads the pointer.
    RING.store(ring as *const Ring as *mut Ring, Ordering::Release);
    Ok(())
}

/// A zeroed mapping for a header and `slots` slots (a zeroed slot is an empty one).
fn map(slots: usize) -> Result<*mut Ring, Errno> {
    let len = std::mem::size_of::<Ring>() + slots * std::mem::size_of::<Slot>();
    // SAFETY: an anonymous private mapping of our own.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(libc::ENOMEM);
    }
    Ok(p.cast())
}

/// The records a dump prints at most: the size set (0: off).
pub fn size() -> usize {
    // SAFETY: a ring, once published, stays mapped.
    unsafe { RING.load(Ordering::Acquire).as_ref() }.map_or(0, |r| r.events as usize)
}

/// Records an event just copied, with sequence number `seq`. `thread_flags`: the fetching
/// thread's id, with [`ACKED`] when cmsafe acks it before handing it out (asked only when the
/// recorder is on).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn record(
    seq: u64,
    event_type: EventType,
    status: i32,
    id: usize,
    listen_id: usize,
    fetched_ns: u64,
    thread_flags: impl FnOnce() -> u64,
) {
    // SAFETY: a ring, once published, stays mapped.
    if let Some(ring) = unsafe { RING.load(Ordering::Acquire).as_ref() } {
        let type_status = event_type as u64 | (status as u32 as u64) << 32;
        let words = [
            type_status,
            id as u64,
            listen_id as u64,
            fetched_ns,
            thread_flags(),
            0,
        ];
        ring.record(seq, words);
    }
}

/// The copy with sequence number `seq` had its last reference released: stamps its record, if
/// the ring still holds it.
#[inline(always)]
pub(crate) fn released(seq: u64) {
    // SAFETY: a ring, once published, stays mapped.
    if let Some(ring) = unsafe { RING.load(Ordering::Acquire).as_ref() } {
        ring.released(seq);
    }
}

impl Ring {
    #[inline(always)]
    fn record(&self, seq: u64, words: [u64; WORDS]) {
        // The slot most likely holds the record a ring's length before.
        let prev = seq.wrapping_sub(self.mask + 1);
        if !self.slot(seq).write(seq, prev, words) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn released(&self, seq: u64) {
        // A record already replaced, or being written, keeps no release: nothing is lost but
        // the time of an event the ring no longer holds.
        self.slot(seq).amend(seq, RELEASE, self.now());
    }
}

/// Records the ring in place dropped (see `Ring::dropped`); 0 when the recorder is off.
pub fn dropped() -> u64 {
    // SAFETY: a ring, once published, stays mapped.
    unsafe { RING.load(Ordering::Acquire).as_ref() }
        .map_or(0, |r| r.dropped.load(Ordering::Relaxed))
}

/// Release counts to CLOCK_MONOTONIC nanoseconds: the line through the ring's base pair and
/// one read now.
struct Scale {
    counter: bool,
    base_count: u64,
    base_ns: u64,
    per_count: f64,
}

impl Scale {
    fn of(ring: &Ring) -> Scale {
        let (count, ns) = (ring.now(), monotonic_ns());
        let per_count = if ring.counter && count > ring.base_count {
            (ns - ring.base_ns) as f64 / (count - ring.base_count) as f64
        } else {
            0.0
        };
        Scale {
            counter: ring.counter,
            base_count: ring.base_count,
            base_ns: ring.base_ns,
            per_count,
        }
    }

    fn ns(&self, release: u64) -> u64 {
        if !self.counter {
            return release;
        }
        let since = release.wrapping_sub(self.base_count) as i64 as f64;
        (self.base_ns as f64 + since * self.per_count).max(0.0) as u64
    }
}

/// Writes the ring's records, oldest first, as JSON lines to `fd`: the last N events whose
/// record is whole (one being written meanwhile is skipped). Returns how many were written;
/// Err(errno) of the first write(2) that failed. Allocates nothing and takes no lock: the
/// misuse's abort path calls it.
pub fn dump(fd: i32) -> Result<u64, Errno> {
    // SAFETY: a ring, once published, stays mapped.
    match unsafe { RING.load(Ordering::Acquire).as_ref() } {
        Some(ring) => ring.dump(fd),
        None => Ok(0),
    }
}

impl Ring {
    fn dump(&self, fd: i32) -> Result<u64, Errno> {
        let scale = Scale::of(self);
        // The latest record: the last N sequence numbers up to it are what the ring can hold.
        let last = (0..=self.mask)
            .map(|i| self.slot(i).seq())
            .max()
            .unwrap_or(0);
        let first = last.saturating_sub(self.events - 1).max(1);
        let mut out = FdOut::new(fd);
        let mut written = 0;
        for seq in first..=last {
            let Some(w) = self.slot(seq).read(seq) else {
                continue;
            };
            // A line is at most about 330 bytes: flush before one that may not fit, so that
            // each goes out in one write(2).
            if out.room() < 512 {
                out.flush();
            }
            let _ = line(&mut out, seq, &w, &scale);
            written += 1;
        }
        out.flush();
        match out.error() {
            0 => Ok(written),
            e => Err(e),
        }
    }
}

/// One record's line.
fn line(out: &mut FdOut, seq: u64, w: &[u64; WORDS], scale: &Scale) -> std::fmt::Result {
    let event_type = w[TYPE_STATUS] as u32 as EventType;
    let status = (w[TYPE_STATUS] >> 32) as u32 as i32;
    write!(
        out,
        "{{\"record\":\"flight\",\"seq\":{seq},\"type\":\"{}\",\"status\":{status},\"id\":\"{:#x}\",\"listen_id\":",
        event_type_name(event_type),
        w[ID],
    )?;
    match w[LISTEN_ID] {
        0 => out.write_str("null")?,
        l => write!(out, "\"{l:#x}\"")?,
    }
    let fetch = w[FETCH_NS];
    write!(
        out,
        ",\"thread\":{},\"fetch_ns\":{fetch},\"ack_ns\":",
        w[THREAD_FLAGS] as u32
    )?;
    match w[THREAD_FLAGS] & ACKED {
        0 => out.write_str("null")?,
        _ => write!(out, "{fetch}")?,
    }
    out.write_str(",\"release_ns\":")?;
    match w[RELEASE] {
        0 => out.write_str("null")?,
        // Never before the fetch: the conversion's error is far below the coarse clock's tick,
        // which the fetch time may lag by.
        r => write!(out, "{}", scale.ns(r).max(fetch))?,
    }
    out.write_str("}\n")
}

/// Sets where the dump at exit and on a misuse's abort goes; the first path set stays.
pub fn set_dump_path(path: CString) {
    let _ = DUMP_PATH.set(path);
}

/// The dump at exit, or on a misuse's abort: to the path set, else (`or_stderr`) to stderr.
/// A failure is said on stderr. No allocation and no lock.
pub fn dump_to_path(or_stderr: bool) {
    if size() == 0 {
        return;
    }
    let fd = match DUMP_PATH.get() {
        // SAFETY: a NUL-terminated path; the flags and mode are plain integers.
        Some(path) => unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                0o644,
            )
        },
        None if or_stderr => 2,
        None => return,
    };
    if fd < 0 {
        // The errno's number: its text (io::Error's Display) would allocate.
        let e = crate::errno::get();
        crate::stderr::line(format_args!(
            "cmsafe: flight recorder: cannot open CMSAFE_FLIGHT_DUMP (errno {e})"
        ));
        return;
    }
    if let Err(e) = dump(fd) {
        crate::stderr::line(format_args!(
            "cmsafe: flight recorder: dump failed (errno {e})"
        ));
    }
    if fd != 2 {
        // SAFETY: our own descriptor, opened above.
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::rdma_cm_event_type::*;

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

    /// A ring's dump, as lines.
    fn dump_lines(ring: &Ring) -> (u64, Vec<String>) {
        let fd = memfd();
        let n = ring.dump(fd).unwrap();
        let text = contents(fd);
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        (n, text.lines().map(str::to_owned).collect())
    }

    /// Record `seq`'s words: each a function of `seq`, so a line shows whether it is whole.
    fn words(seq: u64) -> [u64; WORDS] {
        let t = (seq % 16) | (((-(seq as i64 % 7)) as u32 as u64) << 32);
        [
            t,
            0x1000 * seq,
            if seq % 2 == 0 { 0x10 } else { 0 },
            1_000_000 * seq,
            4242 | ACKED,
            0,
        ]
    }

    /// The line record `seq` of [`words`] makes, unreleased.
    fn line_of(seq: u64) -> String {
        let listen = if seq % 2 == 0 {
            "\"0x10\"".to_owned()
        } else {
            "null".to_owned()
        };
        format!(
            "{{\"record\":\"flight\",\"seq\":{seq},\"type\":\"{}\",\"status\":{},\"id\":\"{:#x}\",\"listen_id\":{listen},\"thread\":4242,\"fetch_ns\":{},\"ack_ns\":{},\"release_ns\":null}}",
            event_type_name((seq % 16) as u32),
            -(seq as i64 % 7),
            0x1000 * seq,
            1_000_000 * seq,
            1_000_000 * seq,
        )
    }

    #[test]
    fn the_ring_keeps_the_last_n_in_order_as_it_wraps() {
        let ring = Ring::new(4).unwrap();
        for seq in 1..=10 {
            ring.record(seq, words(seq));
        }
        let (n, lines) = dump_lines(ring);
        assert_eq!(n, 4);
        let want: Vec<String> = (7..=10).map(line_of).collect();
        assert_eq!(lines, want);
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 0);
        // An older record than a slot holds is dropped, and counted.
        ring.record(5, words(5));
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(dump_lines(ring).1, want);
    }

    #[test]
    fn a_size_not_a_power_of_two_dumps_that_many() {
        let ring = Ring::new(3).unwrap();
        assert_eq!(ring.mask, 3);
        for seq in 1..=9 {
            ring.record(seq, words(seq));
        }
        let (n, lines) = dump_lines(ring);
        assert_eq!(n, 3);
        assert_eq!(lines, (7..=9).map(line_of).collect::<Vec<_>>());
    }

    #[test]
    fn gaps_and_torn_records_are_skipped() {
        let ring = Ring::new(8).unwrap();
        for seq in [1, 2, 4, 5] {
            ring.record(seq, words(seq));
        }
        // Record 6 stopped midway by its writer: skipped, never printed.
        assert!(ring.slot(6).claim_and_stop(6));
        let (n, lines) = dump_lines(ring);
        assert_eq!(n, 4);
        assert_eq!(lines, [1, 2, 4, 5].map(line_of));
        // A writer of 14 (same slot) finds it busy and drops its record.
        ring.record(14, words(14));
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(dump_lines(ring).1, [1, 2, 4, 5].map(line_of));
    }

    #[test]
    fn a_release_is_stamped_on_its_own_record_only() {
        let ring = Ring::new(4).unwrap();
        ring.record(1, words(1));
        ring.record(2, words(2));
        let before = monotonic_ns();
        ring.released(1);
        // Seq 6 shares record 2's slot: its release is of an event the ring does not hold.
        ring.released(6);
        let after = monotonic_ns();
        let (_, lines) = dump_lines(ring);
        assert_eq!(lines[1], line_of(2));
        let released: u64 = lines[0]
            .split("\"release_ns\":")
            .nth(1)
            .and_then(|r| r.trim_end_matches('}').parse().ok())
            .unwrap_or_else(|| panic!("no release time in {}", lines[0]));
        assert_eq!(
            lines[0].replace(&format!("\"release_ns\":{released}"), "\"release_ns\":null"),
            line_of(1)
        );
        // The converted count lies between clock readings around it (the coarse fallback
        // may lag by one tick; the record's fetch time is far below both).
        let tick = 10_000_000;
        assert!(
            released + tick >= before && released <= after,
            "{before} {released} {after}"
        );
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
                        ring.record(seq, words(seq));
                        if seq % 3 == 0 {
                            ring.released(seq);
                        }
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
                        let whole = line_of(seq);
                        let cut = l.find(",\"release_ns\":").unwrap();
                        assert_eq!(l[..cut], whole[..cut], "a torn record printed");
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

    /// The process's recorder, through the copy and release an API fetch makes.
    #[test]
    fn a_copy_is_recorded_and_its_release_stamped() {
        use crate::cm::rdma_cm_event;
        let _serial = SIZE.lock().unwrap();
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
            let fd = memfd();
            dump(fd).unwrap();
            let text = contents(fd);
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            let key = format!("\"seq\":{seq},");
            text.lines().find(|l| l.contains(&key)).map(str::to_owned)
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let held = find().expect("recorded");
        assert_eq!(
            held,
            format!(
                "{{\"record\":\"flight\",\"seq\":{seq},\"type\":\"CONNECT_REQUEST\",\"status\":-110,\"id\":\"{:p}\",\"listen_id\":\"{:p}\",\"thread\":{tid},\"fetch_ns\":{fetched},\"ack_ns\":{fetched},\"release_ns\":null}}",
                raw.id, raw.listen_id
            )
        );
        drop(ev);
        let released = find().expect("still recorded");
        assert!(released.starts_with(&held[..held.len() - "null}".len()]));
        assert!(!released.ends_with("null}"), "{released}");
        // Off: nothing recorded, nothing dumped.
        set_size(0).unwrap();
        assert_eq!(size(), 0);
        assert_eq!(dump(memfd()), Ok(0));
        assert_eq!(set_size(MAX_FLIGHT_EVENTS + 1), Err(libc::EINVAL));
    }

    /// Tests that set the process's size.
    static SIZE: std::sync::Mutex<()> = std::sync::Mutex::new(());
}
