//! USDT probes (SystemTap SDT notes, which bpftrace and perf read) at the points the JSON report
//! records: an event handed to the program, its ack, a finding, a destroy. Their numbers are the
//! report's (seq, the CLOCK_MONOTONIC times), so a trace and a report join on seq.
//!
//! Free when nobody traces: the probes share one semaphore (cmsafe_core::usdt), which a tracer
//! raises while attached, and the report raises for good when one is written; each call site
//! tests it (one load and a branch) and only then calls the cold code that fires and writes.
//! At an ack and a destroy that test is the one the report needed anyway. docs/tracing.md lists
//! the probes and their arguments.

use std::ffi::CString;

use cmsafe_core::usdt_fire;

use crate::audit::findings::Finding;
use crate::audit::record::EventLine;

cmsafe_core::usdt_semaphore!(
    /// Raised by tracers and by the report (the report is written where the probes fire).
    SEMAPHORE
);

/// `event_fetched(seq, type, status, id, get_ns, thread)`: rdma_get_cm_event handed the program
/// event `seq` (librdmacm's type and status numbers) of `id`.
#[cold]
#[inline(never)]
pub fn event_fetched(r: &EventLine) {
    usdt_fire!(
        SEMAPHORE,
        cmsafe,
        event_fetched,
        r.seq,
        r.event_type,
        r.status,
        r.id,
        r.get_ns,
        r.thread
    );
}

/// `event_acked(seq, type, status, id, get_ns, ack_ns)`: the program acked event `seq`.
#[inline(always)]
pub fn event_acked(r: &EventLine) {
    usdt_fire!(
        SEMAPHORE,
        cmsafe,
        event_acked,
        r.seq,
        r.event_type,
        r.status,
        r.id,
        r.get_ns,
        r.ack_ns
    );
}

/// `finding(kind, seq, type, id, thread, message)`: a finding said, its kind, event type name and
/// message as NUL-terminated strings (bpftrace's str()).
#[cold]
#[inline(never)]
pub fn finding(f: &Finding) {
    let c = |s: &str| CString::new(s).unwrap_or_default();
    let (kind, event_type, message) = (c(f.kind.name()), c(f.event_type), c(&f.message));
    usdt_fire!(
        SEMAPHORE,
        cmsafe,
        finding,
        kind.as_ptr(),
        f.seq,
        event_type.as_ptr(),
        f.id,
        f.thread,
        message.as_ptr()
    );
}

/// `destroy_start(id, at_ns)`: rdma_destroy_id(id) called.
#[cold]
#[inline(never)]
pub fn destroy_start(id: usize) {
    usdt_fire!(
        SEMAPHORE,
        cmsafe,
        destroy_start,
        id,
        cmsafe_core::clock::monotonic_ns()
    );
}

/// `destroy_done(id, rc, at_ns)`: it returned `rc` at `at_ns`; the difference from
/// destroy_start is how long it waited for the id's events to be acked.
#[inline(always)]
pub fn destroy_done(id: usize, rc: i32, at_ns: u64) {
    usdt_fire!(SEMAPHORE, cmsafe, destroy_done, id, rc, at_ns);
}
