//! What the preload says: a line on stderr per finding as it happens, a summary at exit, and with
//! CMSAFE_REPORT one JSON object per line for every event and finding. Never private data bytes:
//! lengths only.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::audit::findings::Finding;
use crate::audit::held::Held;
use crate::audit::probes;
use crate::audit::record::{EventLine, EventSource};

/// The JSON-lines report's lines, made under a room's lock and written after it is released
/// (audit/sink.rs, then report_file.rs): the file is never opened or written while a lock that
/// CM calls need is held, so a slow or stuck target holds up only the thread that writes.
#[derive(Default)]
pub struct ReportLines {
    on: bool,
    lines: Vec<u8>,
}

impl ReportLines {
    pub const fn none() -> Self {
        ReportLines {
            on: false,
            lines: Vec::new(),
        }
    }

    /// A report is written: the probes' semaphore goes up for good, since the report is
    /// written on the probes' slow path. Raised once per process however many writers are
    /// made: tracers count on it as uprobes' reference count, and a raise per writer (one per
    /// delivery of use-after-ack faults) would run it past u16 back to zero.
    pub fn new() -> Self {
        static RAISED: AtomicBool = AtomicBool::new(false);
        if !RAISED.swap(true, Ordering::Relaxed) {
            probes::SEMAPHORE.raise();
        }
        ReportLines {
            on: true,
            lines: Vec::new(),
        }
    }

    /// `new` when a report is written (`report`), else `none`.
    pub fn of(report: bool) -> Self {
        if report {
            Self::new()
        } else {
            Self::none()
        }
    }

    fn write_line(&mut self, line: &str) {
        self.lines.extend_from_slice(line.as_bytes());
        self.lines.push(b'\n');
    }

    pub fn has_lines(&self) -> bool {
        !self.lines.is_empty()
    }

    /// The lines made since the last call, for `report_file::write` once the lock is released.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.lines)
    }

    /// The lines made since the last call, as lines of the same report.
    pub fn take_lines(&mut self) -> ReportLines {
        ReportLines {
            on: self.on,
            lines: self.take(),
        }
    }

    /// Inlined to its check, the probes' semaphore (audit/probes.rs), which a report raises for
    /// good: most runs write no report and trace nothing, and every ack comes here.
    #[inline(always)]
    pub fn event(&mut self, r: &impl EventSource) {
        if probes::on() {
            self.traced_event(&r.line());
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_event(&mut self, r: &EventLine) {
        probes::event_acked(r);
        if self.on {
            self.write_event(r);
        }
    }

    #[inline(never)]
    fn write_event(&mut self, r: &EventLine) {
        let line = format!(
            "{{\"record\":\"event\",\"seq\":{},\"type\":\"{}\",\"status\":{},\"id\":\"{:#x}\",\"listen_id\":{},\"thread\":{},\"get_ns\":{},\"ack_ns\":{},\"private_data_len\":{},\"internal\":{}}}",
            r.seq,
            r.type_name(),
            r.status,
            r.id,
            if r.listen_id != 0 {
                format!("\"{:#x}\"", r.listen_id)
            } else {
                "null".to_string()
            },
            r.thread,
            r.get_ns,
            if r.ack_ns == 0 { "null".to_string() } else { r.ack_ns.to_string() },
            r.pd_len,
            r.internal
        );
        self.write_line(&line);
    }

    /// rdma_destroy_id(id), called by `thread`, returned `rc` now: the end of the id's life,
    /// which a timeline draws (bin/cmsafe-timeline) and the destroy_done probe marks. Inlined to
    /// its check, as `event`: every id's destroy comes here, and the clock is read only when a
    /// report is written or a tracer attached.
    #[inline(always)]
    pub fn destroy(&mut self, id: usize, thread: i32, rc: i32) {
        if probes::on() {
            self.traced_destroy(id, thread, rc);
        }
    }

    #[cold]
    #[inline(never)]
    fn traced_destroy(&mut self, id: usize, thread: i32, rc: i32) {
        // The events' clock (get_ns, ack_ns), so a reader can place the destroy among them.
        let at_ns = cmsafe_core::clock::monotonic_ns();
        probes::destroy_done(id, rc, at_ns);
        if self.on {
            let line = format!(
                "{{\"record\":\"destroy\",\"id\":\"{id:#x}\",\"thread\":{thread},\"at_ns\":{at_ns}}}"
            );
            self.write_line(&line);
        }
    }

    /// `id`'s local and peer addresses (`ip:port`), when an event brought them: a record a
    /// reader takes the last of, per id.
    pub fn address(&mut self, id: usize, src: &str, dst: &str) {
        if self.on {
            let line = format!(
                "{{\"record\":\"address\",\"id\":\"{id:#x}\",\"src\":\"{src}\",\"dst\":\"{dst}\"}}"
            );
            self.write_line(&line);
        }
    }

    pub fn finding(&mut self, f: &Finding) {
        if !self.on {
            return;
        }
        let line = format!(
            "{{\"record\":\"finding\",\"finding\":\"{}\",\"seq\":{},\"type\":\"{}\",\"id\":\"{:#x}\",\"thread\":{},\"where\":{},\"message\":{}}}",
            f.kind.name(),
            f.seq,
            f.event_type,
            f.id,
            f.thread,
            json_string(&f.place),
            json_string(&f.message)
        );
        self.write_line(&line);
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The exit summary's line of the preload's own memory, each part the most it ever held (none is
/// given back): its tables (bytes its allocator mapped), the event copies' slab (bytes
/// committed), audit's page ring (pages; 0, and left out, when no event was closed).
pub fn own_memory_line(tables: usize, copies: usize, pages: usize) -> String {
    let mut s = format!(
        "==cmsafe==   own memory at its most: tables {} KiB, copies {} KiB",
        tables.div_ceil(1024),
        copies.div_ceil(1024)
    );
    if pages > 0 {
        let _ = write!(s, ", audit pages {pages}");
    }
    s.push('\n');
    s
}

/// The exit summary's first lines: the process, its events by type, how long they were held
/// (the findings' lines follow, audit/sink.rs).
pub fn summary_head(
    mode: &str,
    events: u64,
    findings: u64,
    by_type: &[(String, u64)],
    held: &Held,
) -> String {
    let mut s = String::new();
    let pid = std::process::id();
    let _ = writeln!(
        s,
        "==cmsafe== summary: pid {pid}, mode {mode}, {events} events, {findings} findings"
    );
    if !by_type.is_empty() {
        let list: Vec<String> = by_type.iter().map(|(t, n)| format!("{t} {n}")).collect();
        let _ = writeln!(s, "==cmsafe==   events by type: {}", list.join(", "));
    }
    if held.count() > 0 {
        let _ = writeln!(
            s,
            "==cmsafe==   held before ack: median {:.3} ms, max {:.3} ms ({} acked)",
            held.median() as f64 / 1e6,
            held.max() as f64 / 1e6,
            held.count()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_memory_in_kib_rounded_up_and_pages_when_there_are() {
        assert_eq!(
            own_memory_line(300_000, 1 << 20, 0),
            "==cmsafe==   own memory at its most: tables 293 KiB, copies 1024 KiB\n"
        );
        assert_eq!(
            own_memory_line(1, 0, 4096),
            "==cmsafe==   own memory at its most: tables 1 KiB, copies 0 KiB, audit pages 4096\n"
        );
    }
}
