//! Gives libcmsafe.so its SONAME, derived from the crate version (the rlib is untouched).
//!
//! 0.MINOR.PATCH: `libcmsafe.so.0.MINOR`, since a new 0.x minor may change the ABI (Cargo's
//! semver reading of 0.x, and cargo-c's convention; 0.0.PATCH: `libcmsafe.so.0.0.PATCH`, every
//! 0.0.x release being incompatible); MAJOR.MINOR.PATCH from 1.0 on: `libcmsafe.so.MAJOR`.
//! README.md, "ABI and versions", states the promise; the Makefile derives the same name.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    let minor = env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets CARGO_PKG_VERSION_MINOR");
    let patch = env::var("CARGO_PKG_VERSION_PATCH").expect("cargo sets CARGO_PKG_VERSION_PATCH");
    let abi = match (major.as_str(), minor.as_str()) {
        ("0", "0") => format!("0.0.{patch}"),
        ("0", _) => format!("0.{minor}"),
        _ => major,
    };
    let soname = format!("libcmsafe.so.{abi}");
    // ELF targets only; other platforms keep their linker's default.
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if matches!(
        os.as_str(),
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly" | "illumos"
    ) {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }
}
