//! The events the program holds and has acked, and the judgments made from them.
//!
//! Every handed-out event is a `Record` keyed by the pointer the program got. The tracker never
//! calls librdmacm while its lock is held: librdmacm calls back into the preload (its
//! rdma_destroy_id acks `id->event` through our rdma_ack_cm_event).

use cmsafe_core::PtrMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use cmsafe_core::cm::{event_type_name, rdma_cm_event, rdma_cm_event_type::*, rdma_cm_id};
use cmsafe_core::safe::{self, SafeCopies};

use crate::audit::findings::{Finding, Kind};
use crate::audit::held::Held;
use crate::audit::pages;
use crate::audit::probes;
use crate::audit::record::EventSource;
use crate::audit::report;
use crate::audit::sink::{self, Outbox};
use crate::cm::objects::{self, Objects};
use crate::cm::record::{reported, Holder, QpDestroyed, Record};
use crate::sys::config::{Config, Mode, CONFIG};
use crate::sys::forked::{self, Mark};
use crate::sys::this_thread;
use crate::sys::whereis::{self, Caller};
use cmsafe_core::fork_lock::ForkSafeMutex;
use cmsafe_sync::signal_queue::SignalQueue;

/// Operations that wait for (or should follow) the acks of an id's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    DestroyId,
    MigrateId,
    DestroyQp,
}

impl Op {
    /// The bit of `Record::reported` for this call.
    pub(super) fn bit(self) -> u8 {
        match self {
            Op::DestroyId => reported::DESTROY_ID,
            Op::MigrateId => reported::MIGRATE_ID,
            Op::DestroyQp => reported::DESTROY_QP,
        }
    }

    /// The librdmacm call, by name.
    pub fn call(self) -> &'static str {
        match self {
            Op::DestroyId => "rdma_destroy_id",
            Op::MigrateId => "rdma_migrate_id",
            Op::DestroyQp => "rdma_destroy_qp",
        }
    }
}

/// Acked events remembered for double-ack detection (and, in audit mode, guarded pages kept
/// in quarantine). Safe mode's copies are remembered by `State::copies` instead.
const ACKED_CAP: usize = 4096;

/// Events counted by type for the summary: every number up to 255 on its own (each is named,
/// `event_type_name`), the last entry for all above, named as they are.
const TYPE_SLOTS: usize = 257;

pub struct State {
    pub(super) live: PtrMap<usize, Record>,
    /// Audit's guarded copies and librdmacm's own events (no copy made), acked, oldest first, at
    /// most [`ACKED_CAP`]; the oldest leaves (and its page is recycled) as each new one comes.
    /// Only a double ack looks a pointer up (newest first), so no table keyed by pointer is
    /// written per event. Safe mode's acked copies are in `copies`, which tells their number and
    /// ack time.
    pub(super) acked: VecDeque<(usize, Record)>,
    /// Safe mode's records of events the program never acked whose copies went with their id's
    /// destroy (`Holder::Released`), oldest first, at most [`ACKED_CAP`]: a later ack of one is
    /// the program's ack of it, not a double ack. The oldest leaves (its event record written)
    /// as each new one comes.
    pub(super) released: VecDeque<(usize, Record)>,
    pub(super) events: u64,
    pub(super) by_type: [u64; TYPE_SLOTS],
    pub(super) held: Held,
    /// What this call has to say (findings, the report's records), delivered to the findings
    /// sink once the lock is released (`with_state`).
    pub(super) out: Outbox,
    pub(super) touched: bool,
    /// Safe mode's copies: the same core as `cmsafe_compat.h`.
    pub(super) copies: SafeCopies,
    /// Reads of librdmacm's rdma_get_cm_event left without returning: the event being read may
    /// be lost. Counted by how they were left (`LeftBy`).
    pub(super) cancelled_reads: Vec<CancelledRead>,
    pub(super) cancelled_total: u64,
    pub(super) longjmp_total: u64,
    /// rdma_destroy_qp calls that met a DISCONNECTED another thread held, judged at its ack.
    pub(super) qp_destroyed: Vec<QpDestroyed>,
    /// Ids and channels: created, destroyed, rejected.
    pub(super) objects: Objects,
}

/// A thread that left librdmacm's rdma_get_cm_event on `channel` without returning.
#[derive(Clone, Copy, Debug)]
pub struct CancelledRead {
    pub channel: usize,
    pub thread: i32,
    pub at_ns: u64,
    pub by: LeftBy,
}

/// How a read was left: glibc runs our cleanup record for both, and the thread's next
/// rdma_get_cm_event tells them apart (a cancelled thread has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeftBy {
    Cancel,
    /// A longjmp out of a signal handler (a timeout by alarm(2), say).
    Longjmp,
}

/// Cancelled reads remembered (the oldest are forgotten past this).
const CANCELLED_CAP: usize = 64;

/// Reads cut short, noted where they are cut (`note_cancelled_read`), taken in by the next call
/// through the tracker.
static CUT_SHORT: SignalQueue<CancelledRead, CANCELLED_CAP> = SignalQueue::new();

/// Threads that called rdma_get_cm_event again after leaving one (`note_read_resumed`): they
/// were not cancelled.
static RESUMED: SignalQueue<i32, CANCELLED_CAP> = SignalQueue::new();

/// A thread left librdmacm's rdma_get_cm_event on `channel` without returning: glibc runs our
/// cleanup record for a cancellation, and for a longjmp out of a signal handler too (which
/// loses the event being read the same way). Taken for a cancel until the thread calls
/// rdma_get_cm_event again (`note_read_resumed`). Lock-free: it may run in a signal handler, on
/// a thread inside any lock; the tracker takes it in at its next call.
pub fn note_cancelled_read(channel: usize) {
    this_thread::note_left_read();
    let _ = CUT_SHORT.push(CancelledRead {
        channel,
        thread: this_thread::id(),
        at_ns: now_ns(),
        by: LeftBy::Cancel,
    });
}

/// `thread`, which left an rdma_get_cm_event without returning, calls it again: that read was
/// left by a longjmp, not a cancellation. Lock-free, as `note_cancelled_read`.
#[cold]
pub fn note_read_resumed(thread: i32) {
    let _ = RESUMED.push(thread);
}

pub static STATE: ForkSafeMutex<Option<State>> = ForkSafeMutex::new(None);

/// Sequence numbers of the events handed out, from 1 (a forked child goes on from its parent's).
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// What rdma_ack_cm_event does with the pointer the program acks (`State::ack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckVerdict {
    /// librdmacm's event behind the program's copy (audit's page, or its own event): ack it
    /// now, once.
    Forward(usize),
    /// Nothing left for librdmacm: safe mode acked its event when it came.
    Done,
    /// A double ack, swallowed: acking librdmacm's event again would free it twice.
    Swallow,
    /// Not a pointer we handed out: librdmacm judges it, as it would without us.
    Pass,
}

/// What the program will get for a new event: made before the tracker's lock is taken, since
/// the copy is the slow part and threads getting events at once need not wait for each other.
pub enum Prepared {
    /// Safe: cmsafe's copy.
    Safe(cmsafe_core::Event),
    /// Audit: the copy on a guarded page.
    Guarded(u32, *mut rdma_cm_event),
    /// No copy could be made: librdmacm's own event.
    Raw,
}

/// The next sequence number and the program's view of `raw`, for `State::got`.
///
/// # Safety
/// `raw` is a valid, unacked event from librdmacm.
pub unsafe fn prepare(raw: *mut rdma_cm_event, mode: Mode) -> (u64, Prepared) {
    let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
    let prepared = match mode {
        // SAFETY: forwarded from the caller.
        Mode::Safe => match unsafe { cmsafe_core::Event::copy_from_raw(raw) } {
            Ok(ev) => Prepared::Safe(ev),
            Err(_) => Prepared::Raw,
        },
        // SAFETY: forwarded from the caller.
        _ => match unsafe { pages::copy_to_page(raw, seq) } {
            Some((page, copy)) => Prepared::Guarded(page, copy),
            None => Prepared::Raw,
        },
    };
    (seq, prepared)
}

pub(super) fn new_state(cfg: &Config) -> State {
    State {
        live: PtrMap::default(),
        acked: VecDeque::new(),
        released: VecDeque::new(),
        events: 0,
        by_type: [0; TYPE_SLOTS],
        held: Held::new(),
        out: Outbox::new(cfg.report.is_some()),
        touched: false,
        copies: SafeCopies::new(),
        cancelled_reads: Vec::new(),
        cancelled_total: 0,
        longjmp_total: 0,
        qp_destroyed: Vec::new(),
        objects: Objects::new(cfg.rejected_ids),
    }
}

/// Runs `f` on the state, creating it on first use; then, with the lock released, delivers what
/// `f` had to say to the findings sink (stderr, the report, the summary's counts).
pub fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let (r, out) = {
        let mut guard = STATE.lock();
        let state = guard.get_or_insert_with(|| new_state(&CONFIG));
        // A child forked without the fork handlers (_Fork, clone): what it inherited is not its
        // doing (the handlers' reset, lifecycle.rs). One load.
        if forked::since(Mark::Tracker) {
            state.after_fork_in_child();
            forked::mark(Mark::Tracker);
        }
        state.touched = true;
        if CUT_SHORT.maybe_pending() {
            while let Some(c) = CUT_SHORT.pop() {
                state.cancelled_read(c);
            }
        }
        if RESUMED.maybe_pending() {
            while let Some(thread) = RESUMED.pop() {
                state.read_left_by_longjmp(thread);
            }
        }
        let r = f(state);
        // Most calls have nothing to say: no outbox made, nothing to deliver.
        (r, (!state.out.is_empty()).then(|| state.out.take()))
    };
    if out.is_some() || sink::pending() {
        sink::deliver(out.unwrap_or_default());
    }
    r
}

/// At exit: the tracker's last findings and its summary, with `extra` (the completion and async
/// events' lines) after its counts, said on stderr. The caller made sure this thread is not
/// inside the lock already (lifecycle.rs).
pub fn finish(extra: Option<String>) {
    let (ending, out) = {
        let mut guard = STATE.lock();
        match guard.as_mut() {
            Some(s) => (Some(s.finish()), s.out.take()),
            None => (None, Outbox::default()),
        }
    };
    sink::deliver(out);
    let Some(ending) = ending else { return };
    if let Some(s) = ending.summary(extra) {
        crate::sys::cancel::write_stderr(format_args!("{s}"));
    }
}

/// What the tracker counted, taken at exit for the summary.
pub struct Ending {
    touched: bool,
    events: u64,
    by_type: Vec<(String, u64)>,
    held: Held,
    cancelled: u64,
    longjmps: u64,
    left: objects::Leftover,
}

impl Ending {
    /// The summary: the tracker's counts, the findings sink's, then `extra` (the completion and
    /// async events' lines) and what is left; None when the program touched nothing.
    fn summary(self, extra: Option<String>) -> Option<String> {
        if !self.touched {
            return None;
        }
        let counts = sink::summarize(self.events)?;
        let mode = match CONFIG.mode {
            Mode::Safe => "safe",
            Mode::Audit => "audit",
            Mode::Off => "off",
        };
        let mut s =
            report::summary_head(mode, self.events, counts.total, &self.by_type, &self.held);
        s.push_str(&report::own_memory_line(
            crate::sys::alloc::mapped_most(),
            cmsafe_core::event::copies_committed(),
            crate::audit::pages::ring_pages(),
        ));
        s.push_str(&counts.lines);
        if let Some(line) = extra {
            s.push_str(&line);
        }
        if self.cancelled > 0 {
            s.push_str(&format!(
                "==cmsafe==   threads cancelled inside rdma_get_cm_event: {}\n",
                self.cancelled
            ));
        }
        if self.longjmps > 0 {
            s.push_str(&format!(
                "==cmsafe==   rdma_get_cm_event calls left by a longjmp (out of a signal handler): {}\n",
                self.longjmps
            ));
        }
        if let Some(line) = counts.lost {
            s.push_str(&line);
        }
        let left = self.left;
        if left.ids > 0 || left.channels > 0 {
            s.push_str(&format!(
                "==cmsafe==   never destroyed: {} cm_ids ({} of rejected requests), {} event channels\n",
                left.ids, left.rejected, left.channels
            ));
        }
        // After the last lines went to the report: what it lost is known now.
        if let Some(line) = crate::audit::report_file::summary_line() {
            s.push_str(&line);
        }
        Some(s)
    }
}

/// A call that waits for acks (destroy, migrate), as it began: what the hang watcher names when
/// it has waited too long.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    pub op: Op,
    pub id: usize,
    pub channel: usize,
    pub thread: i32,
    pub start_ns: u64,
    pub caller: Caller,
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of hold times and of waits for an ack.
pub use cmsafe_core::clock::monotonic_ns as now_ns;

impl State {
    pub(super) fn add(&mut self, f: Finding) {
        self.out.finding(f);
    }

    pub(super) fn finding(&mut self, kind: Kind, r: &Record, place: &str, message: String) {
        self.add(Finding::here(
            kind,
            r.seq,
            r.type_name(),
            r.id,
            place.to_string(),
            message,
        ));
    }

    /// A new event, got from librdmacm as `raw` and `prepared` for the program (outside the
    /// lock); returns the pointer to hand out and, in safe mode, whether librdmacm's event must
    /// be acked now (after the lock is dropped).
    ///
    /// # Safety
    /// `raw` is a valid, unacked event from librdmacm.
    pub unsafe fn got(
        &mut self,
        channel: usize,
        raw: *mut rdma_cm_event,
        caller: whereis::Caller,
        (seq, prepared): (u64, Prepared),
    ) -> (*mut rdma_cm_event, bool) {
        // SAFETY: `raw` is valid (caller).
        let cm = unsafe { &*raw };
        let qp_type = if cm.id.is_null() {
            0
        } else {
            // SAFETY: a live id of an unacked event.
            unsafe { (*cm.id).qp_type }
        };
        let kind = cmsafe_core::event::param_kind(cm.event, qp_type);
        // SAFETY: `kind` names the member librdmacm filled.
        let pd_len = unsafe {
            match kind {
                cmsafe_core::event::ParamKind::Conn => cm.param.conn.private_data_len,
                cmsafe_core::event::ParamKind::Ud => cm.param.ud.private_data_len,
                cmsafe_core::event::ParamKind::MulticastContext
                | cmsafe_core::event::ParamKind::Arg
                | cmsafe_core::event::ParamKind::Opaque => 0,
            }
        };
        let owner = if cm.event == RDMA_CM_EVENT_CONNECT_REQUEST && !cm.listen_id.is_null() {
            cm.listen_id as usize
        } else {
            cm.id as usize
        };
        let (handed, holder, ack_now) = match prepared {
            Prepared::Safe(ev) => (safe::handle(&ev), Holder::Safe(ev), true),
            Prepared::Guarded(page, copy) => (
                copy,
                Holder::Guarded {
                    page,
                    raw: raw as usize,
                },
                false,
            ),
            Prepared::Raw => (raw, Holder::Raw(raw as usize), false),
        };
        // A request's new id is on its listen id's channel, the one read. Every other event's
        // id is its owner, seen alive by `hold` below.
        if cm.event == RDMA_CM_EVENT_CONNECT_REQUEST {
            self.objects
                .id_created(cm.id as usize, channel, caller.in_librdmacm, true);
        }
        let i = (cm.event as usize).min(TYPE_SLOTS - 1);
        self.by_type[i] += 1;
        self.events += 1;
        let next = self.link_newest(handed as usize, owner, channel);
        self.live.insert(
            handed as usize,
            Record {
                seq,
                event_type: cm.event,
                status: cm.status,
                id: cm.id as usize,
                owner,
                prev: 0,
                next,
                channel,
                thread: this_thread::id(),
                get_ns: now_ns(),
                ack_ns: 0,
                pd_len,
                internal: caller.in_librdmacm,
                reported: 0,
                holder,
            },
        );
        if probes::on() {
            // SAFETY: the event just handed out is unacked, so its id is live.
            unsafe { self.traced_got(handed as usize) };
        }
        (handed, ack_now)
    }

    /// A new event's probe, and its id's addresses for the report when the event brings them
    /// (an address resolved, a connection requested or made): the timeline names each id's track
    /// after them. One argument, the pointer handed out, which the caller returns anyway: the
    /// rest is read here, off the hot path.
    ///
    /// # Safety
    /// The event handed out as `handed` is unacked, so its id is live.
    #[cold]
    #[inline(never)]
    unsafe fn traced_got(&mut self, handed: usize) {
        let Some(r) = self.live.get(&handed) else {
            return;
        };
        probes::event_fetched(&r.line());
        let brings = matches!(
            r.event_type,
            RDMA_CM_EVENT_ADDR_RESOLVED
                | RDMA_CM_EVENT_CONNECT_REQUEST
                | RDMA_CM_EVENT_CONNECT_RESPONSE
                | RDMA_CM_EVENT_ESTABLISHED
        );
        if brings && r.id != 0 {
            let id = r.id as *const rdma_cm_id;
            // SAFETY: a live id (the contract); its route's addresses are sockaddr storage,
            // read at their family's length.
            let (src, dst) = unsafe {
                let addr = &(*id).route.addr;
                (
                    cmsafe_core::event::addr_text(&addr.src_addr_union.src_addr),
                    cmsafe_core::event::addr_text(&addr.dst_addr_union.dst_addr),
                )
            };
            self.out.lines.address(r.id, &src, &dst);
        }
    }

    /// The program acks `ptr`: what the wrapper does with it once the lock is released.
    pub fn ack(&mut self, ptr: usize, caller: whereis::Caller, late_ns: u64) -> AckVerdict {
        // Named only when there is something to report: dladdr scans symbol tables.
        let place = || whereis::describe(caller.addr);
        let Some(mut r) = self.take_live(ptr).or_else(|| self.take_released(ptr)) else {
            // Acked before: a record of ours, or safe mode's copy, kept with what it was.
            let prev = match self.acked_record(ptr) {
                Some(r) => Some((r.seq, r.ack_ns, r.type_name(), r.id)),
                None => self.copies.kept(ptr as *mut rdma_cm_event).map(|k| {
                    let ev = &k.event;
                    (k.seq, k.acked_ns, ev.event_type_name(), ev.id() as usize)
                }),
            };
            if let Some((seq, ack_ns, event_type, id)) = prev {
                let msg = format!(
                    "rdma_ack_cm_event of an event already acked {:.3} ms earlier",
                    now_ns().saturating_sub(ack_ns) as f64 / 1e6
                );
                let f = Finding::here(Kind::DoubleAck, seq, event_type, id, place(), msg);
                self.add(f);
                return AckVerdict::Swallow;
            }
            // One of our copies, acked so long ago that its record has left, is still a double
            // ack, and librdmacm must not see it: it would free memory it does not own.
            let ours = cmsafe_core::Event::is_copy_address(ptr as *const rdma_cm_event)
                || pages::is_page_copy(ptr);
            let (kind, message) = if ours {
                (Kind::DoubleAck, format!(
                    "rdma_ack_cm_event({ptr:#x}) of an event this preload copied, acked long ago (its record is gone); not passed to librdmacm"
                ))
            } else {
                (Kind::ForeignAck, format!(
                    "rdma_ack_cm_event({ptr:#x}): not an event rdma_get_cm_event returned; passed to librdmacm"
                ))
            };
            self.add(Finding::here(kind, 0, "-", 0, place(), message));
            return if ours {
                AckVerdict::Swallow
            } else {
                AckVerdict::Pass
            };
        };
        r.ack_ns = now_ns();
        if !self.qp_destroyed.is_empty() {
            self.qp_destroy_at_ack(ptr, &mut r, late_ns);
        }
        let held = r.ack_ns - r.get_ns;
        if held > late_ns && !r.internal && !caller.in_librdmacm {
            let msg = format!(
                "held {:.1} ms before rdma_ack_cm_event (CMSAFE_LATE_ACK_MS={}); the id's state machine waited",
                held as f64 / 1e6,
                late_ns / 1_000_000
            );
            self.finding(Kind::LateAck, &r, &place(), msg);
        }
        self.held.add(held);
        self.out.lines.event(&r);
        let raw = match r.holder {
            Holder::Raw(raw) => raw,
            Holder::Guarded { page, raw } => {
                pages::seal(page);
                raw
            }
            Holder::Safe(ev) => {
                // The copy is remembered there, with the record's number and ack time; no
                // acked record is kept beside it.
                self.copies.keep(ev, r.seq, r.ack_ns);
                return AckVerdict::Done;
            }
            // Acked at once by safe mode, its copy released with its id: nothing left to do.
            Holder::Released => return AckVerdict::Done,
        };
        self.keep_acked(ptr, r);
        AckVerdict::Forward(raw)
    }

    fn keep_acked(&mut self, ptr: usize, r: Record) {
        if self.acked.capacity() == 0 {
            self.acked.reserve_exact(ACKED_CAP + 1);
        }
        self.acked.push_back((ptr, r));
        if self.acked.len() > ACKED_CAP {
            if let Some((_, old)) = self.acked.pop_front() {
                forget(old);
            }
        }
    }

    /// The newest acked record of `ptr`, while it is remembered: a scan, since only a double
    /// ack asks. (A guarded page comes back only once its record has left; librdmacm's own
    /// event memory may be listed twice.)
    fn acked_record(&self, ptr: usize) -> Option<&Record> {
        self.acked
            .iter()
            .rev()
            .find(|(p, _)| *p == ptr)
            .map(|(_, r)| r)
    }

    /// After rdma_destroy_id(id), called by `thread` from `at`, returned: safe mode's acked
    /// copies of its events may go.
    pub fn destroyed(&mut self, id: usize, thread: i32, at: usize, rc: i32) {
        self.out.lines.destroy(id, thread, rc);
        self.copies.id_destroyed(id);
        // Before the id's entry goes: it names the id's unacked events.
        if rc == 0 {
            self.release_unacked_copies(id);
        }
        self.objects.id_destroyed(id, thread, at);
    }

    /// Safe mode's copies of the events counted against `id` that the program never acked:
    /// released with the id, as its acked ones are (a destroy finding named each already: the
    /// destroy would have waited for them). Kept to exit, a program that forgets its acks would
    /// grow by a copy per event for as long as it runs.
    fn release_unacked_copies(&mut self, id: usize) {
        let gone: Vec<usize> = self
            .events_of(id)
            .filter(|(_, r)| matches!(r.holder, Holder::Safe(_)))
            .map(|(p, _)| p)
            .collect();
        for p in gone {
            let Some(mut r) = self.take_live(p) else {
                continue;
            };
            // The copy goes back to cmsafe's pool here; the record waits for a late ack.
            r.holder = Holder::Released;
            self.released.push_back((p, r));
            if self.released.len() > ACKED_CAP {
                if let Some((_, old)) = self.released.pop_front() {
                    self.out.lines.event(&old);
                }
            }
        }
    }

    /// The record of a released copy the program acks now (newest first: the pointer may have
    /// been handed out again since, for a copy released again).
    fn take_released(&mut self, ptr: usize) -> Option<Record> {
        let at = self.released.iter().rposition(|(p, _)| *p == ptr)?;
        self.released.remove(at).map(|(_, r)| r)
    }

    /// Whether every id of `channel` was destroyed and none made since.
    pub fn channel_emptied(&self, channel: usize) -> bool {
        self.objects.emptied(channel).is_some()
    }

    /// After rdma_migrate_id(id, channel) succeeded.
    pub fn migrated(&mut self, id: usize, channel: usize) {
        self.objects.id_migrated(id, channel);
    }

    /// A new id (rdma_create_id; rdma_get_request: `from_request`) on event `channel`, or a
    /// channel (rdma_create_event_channel).
    pub fn id_created(
        &mut self,
        id: usize,
        channel: usize,
        caller: whereis::Caller,
        from_request: bool,
    ) {
        self.objects
            .id_created(id, channel, caller.in_librdmacm, from_request);
    }

    pub fn channel_created(&mut self, channel: usize, caller: whereis::Caller) {
        self.objects.channel_created(channel, caller.in_librdmacm);
    }

    /// A thread was cancelled inside librdmacm's rdma_get_cm_event (`note_cancelled_read`).
    fn cancelled_read(&mut self, c: CancelledRead) {
        self.cancelled_total += 1;
        if self.cancelled_reads.len() == CANCELLED_CAP {
            self.cancelled_reads.remove(0);
        }
        self.cancelled_reads.push(c);
    }

    /// `thread`'s last read left without returning was left by a longjmp (`note_read_resumed`).
    fn read_left_by_longjmp(&mut self, thread: i32) {
        let left = self
            .cancelled_reads
            .iter_mut()
            .rev()
            .find(|c| c.thread == thread && c.by == LeftBy::Cancel);
        if let Some(c) = left {
            c.by = LeftBy::Longjmp;
        }
        self.cancelled_total = self.cancelled_total.saturating_sub(1);
        self.longjmp_total += 1;
    }

    /// At exit: events never acked (findings) and the report's records of the events still
    /// unacked, into the outbox; and what the summary says of the tracker's counts.
    pub fn finish(&mut self) -> Ending {
        self.qp_destroys_at_exit();
        let mut leftover: Vec<usize> = self
            .live
            .iter()
            .filter(|(_, r)| r.reported == 0 && !r.internal)
            .map(|(p, _)| *p)
            .collect();
        leftover.sort_by_key(|p| self.live[p].seq);
        for p in leftover {
            let r = &self.live[&p];
            let msg = format!(
                "never acked: held {:.1} ms until exit",
                (now_ns() - r.get_ns) as f64 / 1e6
            );
            let f = Finding::here(
                Kind::NeverAcked,
                r.seq,
                r.type_name(),
                r.id,
                "exit".to_string(),
                msg,
            )
            .of_thread(r.thread);
            self.add(f);
        }
        let mut unacked: Vec<&Record> = self
            .live
            .values()
            .chain(self.released.iter().map(|(_, r)| r))
            .collect();
        unacked.sort_by_key(|r| r.seq);
        for r in unacked {
            self.out.lines.event(r);
        }
        let by_type = self
            .by_type
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(t, n)| (event_type_name(t as u32).to_string(), *n))
            .collect();
        Ending {
            touched: self.touched,
            events: self.events,
            by_type,
            held: std::mem::replace(&mut self.held, Held::new()),
            cancelled: self.cancelled_total,
            longjmps: self.longjmp_total,
            left: self.objects.leftover(),
        }
    }

    /// In a child after fork(2): its own report and counts; what it inherited is not its doing.
    pub fn after_fork_in_child(&mut self) {
        for r in self.live.values_mut() {
            r.reported |= reported::INHERITED;
        }
        self.events = 0;
        self.by_type = [0; TYPE_SLOTS];
        self.held.clear();
        self.cancelled_reads.clear();
        self.cancelled_total = 0;
        self.longjmp_total = 0;
        // What the parent had to say is the parent's (its report is closed: report_file).
        self.out.clear();
    }
}

/// A record that leaves the tracker: its guarded page goes back, its copy is released.
fn forget(r: Record) {
    if let Holder::Guarded { page, .. } = r.holder {
        pages::recycle(page);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record of event `seq`, all else zero (the judge's tests use it too).
    pub(crate) fn acked(seq: u64) -> Record {
        Record {
            seq,
            event_type: 0,
            status: 0,
            id: 0,
            owner: 0,
            prev: 0,
            next: 0,
            channel: 0,
            thread: 0,
            get_ns: 0,
            ack_ns: 0,
            pd_len: 0,
            internal: false,
            reported: 0,
            holder: Holder::Raw(0),
        }
    }

    #[test]
    fn the_last_acks_are_remembered_and_a_double_ack_finds_the_newest() {
        let mut s = new_state(&CONFIG);
        s.keep_acked(0x1000, acked(1));
        s.keep_acked(0x2000, acked(2));
        // librdmacm's own event memory (no copy made), acked again for a newer event.
        s.keep_acked(0x1000, acked(3));
        for i in 0..ACKED_CAP - 3 {
            s.keep_acked(0x10_0000 + 16 * i, acked(4 + i as u64));
        }
        assert_eq!(s.acked.len(), ACKED_CAP);
        let seq = |s: &State, p| s.acked_record(p).map(|r| r.seq);
        assert_eq!((seq(&s, 0x1000), seq(&s, 0x2000)), (Some(3), Some(2)));
        // Each new ack pushes out the oldest: the first record of 0x1000, then 0x2000's.
        s.keep_acked(0x9000_0000, acked(1 << 40));
        assert_eq!((seq(&s, 0x1000), seq(&s, 0x2000)), (Some(3), Some(2)));
        s.keep_acked(0x9000_0010, acked(1 << 41));
        assert_eq!((seq(&s, 0x1000), seq(&s, 0x2000)), (Some(3), None));
        assert_eq!(s.acked.len(), ACKED_CAP);
        assert_eq!(seq(&s, 0x10_0000), Some(4));
        assert_eq!(seq(&s, 0x9000_0010), Some(1 << 41));
    }
}
