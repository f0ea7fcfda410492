//! The most recent entries of a map keyed by pointers that come back: cmsafe's slots, cm_ids
//! and channels are all reused for newer objects. Bounded, the oldest forgotten first; an
//! entry ages out only through its own place in the order, never through an older entry of the
//! same key.
//!
//! Users: safe mode's acked copies (`safe`), and in the preload the tracker's acked
//! records and the destroyed ids and channels.

use std::collections::VecDeque;

use crate::PtrMap;

/// What tells a value from an older one stored under the same key: a sequence number, an
/// insertion count. Two values ever stored under one key never share a stamp.
pub trait Stamped {
    fn stamp(&self) -> u64;
}

impl Stamped for u64 {
    fn stamp(&self) -> u64 {
        *self
    }
}

/// At most `cap` values, each under a pointer; inserting past the cap pushes the oldest out.
pub struct Recent<V> {
    map: PtrMap<usize, V>,
    /// Insertion order, oldest first: `(key, stamp)`. An entry whose value was replaced or
    /// removed since is stale, skipped when it comes up and dropped by `compact`.
    order: VecDeque<(usize, u64)>,
    cap: usize,
}

/// Whether `map` still holds the value stamped `stamp` under `key` (and not a newer one).
fn current<V: Stamped>(map: &PtrMap<usize, V>, key: usize, stamp: u64) -> bool {
    map.get(&key).is_some_and(|v| v.stamp() == stamp)
}

impl<V: Stamped> Recent<V> {
    pub fn new(cap: usize) -> Self {
        Recent {
            map: PtrMap::default(),
            order: VecDeque::new(),
            cap,
        }
    }

    /// Entries allowed in the order before `compact`: at most `cap` are live, so at least
    /// `cap + 64` are stale when it runs, and compaction stays amortized O(1).
    fn order_max(&self) -> usize {
        2 * self.cap + 64
    }

    /// Inserts `value` under `key`. `leave` is given each value that leaves: the one that was
    /// under the same key, and the oldest, pushed out by the cap. (A callback rather than a
    /// returned pair: the tracker's records are large, and this runs for every event.)
    #[inline]
    pub fn insert(&mut self, key: usize, value: V, mut leave: impl FnMut(V)) {
        if self.order.capacity() == 0 {
            self.reserve_order();
        }
        self.order.push_back((key, value.stamp()));
        if let Some(old) = self.map.insert(key, value) {
            leave(old);
        }
        // One new key at most: one eviction brings the map back to the cap.
        while self.map.len() > self.cap {
            let Some((old, stamp)) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.remove_if(old, stamp) {
                leave(v);
            }
        }
        if self.order.len() > self.order_max() {
            self.compact();
        }
    }

    /// Once, at its largest: growing by doubling would free buffers past glibc's mmap
    /// threshold, which raises it, so later ones come from the heap and stay resident (a step
    /// in the resident set well after warm-up, seen by the soak test).
    #[cold]
    fn reserve_order(&mut self) {
        self.order.reserve_exact(self.order_max() + 1);
    }

    pub fn get(&self, key: usize) -> Option<&V> {
        self.map.get(&key)
    }

    pub fn contains(&self, key: usize) -> bool {
        self.map.contains_key(&key)
    }

    /// Whether the value stamped `stamp` is still the one under `key`.
    pub fn holds(&self, key: usize, stamp: u64) -> bool {
        current(&self.map, key, stamp)
    }

    /// Removes the value under `key` whatever its stamp (its order entry goes stale).
    pub fn remove(&mut self, key: usize) -> Option<V> {
        self.map.remove(&key)
    }

    /// Removes the value under `key` only if it is the one stamped `stamp`.
    #[inline]
    pub fn remove_if(&mut self, key: usize, stamp: u64) -> Option<V> {
        match self.map.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) if e.get().stamp() == stamp => {
                Some(e.remove())
            }
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The keys held, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.map.keys().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Entries in the order, stale ones included (for tests of the bound).
    pub fn order_len(&self) -> usize {
        self.order.len()
    }

    /// Drops the stale entries, in place: a new collection each time would free a buffer past
    /// the mmap threshold (see `reserve_order`). Amortized O(1): it runs once as many entries
    /// are stale as there can be live ones.
    #[cold]
    fn compact(&mut self) {
        let map = &self.map;
        self.order.retain(|&(key, stamp)| current(map, key, stamp));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts, and returns the values that left.
    fn put(r: &mut Recent<u64>, key: usize, value: u64) -> Vec<u64> {
        let mut left = Vec::new();
        r.insert(key, value, |v| left.push(v));
        left
    }

    #[test]
    fn the_oldest_values_are_pushed_out_at_the_cap() {
        let mut r = Recent::new(4);
        for k in 1..=4u64 {
            assert!(put(&mut r, k as usize, k).is_empty());
        }
        assert_eq!(put(&mut r, 5, 5), [1]);
        assert!(!r.contains(1) && r.contains(2) && r.contains(5));
        assert_eq!(r.len(), 4);
    }

    #[test]
    fn an_old_entry_ageing_out_keeps_the_newer_value_of_its_key() {
        let mut r = Recent::new(3);
        put(&mut r, 0x10, 1);
        put(&mut r, 0x20, 2);
        // The pointer comes back for a newer object: the value it replaces leaves.
        assert_eq!(put(&mut r, 0x10, 3), [1]);
        assert!(put(&mut r, 0x30, 4).is_empty());
        // 0x10's first entry comes up first and is stale: 0x20, the oldest value, goes.
        assert_eq!(put(&mut r, 0x40, 5), [2]);
        assert_eq!(r.get(0x10), Some(&3));
        assert_eq!(r.len(), 3);
        assert!(r.holds(0x30, 4) && !r.holds(0x30, 3));
    }

    #[test]
    fn compaction_keeps_the_live_values_in_their_order() {
        let mut r = Recent::new(4);
        for k in 1..=4u64 {
            put(&mut r, k as usize, k);
        }
        // Key 4 replaced again and again: stale entries pile up until compaction runs.
        let mut stamp = 100;
        while r.order_len() > 4 || stamp == 100 {
            assert_eq!(
                put(&mut r, 4, stamp),
                [if stamp == 100 { 4 } else { stamp - 1 }]
            );
            stamp += 1;
            assert!(stamp < 1000, "never compacted");
        }
        // The live values kept their order: the oldest goes first, key 4 last.
        assert_eq!(put(&mut r, 5, 1000), [1]);
        assert_eq!(put(&mut r, 6, 1001), [2]);
        assert_eq!(put(&mut r, 7, 1002), [3]);
        assert_eq!(put(&mut r, 8, 1003), [stamp - 1]);
        assert!(r.contains(5) && r.contains(8) && r.len() == 4);
    }

    #[test]
    fn removals_leave_no_unbounded_order() {
        let mut r = Recent::new(8);
        // A key inserted and removed again and again never reaches the cap: only compaction
        // keeps the order bounded.
        for s in 0..10_000u64 {
            put(&mut r, 0x10, s);
            assert_eq!(r.remove_if(0x10, s), Some(s));
            assert!(r.order_len() <= 2 * 8 + 64 + 1, "{}", r.order_len());
        }
        assert!(r.is_empty());
        assert_eq!(r.remove_if(0x10, 3), None);
        put(&mut r, 0x10, 7);
        assert_eq!(r.remove_if(0x10, 6), None, "another stamp removes nothing");
        assert_eq!(r.remove(0x10), Some(7));
    }
}
