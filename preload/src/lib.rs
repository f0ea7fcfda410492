//! libcmsafe_preload.so: LD_PRELOAD for unmodified RDMA programs.
//!
//! It interposes rdma_get_cm_event and rdma_ack_cm_event, and, to judge how events are used,
//! rdma_destroy_id, rdma_migrate_id, rdma_destroy_event_channel and rdma_destroy_qp; to judge
//! the lifecycles of ids and channels, rdma_create_id, rdma_create_ep, rdma_create_event_channel,
//! rdma_get_request, rdma_accept, rdma_connect, rdma_reject, rdma_disconnect, rdma_bind_addr,
//! rdma_resolve_addr, rdma_resolve_route, rdma_listen, rdma_create_qp and rdma_set_option
//! (cm/wrap_ids.rs, cm/objects.rs); and
//! libibverbs' ibv_get_cq_event, ibv_ack_cq_events and ibv_destroy_cq, to count each CQ's
//! completion events got and acked (verbs/wrap_cq.rs, verbs/cq.rs); ibv_get_async_event,
//! ibv_ack_async_event, ibv_destroy_qp and ibv_destroy_srq, to count each object's async events
//! got and acked (verbs/wrap_async.rs, verbs/async_events.rs). Nothing else is exported.
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
//! - `audit/`: the findings, the report, and audit mode's guarded pages;
//! - `sys/`: the real functions, settings, callers' places, cancellation, errno kept;
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
