//! How long events were held before their ack, in a fixed log-linear histogram: the same 8 KiB
//! however long the program runs (audit in staging for days is the intended use). Each value is
//! kept to within 1/16 of itself; the maximum is exact.

/// Sub-buckets per power of two.
const SUB: u64 = 16;
const SUB_BITS: u32 = 4;
/// Values below SUB exactly, then 16 buckets for each power of two from 2^4 to 2^63.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;

pub struct Held {
    counts: [u64; BUCKETS],
    n: u64,
    max: u64,
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS
    let sub = (v >> (e - SUB_BITS)) - SUB;
    (SUB + (e - SUB_BITS) as u64 * SUB + sub) as usize
}

/// The middle of bucket `b`'s range.
fn value(b: usize) -> u64 {
    let b = b as u64;
    if b < SUB {
        return b;
    }
    let e = (b - SUB) / SUB + SUB_BITS as u64;
    let sub = (b - SUB) % SUB;
    let width = 1u64 << (e - SUB_BITS as u64);
    (SUB + sub) * width + width / 2
}

impl Held {
    pub const fn new() -> Self {
        Held {
            counts: [0; BUCKETS],
            n: 0,
            max: 0,
        }
    }

    pub fn add(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.n += 1;
        self.max = self.max.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The median (the value of rank n/2), to within 1/16; 0 when empty.
    pub fn median(&self) -> u64 {
        let rank = self.n / 2;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return value(b).min(self.max);
            }
        }
        0
    }

    pub fn clear(&mut self) {
        *self = Held::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_values_within_a_sixteenth() {
        for v in [
            0u64,
            1,
            15,
            16,
            17,
            31,
            32,
            1000,
            15_000,
            1_643_000,
            u64::MAX / 3,
        ] {
            let got = value(bucket(v));
            let err = got.abs_diff(v) as f64;
            assert!(err <= v as f64 / 16.0 + 0.5, "{v} -> {got}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn median_and_max() {
        let mut h = Held::new();
        assert_eq!((h.count(), h.median(), h.max()), (0, 0, 0));
        for v in [10_000u64, 20_000, 30_000, 40_000, 5_000_000] {
            h.add(v);
        }
        assert_eq!(h.count(), 5);
        assert_eq!(h.max(), 5_000_000);
        let m = h.median();
        assert!((28_125..=31_875).contains(&m), "median {m}");
        h.clear();
        assert_eq!(h.count(), 0);
    }
}
