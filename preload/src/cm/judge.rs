//! The tracker's judgments of the calls that depend on the events a program holds and the ids
//! and channels it made: whether a destroy or a migrate will wait, and for what; calls on
//! destroyed ids and channels; rejected ids left alive; lost events and reads that can never
//! return. Each judgment makes its finding, with the sentence a reader needs, in the tracker's
//! outbox (cm/track.rs keeps the events themselves).

use cmsafe_core::cm::{rdma_cm_event_type::*, rdma_cm_id};

use crate::audit::findings::{Finding, Kind};
use crate::cm::record::{reported, QpDestroyed, Record};
use crate::cm::track::{now_ns, LeftBy, Op, State, Wait};
use crate::sys::config::{Mode, CONFIG};
use crate::sys::{this_thread, whereis};

impl State {
    /// Unacked events rdma_destroy_id / rdma_migrate_id of `id` would wait for. librdmacm acks
    /// `id->event` itself before it waits, so that one does not count.
    fn blocking(&self, op: Op, id: usize, own_event: usize) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .events_of(id)
            .filter(|&(p, r)| p != own_event && !r.reported_for(op.bit()))
            .map(|(p, _)| p)
            .collect();
        v.sort_by_key(|p| self.live[p].seq);
        v
    }

    fn list(&self, ptrs: &[usize]) -> String {
        ptrs.iter()
            .map(|p| {
                let r = &self.live[p];
                format!("seq={} {}", r.seq, r.type_name())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The unacked events an operation on `id` waits for (rdma_destroy_id, rdma_migrate_id), or
    /// that it should not run before (rdma_destroy_qp and the id's DISCONNECTED), split into
    /// those the calling thread holds and those other threads hold.
    ///
    /// # Safety
    /// `id` is a live cm_id (the program passes it to librdmacm).
    pub unsafe fn waits_for(&self, op: Op, id: *mut rdma_cm_id) -> (Vec<usize>, Vec<usize>) {
        let ptrs = match op {
            Op::DestroyId | Op::MigrateId => {
                // SAFETY: forwarded from the caller.
                let own = unsafe { (*id).event } as usize;
                self.blocking(op, id as usize, own)
            }
            Op::DestroyQp => {
                // A DISCONNECTED counts against its own id.
                let mut v: Vec<usize> = self
                    .events_of(id as usize)
                    .filter(|(_, r)| {
                        r.id == id as usize
                            && r.event_type == RDMA_CM_EVENT_DISCONNECTED
                            && !r.internal
                            && !r.reported_for(op.bit())
                    })
                    .map(|(p, _)| p)
                    .collect();
                v.sort_by_key(|p| self.live[p].seq);
                v
            }
        };
        let me = this_thread::id();
        ptrs.into_iter().partition(|p| self.live[p].thread == me)
    }

    /// Which of `ptrs` are still unacked.
    pub fn still_unacked(&self, ptrs: &[usize]) -> Vec<usize> {
        ptrs.iter()
            .copied()
            .filter(|p| self.live.contains_key(p))
            .collect()
    }

    /// Reports that `op` on `id` meets the unacked events `ptrs`: held by this thread
    /// (`waited_ms` None), or by others that did not ack them within `waited_ms`.
    pub fn report_wait(
        &mut self,
        op: Op,
        id: usize,
        ptrs: &[usize],
        caller: whereis::Caller,
        waited_ms: Option<u64>,
    ) {
        let ptrs = self.still_unacked(ptrs);
        let Some(&first) = ptrs.first() else { return };
        let safe = CONFIG.mode == Mode::Safe;
        let list = self.list(&ptrs);
        let n = ptrs.len();
        let held = match waited_ms {
            None => "held by this very thread".to_string(),
            Some(ms) => {
                format!("still unacked after {ms} ms waiting for the threads that hold them")
            }
        };
        let (kind, message) = match (op, waited_ms) {
            (Op::DestroyId, None) => (
                Kind::DestroyInOwnHandler,
                if safe {
                    format!("rdma_destroy_id called by the thread that holds {n} unacked event(s) of this id ({list}): without cmsafe it would wait for itself forever (safe mode acked them)")
                } else {
                    format!("rdma_destroy_id called by the thread that holds {n} unacked event(s) of this id ({list}): it will wait for itself forever")
                },
            ),
            (Op::DestroyId, Some(_)) => {
                (
                    Kind::DestroyWithUnacked,
                    if safe {
                        format!("without cmsafe, rdma_destroy_id would wait forever for these {n} events ({held}): {list}; safe mode acked them")
                    } else {
                        format!("rdma_destroy_id will wait forever for these {n} events ({held}): {list}")
                    },
                )
            }
            (Op::MigrateId, _) => {
                (
                    Kind::MigrateWithUnacked,
                    if safe {
                        format!("without cmsafe, rdma_migrate_id would wait forever for these {n} events ({held}): {list}; safe mode acked them")
                    } else {
                        format!("rdma_migrate_id will wait forever for these {n} events ({held}): {list}")
                    },
                )
            }
            (Op::DestroyQp, _) => (Kind::QpDestroyBeforeAck, qp_destroy_message(&held, &list)),
        };
        let r = &self.live[&first];
        let f = Finding::here(
            kind,
            r.seq,
            r.type_name(),
            id,
            whereis::describe(caller.addr),
            message,
        );
        self.add(f);
        for p in ptrs {
            if let Some(r) = self.live.get_mut(&p) {
                r.reported |= op.bit();
            }
        }
    }

    /// rdma_destroy_qp met `ptrs`, DISCONNECTEDs other threads hold: librdmacm waits for none
    /// of them, so neither does the call (audit changes no timing). Each is judged at its ack
    /// (`qp_destroy_at_ack`), or at exit if it never comes.
    pub fn note_qp_destroy(&mut self, ptrs: &[usize], caller: whereis::Caller) {
        let (at_ns, thread) = (now_ns(), this_thread::id());
        for &ptr in ptrs {
            self.qp_destroyed.push(QpDestroyed {
                ptr,
                at_ns,
                thread,
                caller: caller.addr,
            });
        }
    }

    /// At the ack of `r` (at `ptr`, now removed from the live events): a rdma_destroy_qp that met
    /// it unacked is a finding when the ack came more than CMSAFE_LATE_ACK_MS after the call,
    /// the grace a destroy gives an event thread that is about to ack.
    pub fn qp_destroy_at_ack(&mut self, ptr: usize, r: &mut Record, late_ns: u64) {
        let Some(i) = self.qp_destroyed.iter().position(|q| q.ptr == ptr) else {
            return;
        };
        let q = self.qp_destroyed.swap_remove(i);
        let after = r.ack_ns.saturating_sub(q.at_ns);
        if after > late_ns && !r.reported_for(reported::DESTROY_QP) {
            let held = format!(
                "acked by another thread {:.1} ms after this call, past CMSAFE_LATE_ACK_MS={}",
                after as f64 / 1e6,
                late_ns / 1_000_000
            );
            r.reported |= reported::DESTROY_QP;
            self.qp_destroy_finding(q, (r.seq, r.type_name(), r.id), &held);
        }
    }

    /// At exit: each rdma_destroy_qp that met a DISCONNECTED never acked since.
    pub fn qp_destroys_at_exit(&mut self) {
        for q in std::mem::take(&mut self.qp_destroyed) {
            let named = match self.live.get_mut(&q.ptr) {
                Some(r) if !r.reported_for(reported::DESTROY_QP) => {
                    r.reported |= reported::DESTROY_QP;
                    (r.seq, r.type_name(), r.id)
                }
                _ => continue,
            };
            self.qp_destroy_finding(q, named, "still unacked at exit");
        }
    }

    /// The finding of the rdma_destroy_qp `q` that met the event `(seq, type, id)` unacked.
    fn qp_destroy_finding(
        &mut self,
        q: QpDestroyed,
        event: (u64, &'static str, usize),
        held: &str,
    ) {
        let (seq, event_type, id) = event;
        let message = qp_destroy_message(held, &format!("seq={seq} {event_type}"));
        let f = Finding::here(
            Kind::QpDestroyBeforeAck,
            seq,
            event_type,
            id,
            whereis::describe(q.caller),
            message,
        )
        .of_thread(q.thread);
        self.add(f);
    }

    /// Before `call` on `id`: true (and a finding) when the program destroyed that id, or when
    /// no id can be at that address.
    pub fn use_of_id(&mut self, call: &str, id: usize, caller: whereis::Caller) -> bool {
        if crate::sys::address::cannot_be_object(id) {
            let message = format!(
                "{call} on {id:#x}, which cannot be a cm_id (no object of a process is at that \
                 address), so librdmacm faults reading it: the program took the id from memory \
                 that does not hold one, such as a freed struct whose slot was reused{}",
                refused("EINVAL")
            );
            self.object_finding(Kind::NotACmId, id, caller, message);
            return true;
        }
        if !self.objects.id_gone(id) {
            return false;
        }
        if caller.in_librdmacm {
            // librdmacm never calls on an id it freed: this is a new id at a reused address,
            // made inside librdmacm where the preload does not see it (rdma_get_request's
            // request id on a synchronous listener, then its own rdma_migrate_id or
            // rdma_destroy_id; on arm64 those calls come through the PLT).
            self.objects.id_seen(id, 0);
            return false;
        }
        let message = format!(
            "{call} on a cm_id already passed to rdma_destroy_id: librdmacm freed it, so the call \
             reads freed memory{}",
            refused("EINVAL")
        );
        self.object_finding(Kind::UseAfterDestroyId, id, caller, message);
        true
    }

    /// Before `call` on `channel`: true (and a finding) when the program destroyed it.
    pub fn use_of_channel(&mut self, call: &str, channel: usize, caller: whereis::Caller) -> bool {
        if !self.objects.channel_gone(channel) {
            return false;
        }
        let message = format!(
            "{call} on event channel {channel:#x}, already passed to rdma_destroy_event_channel: \
             librdmacm freed it and closed its fd, so the call reads freed memory (and a reused \
             fd){}",
            refused("EBADF")
        );
        self.object_finding(Kind::UseAfterDestroyChannel, 0, caller, message);
        true
    }

    /// rdma_reject of `id`: a finding each time the rejected request ids still alive reach
    /// CMSAFE_REJECTED_IDS or a multiple of it.
    pub fn rejected(&mut self, id: usize, caller: whereis::Caller) {
        if let Some(n) = self.objects.id_rejected(id) {
            let message = format!(
                "{n} cm_ids of rejected connection requests are alive, none passed to \
                 rdma_destroy_id: each keeps a kernel cm_id (rdma resource show cm_id) until it \
                 is destroyed or the process exits; destroy a request's id after rdma_reject"
            );
            self.object_finding(Kind::RejectedIdNeverDestroyed, id, caller, message);
        }
    }

    fn object_finding(&mut self, kind: Kind, id: usize, caller: whereis::Caller, message: String) {
        self.add(Finding::here(
            kind,
            0,
            "-",
            id,
            whereis::describe(caller.addr),
            message,
        ));
    }

    /// The unacked events from `channel`, no finding named yet, that threads other than the
    /// caller hold: what rdma_destroy_event_channel gives CMSAFE_LATE_ACK_MS to be acked.
    ///
    /// A pass over every event held, once per channel's life (its destroy), never per event or
    /// per id; none at all when nothing is held, the usual case (a table that once held many
    /// events is as long to walk as it grew).
    pub fn channel_held_by_others(&self, channel: usize) -> Vec<usize> {
        if self.live.is_empty() {
            return Vec::new();
        }
        let me = this_thread::id();
        self.live
            .iter()
            .filter(|(_, r)| {
                r.channel == channel && r.reported == 0 && !r.internal && r.thread != me
            })
            .map(|(p, _)| *p)
            .collect()
    }

    /// Before rdma_destroy_event_channel(channel): as `channel_held_by_others`, a pass over the
    /// events held, if any.
    pub fn destroying_channel(&mut self, channel: usize, caller: whereis::Caller) {
        self.objects.channel_destroyed(channel);
        if self.live.is_empty() {
            return;
        }
        let mut ptrs: Vec<usize> = self
            .live
            .iter()
            // Only events no finding named yet: this call does not block, so it adds nothing
            // to what a destroy or migrate finding already said of them.
            .filter(|(_, r)| r.channel == channel && r.reported == 0 && !r.internal)
            .map(|(p, _)| *p)
            .collect();
        if ptrs.is_empty() {
            return;
        }
        ptrs.sort_by_key(|p| self.live[p].seq);
        let first = &self.live[&ptrs[0]];
        let message = format!(
            "rdma_destroy_event_channel with {} unacked events from it: {}",
            ptrs.len(),
            self.list(&ptrs)
        );
        let f = Finding::here(
            Kind::ChannelDestroyWithUnacked,
            first.seq,
            first.type_name(),
            first.id,
            whereis::describe(caller.addr),
            message,
        );
        self.add(f);
        for p in ptrs {
            if let Some(r) = self.live.get_mut(&p) {
                r.reported |= reported::DESTROY_CHANNEL;
            }
        }
    }

    /// Whether the program holds an unacked event that `op` on `id` waits for.
    pub fn holds_events_of(&self, id: usize) -> bool {
        self.events_of(id).any(|(_, r)| !r.internal)
    }

    /// `op` on `id` (whose event channel is `channel`) has blocked `waited_ms` in `thread`
    /// though the program holds no unacked event of the id: librdmacm waits for an event the
    /// kernel reported and nobody completed.
    pub fn report_lost_event(&mut self, w: &Wait, waited_ms: u64) {
        let call = w.op.call();
        let cause = match self
            .cancelled_reads
            .iter()
            .rev()
            .find(|c| c.channel == w.channel)
        {
            Some(c) if c.by == LeftBy::Cancel => format!(
                "thread {} was cancelled inside rdma_get_cm_event on this id's event channel {:.1} ms before this call: a cancel that lands as the kernel hands over an event loses that event (glibc acts on it after the read returned), and librdmacm waits for its ack forever; cancel a CM thread only outside rdma_get_cm_event",
                c.thread,
                w.start_ns.saturating_sub(c.at_ns) as f64 / 1e6
            ),
            Some(c) => format!(
                "thread {} left rdma_get_cm_event on this id's event channel by a longjmp out of a signal handler {:.1} ms before this call: a signal that lands as the kernel hands over an event loses that event the same way, and librdmacm waits for its ack forever; for a timeout, poll(2) the channel's fd instead",
                c.thread,
                w.start_ns.saturating_sub(c.at_ns) as f64 / 1e6
            ),
            None => "the kernel reported an event for it that never reached the program through rdma_get_cm_event (read from the channel's fd directly, or lost by a cancelled thread)".to_string(),
        };
        let message = format!(
            "{call} has waited {waited_ms} ms although every event the program got for this id was acked: {cause}"
        );
        let f = Finding::here(
            Kind::LostEvent,
            0,
            "-",
            w.id,
            whereis::describe(w.caller.addr),
            message,
        )
        .of_thread(w.thread);
        self.add(f);
    }

    /// `thread` (called from `at`) has been inside rdma_get_cm_event on `channel` for at least
    /// `waited_ms` since the watcher first saw that channel without ids: it waits for good.
    pub fn report_read_without_ids(
        &mut self,
        channel: usize,
        thread: i32,
        at: usize,
        waited_ms: u64,
    ) {
        let Some(e) = self.objects.emptied(channel) else {
            return;
        };
        let place = if at == 0 {
            "rdma_get_cm_event".to_string()
        } else {
            whereis::describe(at)
        };
        let message = format!(
            "rdma_get_cm_event on event channel {channel:#x} has blocked at least {waited_ms} ms \
             since thread {} destroyed the channel's last cm_id ({:#x}, at {}), and no id was \
             made on it since: no event can come, so it returns only if an id is made on this \
             channel or the thread is cancelled. The kernel drops a destroyed id's unread \
             events: a thread that polls the channel's fd and then calls rdma_get_cm_event \
             waits forever when another thread destroys the id between the two (rping's \
             cm_thread against its main thread's rdma_destroy_id); stop the event thread \
             before destroying the last id, or read with the fd non-blocking",
            e.last_thread,
            e.last_id,
            whereis::describe(e.last_at),
        );
        self.add(
            Finding::here(Kind::GetEventWithoutIds, 0, "-", e.last_id, place, message)
                .of_thread(thread),
        );
    }
}

/// What safe mode does with a call on a destroyed object, for the finding's message.
fn refused(errno_name: &str) -> String {
    if CONFIG.mode == Mode::Safe {
        format!("; safe mode refused the call (-1, errno {errno_name})")
    } else {
        String::new()
    }
}

/// What a qp-destroy-before-ack says, at the call (its own thread's events) or later (another
/// thread's, at their ack or at exit): `held` says how they were held, `list` names them.
fn qp_destroy_message(held: &str, list: &str) -> String {
    format!("rdma_destroy_qp while the id's DISCONNECTED is unacked ({held}): {list}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::record::Record;
    use crate::cm::track::new_state;
    use crate::cm::track::tests::acked;
    use crate::cm::unacked::tests::hold;

    #[test]
    fn a_channel_destroy_waits_only_for_what_other_threads_hold() {
        let mut s = new_state(&CONFIG);
        let (chan, other_chan) = (0x7000_0010, 0x7000_0020);
        let me = this_thread::id();
        let held = |seq, channel, thread, reported, internal| Record {
            channel,
            thread,
            reported,
            internal,
            ..acked(seq)
        };
        s.live.insert(0x1000, held(1, chan, me + 1, 0, false));
        s.live.insert(0x2000, held(2, chan, me, 0, false));
        s.live.insert(0x3000, held(3, other_chan, me + 1, 0, false));
        s.live.insert(
            0x4000,
            held(4, chan, me + 1, reported::DESTROY_CHANNEL, false),
        );
        s.live.insert(0x5000, held(5, chan, me + 1, 0, true));
        assert_eq!(s.channel_held_by_others(chan), [0x1000]);
        // Once acked, nothing is left to wait for.
        s.live.remove(&0x1000);
        assert!(s.still_unacked(&[0x1000]).is_empty());
        assert!(s.channel_held_by_others(chan).is_empty());
    }

    #[test]
    fn a_destroy_waits_for_its_own_ids_events_among_thousands_held() {
        let mut s = new_state(&CONFIG);
        let me = this_thread::id();
        // SAFETY: all-zero is a valid rdma_cm_id (its `event`, librdmacm's own, is NULL).
        let mut cm_id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        let id = &mut *cm_id as *mut rdma_cm_id;
        let mut held = |ptr: usize, owner: usize, seq: u64, thread: i32, event_type: u32| {
            let r = Record {
                owner,
                id: owner,
                thread,
                event_type,
                ..acked(seq)
            };
            hold(&mut s, ptr, r);
        };
        for i in 0..10_000 {
            held(
                0x10_0000 + 16 * i,
                0x20_0000 + 16 * i,
                100 + i as u64,
                me,
                0,
            );
        }
        held(0x1000, id as usize, 1, me + 1, RDMA_CM_EVENT_DISCONNECTED);
        held(0x2000, id as usize, 2, me, RDMA_CM_EVENT_ESTABLISHED);
        // SAFETY: a live (zeroed) cm_id.
        let (mine, others) = unsafe { s.waits_for(Op::DestroyId, id) };
        assert_eq!((mine, others), (vec![0x2000], vec![0x1000]));
        // SAFETY: as above.
        let (mine, others) = unsafe { s.waits_for(Op::DestroyQp, id) };
        assert_eq!((mine, others), (vec![], vec![0x1000]));
        assert!(s.holds_events_of(id as usize));
        s.take_live(0x1000);
        s.take_live(0x2000);
        assert!(!s.holds_events_of(id as usize));
    }

    /// A call made from the program (false) or from inside librdmacm (true), at no place.
    fn call_from(in_librdmacm: bool) -> whereis::Caller {
        whereis::Caller {
            addr: 0,
            in_librdmacm,
        }
    }

    #[test]
    fn a_call_on_a_destroyed_id_or_on_no_id_is_named_once_each() {
        let mut s = new_state(&CONFIG);
        let caller = call_from(false);
        let id = 0x5555_0000_1230;
        s.id_created(id, 0, caller, false);
        assert!(!s.use_of_id("rdma_resolve_addr", id, caller));
        s.destroyed(id, 0, 0, 0);
        assert!(s.use_of_id("rdma_resolve_addr", id, caller));
        // A sockaddr_in for 192.0.2.1:18515 read as a pointer, as perftest's retry passes it.
        assert!(s.use_of_id("rdma_resolve_addr", 0x0102_00c0_5348_0002, caller));
        assert_eq!(s.out.kinds(), [Kind::UseAfterDestroyId, Kind::NotACmId]);
        // Made again at the same address: a live id once more.
        s.id_created(id, 0, caller, false);
        assert!(!s.use_of_id("rdma_resolve_addr", id, caller));
    }

    #[test]
    fn librdmacm_calling_on_a_reused_address_revives_the_id() {
        let mut s = new_state(&CONFIG);
        let (program, librdmacm) = (call_from(false), call_from(true));
        let id = 0x5555_0000_4560;
        s.id_created(id, 0, program, false);
        s.destroyed(id, 0, 0, 0);
        // librdmacm made a request id at the freed address unseen, then migrates it.
        assert!(!s.use_of_id("rdma_migrate_id", id, librdmacm));
        assert!(s.out.kinds().is_empty());
        // The program's calls on it are calls on a live id now.
        assert!(!s.use_of_id("rdma_accept", id, program));
        assert!(s.out.kinds().is_empty());
        s.destroyed(id, 0, 0, 0);
        assert!(s.use_of_id("rdma_accept", id, program));
        assert_eq!(s.out.kinds(), [Kind::UseAfterDestroyId]);
    }
}
