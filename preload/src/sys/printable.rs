//! Text that came from outside (a program's name as the loader gives it, an object's or a
//! symbol's name), made safe to put on a line of ours: a newline or an escape sequence in it
//! would otherwise end our line, forge one of ours (`==cmsafe== summary`, which harnesses and
//! people read), or drive the terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control character (C0, DEL, C1), the backslash, and the characters some
/// readers take for a line's end or that reorder what a terminal shows (U+2028, U+2029, the
/// bidirectional overrides and isolates) written as escapes: `\n`, `\t`, `\x1b`, `\u{85}`,
/// `\u{2028}`, `\\`. Printable text, spaces included, is kept as it is.
pub fn printable(s: &str) -> Cow<'_, str> {
    let plain = |c: char| {
        !c.is_control()
            && c != '\\'
            && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if s.chars().all(plain) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if plain(c) => out.push(c),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("./server -a 1.2.3.4"), "./server -a 1.2.3.4");
        assert_eq!(printable("café ünïcode"), "café ünïcode");
        assert_eq!(
            printable("srv\n==cmsafe== summary: pid 1, mode audit, 0 events, 0 findings"),
            "srv\\n==cmsafe== summary: pid 1, mode audit, 0 events, 0 findings"
        );
        assert_eq!(printable("a\x1b[2Jb\tc\rd"), "a\\x1b[2Jb\\tc\\rd");
        assert_eq!(printable("\u{7f}\u{85}\u{9b}"), "\\x7f\\u{85}\\u{9b}");
        // The escape's own character is escaped, so an escape seen was made here.
        assert_eq!(printable("a\\nb"), "a\\\\nb");
        // Line and paragraph separators (Python's splitlines ends a line there), and the
        // bidirectional overrides that reorder a terminal's text.
        assert_eq!(printable("a\u{2028}b\u{2029}c"), "a\\u{2028}b\\u{2029}c");
        assert_eq!(printable("\u{202e}x\u{2066}"), "\\u{202e}x\\u{2066}");
    }
}
