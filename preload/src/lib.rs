//! libcmsafe_preload.so: LD_PRELOAD for unmodified RDMA programs.
//!
//! It interposes librdmacm's event calls and the calls that judge how events, ids and channels
//! are used, libibverbs' completion and async event calls, and, for audit's SIGSEGV handler,
//! sigaction and signal: the list is entry.rs's `entry!` blocks, its one source (c-tests/
//! interposed reads it; the ABI check holds the library's exports to it, docs/preload.md names
//! each). Nothing else is exported.
//!
//! CMSAFE_MODE chooses:
//! - `audit` (default): the program sees the same events and the same ack timing; every misuse is
//!   reported (see `audit::findings`). Copies live on guarded pages so reads after the ack are caught.
//! - `safe`: librdmacm's event is acked at once and the program gets cmsafe's copy, which stays
//!   valid after the program's ack until the id is destroyed (or 4096 newer acks pushed it out),
//!   so ack-then-read code reads the right bytes and rdma_destroy_id never waits on a forgotten
//!   event; ibv_destroy_cq acks the completion events the program still owes, and acks libibverbs
//!   must not see (beyond the events got, or of a destroyed CQ) are kept from it; the same for
//!   the async events of QPs, CQs and SRQs at their destroys. Findings are
//!   still reported.
//! - `off`: every call passes through untouched.
//!
//! Each wrapper resolves the real function lazily, wherever librdmacm is loaded (sys/real.rs),
//! keeps errno as librdmacm left it, never lets a panic cross into the program, and is as
//! cancellable as librdmacm itself, no more (sys/cancel.rs).
//!
//! The rooms, each a family's wrappers (`wrap_*.rs`: the exported C functions' bodies) beside
//! the model they keep (state and judgements), on the ground the others stand on:
//! - `cm/`: librdmacm's calls and the events, ids and channels the program holds;
//! - `verbs/`: libibverbs' completion and async events, counted per object;
//! - `audit/`: the findings sink and the report, and audit mode's guarded pages (userfaultfd,
//!   or mprotect and the SIGSEGV handler);
//! - `sys/`: the real functions, settings, callers' places, cancellation, errno kept, the
//!   preload's own memory and threads;
//! - `entry.rs`, the exported names, and `lifecycle.rs`, the exit and fork handlers, above all.

/// The preload's allocations never take the program's malloc lock (sys/alloc.rs).
#[global_allocator]
static ALLOCATOR: sys::alloc::Allocator = sys::alloc::Allocator;

mod audit;
mod cm;
mod entry;
mod lifecycle;
mod sys;
mod verbs;
