//! libibverbs' completion-event calls, interposed: ibv_get_cq_event, ibv_ack_cq_events and
//! ibv_destroy_cq. The counting is cq.rs's; here the real calls are made and the findings said.
//! Per event the preload adds no system call: a lock, a table update and the thread id cached
//! per thread.

use std::ffi::{c_uint, c_void};

use crate::audit::findings::Kind;
use crate::sys::config::{Mode, CONFIG};
use crate::sys::{real, this_thread, whereis};
use crate::verbs::async_events::Object;
use crate::verbs::cq::{self, AckIssue, Cq, DestroyIssue};
use crate::verbs::{getters, wrap_async};

/// The head of libibverbs' struct ibv_cq (verbs.h), as far as the preload reads it.
#[repr(C)]
struct CqHead {
    _context: *mut c_void,
    channel: *mut c_void,
}

/// Says a completion-queue finding about `cq`, made where the entry point's `ret` says.
fn say(kind: Kind, cq: usize, ret: usize, message: String) {
    crate::verbs::say::say_about(kind, "COMPLETION", cq, whereis::place(ret), message);
}

/// ibv_get_cq_event(3), interposed.
///
/// # Safety
/// As libibverbs' own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn get_cq_event(
    channel: *mut c_void,
    cq: *mut *mut c_void,
    cq_context: *mut *mut c_void,
    ret: usize,
) -> i32 {
    let Some(real) = real::get_cq_event() else {
        return crate::sys::quiet::missing();
    };
    // SAFETY: the program's own arguments, passed on. It blocks in read(2) and stays
    // cancellable exactly as raw: nothing of ours is live across it.
    let rc = unsafe { real(channel, cq, cq_context) };
    if rc != 0 || CONFIG.mode == Mode::Off || cq.is_null() {
        return rc;
    }
    // SAFETY: libibverbs stored the event's CQ through the program's non-NULL pointer.
    let got = unsafe { *cq } as usize;
    crate::lifecycle::quietly(|| {
        let thread = this_thread::id();
        cq::CQS.with(|q| q.got(got, channel as usize, thread, whereis::place(ret)));
    });
    rc
}

/// The sentence for an ack found wrong.
fn ack_message(cq: usize, n: u64, pass: u64, issue: &AckIssue) -> (Kind, String) {
    let safe = CONFIG.mode == Mode::Safe;
    let kept = if !safe {
        String::new()
    } else if pass == 0 {
        "; safe mode kept the ack from libibverbs".to_string()
    } else {
        format!(
            "; safe mode passed on {pass} and kept {} from libibverbs",
            n - pass
        )
    };
    match issue {
        AckIssue::OverAck { before, .. } => (
            Kind::CqOverAck,
            format!(
                "ibv_ack_cq_events(cq {cq:#x}, {n}) acks more than was got: {} got from this CQ, {} acked before; ibv_destroy_cq waits until the two counts are equal, so {} forever{kept}",
                before.got,
                before.acked,
                if safe { "it would wait" } else { "it will wait" }
            ),
        ),
        AckIssue::WrongCq {
            before,
            other,
            other_owed,
            ..
        } => (
            Kind::CqAckWrongCq,
            format!(
                "ibv_ack_cq_events(cq {cq:#x}, {n}) but this CQ has {} unacked events (got {}, acked {}), while cq {other:#x} on the same completion channel has {other_owed} unacked: acked against the wrong CQ? ibv_destroy_cq of either {} forever{kept}",
                before.owed(),
                before.got,
                before.acked,
                if safe { "would wait" } else { "will wait" }
            ),
        ),
        AckIssue::AfterDestroy { prepaid } => (
            Kind::CqAckAfterDestroy,
            if safe {
                format!(
                    "ibv_ack_cq_events(cq {cq:#x}, {n}) after ibv_destroy_cq(cq) returned (safe mode had acked {prepaid} for the program there): kept from libibverbs, never passed on to the freed CQ"
                )
            } else {
                format!(
                    "ibv_ack_cq_events(cq {cq:#x}, {n}) after ibv_destroy_cq(cq) returned: the CQ is freed memory (passed on, as without cmsafe)"
                )
            },
        ),
    }
}

/// ibv_ack_cq_events(3), interposed.
///
/// # Safety
/// As libibverbs' own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn ack_cq_events(cq: *mut c_void, nevents: c_uint, ret: usize) {
    let Some(real) = real::ack_cq_events() else {
        cmsafe_core::errno::set(libc::ENOSYS);
        return;
    };
    if CONFIG.mode == Mode::Off || cq.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(cq, nevents) };
    }
    let n = u64::from(nevents);
    let mut pass = n;
    crate::lifecycle::quietly(|| {
        let safe = CONFIG.mode == Mode::Safe;
        // SAFETY: asked only for a CQ not known destroyed, which the program passes to
        // libibverbs (which locks its mutex): a live struct ibv_cq.
        let channel = || unsafe { (*(cq as *const CqHead)).channel } as usize;
        let v = cq::CQS.with(|q| q.ack(cq as usize, channel, n, safe));
        pass = v.pass;
        if let Some(issue) = &v.issue {
            let (kind, message) = ack_message(cq as usize, n, v.pass, issue);
            say(kind, cq as usize, ret, message);
        }
    });
    if pass == n {
        // SAFETY: passed on as given.
        unsafe { real(cq, nevents) }
    } else if pass > 0 {
        // SAFETY: the program's CQ, with fewer acks than it asked (pass < nevents).
        unsafe { real(cq, pass as c_uint) }
    }
}

/// The destroy's issue once the threads that got the CQ's unacked events had their grace.
fn settled(cq: usize) -> Option<DestroyIssue> {
    getters::settled(
        || cq::CQS.with(|q| q.destroying(cq)),
        |issue| match issue {
            DestroyIssue::Unacked(c) => Some(c.threads.clone()),
            DestroyIssue::OverAcked(_) => None,
        },
    )
}

fn destroy_message(cq: usize, issue: &DestroyIssue, got_where: String) -> (Kind, String) {
    let safe = CONFIG.mode == Mode::Safe;
    match issue {
        DestroyIssue::Unacked(c) => {
            let what = format!(
                "{} unacked completion events of cq {cq:#x} (got {}, acked {}; got by {}, the last at {got_where})",
                c.owed(),
                c.got,
                c.acked,
                c.getters()
            );
            (
                Kind::CqDestroyWithUnacked,
                if safe {
                    format!(
                        "without cmsafe, ibv_destroy_cq would wait forever for these {what}; safe mode acked them (ibv_ack_cq_events(cq, {}))",
                        c.owed()
                    )
                } else {
                    format!("ibv_destroy_cq will wait forever for these {what}")
                },
            )
        }
        DestroyIssue::OverAcked(c) => (
            Kind::CqOverAck,
            format!(
                "ibv_destroy_cq(cq {cq:#x}) will wait forever: {} acked for {} got from this CQ (libibverbs waits until the two are equal)",
                c.acked, c.got
            ),
        ),
    }
}

/// ibv_destroy_cq(3), interposed: says before it blocks what it will wait for (completion and
/// async events); safe mode acks what the program owes, so that it returns.
///
/// # Safety
/// As libibverbs' own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn destroy_cq(cq: *mut c_void, ret: usize) -> i32 {
    let Some(real) = real::destroy_cq() else {
        return crate::sys::quiet::missing();
    };
    if CONFIG.mode == Mode::Off || cq.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(cq) };
    }
    // Its async events (CQ_ERR) first: the destroy waits for those acks too.
    wrap_async::before_destroy(Object::Cq, cq as usize, ret);
    let mut owed_acks = 0;
    crate::lifecycle::quietly(|| {
        let Some(issue) = settled(cq as usize) else {
            return;
        };
        let c: &Cq = match &issue {
            DestroyIssue::Unacked(c) | DestroyIssue::OverAcked(c) => c,
        };
        let (kind, message) = destroy_message(cq as usize, &issue, whereis::describe(c.last_get));
        if CONFIG.mode == Mode::Safe && kind == Kind::CqDestroyWithUnacked {
            owed_acks = cq::CQS.with(|q| q.prepay(cq as usize));
        }
        cq::CQS.with(|q| q.mark_reported(cq as usize));
        say(kind, cq as usize, ret, message);
    });
    if owed_acks > 0 {
        if let Some(ack) = real::ack_cq_events() {
            // SAFETY: the program's live CQ, acked for the events it got and still owes.
            unsafe { ack(cq, owed_acks.min(u64::from(c_uint::MAX)) as c_uint) };
        }
    }
    // SAFETY: passed on as given.
    let rc = unsafe { real(cq) };
    crate::lifecycle::quietly(|| cq::CQS.with(|q| q.destroyed(cq as usize, rc)));
    wrap_async::after_destroy(Object::Cq, cq as usize, rc);
    rc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::counted::Count;
    use crate::verbs::getters::Getters;

    fn cq(got: u64, acked: u64, threads: &[i32]) -> Cq {
        let mut c = Cq {
            count: Count {
                got,
                acked,
                ..Count::default()
            },
            ..Cq::default()
        };
        c.threads = Getters::of(threads);
        c
    }

    // CMSAFE_MODE is not set under cargo test: audit's sentences.
    #[test]
    fn destroy_sentences_name_counts_and_threads() {
        let (kind, msg) = destroy_message(
            0xa000,
            &DestroyIssue::Unacked(cq(3, 1, &[7, 8])),
            "f+0x10".to_string(),
        );
        assert_eq!(kind, Kind::CqDestroyWithUnacked);
        assert_eq!(
            msg,
            "ibv_destroy_cq will wait forever for these 2 unacked completion events of cq 0xa000 (got 3, acked 1; got by threads 7, 8, the last at f+0x10)"
        );
        let (kind, msg) = destroy_message(
            0xa000,
            &DestroyIssue::OverAcked(cq(1, 3, &[7])),
            String::new(),
        );
        assert_eq!(kind, Kind::CqOverAck);
        assert!(
            msg.contains("will wait forever: 3 acked for 1 got"),
            "{msg}"
        );
    }

    #[test]
    fn ack_sentences_name_both_cqs() {
        let issue = AckIssue::WrongCq {
            before: cq(0, 0, &[]),
            n: 1,
            other: 0xa000,
            other_owed: 2,
        };
        let (kind, msg) = ack_message(0xb000, 1, 1, &issue);
        assert_eq!(kind, Kind::CqAckWrongCq);
        assert!(
            msg.starts_with("ibv_ack_cq_events(cq 0xb000, 1) but this CQ has 0 unacked events (got 0, acked 0), while cq 0xa000 on the same completion channel has 2 unacked"),
            "{msg}"
        );
        let over = AckIssue::OverAck {
            before: cq(1, 0, &[7]),
            n: 2,
        };
        let (kind, msg) = ack_message(0xb000, 2, 2, &over);
        assert_eq!(kind, Kind::CqOverAck);
        assert!(
            msg.contains("acks more than was got: 1 got from this CQ, 0 acked before"),
            "{msg}"
        );
        let (kind, _) = ack_message(0xb000, 1, 1, &AckIssue::AfterDestroy { prepaid: 0 });
        assert_eq!(kind, Kind::CqAckAfterDestroy);
    }
}
