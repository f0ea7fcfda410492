//! The copies still held, for one dump: found in one walk of the pool and kept by sequence
//! number, so that the dump prints them among the ring's records in sequence order with no
//! walk per copy.
//!
//! The index has one entry per ring slot and is indexed as the ring is (`seq & mask`). The dump
//! prints the last N sequence numbers, N at most the ring's slots, so no two of them share an
//! entry: an entry keeps the newest copy that lands on it, and an older one it replaced lies
//! a ring's length or more below it, outside what the dump prints.

use crate::errno::Errno;
use crate::flight::ring::Words;
use crate::mapping::Mapping;

#[repr(C)]
struct Entry {
    /// 0: no copy.
    seq: u64,
    words: Words,
}

pub(crate) struct HeldIndex {
    /// `mask + 1` entries, zeroed at the start; None when no copy is held (nothing mapped).
    map: Option<Mapping>,
    mask: u64,
    newest: u64,
}

impl HeldIndex {
    /// The copies `walk` gives (each once: its sequence number and record), for a ring of
    /// `mask + 1` slots. ENOMEM when the index cannot be mapped (one Entry a slot, mapped at the
    /// first copy given).
    pub(crate) fn build(
        mask: u64,
        walk: impl FnOnce(&mut dyn FnMut(u64, Words)),
    ) -> Result<HeldIndex, Errno> {
        let mut index = HeldIndex {
            map: None,
            mask,
            newest: 0,
        };
        let mut failed = false;
        walk(&mut |seq, words| {
            if failed || seq == 0 {
                return;
            }
            let entries = match &index.map {
                Some(m) => m.ptr().cast::<Entry>(),
                None => {
                    let len = (mask as usize + 1) * std::mem::size_of::<Entry>();
                    match Mapping::new(len) {
                        Ok(m) => index.map.insert(m).ptr().cast::<Entry>(),
                        Err(_) => {
                            failed = true;
                            return;
                        }
                    }
                }
            };
            // SAFETY: `seq & mask` is below the mapping's `mask + 1` entries, which are zeroed
            // or written here, and this index's alone.
            let e = unsafe { &mut *entries.add((seq & mask) as usize) };
            if seq > e.seq {
                *e = Entry { seq, words };
            }
            index.newest = index.newest.max(seq);
        });
        if failed {
            return Err(libc::ENOMEM);
        }
        Ok(index)
    }

    /// The newest copy's sequence number, 0 for none.
    pub(crate) fn newest(&self) -> u64 {
        self.newest
    }

    /// Copy `seq`'s record, if it was given and no newer one on its entry.
    pub(crate) fn get(&self, seq: u64) -> Option<Words> {
        let m = self.map.as_ref()?;
        // SAFETY: as in `build`; read only.
        let e = unsafe { &*m.ptr().cast::<Entry>().add((seq & self.mask) as usize) };
        (e.seq == seq && seq != 0).then_some(e.words)
    }
}
