//! Bookkeeping shared by the completion-event (cq.rs) and async-event (async_events.rs) tables:
//! the totals the exit summary prints, and the short ring of destroyed objects that names acks
//! coming after a destroy.

use std::collections::VecDeque;

/// Destroyed objects remembered for acks after the destroy.
pub const DESTROYED_CAP: usize = 64;

/// Events through the preload, for the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub got: u64,
    pub acked: u64,
    /// Acks safe mode made on the program's behalf, and program acks it kept from libibverbs.
    pub cmsafe_acked: u64,
    pub absorbed: u64,
}

impl Tally {
    /// The summary's line on these events ("completion events", "async events"), None when none
    /// went through.
    pub fn line(&self, what: &str) -> Option<String> {
        if self.got == 0 && self.acked == 0 {
            return None;
        }
        let mut line = format!(
            "==cmsafe==   {what}: {} got, {} acked",
            self.got, self.acked
        );
        if self.cmsafe_acked > 0 || self.absorbed > 0 {
            line.push_str(&format!(
                " (safe mode acked {} for the program, kept {} of its acks from libibverbs)",
                self.cmsafe_acked, self.absorbed
            ));
        }
        line.push('\n');
        Some(line)
    }
}

/// The last DESTROYED_CAP objects destroyed, newest last, each with what safe mode had acked for
/// the program at its destroy.
#[derive(Debug)]
pub struct Destroyed<K> {
    ring: VecDeque<(K, u64)>,
}

impl<K> Default for Destroyed<K> {
    fn default() -> Self {
        Destroyed {
            ring: VecDeque::new(),
        }
    }
}

impl<K: PartialEq + Copy> Destroyed<K> {
    /// What safe mode had acked at `k`'s destroy, if `k` is remembered destroyed.
    pub fn prepaid(&self, k: K) -> Option<u64> {
        self.ring
            .iter()
            .rev()
            .find(|(d, _)| *d == k)
            .map(|&(_, p)| p)
    }

    /// A new object lives at `k`: no longer destroyed.
    pub fn forget(&mut self, k: K) {
        // A key is in the ring at most once (`remember` forgets it first): one scan, which
        // stops at it, where a retain would compare and move every entry.
        if let Some(i) = self.ring.iter().position(|&(d, _)| d == k) {
            self.ring.remove(i);
        }
    }

    pub fn remember(&mut self, k: K, prepaid: u64) {
        self.forget(k);
        if self.ring.len() == DESTROYED_CAP {
            self.ring.pop_front();
        }
        self.ring.push_back((k, prepaid));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ring.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_ring() {
        let mut t = Tally::default();
        assert_eq!(t.line("async events"), None);
        t.got = 2;
        t.acked = 1;
        assert_eq!(
            t.line("async events").unwrap(),
            "==cmsafe==   async events: 2 got, 1 acked\n"
        );
        t.absorbed = 1;
        assert!(t.line("x").unwrap().ends_with(
            "(safe mode acked 0 for the program, kept 1 of its acks from libibverbs)\n"
        ));
        let mut d = Destroyed::default();
        for k in 0..100usize {
            d.remember(k, 1);
        }
        d.remember(99, 2);
        assert_eq!(d.len(), DESTROYED_CAP);
        assert_eq!((d.prepaid(99), d.prepaid(0)), (Some(2), None));
        d.forget(99);
        assert_eq!(d.prepaid(99), None);
    }
}
