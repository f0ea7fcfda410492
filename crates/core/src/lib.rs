//! cmsafe's core: RDMA connection-manager events that are safe to handle.
//!
//! `rdma_get_cm_event(3)` hands out memory that librdmacm owns and `rdma_ack_cm_event(3)` frees.
//! cmsafe fetches an event, deep-copies everything it carries into memory the library owns, acks
//! the original at once and hands out an immutable, refcounted copy. Private data lives in its own
//! refcounted buffer that can outlive the event and cross threads.
//!
//! Layout of the crate:
//! - [`cm`]: the librdmacm types and names cmsafe works with (our own bindings, [`cm::sys`]).
//! - [`event`]: the owned copy of an event and its private data buffer.
//! - [`channel`]: the safe Rust API over an event channel (fetch, copy, ack, timeouts, batches).
//! - [`status`]: what an event's status means (errno, IB CM reject reason, ...).
//! - [`safe`]: safe mode's copies that outlive the program's ack (preload and compat header).
//! - [`stats`], [`logging`], [`fault`]: counters, log routing, allocation fault injection;
//!   `snapshot` reads the counters with what is derived from the pool and the channels.
//! - [`flight`]: the flight recorder, the last N events in a ring, dumped as JSON lines.
//! - [`fork_lock`]: the mutex of process-wide state that a fork(2) must not split, and the
//!   handlers that take cmsafe's own across a fork.
//! - [`recent`]: a bounded map of the latest entries under pointers that come back (safe mode's
//!   acked copies; the preload's acked records and destroyed objects).
//! - [`errno`] and [`clock`]: the calling thread's errno and the clocks read, for this crate,
//!   the C ABI and the preload alike.
//! - [`env`]: the settings read from the environment, none under AT_SECURE (setuid, setgid,
//!   file capabilities); [`setting`]: their text to a value, pure functions (fuzzed: `fuzz/`).
//! - [`outfile`]: the files cmsafe writes (the flight recorder's dump, the preload's report):
//!   new, 0600, never through a symlink, one per process, their failed writes counted.
//! - `pool`: the refcounted slots events and buffers live in; `stderr`: lines to stderr that
//!   cannot panic.
//!
//! The C ABI (`include/cmsafe.h`, libcmsafe.so) is the crate `cmsafe` at the top of the
//! repository, a thin layer over this one; the LD_PRELOAD library (`preload/`) is built on this
//! crate too, never on that one, so it cannot export the C API's names.

pub mod channel;
pub mod clock;
pub mod cm;
pub mod env;
pub mod errno;
pub mod event;
pub mod fault;
pub mod flight;
pub mod fork_lock;
pub mod logging;
pub mod mapping;
pub mod outfile;
pub mod page;
mod pool;
pub mod recent;
pub mod safe;
pub mod setting;
pub mod snapshot;
pub mod stats;
pub mod status;
pub mod stderr;
pub mod usdt;

pub use channel::{EventChannel, Wait};
pub use event::{Event, PrivateData};
pub use pool::AllocError;
pub use snapshot::snapshot as stats;
pub use stats::Stats;
pub use status::StatusKind;

/// A map keyed by this process's own pointers (events, cm_ids, channels, CQs, QPs), for cmsafe
/// and the preload alike: FxHash, since no key comes from outside to flood a bucket, and SipHash
/// was a large share of the cost per event.
pub type PtrMap<K, V> = rustc_hash::FxHashMap<K, V>;
