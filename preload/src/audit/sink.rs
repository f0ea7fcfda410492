//! Where every finding goes, whichever room made it: said on stderr as it happens, written to the
//! JSON-lines report, fired as a USDT probe, and counted (its kind's first example and a count)
//! for the exit summary; and the report's other records with them.
//!
//! A room judges under its own lock and collects what it has to say in an [`Outbox`]; once that
//! lock is released, [`deliver`] counts it under the sink's lock (no I/O there) and then writes
//! it, under no lock at all: a slow stderr or report holds up only the thread that writes. The
//! use-after-ack faults the SIGSEGV handler or the fault thread queued (faults.rs) are taken in
//! at each delivery: they were said on stderr already.

use std::fmt::Write as _;

use cmsafe_core::cm::event_type_name;
use cmsafe_core::fork_lock::{ForkSafeGuard, ForkSafeMutex};

use crate::audit::findings::{Finding, Kind};
use crate::audit::report::ReportLines;
use crate::audit::{faults, probes, report_file};
use crate::sys::whereis;

/// What one call made to say, collected under its room's lock, delivered after it.
#[derive(Default)]
pub struct Outbox {
    findings: Vec<Finding>,
    /// The report's records other than findings (events, destroys, addresses).
    pub lines: ReportLines,
}

impl Outbox {
    /// An outbox whose records go to the report when `report` (CMSAFE_REPORT is set).
    pub fn new(report: bool) -> Self {
        Outbox {
            findings: Vec::new(),
            lines: ReportLines::of(report),
        }
    }

    pub fn finding(&mut self, f: Finding) {
        self.findings.push(f);
    }

    /// What was collected since the last call, to deliver; this outbox stays, empty.
    pub fn take(&mut self) -> Outbox {
        Outbox {
            findings: std::mem::take(&mut self.findings),
            lines: self.lines.take_lines(),
        }
    }

    /// The kinds of the findings collected, in order (tests).
    #[cfg(test)]
    pub fn kinds(&self) -> Vec<Kind> {
        self.findings.iter().map(|f| f.kind).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.findings.is_empty() && !self.lines.has_lines()
    }

    /// Forgets what was collected (a forked child's, which is its parent's to say).
    pub fn clear(&mut self) {
        self.findings.clear();
        self.lines.take_lines();
    }
}

/// The findings counted so far, and the report's lines that wait while another thread opens the
/// report file.
#[derive(Default)]
struct Sink {
    /// The first finding of each kind and how many there were: bounded however many there are.
    counts: Vec<(Finding, u64)>,
    /// Use-after-ack faults said on stderr but not recorded: the queue was full.
    faults_lost: u64,
    /// Whether the exit summary has taken its counts: a finding counted after that (another
    /// thread's, while the exiting one writes the summary) gets a line of its own saying so.
    summarized: bool,
    lines: Vec<u8>,
}

/// The counts the exit summary says, taken together under one lock hold.
pub struct Counts {
    /// All findings counted, for the summary's first line.
    pub total: u64,
    /// Each kind with its count and first example.
    pub lines: String,
    /// Use-after-ack faults that could not be recorded, if any.
    pub lost: Option<String>,
}

impl Sink {
    /// Counts `findings` and puts their records in `lines`; what to say of them on stderr.
    fn take_in(&mut self, findings: Vec<Finding>, lines: &mut ReportLines) -> String {
        let mut say = String::new();
        // Under AT_SECURE the lines would show the caller (a less privileged user) where a
        // privileged program's heap and code are: counted only (docs/preload.md).
        let quiet = cmsafe_core::env::secure();
        for f in findings {
            if !quiet {
                let _ = writeln!(say, "==cmsafe== {}", f.line());
            }
            if probes::on() {
                probes::finding(&f);
            }
            lines.finding(&f);
            count(self, f);
        }
        say
    }

    /// The line that says what was counted since `before` (the total then), when the exit
    /// summary had taken its counts already: a reader who adds these to the summary's count
    /// has every finding, the faults the SIGSEGV handler said as well as the rooms' findings.
    fn after_summary(&self, before: u64) -> Option<String> {
        let after = self.total();
        (self.summarized && after > before).then(|| {
            format!(
                "==cmsafe== after the summary: pid {}, {} more findings, {after} findings in all\n",
                std::process::id(),
                after - before
            )
        })
    }

    /// The summary's counts (see [`summarize`]), the sink marked summarized.
    fn counts(&mut self, events: u64) -> Option<Counts> {
        let total = self.total();
        if events == 0 && total == 0 {
            return None;
        }
        self.summarized = true;
        let mut lines = String::new();
        let mut kinds: Vec<&(Finding, u64)> = self.counts.iter().collect();
        kinds.sort_by_key(|(f, _)| f.kind);
        for (first, n) in kinds {
            if cmsafe_core::env::secure() {
                let _ = writeln!(lines, "==cmsafe==   {}: {n}", first.kind.name());
            } else {
                let _ = writeln!(
                    lines,
                    "==cmsafe==   {}: {n} (first: {})",
                    first.kind.name(),
                    first.line()
                );
            }
        }
        let lost = (self.faults_lost > 0).then(|| {
            format!(
                "==cmsafe==   use-after-ack faults said on stderr but not recorded (too many at once): {}\n",
                self.faults_lost
            )
        });
        Some(Counts { total, lines, lost })
    }

    fn total(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }
}

static SINK: ForkSafeMutex<Option<Sink>> = ForkSafeMutex::new(None);

fn sink<'a>(guard: &'a mut ForkSafeGuard<'_, Option<Sink>>) -> &'a mut Sink {
    guard.get_or_insert_with(Sink::default)
}

/// Whether a delivery has anything to do even with an empty outbox: faults queued, or a notice
/// to say. Inlined: a few loads, on every call through a room.
#[inline]
pub fn pending() -> bool {
    faults::faults_pending() || faults::notices_pending()
}

/// Says, writes, fires and counts what `out` holds, with the faults queued since the last
/// delivery. Call it with no lock of the preload's held.
pub fn deliver(out: Outbox) {
    if let Some(lines) = faults::take_notices() {
        crate::sys::cancel::write_stderr(format_args!("{lines}"));
    }
    if out.is_empty() && !faults::faults_pending() {
        return;
    }
    let Outbox {
        findings,
        mut lines,
    } = out;
    let (say, report) = {
        let mut guard = SINK.lock();
        let s = sink(&mut guard);
        let before = s.total();
        if faults::faults_pending() {
            // Their records go to the report whenever there is one, whichever delivery takes
            // them in: a call with nothing of its own to say brings an outbox without lines.
            let mut fault_lines = ReportLines::of(crate::sys::config::CONFIG.report.is_some());
            absorb_faults(s, &mut fault_lines);
            s.lines.extend_from_slice(&fault_lines.take());
        }
        let mut say = s.take_in(findings, &mut lines);
        // In the same write as the findings' own lines.
        if let Some(line) = s.after_summary(before) {
            say.push_str(&line);
        }
        s.lines.extend_from_slice(&lines.take());
        // Lines wait here while another thread opens the file.
        let report: Option<(report_file::Turn, Vec<u8>)> = (!s.lines.is_empty())
            .then(report_file::turn)
            .filter(|&turn| turn != report_file::Turn::Keep)
            .map(|turn| (turn, std::mem::take(&mut s.lines)));
        (say, report)
    };
    if !say.is_empty() {
        crate::sys::cancel::write_stderr(format_args!("{say}"));
    }
    if let Some((turn, lines)) = report {
        report_file::write(turn, &lines);
    }
}

/// Says a finding made outside any room's lock (the completion and async events' at exit).
pub fn say(f: Finding) {
    let mut out = Outbox::new(crate::sys::config::CONFIG.report.is_some());
    out.finding(f);
    deliver(out);
}

fn count(s: &mut Sink, f: Finding) {
    match s.counts.iter_mut().find(|(g, _)| g.kind == f.kind) {
        Some((_, n)) => *n += 1,
        None => s.counts.push((f, 1)),
    }
}

/// The faults the SIGSEGV handler or the fault thread queued, as findings: reported and
/// counted, not said again.
#[cold]
fn absorb_faults(s: &mut Sink, lines: &mut ReportLines) {
    let (queued, lost) = faults::drain_faults();
    s.faults_lost += lost;
    for fault in queued {
        let message = if fault.syscall == faults::UNKNOWN {
            format!(
                "read of the event's memory at {:#x} after its rdma_ack_cm_event, by the \
                 thread's code or a system call (the thread's state could not be read)",
                fault.data_addr
            )
        } else if fault.syscall < 0 {
            format!(
                "read of the event's memory at {:#x} after its rdma_ack_cm_event",
                fault.data_addr
            )
        } else {
            format!(
                "the kernel read the event's memory at {:#x} after its rdma_ack_cm_event, for \
                 the system call {}: without the preload it reads freed memory",
                fault.data_addr,
                faults::syscall_name(fault.syscall)
                    .map_or_else(|| format!("#{}", fault.syscall), str::to_string)
            )
        };
        let f = Finding::here(
            Kind::UseAfterAck,
            fault.seq,
            event_type_name(fault.event_type),
            fault.id,
            whereis::describe_fault(fault.code_addr, fault.link, &fault.stack),
            message,
        )
        .of_thread(fault.thread);
        if probes::on() {
            probes::finding(&f);
        }
        lines.finding(&f);
        count(s, f);
    }
}

/// The exit summary's counts, or None when `events` is 0 and nothing was found (no summary is
/// said). Findings counted after this are said to come after it (see [`deliver`]).
pub fn summarize(events: u64) -> Option<Counts> {
    sink(&mut SINK.lock()).counts(events)
}

/// Whether the calling thread is inside the sink's lock (a signal handler that interrupted it).
pub fn held_here() -> bool {
    SINK.held_here()
}

pub fn lock_for_fork() {
    SINK.lock_for_fork();
}

pub fn unlock_after_fork() {
    SINK.unlock_after_fork();
}

/// In a child after fork(2): its findings are its own (`later`: see fork_lock).
pub fn after_fork_in_child(later: bool) {
    SINK.after_fork_in_child(|s| *s = None, later);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(kind: Kind, seq: u64) -> Finding {
        Finding::here(kind, seq, "ADDR_RESOLVED", 0x10, "main".into(), "m".into())
    }

    #[test]
    fn a_finding_counted_after_the_summary_says_so() {
        let mut s = Sink::default();
        let mut lines = ReportLines::of(false);
        let before = s.total();
        s.take_in(vec![finding(Kind::DoubleAck, 1)], &mut lines);
        assert_eq!(s.after_summary(before), None);
        let counts = s.counts(3).expect("a summary");
        assert_eq!(counts.total, 1);
        assert_eq!(counts.lines.lines().count(), 1, "{}", counts.lines);
        let before = s.total();
        let said = s.take_in(
            vec![
                finding(Kind::DoubleAck, 2),
                finding(Kind::UseAfterDestroyChannel, 3),
            ],
            &mut lines,
        );
        assert_eq!(said.lines().count(), 2, "{said}");
        assert_eq!(
            s.after_summary(before),
            Some(format!(
                "==cmsafe== after the summary: pid {}, 2 more findings, 3 findings in all\n",
                std::process::id()
            ))
        );
        // An empty delivery after it says nothing more.
        let before = s.total();
        assert_eq!(s.take_in(Vec::new(), &mut lines), "");
        assert_eq!(s.after_summary(before), None);
    }

    #[test]
    fn no_summary_when_nothing_happened_and_no_mark() {
        let mut s = Sink::default();
        assert!(s.counts(0).is_none());
        let mut lines = ReportLines::of(false);
        s.take_in(vec![finding(Kind::DoubleAck, 1)], &mut lines);
        assert_eq!(s.after_summary(0), None);
    }
}
