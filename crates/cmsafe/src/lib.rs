//! cmsafe: RDMA connection-manager events that are safe to handle, for Rust programs.
//!
//! `rdma_get_cm_event(3)` hands out memory that librdmacm owns and `rdma_ack_cm_event(3)` frees.
//! cmsafe fetches an event, deep-copies everything it carries into memory the library owns, acks
//! the original at once and hands out an immutable, refcounted copy. Private data lives in its own
//! refcounted buffer that can outlive the event and cross threads.
//!
//! - [`channel`]: an event channel and its fetches ([`EventChannel`]: blocking, with a timeout,
//!   in batches).
//! - [`event`]: the owned copy of an event ([`Event`]) and its private data ([`PrivateData`]).
//! - [`status`]: what an event's status means (errno, IB CM reject reason, ...).
//! - [`stats`]: the process's counters; [`logging`]: where cmsafe's log lines go.
//! - [`cm`]: librdmacm's types, as the events carry them.
//!
//! This crate links no C exports: a C program uses libcmsafe.so (the package `cmsafe-ffi`,
//! `include/cmsafe.h`) instead. Both are built on the same core.

pub use cmsafe_core::{channel, cm, event, logging, status};
pub use cmsafe_core::{AllocError, Event, EventChannel, PrivateData, Stats, StatusKind, Wait};

/// The process's counters now (events fetched, copies and buffers live, allocation failures).
pub fn stats() -> Stats {
    cmsafe_core::stats()
}
