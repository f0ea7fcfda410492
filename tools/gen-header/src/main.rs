//! `gen-header [--check]`: writes include/cmsafe.h from the crate's C ABI with cbindgen and
//! cbindgen.toml, or with `--check` fails when the committed header differs from a fresh one.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = match cbindgen::Config::from_file(root.join("cbindgen.toml")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gen-header: cbindgen.toml: {e}");
            return ExitCode::FAILURE;
        }
    };
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
