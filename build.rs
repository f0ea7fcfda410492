//! Gives libcmsafe.so its SONAME, the name scripts/soname (the rule's one place) gives for the
//! crate version, and its symbol versions, src/ffi/libcmsafe.map (the rlib is untouched;
//! docs/abi.md states the promise).

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=scripts/soname");
    println!("cargo:rerun-if-changed=scripts/ld-version-script");
    println!("cargo:rerun-if-changed=src/ffi/libcmsafe.map");
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
        version_script();
    }
}

/// The C ABI's symbol versions (src/ffi/libcmsafe.map): GNU ld takes them only without rustc's
/// own anonymous version script, so gcc finds ld.bfd first in a directory of ours (-B), where it
/// is scripts/ld-version-script, which leaves rustc's script out (that script says why).
fn version_script() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let shim = PathBuf::from(out).join("ld-version-script");
    fs::create_dir_all(&shim).expect("create OUT_DIR/ld-version-script");
    // A copy keeps the script's mode (executable), and the build never writes to the source.
    fs::copy(
        format!("{dir}/scripts/ld-version-script"),
        shim.join("ld.bfd"),
    )
    .expect("copy scripts/ld-version-script");
    println!("cargo:rustc-cdylib-link-arg=-B{}", shim.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/src/ffi/libcmsafe.map");
}
