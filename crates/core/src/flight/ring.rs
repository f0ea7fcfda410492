//! The flight recorder's ring: one mapping, made when its size is set, of `SeqRecord` slots
//! indexed by sequence number; what a record holds, and its JSON line.
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

use crate::clock::{coarse_ns, monotonic_ns};
use crate::cm::{event_type_name, EventType};
use crate::errno::Errno;
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
    /// The records a dump prints at most: the size asked for.
    pub(crate) events: u64,
    /// Release times are counter readings (else CLOCK_MONOTONIC_COARSE nanoseconds).
    counter: bool,
    /// A counter reading and CLOCK_MONOTONIC then, when the ring was made.
    base_count: u64,
    base_ns: u64,
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
    // SAFETY: a ring, once published, stays mapped and its header unchanged.
    unsafe { RING.load(Ordering::Acquire).as_ref() }
}

/// The CPU's counter, read in one instruction./// The CPU's counter, read in one instruction.
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

impl Ring {
    /// A new, empty ring for `events` records (at least 1), mapped for good.
    pub(crate) fn new(events: usize) -> Result<&'static Ring, Errno> {
        let slots = events.next_power_of_two();
        let ring = map(slots)?;
        let use_counter = counter_usable();
        // SAFETY: a fresh mapping, zeroed, big enough for the header; not yet shared, and
        // never unmapped.
        unsafe {
            ring.write(Ring {
                mask: slots as u64 - 1,
                slots: slots as u64,
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

    /// The newest record's sequence number, 0 for none.
    pub(crate) fn last(&self) -> u64 {
        (0..=self.mask)
            .map(|i| self.slot(i).seq())
            .max()
            .unwrap_or(0)
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
