//! cmsafe: RDMA connection-manager events that are safe to handle.
//!
//! `rdma_get_cm_event(3)` hands out memory that librdmacm owns and `rdma_ack_cm_event(3)` frees.
//! cmsafe fetches an event, deep-copies everything it carries into memory the library owns, acks
//! the original at once and hands out an immutable, refcounted copy. Private data lives in its own
//! refcounted buffer that can outlive the event and cross threads.
//!
//! This crate is libcmsafe.so: the C ABI (`ffi`, from which cbindgen generates
//! `include/cmsafe.h`) over the core (`cmsafe-core`, whose Rust API it re-exports):
//! - [`channel`]: the safe Rust API over an event channel (fetch, copy, ack, timeouts, batches).
//! - [`event`]: the owned copy of an event and its private data buffer.
//! - [`status`]: what an event's status means (errno, IB CM reject reason, ...).
//! - [`stats`], [`logging`]: counters and log routing; [`cm`]: librdmacm's types.

mod ffi;

pub use cmsafe_core::{
    channel, cm, event, fault, flight, fork_lock, logging, recent, safe, snapshot, stats, status,
};
pub use cmsafe_core::{AllocError, Event, EventChannel, PrivateData, Stats, StatusKind, Wait};
