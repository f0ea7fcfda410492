//! libibverbs' async-event calls, interposed: ibv_get_async_event and ibv_ack_async_event, and
//! the destroys that wait for an object's async events to be acked: ibv_destroy_qp (which
//! librdmacm's rdma_destroy_qp calls too) and ibv_destroy_srq here, ibv_destroy_cq through
//! wrap_cq.rs. ibv_destroy_wq is an inline function of verbs.h calling the provider directly: no
//! symbol to interpose, so a WQ's events are counted but its destroy is not judged. The counting
//! is async_events.rs's; here the real calls are made and the findings said.

use std::ffi::c_void;

use crate::audit::findings::Kind;
use crate::sys::config::{Mode, CONFIG};
use crate::sys::{real, this_thread, whereis};
use crate::verbs::async_events::{self, type_name, AckIssue, Obj, Object};
use crate::verbs::getters;

/// struct ibv_async_event (verbs.h): the element union (a pointer, or the port number) and the
/// event type.
#[repr(C)]
struct AsyncEvent {
    element: usize,
    event_type: i32,
}

/// The event's type, and the address of its object when it is about one (0 otherwise: a port
/// event's element is an int, the rest of the union is never read).
///
/// # Safety
/// `event` points to a struct ibv_async_event that ibv_get_async_event filled.
unsafe fn read_event(event: *const c_void) -> (i32, usize) {
    let e = event as *const AsyncEvent;
    // SAFETY: as the caller promises; the element is read only where it holds a pointer.
    unsafe {
        let t = (*e).event_type;
        (t, Object::of_event(t).map_or(0, |_| (*e).element))
    }
}

/// ibv_get_async_event(3), interposed. A non-blocking fd with nothing to read returns -1
/// (EAGAIN): no event, nothing counted.
///
/// # Safety
/// As libibverbs' own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn get_async_event(
    context: *mut c_void,
    event: *mut c_void,
    ret: usize,
) -> i32 {
    let Some(real) = real::get_async_event() else {
        return crate::sys::quiet::missing();
    };
    // SAFETY: the program's own arguments, passed on; it blocks in read(2), cancellable as raw.
    let rc = unsafe { real(context, event) };
    if rc != 0 || CONFIG.mode == Mode::Off || event.is_null() {
        return rc;
    }
    // SAFETY: libibverbs just filled the program's non-NULL struct ibv_async_event.
    let (t, element) = unsafe { read_event(event) };
    crate::lifecycle::quietly(|| {
        let thread = this_thread::id();
        async_events::ASYNCS.with(|q| q.got(t, element, thread, whereis::place(ret)));
    });
    rc
}

fn ack_message(t: i32, kind: Object, element: usize, issue: &AckIssue) -> (Kind, String) {
    let safe = CONFIG.mode == Mode::Safe;
    let what = kind.name();
    let call = format!(
        "ibv_ack_async_event({} of {what} {element:#x})",
        type_name(t)
    );
    match issue {
        AckIssue::DoubleAck(before) => (
            Kind::AsyncDoubleAck,
            format!(
                "{call} acks more than was got: {} got for this {what}, {} acked before (an event acked twice?); ibv_destroy_{what} waits until the two counts are equal, so {}",
                before.got,
                before.acked,
                if safe {
                    "it would wait forever; safe mode kept the ack from libibverbs"
                } else {
                    "it will wait forever"
                }
            ),
        ),
        AckIssue::AfterDestroy { prepaid } => (
            Kind::AsyncAckAfterDestroy,
            if safe {
                format!("{call} after ibv_destroy_{what}({what}) returned (safe mode had acked {prepaid} for the program there): kept from libibverbs, never passed on to the freed {what}")
            } else {
                format!("{call} after ibv_destroy_{what}({what}) returned: the {what} is freed memory (passed on, as without cmsafe)")
            },
        ),
    }
}

/// ibv_ack_async_event(3), interposed.
///
/// # Safety
/// As libibverbs' own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn ack_async_event(event: *mut c_void, ret: usize) {
    let Some(real) = real::ack_async_event() else {
        cmsafe_core::errno::set(libc::ENOSYS);
        return;
    };
    if CONFIG.mode == Mode::Off || event.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(event) };
    }
    // SAFETY: the program's non-NULL event, as ibv_get_async_event filled it.
    let (t, element) = unsafe { read_event(event) };
    let mut pass = true;
    crate::lifecycle::quietly(|| {
        let safe = CONFIG.mode == Mode::Safe;
        let v = async_events::ASYNCS.with(|q| q.ack(t, element, safe));
        pass = v.pass;
        if let (Some(issue), Some(kind)) = (&v.issue, Object::of_event(t)) {
            let (finding, message) = ack_message(t, kind, element, issue);
            crate::verbs::say::say_about(
                finding,
                type_name(t),
                element,
                whereis::place(ret),
                message,
            );
        }
    });
    if pass {
        // SAFETY: passed on as given.
        unsafe { real(event) }
    }
}

fn destroy_message(kind: Object, element: usize, o: &Obj) -> (Kind, String) {
    let what = kind.name();
    if o.owed() == 0 {
        return (
            Kind::AsyncDoubleAck,
            format!(
                "ibv_destroy_{what}({what} {element:#x}) will wait forever: {} acked for {} async events got of this {what} (libibverbs waits until the two are equal)",
                o.acked, o.got
            ),
        );
    }
    let held = format!(
        "{} unacked async events of {what} {element:#x} (got {}, acked {}, the last {}; got by {}, the last at {})",
        o.owed(),
        o.got,
        o.acked,
        type_name(o.last_type),
        o.threads.describe(),
        whereis::describe(o.last_get)
    );
    (
        Kind::AsyncDestroyWithUnacked,
        if CONFIG.mode == Mode::Safe {
            format!(
                "without cmsafe, ibv_destroy_{what} would wait forever for these {held}; safe mode acked them ({} ibv_ack_async_event for the program)",
                o.owed()
            )
        } else {
            format!("ibv_destroy_{what} will wait forever for these {held}")
        },
    )
}

/// Before the destroy of `kind` at `element`: says what it will wait for, before it blocks
/// (after the getter threads' grace); safe mode acks what the program owes, so that it returns.
pub fn before_destroy(kind: Object, element: usize, ret: usize) {
    let mut owed = (0, 0);
    crate::lifecycle::quietly(|| {
        let probe = || async_events::ASYNCS.with(|q| q.destroying(kind, element));
        let Some(o) = getters::settled(probe, |o| (o.owed() > 0).then(|| o.threads.clone())) else {
            return;
        };
        let (finding, message) = destroy_message(kind, element, &o);
        if CONFIG.mode == Mode::Safe && finding == Kind::AsyncDestroyWithUnacked {
            owed = async_events::ASYNCS.with(|q| q.prepay(kind, element));
        }
        async_events::ASYNCS.with(|q| q.mark_reported(kind, element));
        crate::verbs::say::say_about(
            finding,
            type_name(o.last_type),
            element,
            whereis::program_place(ret),
            message,
        );
    });
    let (n, t) = owed;
    if let Some(ack) = real::ack_async_event() {
        let mut e = AsyncEvent {
            element,
            event_type: t,
        };
        for _ in 0..n {
            // SAFETY: the program's live object, acked for an event of it the program got and
            // still owes (libibverbs reads only the type and the element).
            unsafe { ack(&mut e as *mut AsyncEvent as *mut c_void) };
        }
    }
}

/// After the destroy of `kind` at `element` returned `rc`.
pub fn after_destroy(kind: Object, element: usize, rc: i32) {
    crate::lifecycle::quietly(|| async_events::ASYNCS.with(|q| q.destroyed(kind, element, rc)));
}

/// A destroy that waits for the object's async events: judged, then passed on.
///
/// # Safety
/// `real` is libibverbs' destroy for `kind`, `obj` the program's argument to it.
unsafe fn destroy(
    kind: Object,
    real: Option<real::DestroyObj>,
    obj: *mut c_void,
    ret: usize,
) -> i32 {
    let Some(real) = real else {
        return crate::sys::quiet::missing();
    };
    if CONFIG.mode == Mode::Off || obj.is_null() {
        // SAFETY: passed on as given.
        return unsafe { real(obj) };
    }
    before_destroy(kind, obj as usize, ret);
    // SAFETY: passed on as given.
    let rc = unsafe { real(obj) };
    after_destroy(kind, obj as usize, rc);
    rc
}

/// ibv_destroy_qp(3), interposed.
///
/// # Safety
/// As libibverbs' own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn destroy_qp(qp: *mut c_void, ret: usize) -> i32 {
    // SAFETY: libibverbs' ibv_destroy_qp and the program's argument.
    unsafe { destroy(Object::Qp, real::destroy_ibv_qp(), qp, ret) }
}

/// ibv_destroy_srq(3), interposed.
///
/// # Safety
/// As libibverbs' own function: the arguments are what its man page asks for.
pub unsafe extern "C-unwind" fn destroy_srq(srq: *mut c_void, ret: usize) -> i32 {
    // SAFETY: libibverbs' ibv_destroy_srq and the program's argument.
    unsafe { destroy(Object::Srq, real::destroy_srq(), srq, ret) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::counted::Count;
    use crate::verbs::getters::Getters;

    // CMSAFE_MODE is not set under cargo test: audit's sentences.
    #[test]
    fn destroy_sentences_name_object_type_and_threads() {
        let o = Obj {
            last_type: 5,
            count: Count {
                got: 1,
                threads: Getters::of(&[7]),
                ..Count::default()
            },
        };
        let (kind, msg) = destroy_message(Object::Qp, 0xa000, &o);
        assert_eq!(kind, Kind::AsyncDestroyWithUnacked);
        assert_eq!(
            msg,
            "ibv_destroy_qp will wait forever for these 1 unacked async events of qp 0xa000 (got 1, acked 0, the last SQ_DRAINED; got by thread 7, the last at an unknown place)"
        );
        let over = Obj {
            count: Count {
                got: 1,
                acked: 2,
                ..o.count.clone()
            },
            ..o
        };
        let (kind, msg) = destroy_message(Object::Srq, 0xb000, &over);
        assert_eq!(kind, Kind::AsyncDoubleAck);
        assert!(
            msg.starts_with("ibv_destroy_srq(srq 0xb000) will wait forever: 2 acked for 1"),
            "{msg}"
        );
    }

    #[test]
    fn the_element_is_read_only_for_object_events() {
        let port = AsyncEvent {
            element: 0xdead_0001,
            event_type: 10, // PORT_ERR: the element is the port number, an int
        };
        let qp = AsyncEvent {
            element: 0xa000,
            event_type: 5, // SQ_DRAINED
        };
        // SAFETY: both are live, initialized events.
        unsafe {
            assert_eq!(
                read_event(&port as *const AsyncEvent as *const c_void),
                (10, 0)
            );
            assert_eq!(
                read_event(&qp as *const AsyncEvent as *const c_void),
                (5, 0xa000)
            );
        }
    }

    #[test]
    fn ack_sentences() {
        let before = Obj {
            count: Count {
                got: 1,
                acked: 1,
                ..Count::default()
            },
            ..Obj::default()
        };
        let (kind, msg) = ack_message(5, Object::Qp, 0xa000, &AckIssue::DoubleAck(before));
        assert_eq!(kind, Kind::AsyncDoubleAck);
        assert!(msg.starts_with("ibv_ack_async_event(SQ_DRAINED of qp 0xa000) acks more than was got: 1 got for this qp, 1 acked before"), "{msg}");
        let (kind, _) = ack_message(
            0,
            Object::Cq,
            0xa000,
            &AckIssue::AfterDestroy { prepaid: 0 },
        );
        assert_eq!(kind, Kind::AsyncAckAfterDestroy);
    }
}
