//! libcmsafe_preload.so: LD_PRELOAD for unmodified RDMA programs.
//!
//! It interposes rdma_get_cm_event and rdma_ack_cm_event, and, to judge how events are used,
//! rdma_destroy_id, rdma_migrate_id, rdma_destroy_event_channel and rdma_destroy_qp. Nothing else
//! is exported. CMSAFE_MODE chooses:
//! - `audit` (default): the program sees the same events and the same ack timing; every misuse is
//!   reported (see `findings`). Copies live on guarded pages so reads after the ack are caught.
//! - `safe`: librdmacm's event is acked at once and the program gets cmsafe's copy, which stays
//!   valid after the program's ack until the id is destroyed (or 4096 newer acks pushed it out),
//!   so ack-then-read code reads the right bytes and rdma_destroy_id never waits on a forgotten
//!   event. Findings are still reported.
//! - `off`: every call passes through untouched.
//!
//! Each wrapper resolves the real function lazily (real.rs), keeps errno as librdmacm left it,
//! and never lets a panic cross into the program.

mod config;
mod entry;
mod findings;
mod guard;
mod lifecycle;
mod real;
mod report;
mod sync;
mod track;
mod whereis;

use std::panic::{catch_unwind, AssertUnwindSafe};

use cmsafe::cm::{rdma_cm_event, rdma_cm_id, rdma_event_channel};

use config::{Mode, CONFIG};
use track::{with_state, Op};

fn errno() -> i32 {
    // SAFETY: the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: i32) {
    // SAFETY: the calling thread's errno slot.
    unsafe { *libc::__errno_location() = v };
}

/// -1 with ENOSYS: librdmacm is not behind us.
fn missing() -> i32 {
    set_errno(libc::ENOSYS);
    -1
}

/// Runs the preload's own work with errno kept and no panic escaping.
fn quietly(f: impl FnOnce()) {
    let saved = errno();
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        eprintln!("==cmsafe== internal error (caught); the call went on unchecked");
    }
    set_errno(saved);
}

/// Before `op` on `id`: events the calling thread itself holds are reported at once (it cannot
/// ack them while it waits); events other threads hold get up to CMSAFE_LATE_ACK_MS to be acked
/// (a program's event thread may be about to), and are reported if they are not.
fn judge_wait(op: Op, id: *mut rdma_cm_id, ret: usize) {
    quietly(|| {
        let caller = whereis::caller_at(ret);
        // SAFETY: the program passes a live id to librdmacm.
        let (mine, others) = with_state(|s| unsafe { s.waits_for(op, id) });
        if !mine.is_empty() {
            with_state(|s| s.report_wait(op, id as usize, &mine, caller, None));
        }
        if others.is_empty() {
            return;
        }
        let start = track::now_ns();
        let mut left = others;
        while !left.is_empty() && track::now_ns() - start < CONFIG.late_ack_ns {
            std::thread::sleep(std::time::Duration::from_millis(1));
            left = with_state(|s| s.still_unacked(&left));
        }
        if !left.is_empty() {
            let waited_ms = (track::now_ns() - start) / 1_000_000;
            with_state(|s| s.report_wait(op, id as usize, &left, caller, Some(waited_ms)));
        }
    });
}

/// rdma_get_cm_event(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
unsafe extern "C" fn get_cm_event(
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
    let mut raw: *mut rdma_cm_event = std::ptr::null_mut();
    // SAFETY: as above, with our own out pointer.
    let rc = unsafe { real(channel, &mut raw) };
    if rc != 0 || raw.is_null() {
        return rc;
    }
    let mut handed = raw;
    let mut ack_now = false;
    quietly(|| {
        let caller = whereis::caller_at(ret);
        // SAFETY: `raw` was just returned by librdmacm, unacked.
        (handed, ack_now) = with_state(|s| unsafe { s.got(channel as usize, raw, caller, mode) });
    });
    if ack_now {
        if let Some(ack) = real::ack_event() {
            let saved = errno();
            // SAFETY: librdmacm's own event, copied, acked exactly once.
            unsafe { ack(raw) };
            set_errno(saved);
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
unsafe extern "C" fn ack_cm_event(event: *mut rdma_cm_event, ret: usize) -> i32 {
    let Some(real) = real::ack_event() else {
        return missing();
    };
    if CONFIG.mode == Mode::Off || event.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(event) };
    }
    let mut verdict: Result<Option<usize>, bool> = Err(true);
    quietly(|| {
        let caller = whereis::caller_at(ret);
        verdict = with_state(|s| s.ack(event as usize, caller, CONFIG.late_ack_ns));
    });
    match verdict {
        // SAFETY: librdmacm's event behind the program's copy, acked once, now.
        Ok(Some(raw)) => unsafe { real(raw as *mut rdma_cm_event) },
        Ok(None) => 0,
        // A double ack: librdmacm's event was already acked; doing it again would free twice.
        Err(false) => 0,
        // SAFETY: not ours: librdmacm judges it, as it would without us.
        Err(true) => unsafe { real(event) },
    }
}

/// rdma_destroy_id(3), interposed: says before it blocks which events it will wait for.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
unsafe extern "C" fn destroy_id(id: *mut rdma_cm_id, ret: usize) -> i32 {
    let Some(real) = real::destroy_id() else {
        return missing();
    };
    if CONFIG.mode == Mode::Off || id.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(id) };
    }
    judge_wait(Op::DestroyId, id, ret);
    // SAFETY: the program's id; librdmacm acks id->event through our rdma_ack_cm_event.
    let rc = unsafe { real(id) };
    let saved = errno();
    quietly(|| with_state(|s| s.destroyed(id as usize)));
    set_errno(saved);
    rc
}

/// rdma_migrate_id(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
unsafe extern "C" fn migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
    ret: usize,
) -> i32 {
    let Some(real) = real::migrate_id() else {
        return missing();
    };
    if CONFIG.mode != Mode::Off && !id.is_null() {
        judge_wait(Op::MigrateId, id, ret);
    }
    // SAFETY: passed on as given.
    unsafe { real(id, channel) }
}

/// rdma_destroy_event_channel(3), interposed.
///
/// # Safety
/// As librdmacm's own function: the arguments are what its man page asks for.
unsafe extern "C" fn destroy_event_channel(channel: *mut rdma_event_channel, ret: usize) {
    let Some(real) = real::destroy_channel() else {
        set_errno(libc::ENOSYS);
        return;
    };
    if CONFIG.mode != Mode::Off && !channel.is_null() {
        quietly(|| {
            let caller = whereis::caller_at(ret);
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
unsafe extern "C" fn destroy_qp(id: *mut rdma_cm_id, ret: usize) {
    let Some(real) = real::destroy_qp() else {
        set_errno(libc::ENOSYS);
        return;
    };
    if CONFIG.mode != Mode::Off && !id.is_null() {
        judge_wait(Op::DestroyQp, id, ret);
    }
    // SAFETY: passed on as given.
    unsafe { real(id) }
}
