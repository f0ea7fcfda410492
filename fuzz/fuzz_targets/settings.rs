//! The settings' parsers on any text a user could put in the variable (its bytes as
//! `cmsafe_core::env::var` gives them: not UTF-8 becomes U+FFFD): the preload's CMSAFE_MODE and
//! CMSAFE_GUARD (`setting::word`), CMSAFE_LATE_ACK_MS, CMSAFE_HANG_MS and CMSAFE_REJECTED_IDS
//! (`setting::number`), libcmsafe's CMSAFE_FLIGHT_EVENTS (`flight::events_setting`) and both
//! libraries' CMSAFE_LOG (`logging::parse_level`). Each must give a value in range, or say
//! unset (blank) or invalid, and never panic.
#![no_main]

use cmsafe_core::flight::{events_setting, MAX_FLIGHT_EVENTS};
use cmsafe_core::logging::parse_level;
use cmsafe_core::setting::{number, word, Parsed};
use libfuzzer_sys::fuzz_target;

/// What a whole decimal number in `range` must parse to, by another route than `number`'s:
/// digits only (after one optional `+`), compared as text against the range's ends.
fn expected_number(text: &str, min: u64, max: u64) -> Parsed<u64> {
    let t = text.trim();
    if t.is_empty() {
        return Parsed::Unset;
    }
    let digits = t.strip_prefix('+').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Parsed::Invalid;
    }
    let digits = digits.trim_start_matches('0');
    // More than u64's 20 digits, or 20 digits above its maximum: not a u64.
    let max_text = u64::MAX.to_string();
    if digits.len() > max_text.len()
        || (digits.len() == max_text.len() && digits > max_text.as_str())
    {
        return Parsed::Invalid;
    }
    let n = digits
        .bytes()
        .fold(0u64, |n, b| n * 10 + u64::from(b - b'0'));
    if (min..=max).contains(&n) {
        Parsed::Value(n)
    } else {
        Parsed::Invalid
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();

    // The preload's numbers: at least 0 (the two times) and at least 1 (rejected ids).
    for min in [0, 1] {
        let got = number(Some(text), min..=u64::MAX);
        assert_eq!(got, expected_number(text, min, u64::MAX), "{text:?}");
    }
    assert_eq!(number(None, 0..=u64::MAX), Parsed::Unset);

    // CMSAFE_FLIGHT_EVENTS: a count the recorder takes.
    let got = events_setting(Some(text));
    assert_eq!(
        got,
        expected_number(text, 0, MAX_FLIGHT_EVENTS as u64).map(|n| n as usize),
        "{text:?}"
    );
    if let Parsed::Value(n) = got {
        assert!(n <= MAX_FLIGHT_EVENTS);
    }

    // The preload's words (CMSAFE_MODE, CMSAFE_GUARD), and a list with a prefix of another
    // word and an empty word: exactly one of the list, else unset or invalid.
    let lists: [&[(&str, u8)]; 3] = [
        &[("audit", 0), ("safe", 1), ("off", 2)],
        &[("userfaultfd", 0), ("mprotect", 1)],
        &[("", 0), ("saf", 1), ("safe", 2), ("\u{fffd}", 3)],
    ];
    for words in lists {
        let t = text.trim();
        let want = if t.is_empty() {
            Parsed::Unset
        } else {
            words
                .iter()
                .find(|(w, _)| *w == t)
                .map_or(Parsed::Invalid, |&(_, v)| Parsed::Value(v))
        };
        assert_eq!(word(Some(text), words), want, "{text:?}");
    }

    // CMSAFE_LOG: a level whose name is the text, in any case.
    match parse_level(text) {
        Some(level) => assert!(level.as_str().eq_ignore_ascii_case(text.trim()), "{text:?}"),
        None => assert!(
            !["off", "error", "warn", "info", "debug", "trace"]
                .iter()
                .any(|l| l.eq_ignore_ascii_case(text.trim())),
            "{text:?}"
        ),
    }
});
