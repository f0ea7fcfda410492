//! The flight recorder's ring: one mapping of `SeqRecord` slots indexed by sequence number,
//! one for each power of two of sizes, made when such a size is first set and reused from then
//! on; what a record holds, and its JSON line.
//!
//! A record is written once, when the copy's last reference is released (the event's, or its
//! private data buffer's): everything it holds is in the copy's slot until then, so an event
//! costs one write here, with its release time, and a copy still held is read from its slot by
//! the dump (`event::for_each_held`). The release time is the CPU's counter (one instruction,
//! where a clock_gettime(2) through the vDSO costs as much as the rest of the record), scaled
//! to CLOCK_MONOTONIC by the dump.

use std::fmt::Write;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use cmsafe_sync::SeqRecord;
use once_cell::race::OnceBox;

use crate::clock::{coarse_ns, monotonic_ns};
use crate::cm::{event_type_name, EventType};
use crate::errno::Errno;
use crate::mapping::Mapping;
use crate::stderr::FdOut;

/// A record's words (after its slot's stamp): [`TYPE_STATUS`] (librdmacm's `event` and
/// `status`, the two 32-bit fields as they lie in `struct rdma_cm_event`), the cm_id, the
/// listen id, the fetch time, [`FLAGS`] (with [`ACKED`]), the release count (0: still held).
/// Each is stored as the copy holds it, so that a record costs loads and stores alone.
pub(crate) const WORDS: usize = 6;
pub(crate) type Words = [u64; WORDS];
const TYPE_STATUS: usize = 0;
const ID: usize = 1;
const LISTEN_ID: usize = 2;
const FETCH_NS: usize = 3;
const FLAGS: usize = 4;
const RELEASE: usize = 5;
/// In [`FLAGS`]: cmsafe acked the event in the call that fetched it.
pub(crate) const ACKED: u64 = 1 << 62;

type Slot = SeqRecord<WORDS>;

/// A record's words, from the copy's fields: `type_status` is the 8 bytes of `event` and
/// `status`; `flags` holds [`ACKED`] or not (other bits are ignored); `release` is 0 for a
/// copy held.
#[inline(always)]
pub(crate) fn words(
    type_status: u64,
    flags: u64,
    (id, listen_id): (usize, usize),
    fetched_ns: u64,
    release: u64,
) -> Words {
    [
        type_status,
        id as u64,
        listen_id as u64,
        fetched_ns,
        flags,
        release,
    ]
}

/// `type_status` of [`words`] for a type and a status.
pub(crate) fn type_status(event_type: EventType, status: i32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&event_type.to_ne_bytes());
    b[4..].copy_from_slice(&status.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The ring's header; its slots follow it in the same mapping.
#[repr(C, align(64))]
pub(crate) struct Ring {
    /// Slots - 1 (a power of two less one).
    pub(crate) mask: u64,
    /// Slots (a power of two).
    slots: u64,
    /// Release times are counter readings (else CLOCK_MONOTONIC_COARSE nanoseconds).
    counter: bool,
    /// A counter reading and CLOCK_MONOTONIC then, when the ring was made.
    base_count: u64,
    base_ns: u64,
    /// The records a dump prints at most: the size set last (a ring serves every size of its
    /// power of two).
    events: AtomicU64,
    /// When the ring's present use began (`start`), in the unit of release times, and the first
    /// sequence number of a copy made since: what it holds from before is not its own
    /// ([`Since::current`]). Both 0 for a ring that was never reused.
    since_time: AtomicU64,
    since_seq: AtomicU64,
    /// Records dropped because their slot was being written by another thread (a writer as
    /// far behind as the ring is long) or already held a newer record.
    pub(crate) dropped: AtomicU64,
}

/// The ring records go to; NULL when the recorder is off. A ring is never unmapped: a writer
/// may still be in one that a new size replaced.
pub(crate) static RING: AtomicPtr<Ring> = AtomicPtr::new(std::ptr::null_mut());

/// The ring in place, if any.
#[inline(always)]
pub(crate) fn ring() -> Option<&'static Ring> {
    // SAFETY: a ring, once published, stays mapped, and the fields of its header that are not
    // atomics stay as they were made.
    unsafe { RING.load(Ordering::Acquire).as_ref() }
}

/// Ring sizes: the powers of two from 1 to `MAX_FLIGHT_EVENTS`.
const SIZES: usize = super::MAX_FLIGHT_EVENTS.trailing_zeros() as usize + 1;

/// The ring of each size, mapped when the size is first set and reused at each later use (a
/// writer may still be in it, so it is never unmapped): the rings' address space is bounded
/// by twice the largest one's, whatever the program sets and how often. Published by
/// compare-and-swap: of two threads that map a size at once, one keeps its mapping and the
/// other's, never seen, is unmapped.
static RINGS: [OnceBox<Mapping>; SIZES] = [const { OnceBox::new() }; SIZES];

/// The ring for `events` records (1 to `MAX_FLIGHT_EVENTS`): its size's, mapped at its first
/// use, not yet started.
pub(crate) fn of_size(events: usize) -> Result<&'static Ring, Errno> {
    let slots = events.next_power_of_two();
    let m = RINGS[slots.trailing_zeros() as usize]
        .get_or_try_init(|| Ring::map(slots).map(Box::new))?;
    // SAFETY: the mapping holds a ring made by `Ring::map`, mapped for good (a static's).
    Ok(unsafe { &*m.ptr().cast::<Ring>() })
}

/// The address space the rings of [`of_size`] take: at most twice the largest ring's plus a
/// page for each size (see `cmsafe_flight_set_size`).
pub(crate) fn mapped() -> usize {
    RINGS
        .iter()
        .filter_map(OnceBox::get)
        .map(Mapping::bytes)
        .sum()
}

/// What a dump takes for the ring's present use (see [`Ring::since`]).
#[derive(Clone, Copy)]
pub(crate) struct Since {
    pub(crate) time: u64,
    pub(crate) seq: u64,
}

impl Since {
    /// Whether record `seq` belongs to the ring's present use: released after it began, or in
    /// the same tick of the clock by a copy made since. A record of an earlier use, whether it
    /// was there before or a writer still in the ring from then (its release time read then)
    /// puts it there now, is not; a writer's record never replaces a newer one
    /// (`SeqRecord`), so it cannot hide one of the present use either.
    pub(crate) fn current(&self, seq: u64, w: &Words) -> bool {
        w[RELEASE] > self.time || (w[RELEASE] == self.time && seq >= self.seq)
    }
}

/// The CPU's counter, read in one instruction.
#[inline(always)]
/// The counter and CLOCK_MONOTONIC at one instant: the counter read between two clock readings,
/// paired with their midpoint. Read one after the other, the clock would be late by the time
/// the reading takes (tens of nanoseconds), and every time scaled from the pair as late.
fn counter_at_ns() -> (u64, u64) {
    let before = monotonic_ns();
    let count = counter();
    let after = monotonic_ns();
    (count, before + (after - before) / 2)
}

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

impl Ring {
    /// A mapping holding a new, empty ring of `slots` slots (a power of two), zeroed (a zeroed
    /// slot is an empty one).
    fn map(slots: usize) -> Result<Mapping, Errno> {
        let m = Mapping::new(std::mem::size_of::<Ring>() + slots * std::mem::size_of::<Slot>())?;
        let use_counter = counter_usable();
        let (base_count, base_ns) = if use_counter {
            counter_at_ns()
        } else {
            (0, monotonic_ns())
        };
        // SAFETY: a fresh mapping, page-aligned and big enough for the header; not yet shared.
        unsafe {
            m.ptr().cast::<Ring>().write(Ring {
                mask: slots as u64 - 1,
                slots: slots as u64,
                counter: use_counter,
                base_count,
                base_ns,
                events: AtomicU64::new(slots as u64),
                since_time: AtomicU64::new(0),
                since_seq: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            })
        };
        Ok(m)
    }

    /// Starts a use of the ring for `events` records (no more than its slots), before it is
    /// published (or while it is, for another size of its power of two): it is empty from now
    /// on, its records and those a writer still in it from an earlier use writes no longer its
    /// own ([`Since`]); `first_seq`: the sequence number the next copy made will have.
    pub(crate) fn start(&self, events: usize, first_seq: u64) {
        self.since_seq.store(first_seq, Ordering::Relaxed);
        self.since_time.store(self.now(), Ordering::Relaxed);
        self.dropped.store(0, Ordering::Relaxed);
        self.events.store(events as u64, Ordering::Relaxed);
    }

    /// The records a dump prints at most.
    pub(crate) fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Where the present use began (a dump reads it once, at its start: a use started while it
    /// runs may leave it a few records of the one before, all whole).
    pub(crate) fn since(&self) -> Since {
        Since {
            time: self.since_time.load(Ordering::Relaxed),
            seq: self.since_seq.load(Ordering::Relaxed),
        }
    }

    #[inline(always)]
    pub(crate) fn slot(&self, seq: u64) -> &Slot {
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
    fn now(&self) -> u64 {
        if self.counter {
            counter()
        } else {
            coarse_ns()
        }
    }

    /// Records `seq` (> 0), its words made by `f` from now; `f` should hold one pointer
    /// at most: it is passed to the fallback, out of line, in a register. The usual path is one
    /// compare-and-swap from the record a ring's length before (none, stamp 0, in the ring's
    /// first round) and a read of the counter; anything else (the clock instead of the counter,
    /// another record in the slot) goes out of line, in tail position, so the usual path saves
    /// no register.
    #[inline(always)]
    pub(crate) fn record(&self, seq: u64, f: impl FnOnce(u64) -> Words) {
        if !self.counter {
            return self.record_over(seq, f);
        }
        let now = counter();
        match self
            .slot(seq)
            .claim_from(seq.saturating_sub(self.slots), seq)
        {
            Some(claimed) => claimed.fill(f(now)),
            None => self.record_over(seq, f),
        }
    }

    /// `record`'s fallback: release times from the clock, or a slot that held another record
    /// than the one a ring's length before (or one being written: dropped, and counted).
    #[cold]
    #[inline(never)]
    fn record_over(&self, seq: u64, f: impl FnOnce(u64) -> Words) {
        let now = self.now();
        match self.slot(seq).claim_older(seq) {
            Some(claimed) => claimed.fill(f(now)),
            None => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The newest whole record's sequence number of the present use (`since`), 0 for none.
    pub(crate) fn last(&self, since: Since) -> u64 {
        (0..=self.mask)
            .filter_map(|i| {
                let slot = self.slot(i);
                let seq = slot.seq();
                let current = |w: &Words| since.current(seq, w);
                (seq != 0 && slot.read(seq).is_some_and(|w| current(&w))).then_some(seq)
            })
            .max()
            .unwrap_or(0)
    }

    /// Record `seq`, when the ring holds it whole and of the present use (`since`).
    pub(crate) fn read(&self, seq: u64, since: Since) -> Option<Words> {
        self.slot(seq).read(seq).filter(|w| since.current(seq, w))
    }
}

/// Release counts to CLOCK_MONOTONIC nanoseconds: the line through the ring's base pair and
/// one read now.
pub(crate) struct Scale {
    counter: bool,
    base_count: u64,
    base_ns: u64,
    per_count: f64,
}

impl Scale {
    pub(crate) fn of(ring: &Ring) -> Scale {
        let (count, ns) = if ring.counter {
            counter_at_ns()
        } else {
            (ring.now(), monotonic_ns())
        };
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

/// Writes record `seq`'s line. A line is at most about 300 bytes: it is flushed before one
/// that may not fit, so that each goes out in one write(2).
pub(crate) fn line(out: &mut FdOut, seq: u64, w: &Words, scale: &Scale) {
    if out.room() < 512 {
        out.flush();
    }
    // FdOut's writes never fail: the error a write(2) met is kept for the caller.
    let _ = write_line(out, seq, w, scale);
}

fn write_line(out: &mut FdOut, seq: u64, w: &Words, scale: &Scale) -> std::fmt::Result {
    let b = w[TYPE_STATUS].to_ne_bytes();
    let event_type = EventType::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    let status = i32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
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
    write!(out, ",\"fetch_ns\":{fetch},\"ack_ns\":")?;
    match w[FLAGS] & ACKED {
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

// After the record's writer: c-tests/lists/report-fields reads the writers up to the first code
// for tests.
#[cfg(test)]
impl Ring {
    /// A new, empty ring for `events` records (at least 1), of its own, mapped for good.
    pub(crate) fn new(events: usize) -> Result<&'static Ring, Errno> {
        let m = Ring::map(events.next_power_of_two())?;
        // SAFETY: the mapping holds a ring; it is never unmapped (forgotten).
        let ring = unsafe { &*m.ptr().cast::<Ring>() };
        ring.events.store(events as u64, Ordering::Relaxed);
        std::mem::forget(m);
        Ok(ring)
    }
}
