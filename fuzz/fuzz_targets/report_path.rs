//! `cmsafe_core::outfile::Template::path_for`: the name a report or a dump gets from its
//! setting (CMSAFE_REPORT, CMSAFE_FLIGHT_DUMP: any bytes but NUL), the owner's pid and the
//! writer's. Each `%p` becomes the writer's pid, left to right; with none, a writer other than
//! the owner gets `.<pid>` after the name; a name longer than PATH_MAX is ENAMETOOLONG. Never a
//! panic, never a NUL inside, never a name cut short.
#![no_main]

use std::ffi::CString;

use cmsafe_core::outfile::{Template, PATH_MAX};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// The name, by another route: `%p` replaced left to right, as str::replace does.
fn expected(text: &[u8], owner: i32, pid: i32) -> Vec<u8> {
    let pid_text = pid.to_string().into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut expanded = false;
    while i < text.len() {
        if text[i..].starts_with(b"%p") {
            out.extend_from_slice(&pid_text);
            i += 2;
            expanded = true;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    if !expanded && pid != owner {
        out.push(b'.');
        out.extend_from_slice(&pid_text);
    }
    out
}

fn run(mut u: Unstructured) -> Result<()> {
    let owner: i32 = u.arbitrary()?;
    let pid: i32 = if u.arbitrary()? {
        owner
    } else {
        u.arbitrary()?
    };
    // A text long enough to reach PATH_MAX: the fuzzer's bytes, repeated a number of times.
    let times = u.int_in_range(1..=8)?;
    let text = u.take_rest().repeat(times);
    let Ok(text) = CString::new(text) else {
        return Ok(());
    };
    let Some(t) = Template::owned_by(text.clone(), owner) else {
        assert!(text.is_empty());
        return Ok(());
    };
    let want = expected(text.as_bytes(), owner, pid);
    match t.path_for(pid) {
        Ok(p) => {
            assert_eq!(p.as_bytes(), &want[..]);
            assert!(want.len() < PATH_MAX);
            assert_eq!(p.as_c_str().to_bytes(), &want[..]);
        }
        Err(e) => {
            assert_eq!(e, libc::ENAMETOOLONG);
            assert!(want.len() >= PATH_MAX, "{} bytes refused", want.len());
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(Unstructured::new(data));
});
