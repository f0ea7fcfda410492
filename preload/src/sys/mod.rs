//! The ground the wrappers stand on: the real functions behind ours, the settings, where a call
//! came from, the calling thread, cancellation, running the preload's own work quietly, and its own memory.

pub mod address;
pub mod alloc;
pub mod cancel;
pub mod config;
pub mod forked;
pub mod printable;
pub mod quiet;
pub mod real;
pub mod seccomp;
pub mod this_thread;
pub mod thread;
pub mod wait;
pub mod whereis;
