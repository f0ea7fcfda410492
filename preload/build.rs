//! Gives libcmsafe_preload.so a SONAME of its own, so that the loader never takes it for
//! another library a program needs (a program linked against libcmsafe runs under the preload
//! with both loaded).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcmsafe_preload.so");
        // GNU ld: code at a file offset equal to its address, where perf places USDT probes
        // (docs/tracing.md, "Linker").
        println!("cargo:rustc-cdylib-link-arg=-fuse-ld=bfd");
    }
}
