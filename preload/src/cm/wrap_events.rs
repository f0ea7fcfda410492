//! librdmacm's event calls, interposed: rdma_get_cm_event and rdma_ack_cm_event, and the calls
//! that wait for an id's events to be acked (rdma_destroy_id, rdma_migrate_id, rdma_destroy_qp)
//! or end a channel (rdma_destroy_event_channel). The judging is track.rs's; here the real calls
//! are made.

use cmsafe_core::cm::{rdma_cm_event, rdma_cm_id, rdma_event_channel};
use cmsafe_core::errno;

use crate::audit::probes;
use crate::cm::track::{self, with_state, AckVerdict, Op};
use crate::cm::{readers, refuse, watch};
use crate::lifecycle::quietly;
use crate::sys::config::{Mode, CONFIG};
use crate::sys::quiet::missing;
use crate::sys::{cancel, real, this_thread, whereis};

/// A read of a channel in progress (readers.rs), for `cancelled_in_get`.
struct Reading {
    channel: usize,
    token: readers::Token,
}

/// Run by glibc when a cancellation unwinds a thread out of librdmacm's rdma_get_cm_event, or a
/// longjmp out of a signal handler jumps over it: nothing here takes a lock.
///
/// # Safety
/// `reading` points to the `Reading` of the get_cm_event frame being unwound (still in place
/// while its cleanup runs).
unsafe extern "C" fn cancelled_in_get(reading: *mut libc::c_void) {
    // SAFETY: the caller's contract.
    let r = unsafe { &*(reading as *const Reading) };
    readers::leave(r.token);
    track::note_cancelled_read(r.channel);
}

/// Before `op` on `id`: events the calling thread itself holds are reported at once (it cannot
/// ack them while it waits); events other threads hold get up to CMSAFE_LATE_ACK_MS to be acked
/// (a program's event thread may be about to), and are reported if they are not. Calls that
/// wait for acks (destroy, migrate) are then watched until they return: the token for
/// `watch::end` (0: not watched). First of all, in the same pass over the state, a call on an
/// id the program destroyed, or at an address no id can have, is named (`use-after-destroy-id`,
/// `not-a-cm-id`), then one naming a channel it
/// destroyed (`new_channel`, rdma_migrate_id's destination: `use-after-destroy-channel`): the
/// errno (EINVAL, EBADF) when safe mode refuses the call, set here.
fn judge_wait(
    op: Op,
    id: *mut rdma_cm_id,
    new_channel: *mut rdma_event_channel,
    ret: usize,
) -> Result<u64, i32> {
    let mut token = Ok(0);
    // Audit passes such an id on, as librdmacm would get it, and the preload never reads it.
    let no_id = crate::sys::address::cannot_be_object(id as usize);
    quietly(|| {
        let caller = whereis::caller_at(ret);
        let safe = CONFIG.mode == Mode::Safe;
        let judged = with_state(|s| {
            if s.use_of_id(op.call(), id as usize, caller) && safe {
                return Err(libc::EINVAL);
            }
            if no_id {
                return Ok((Vec::new(), Vec::new()));
            }
            if refuse::channel_may_be_gone(new_channel)
                && s.use_of_channel(op.call(), new_channel as usize, caller)
                && safe
            {
                return Err(libc::EBADF);
            }
            // SAFETY: the program passes a live id to librdmacm (a destroyed one was named
            // above, and librdmacm reads it just the same).
            Ok(unsafe { s.waits_for(op, id) })
        });
        let (mine, others) = match judged {
            Ok(w) => w,
            Err(e) => {
                token = Err(e);
                return;
            }
        };
        if !mine.is_empty() {
            with_state(|s| s.report_wait(op, id as usize, &mine, caller, None));
        }
        if op == Op::DestroyQp {
            // librdmacm's rdma_destroy_qp waits for no ack: neither do we (judged at the ack).
            if !others.is_empty() {
                with_state(|s| s.note_qp_destroy(&others, caller));
            }
            return;
        }
        let (left, waited_ns) = crate::sys::wait::for_acks(
            others,
            |left| !left.is_empty(),
            |left| with_state(|s| s.still_unacked(left)),
        );
        if !left.is_empty() {
            let waited_ms = waited_ns / 1_000_000;
            with_state(|s| s.report_wait(op, id as usize, &left, caller, Some(waited_ms)));
        }
        // librdmacm's own destroys (its set-up probes devices with a temporary id) never wait.
        if !caller.in_librdmacm && !no_id {
            // SAFETY: as above.
            let channel = unsafe { (*id).channel } as usize;
            token = Ok(watch::begin(op, id as usize, channel, caller));
        }
    });
    if let Err(e) = token {
        errno::set(e);
    }
    token
}

/// rdma_get_cm_event(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
    ret: usize,
) -> i32 {
    let Some(real) = real::get_event() else {
        return missing();
    };
    let mode = CONFIG.mode;
    if mode == Mode::Off || event.is_null() {
        // SAFETY: the program's own arguments, passed on.
        return unsafe { real(channel, event) };
    }
    if refuse::channel_refused("rdma_get_cm_event", channel, ret) {
        return -1;
    }
    let mut raw: *mut rdma_cm_event = std::ptr::null_mut();
    // Seen by the hang watcher while it lasts: a read on a channel whose ids are all destroyed
    // never returns.
    let (thread, left_before) = this_thread::id_and_left_read();
    if left_before {
        track::note_read_resumed(thread);
    }
    let reading = Reading {
        channel: channel as usize,
        token: readers::enter(channel as usize, thread, ret),
    };
    // SAFETY: as above, with our own out pointer; `cancelled_in_get` only gives the read's slot
    // back and records the channel, reading `reading`, which outlives the call.
    let rc = unsafe {
        cancel::watching_cancel(
            cancelled_in_get,
            &reading as *const Reading as *mut libc::c_void,
            || real(channel, &mut raw),
        )
    };
    readers::leave(reading.token);
    if rc != 0 || raw.is_null() {
        return rc;
    }
    let mut handed = raw;
    let mut ack_now = false;
    quietly(|| {
        let caller = whereis::caller_at(ret);
        // SAFETY: `raw` was just returned by librdmacm, unacked.
        let prepared = unsafe { track::prepare(raw, mode) };
        // SAFETY: as above.
        (handed, ack_now) =
            with_state(|s| unsafe { s.got(channel as usize, raw, caller, prepared) });
    });
    if ack_now {
        if let Some(ack) = real::ack_event() {
            let saved = errno::get();
            // SAFETY: librdmacm's own event, copied, acked exactly once.
            unsafe { ack(raw) };
            errno::set(saved);
        }
    }
    // SAFETY: the program's out pointer, checked non-NULL above.
    unsafe { *event = handed };
    0
}

/// rdma_ack_cm_event(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn ack_cm_event(event: *mut rdma_cm_event, ret: usize) -> i32 {
    let Some(real) = real::ack_event() else {
        return missing();
    };
    if CONFIG.mode == Mode::Off || event.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(event) };
    }
    // A panic caught on the way leaves the pointer to librdmacm, as without us.
    let mut verdict = AckVerdict::Pass;
    quietly(|| {
        let caller = whereis::caller_at(ret);
        verdict = with_state(|s| s.ack(event as usize, caller, CONFIG.late_ack_ns));
    });
    match verdict {
        // SAFETY: librdmacm's event behind the program's copy, acked once, now.
        AckVerdict::Forward(raw) => unsafe { real(raw as *mut rdma_cm_event) },
        AckVerdict::Done | AckVerdict::Swallow => 0,
        // SAFETY: not ours: librdmacm judges it, as it would without us.
        AckVerdict::Pass => unsafe { real(event) },
    }
}

/// rdma_destroy_id(3), interposed: says before it blocks which events it will wait for.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn destroy_id(id: *mut rdma_cm_id, ret: usize) -> i32 {
    let Some(real) = real::destroy_id() else {
        return missing();
    };
    if CONFIG.mode == Mode::Off || id.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(id) };
    }
    let Ok(token) = judge_wait(Op::DestroyId, id, std::ptr::null_mut(), ret) else {
        return -1;
    };
    if probes::on() {
        probes::destroy_start(id as usize);
    }
    // SAFETY: the program's id; librdmacm acks id->event through our rdma_ack_cm_event.
    let rc = unsafe { real(id) };
    quietly(|| {
        watch::end(token);
        let thread = this_thread::id();
        with_state(|s| s.destroyed(id as usize, thread, ret, rc));
    });
    rc
}

/// rdma_migrate_id(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
    ret: usize,
) -> i32 {
    let Some(real) = real::migrate_id() else {
        return missing();
    };
    if CONFIG.mode == Mode::Off || id.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(id, channel) };
    }
    let Ok(token) = judge_wait(Op::MigrateId, id, channel, ret) else {
        return -1;
    };
    // SAFETY: passed on as given.
    let rc = unsafe { real(id, channel) };
    quietly(|| {
        watch::end(token);
        if rc == 0 {
            with_state(|s| s.migrated(id as usize, channel as usize));
        }
    });
    rc
}

/// rdma_destroy_event_channel(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn destroy_event_channel(
    channel: *mut rdma_event_channel,
    ret: usize,
) {
    let Some(real) = real::destroy_channel() else {
        errno::set(libc::ENOSYS);
        return;
    };
    if CONFIG.mode != Mode::Off && !channel.is_null() {
        if refuse::channel_refused("rdma_destroy_event_channel", channel, ret) {
            return;
        }
        quietly(|| {
            let caller = whereis::caller_at(ret);
            // As before a destroy of an id: events another thread holds get CMSAFE_LATE_ACK_MS
            // to be acked. An event thread that got the id's last event while rdma_destroy_id
            // ran (after its own wait for acks) had it acked at once by safe mode, so that
            // destroy returned without waiting for the program's ack, as librdmacm's would
            // have: the thread may still be in its handler, the ack its next step, when the
            // channel goes (rping before rdma-core 59, seen on trixie).
            crate::sys::wait::for_acks(
                with_state(|s| s.channel_held_by_others(channel as usize)),
                |left| !left.is_empty(),
                |left| with_state(|s| s.still_unacked(left)),
            );
            with_state(|s| s.destroying_channel(channel as usize, caller));
        });
    }
    // SAFETY: passed on as given.
    unsafe { real(channel) }
}

/// rdma_destroy_qp(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn destroy_qp(id: *mut rdma_cm_id, ret: usize) {
    let Some(real) = real::destroy_qp() else {
        errno::set(libc::ENOSYS);
        return;
    };
    if CONFIG.mode != Mode::Off
        && !id.is_null()
        && judge_wait(Op::DestroyQp, id, std::ptr::null_mut(), ret).is_err()
    {
        return;
    }
    // SAFETY: passed on as given.
    unsafe { real(id) }
}
