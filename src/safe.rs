//! Safe mode's copies, shared by the LD_PRELOAD library and `cmsafe_compat.h`: old code that
//! acks an event and then reads it keeps working, because what it got is cmsafe's copy, which
//! outlives the program's ack.
//!
//! A copy stays valid after the program acks it until the event's id (or, for CONNECT_REQUEST,
//! its listen id) is destroyed, or until [`ACKED_CAP`] newer acks push it out, whichever comes
//! first. librdmacm's own event is acked the moment it is copied, so rdma_destroy_id and
//! rdma_migrate_id never wait on an event the program forgot.

use std::collections::{HashMap, VecDeque};

use crate::cm::{rdma_cm_event, rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST};
use crate::event::Event;
use crate::pool::AllocError;

/// Acked copies kept alive at most, oldest released first.
pub const ACKED_CAP: usize = 4096;

/// What an ack of a pointer meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// One of our copies, now acked by the program; nothing for librdmacm to do.
    Acked,
    /// One of our copies, acked before: a double ack (librdmacm's event is long acked).
    AlreadyAcked,
    /// Not ours: librdmacm must judge it.
    Unknown,
}

#[derive(Default)]
pub struct SafeCopies {
    live: HashMap<usize, Event>,
    acked: HashMap<usize, Event>,
    order: VecDeque<usize>,
}

/// The pointer a program reads an event copy through.
fn handle(ev: &Event) -> *mut rdma_cm_event {
    ev.cm() as *const rdma_cm_event as *mut rdma_cm_event
}

impl SafeCopies {
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies `raw` and returns the pointer to hand the program. The caller acks `raw` with
    /// librdmacm right after (on error, `raw` is untouched and still the caller's).
    ///
    /// # Safety
    /// `raw` is a valid, unacked event from librdmacm.
    pub unsafe fn adopt(
        &mut self,
        raw: *const rdma_cm_event,
    ) -> Result<*mut rdma_cm_event, AllocError> {
        // SAFETY: forwarded from the caller.
        let ev = unsafe { Event::copy_from_raw(raw) }?;
        let p = handle(&ev);
        self.live.insert(p as usize, ev);
        Ok(p)
    }

    pub fn ack(&mut self, ptr: *mut rdma_cm_event) -> Ack {
        let key = ptr as usize;
        if let Some(ev) = self.live.remove(&key) {
            self.acked.insert(key, ev);
            self.order.push_back(key);
            while self.order.len() > ACKED_CAP {
                if let Some(old) = self.order.pop_front() {
                    self.acked.remove(&old);
                }
            }
            return Ack::Acked;
        }
        if self.acked.contains_key(&key) {
            Ack::AlreadyAcked
        } else {
            Ack::Unknown
        }
    }

    /// After rdma_destroy_id(id): acked copies of its events may go. Copies the program never
    /// acked stay valid: it may still read them.
    pub fn id_destroyed(&mut self, id: usize) {
        let belongs = |ev: &Event| {
            ev.id() as usize == id
                || (ev.event_type() == RDMA_CM_EVENT_CONNECT_REQUEST
                    && ev.listen_id() as usize == id)
        };
        let gone: Vec<usize> = self
            .acked
            .iter()
            .filter(|(_, ev)| belongs(ev))
            .map(|(k, _)| *k)
            .collect();
        if gone.is_empty() {
            return;
        }
        for k in &gone {
            self.acked.remove(k);
        }
        self.order.retain(|k| !gone.contains(k));
    }

    /// Copies handed out and not acked yet, and acked copies still kept.
    pub fn counts(&self) -> (usize, usize) {
        (self.live.len(), self.acked.len())
    }
}
