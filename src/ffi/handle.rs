//! How C-visible handles map to Rust values: each opaque handle is an `Arc` turned into a raw
//! pointer, so `_retain` and `_release` are atomic refcount changes.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use crate::event::{Event, EventInner};

/// An owned, refcounted copy of one RDMA CM event (see `cmsafe_get_event`).
#[allow(non_camel_case_types)]
pub struct cmsafe_event {
    _private: [u8; 0],
}

pub(crate) fn event_into_c(event: Event) -> *mut cmsafe_event {
    Arc::into_raw(event.0) as *mut cmsafe_event
}

/// Borrows the event behind a handle for the length of a call.
///
/// # Safety
/// `ev` is NULL or a handle from `event_into_c` that is still held.
pub(crate) unsafe fn event_ref(ev: *const cmsafe_event) -> Option<ManuallyDrop<Event>> {
    if ev.is_null() {
        return None;
    }
    // SAFETY: a held handle is a counted `Arc<EventInner>`; ManuallyDrop leaves the count alone.
    Some(ManuallyDrop::new(Event(unsafe {
        Arc::from_raw(ev as *const EventInner)
    })))
}

/// Gives one reference back.
///
/// # Safety
/// `ev` is a handle from `event_into_c` whose reference the caller owns.
pub(crate) unsafe fn event_release(ev: *const cmsafe_event) {
    // SAFETY: forwarded from the caller: this reference was counted by `Arc::into_raw`.
    drop(unsafe { Arc::from_raw(ev as *const EventInner) });
}
