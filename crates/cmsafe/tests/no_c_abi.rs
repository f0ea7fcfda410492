//! A Rust program on this crate carries none of libcmsafe.so's C ABI: no `cmsafe_*` function
//! and neither of its load-time hooks (the flight recorder's set-up, the fork handlers'
//! registration), whatever it uses of the API. This test binary is such a program; it reads its
//! own symbol table with nm(1).

use std::process::Command;

#[test]
fn this_program_links_no_c_export_or_load_time_hook() {
    // Something of the API used, so that the test is of a program that links the crate.
    let _ = cmsafe::stats();
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("nm")
        .arg(&exe)
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm failed on {}", exe.display());
    let symbols = String::from_utf8_lossy(&out.stdout);
    assert!(symbols.lines().count() > 100, "nm listed almost nothing");
    let ours: Vec<&str> = symbols
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| {
            s.starts_with("cmsafe_")
                || s.contains("SET_UP_AT_LOAD")
                || s.contains("REGISTER_AT_LOAD")
        })
        .collect();
    assert!(ours.is_empty(), "C ABI symbols linked in: {ours:?}");
}
