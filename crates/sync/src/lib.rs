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
//!   sleeps in futex(2): the one part here that makes system calls).

mod futex;
mod lock;
mod refs;
mod shim;

pub use lock::{Deadline, TimedLock};
pub use refs::{Released, SlotRefs};
