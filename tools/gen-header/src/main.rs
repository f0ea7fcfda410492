//! `gen-header [--check]`: writes include/cmsafe.h from the crate's C ABI with cbindgen and
//! cbindgen.toml, or with `--check` fails when the committed header differs from a fresh one.
//!
//! The version macros (`CMSAFE_VERSION_*`) come from the `[package]` version in Cargo.toml, so a
//! version bump without `make header` is drift too.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut config = match cbindgen::Config::from_file(root.join("cbindgen.toml")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gen-header: cbindgen.toml: {e}");
            return ExitCode::FAILURE;
        }
    };
    let version = match package_version(&root.join("Cargo.toml")) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("gen-header: Cargo.toml: {e}");
            return ExitCode::FAILURE;
        }
    };
    let macros = version_macros(&version);
    config.after_includes = Some(match config.after_includes.take() {
        Some(more) => format!("{macros}\n{more}"),
        None => macros,
    });
    let bindings = match cbindgen::generate_with_config(&root, config) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("gen-header: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = root.join("include/cmsafe.h");
    if check {
        let committed = std::fs::read(&path).unwrap_or_default();
        if committed != fresh {
            eprintln!(
                "gen-header: include/cmsafe.h differs from a fresh generation: run `make header`"
            );
            return ExitCode::FAILURE;
        }
        println!("gen-header: include/cmsafe.h is up to date");
    } else {
        if let Err(e) = std::fs::write(&path, &fresh) {
            eprintln!("gen-header: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("gen-header: wrote include/cmsafe.h");
    }
    ExitCode::SUCCESS
}

/// The `version` of the `[package]` table, e.g. "0.1.0" or "0.2.0-rc.1".
fn package_version(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some((key, value)) = line.split_once('=') {
                if key.trim() == "version" {
                    let v = value.trim();
                    let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                    return v.map(str::to_string).ok_or_else(|| {
                        format!("[package] version is not a string literal: {value}")
                    });
                }
            }
        }
    }
    Err("no version in [package]".into())
}

/// `#define`s for the version, in the header's doc comment style.
fn version_macros(version: &str) -> String {
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
        "gen-header: Cargo.toml version {version:?} is not MAJOR.MINOR.PATCH"
    );
    format!(
        "\n/**\n * The cmsafe release this header belongs to (Cargo.toml). `cmsafe_version()` gives the\n \
         * version of the library loaded at run time.\n */\n\
         #define CMSAFE_VERSION_MAJOR {}\n\
         #define CMSAFE_VERSION_MINOR {}\n\
         #define CMSAFE_VERSION_PATCH {}\n\
         #define CMSAFE_VERSION_STRING \"{version}\"",
        parts[0], parts[1], parts[2]
    )
}
