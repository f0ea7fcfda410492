//! libcmsafe.so: the C ABI of cmsafe (`ffi`, from which cbindgen generates `include/cmsafe.h`)
//! over the core (`cmsafe-core`).
//!
//! `rdma_get_cm_event(3)` hands out memory that librdmacm owns and `rdma_ack_cm_event(3)` frees.
//! cmsafe fetches an event, deep-copies everything it carries into memory the library owns, acks
//! the original at once and hands out an immutable, refcounted copy. This crate builds only the
//! shared library; Rust programs use the `cmsafe` crate (crates/cmsafe), which has none of these
//! C exports or load-time hooks.

// Public so that its constants, which only cbindgen reads (into include/cmsafe.h), are not dead
// code to the compiler; nothing Rust links this crate (a cdylib only).
pub mod ffi;
