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

mod shim;

pub mod gone_channels;
pub mod page_state;
pub mod saved_action;
pub mod signal_queue;
mod slot_cell;
