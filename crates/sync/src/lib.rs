//! cmsafe's lock-free and ordering-sensitive parts, each a small type of its own, so that the
//! same code runs in the library, in the preload and under loom's model checker.
//!
//! Built with `--cfg loom` (`make loom`), every type here runs on loom's atomics and the
//! `loom` test modules explore each interleaving of two or three threads, and under loom's
//! C11 memory model each load may see any store the model allows: what x86's strong order
//! hides on the machines the tests run on shows up here. Without the cfg they are plain std
//! atomics with no cost over hand-written code.
//!
//! Nothing here allocates, takes a lock or makes a system call unless its doc says so.
//!
//! - [`SlotRefs`]: a pooled slot's references, to its event and to its buffer, in one word.
//! - [`TimedLock`]: a futex lock word whose acquisition can give up at a [`Deadline`] (it
//!   sleeps in futex(2), as [`Latch`] does: the parts here that make system calls).
//! - [`Latch`]: work done once that other threads may wait for up to a deadline (the exit
//!   summary, which a second thread's exit waits for; it sleeps in futex(2) too).
//! - [`signal_queue::SignalQueue`]: a bounded MPMC queue a signal handler may push to (audit's
//!   use-after-ack findings).
//! - [`page_state::PageState`]: the life of one of audit's guarded pages, by compare-and-swap.
//! - [`HolderWord`]: which thread holds a lock, for a signal handler that must not wait for
//!   its own thread (the fork-safe mutex of the exit and fork paths).
//! - [`latest::Latest`]: the newest of a value set by any thread and read by a signal handler
//!   (the program's own SIGSEGV action, under audit).
//! - [`gone_channels::GoneChannels`]: destroyed event channels, for a check that takes no lock.
//! - [`read_table::ReadTable`]: the threads blocked in a read, by channel, for a watcher.
//! - [`SeqRecord`]: a slot of a ring of records written by many threads and copied out while
//!   they write (the flight recorder).
//!
//! `shim` picks the atomics; `slot_cell` the cell whose accesses loom checks for races.

mod futex;
mod holder;
mod latch;
mod lock;
mod refs;
mod seq_record;
mod shim;
mod slot_cell;

pub mod gone_channels;
pub mod latest;
pub mod page_state;
pub mod read_table;
pub mod signal_queue;

pub use holder::HolderWord;
pub use latch::Latch;
pub use lock::{Deadline, TimedLock};
pub use refs::{Released, SlotRefs};
pub use seq_record::{Claimed, SeqRecord};
