//! The atomics the types of this crate are built on: std's, or loom's under `--cfg loom`.
//!
//! loom's atomics are not `const`-constructible, so a type used in a `static` has a `const fn
//! new` without loom and a plain `fn new` with it; the statics themselves live in the crates
//! that use these types, never here.

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
