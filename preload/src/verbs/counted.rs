//! Counted events per object, the model shared by the completion-event (cq.rs) and async-event
//! (async_events.rs) tables: libibverbs' destroy of a CQ, QP, SRQ or WQ waits until the acks of
//! the object's events equal the events the kernel handed out, so what each object got, what
//! was acked for it and what it owes at its destroy say whether the destroy will return. Also
//! the totals the exit summary prints, and the short ring of destroyed objects that names acks
//! coming after a destroy.

use std::collections::VecDeque;
use std::hash::Hash;
use std::ops::DerefMut;

use cmsafe_core::PtrMap;

use crate::verbs::getters::Getters;

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

/// One object's counted events; the tables' entries add what they need beside it (a CQ its
/// channel, an async object the type of its last event) and deref to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Events got (libibverbs' reported count).
    pub got: u64,
    /// Acks passed on to libibverbs, the program's and cmsafe's (libibverbs' acked count).
    pub acked: u64,
    /// Acks safe mode made on the program's behalf at a destroy, not yet matched by the
    /// program's own (those are absorbed).
    pub prepaid: u64,
    /// The threads that got its events.
    pub threads: Getters,
    /// Where the last event was got (a return address in the program).
    pub last_get: usize,
    /// A finding already named its unacked events (no never-acked line at exit then).
    pub reported: bool,
}

impl Count {
    /// Events got and not acked (0 when over-acked).
    pub fn owed(&self) -> u64 {
        self.got.saturating_sub(self.acked)
    }

    /// Acks beyond the events got.
    pub fn over(&self) -> u64 {
        self.acked.saturating_sub(self.got)
    }
}

/// Lets a table's entry (`$t`, with a `count: Count` field) be read and changed as its `Count`.
macro_rules! derefs_to_count {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = $crate::verbs::counted::Count;
            fn deref(&self) -> &Self::Target {
                &self.count
            }
        }

        impl std::ops::DerefMut for $t {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.count
            }
        }
    };
}
pub(crate) use derefs_to_count;

/// What became of an ack of `n` events of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acked<V> {
    /// How many to pass on to libibverbs.
    pub pass: u64,
    /// How many were kept from it (safe mode).
    pub absorbed: u64,
    /// The object's destroy had returned: what safe mode had acked there for the program.
    pub after_destroy: Option<u64>,
    /// More acked than got: the object's counts before this ack.
    pub over: Option<V>,
}

/// Counted events per object (`V`, a `Count` and what its table adds) by key `K`: one entry per
/// object the program got or acked events of, removed when its destroy returns; destroyed
/// objects are remembered in a short ring only, to name acks that come after the destroy.
pub struct Counted<K, V> {
    live: PtrMap<K, V>,
    destroyed: Destroyed<K>,
    pub tally: Tally,
}

impl<K, V> Default for Counted<K, V> {
    fn default() -> Self {
        Counted {
            live: PtrMap::default(),
            destroyed: Destroyed::default(),
            tally: Tally::default(),
        }
    }
}

impl<K, V> Counted<K, V>
where
    K: Copy + Eq + Hash,
    V: Clone + Default + DerefMut<Target = Count>,
{
    fn entry(&mut self, k: K) -> &mut V {
        if !self.live.contains_key(&k) {
            // A new object at the address of a destroyed one: acks now count against it.
            self.destroyed.forget(k);
        }
        self.live.entry(k).or_default()
    }

    /// An event of `k` was got, in `thread`, called from `place`: its entry, for what the table
    /// adds.
    pub fn got(&mut self, k: K, thread: i32, place: usize) -> &mut V {
        self.tally.got += 1;
        let o = self.entry(k);
        o.got += 1;
        o.threads.add(thread);
        o.last_get = place;
        o
    }

    /// The program acks `n` events of `k`; `fill` completes an entry made for it (an object
    /// neither tracked nor destroyed: so it never reads what we know to be freed). In safe mode
    /// (`absorb`) acks that libibverbs must not see are kept from it: those safe mode made for
    /// the program already, those beyond the events got, those of a destroyed object.
    pub fn ack(&mut self, k: K, n: u64, absorb: bool, fill: impl FnOnce(&mut V)) -> Acked<V> {
        self.tally.acked += n;
        if !self.live.contains_key(&k) {
            if let Some(prepaid) = self.destroyed.prepaid(k) {
                let (pass, absorbed) = if absorb { (0, n) } else { (n, 0) };
                self.tally.absorbed += absorbed;
                return Acked {
                    pass,
                    absorbed,
                    after_destroy: Some(prepaid),
                    over: None,
                };
            }
            fill(self.entry(k));
        }
        let o = self.entry(k);
        let paid = n.min(o.prepaid);
        o.prepaid -= paid;
        let rest = n - paid;
        let owed = o.owed();
        if rest <= owed {
            o.acked += rest;
            self.tally.absorbed += paid;
            return Acked {
                pass: rest,
                absorbed: paid,
                after_destroy: None,
                over: None,
            };
        }
        let before = o.clone();
        let pass = if absorb { owed } else { rest };
        o.acked += pass;
        let absorbed = n - pass;
        self.tally.absorbed += absorbed;
        Acked {
            pass,
            absorbed,
            after_destroy: None,
            over: Some(before),
        }
    }

    /// `k`'s counts, if the program got or acked any of its events.
    pub fn get(&self, k: K) -> Option<&V> {
        self.live.get(&k)
    }

    /// The objects tracked, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.live.iter()
    }

    /// A finding named `k`'s unacked events.
    pub fn mark_reported(&mut self, k: K) {
        if let Some(o) = self.live.get_mut(&k) {
            o.reported = true;
        }
    }

    /// Safe mode, before the destroy of `k`: the acks the program owes, counted as passed on now
    /// (the caller passes them on, after the table's lock is dropped). Returns how many, and the
    /// entry; None when `k` is not tracked.
    pub fn prepay(&mut self, k: K) -> Option<(u64, &mut V)> {
        let o = self.live.get_mut(&k)?;
        let owed = o.owed();
        o.acked += owed;
        o.prepaid += owed;
        self.tally.cmsafe_acked += owed;
        Some((owed, o))
    }

    /// The destroy of `k` returned `rc`: on success the object is gone, and remembered a while.
    pub fn destroyed(&mut self, k: K, rc: i32) {
        if rc != 0 {
            return;
        }
        let prepaid = self.live.remove(&k).map_or(0, |o| o.prepaid);
        self.destroyed.remember(k, prepaid);
    }

    /// At exit: the objects whose events were got and never acked, no finding having named
    /// them, by address (`addr` of their key).
    pub fn never_acked(&self, addr: impl Fn(&K) -> usize) -> Vec<(K, V)> {
        let mut v: Vec<(K, V)> = self
            .live
            .iter()
            .filter(|(_, o)| o.owed() > 0 && !o.reported)
            .map(|(&k, o)| (k, o.clone()))
            .collect();
        v.sort_by_key(|(k, _)| addr(k));
        v
    }

    /// How many objects are tracked (live, and destroyed ones remembered).
    #[cfg(test)]
    pub fn sizes(&self) -> (usize, usize) {
        (self.live.len(), self.destroyed.len())
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

    /// An entry as a table makes it: a `Count` and a tag of its own.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    struct Tagged {
        tag: u32,
        count: Count,
    }

    derefs_to_count!(Tagged);

    const A: usize = 0xa000;

    #[test]
    fn got_acked_and_owed() {
        let mut t: Counted<usize, Tagged> = Counted::default();
        t.got(A, 7, 0x100).tag = 3;
        t.got(A, 8, 0x104);
        let o = t.get(A).unwrap();
        assert_eq!(
            (o.got, o.owed(), o.over(), o.last_get, o.tag),
            (2, 2, 0, 0x104, 3)
        );
        assert_eq!(o.threads.describe(), "threads 7, 8");
        let a = t.ack(A, 1, true, |_| panic!("a tracked object filled again"));
        assert_eq!(
            (a.pass, a.absorbed, a.after_destroy, a.over),
            (1, 0, None, None)
        );
        assert_eq!(t.never_acked(|&k| k).len(), 1);
        t.mark_reported(A);
        assert!(t.never_acked(|&k| k).is_empty());
        assert_eq!((t.tally.got, t.tally.acked), (2, 1));
    }

    #[test]
    fn over_acks_pass_in_audit_and_are_absorbed_in_safe() {
        let mut audit: Counted<usize, Tagged> = Counted::default();
        let a = audit.ack(A, 2, false, |o| o.tag = 9);
        let before = a.over.expect("an over-ack");
        assert_eq!((before.got, before.acked, before.tag), (0, 0, 9));
        assert_eq!((a.pass, a.absorbed), (2, 0));
        assert_eq!(audit.get(A).unwrap().over(), 2);
        let mut safe: Counted<usize, Tagged> = Counted::default();
        safe.got(A, 7, 0);
        let a = safe.ack(A, 3, true, |_| {});
        assert_eq!((a.pass, a.absorbed), (1, 2));
        assert_eq!((safe.get(A).unwrap().over(), safe.tally.absorbed), (0, 2));
    }

    #[test]
    fn prepaid_acks_are_absorbed_and_named_after_the_destroy() {
        let mut t: Counted<usize, Tagged> = Counted::default();
        t.got(A, 7, 0);
        t.got(A, 7, 0);
        let (owed, o) = t.prepay(A).unwrap();
        assert_eq!((owed, o.owed(), o.prepaid), (2, 0, 2));
        assert!(t.prepay(0xb000).is_none());
        // A failed destroy keeps the object: the program's own acks are the prepaid ones.
        t.destroyed(A, -1);
        let a = t.ack(A, 1, true, |_| {});
        assert_eq!((a.pass, a.absorbed, a.over), (0, 1, None));
        t.destroyed(A, 0);
        assert_eq!(t.sizes(), (0, 1));
        let a = t.ack(A, 2, true, |_| panic!("a destroyed object's memory read"));
        assert_eq!((a.pass, a.absorbed, a.after_destroy), (0, 2, Some(1)));
        let a = t.ack(A, 2, false, |_| {});
        assert_eq!((a.pass, a.absorbed, a.after_destroy), (2, 0, Some(1)));
        assert_eq!((t.tally.cmsafe_acked, t.tally.absorbed), (2, 3));
        // A new object at the address starts afresh.
        t.got(A, 9, 0);
        assert_eq!(t.sizes(), (1, 0));
        assert_eq!(t.ack(A, 1, true, |_| {}).pass, 1);
    }
}
