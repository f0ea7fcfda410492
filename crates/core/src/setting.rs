//! A setting's text to its value, for libcmsafe and the preload alike: pure functions, no
//! environment and no output (the caller reads the variable through [`crate::env`] and says a
//! mistake on stderr), so that whatever a user writes in a `CMSAFE_*` variable gives a value
//! in range or the caller's default, never a panic. The fuzz targets (`fuzz/`) hold them to that.

use std::ops::RangeInclusive;

/// What a setting's text says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// Unset, empty or only white space: the caller's default, said nowhere.
    Unset,
    /// The value the text names.
    Value(T),
    /// Anything else: the caller keeps its default and says so.
    Invalid,
}

impl<T> Parsed<T> {
    /// The same verdict with the value mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Parsed<U> {
        match self {
            Parsed::Unset => Parsed::Unset,
            Parsed::Value(v) => Parsed::Value(f(v)),
            Parsed::Invalid => Parsed::Invalid,
        }
    }
}

/// The text with the white space around it removed, or None when nothing is left.
fn trimmed(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|t| !t.is_empty())
}

/// A whole decimal number in `range` (a leading `+` allowed, white space around it ignored).
pub fn number(text: Option<&str>, range: RangeInclusive<u64>) -> Parsed<u64> {
    let Some(t) = trimmed(text) else {
        return Parsed::Unset;
    };
    match t.parse::<u64>() {
        Ok(n) if range.contains(&n) => Parsed::Value(n),
        _ => Parsed::Invalid,
    }
}

/// The value of the word of `words` that the text is, exactly (white space around it ignored).
pub fn word<T: Copy>(text: Option<&str>, words: &[(&str, T)]) -> Parsed<T> {
    let Some(t) = trimmed(text) else {
        return Parsed::Unset;
    };
    match words.iter().find(|(w, _)| *w == t) {
        Some(&(_, v)) => Parsed::Value(v),
        None => Parsed::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_in_range_or_unset_or_invalid() {
        let r = 1..=64;
        assert_eq!(number(Some(" 25 "), r.clone()), Parsed::Value(25));
        assert_eq!(number(Some("+7"), r.clone()), Parsed::Value(7));
        assert_eq!(number(Some("64"), r.clone()), Parsed::Value(64));
        assert_eq!(number(None, r.clone()), Parsed::Unset);
        assert_eq!(number(Some(""), r.clone()), Parsed::Unset);
        assert_eq!(number(Some(" \t\n"), r.clone()), Parsed::Unset);
        for bad in [
            "0",
            "65",
            "-1",
            "abc",
            "2 5",
            "1e3",
            "0x10",
            "18446744073709551616",
        ] {
            assert_eq!(number(Some(bad), r.clone()), Parsed::Invalid, "{bad:?}");
        }
        assert_eq!(
            number(Some("18446744073709551615"), 0..=u64::MAX),
            Parsed::Value(u64::MAX)
        );
    }

    #[test]
    fn a_word_of_the_list_exactly() {
        let words = [("audit", 1), ("safe", 2), ("off", 3)];
        assert_eq!(word(Some(" safe\n"), &words), Parsed::Value(2));
        assert_eq!(word(Some("off"), &words), Parsed::Value(3));
        assert_eq!(word(None, &words), Parsed::Unset);
        assert_eq!(word(Some("  "), &words), Parsed::Unset);
        for bad in ["Safe", "saf", "safe mode", "audit,safe"] {
            assert_eq!(word(Some(bad), &words), Parsed::Invalid, "{bad:?}");
        }
        assert_eq!(Parsed::Value(2).map(|v| v * 10), Parsed::Value(20));
    }
}
