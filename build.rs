//! Gives libcmsafe.so its SONAME (the rlib is untouched): the name scripts/soname, the rule's one
//! place, gives for the crate version (docs/abi.md states the promise).

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=scripts/soname");
    // ELF targets only; other platforms keep their linker's default.
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if !matches!(
        os.as_str(),
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly" | "illumos"
    ) {
        return;
    }
    let version = env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    let out = Command::new("sh")
        .args(["scripts/soname", &version])
        .output()
        .expect("sh runs scripts/soname");
    assert!(
        out.status.success(),
        "scripts/soname {version}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).expect("scripts/soname prints text");
    let soname = line
        .split_whitespace()
        .nth(1)
        .expect("scripts/soname prints VERSION SONAME");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    // GNU ld, not rust-lld (the default on x86_64 Linux since Rust 1.90): its layout keeps code
    // at a file offset equal to its address, which perf needs to place the USDT probes right
    // (docs/tracing.md, "Linker").
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-fuse-ld=bfd");
    }
}
