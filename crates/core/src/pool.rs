//! Refcounted fixed-size slots in a few size classes, carved out of one reserved address range.
//!
//! Why not malloc or `Arc`: a C handle must be checkable. Every handle cmsafe returns lies in
//! the range at a slot boundary below its class's high-water mark, and a slot's refcount says
//! whether it is live (a slot above the mark was never handed out), so `_release` of a handle
//! already released, or of a pointer cmsafe never returned, is reported instead of corrupting
//! memory. Freed slots wait in a FIFO quarantine before reuse, which keeps a stale
//! handle detectable for as long as possible. Slots are recycled, so the steady state allocates
//! nothing, and a failed allocation is an error (ENOMEM), never an abort.
//!
//! Each class has its own fixed part of the range, so a slot's class and index follow from its
//! address (a subtraction, a shift and a multiply). Slots never used are handed out in address
//! order, so memory is touched only by slots in use or in quarantine. Each thread keeps a small
//! FIFO of free slots per class ([`Cache`]), so the common alloc and release take no lock; slots
//! move between a thread and the shared free lists 32 at a time.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use cmsafe_sync::{Released, SlotRefs};
use once_cell::sync::OnceCell;

use crate::fault;
use crate::fork_lock::{ForkSafeGuard, ForkSafeMutex};

/// Size classes.
pub(crate) const CLASSES: usize = 5;
/// Address space per class (committed as it is used): a class's range is 1 << RANGE_SHIFT.
/// Under Miri, which maps memory only readable and writable and holds all of it, a range of a
/// megabyte, mapped so at once (`base`, `take_fresh`): enough for the tests it runs.
const RANGE_SHIFT: u32 = if cfg!(miri) { 20 } else { 30 };
const RANGE: usize = 1 << RANGE_SHIFT;
/// Committed at a time: a multiple of every page size (4K, 16K, 64K), so each mprotect(2) of
/// the next part starts on a page boundary.
const COMMIT_BYTES: usize = 64 << 10;
/// Freed slots that must be waiting in a class before one is reused.
const QUARANTINE: usize = 1024;
/// A thread reuses one of its freed slots only when it holds more than this many: a released
/// handle stays detectable for at least this many newer allocations in its thread.
pub(crate) const LOCAL_MIN: usize = 128;
/// Beyond this many, a thread gives its oldest free slots back to the shared list.
const LOCAL_MAX: usize = 192;
/// Slots moved between a thread and the shared list at a time.
const BATCH: usize = 32;
/// A thread's ring of free slots per class: room for LOCAL_MAX + BATCH, a power of two.
const RING: usize = 256;
const _: () = assert!(RING >= LOCAL_MAX + BATCH && RING.is_power_of_two());

/// Where a slot's value begins: after its references ([`SlotRefs`], all of them 0 in a free
/// slot), which every slot begins with.
pub(crate) const VALUE_OFFSET: usize = 8;
const _: () = assert!(std::mem::size_of::<SlotRefs>() == VALUE_OFFSET);

/// Allocation failed (really, or injected by a test).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocError;

/// What an address is to a slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Not a slot boundary of this slab.
    Foreign,
    /// A slot of this slab, released.
    Free,
    /// A slot of this slab holding a value.
    Live,
}

const NO_SLOT: u32 = u32::MAX;

/// One class's shared free slots: a FIFO of freed ones, linked through the slots themselves
/// (each holds the index of the next in its value's first word); the never-used ones are above
/// the class's `fresh` mark.
struct FreeList {
    head: u32,
    tail: u32,
    len: usize,
    /// The address of slot 0's link word, once the reservation exists.
    first: usize,
    size: usize,
}

impl FreeList {
    const fn new() -> Self {
        FreeList {
            head: NO_SLOT,
            tail: NO_SLOT,
            len: 0,
            first: 0,
            size: 0,
        }
    }

    fn link(&self, index: u32) -> *mut u32 {
        (self.first + index as usize * self.size) as *mut u32
    }

    fn push_back(&mut self, index: u32) {
        // SAFETY: a committed, free slot: its value is dead and only this list (held under its
        // lock) writes it; the word is 4-aligned (slots are 8-aligned).
        unsafe { self.link(index).write(NO_SLOT) };
        if self.tail == NO_SLOT {
            self.head = index;
        } else {
            // SAFETY: as above, for the current tail.
            unsafe { self.link(self.tail).write(index) };
        }
        self.tail = index;
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<u32> {
        if self.head == NO_SLOT {
            return None;
        }
        let index = self.head;
        // SAFETY: a slot on this list: free, committed, its link written by push_back.
        self.head = unsafe { self.link(index).read() };
        if self.head == NO_SLOT {
            self.tail = NO_SLOT;
        }
        self.len -= 1;
        Some(index)
    }
}

struct Class {
    /// Bytes of the class's range that are readable; slots below `committed / size` exist.
    committed: AtomicUsize,
    /// Slots below this were handed out at least once (written under `list`'s lock).
    fresh: AtomicU32,
    /// Fork-safe: `Slab::lock_for_fork` takes it before a fork(2).
    list: ForkSafeMutex<FreeList>,
}

/// Slots of `CLASSES` sizes.
pub(crate) struct Slab {
    sizes: [usize; CLASSES],
    /// `u64::MAX / size + 1` per class: divides and tests divisibility by a multiply
    /// (Lemire et al., "Faster remainder by direct computation"), for offsets below 2^32.
    recip: [u64; CLASSES],
    /// What a handle of this slab is called in error reports.
    what: &'static str,
    base: OnceCell<usize>,
    classes: [Class; CLASSES],
}

/// A thread's free slots of one class, oldest first. Cells, not a RefCell: no borrow flag to
/// check, and nothing is held across a call.
struct Ring {
    index: [Cell<u32>; RING],
    head: Cell<usize>,
    len: Cell<usize>,
}

impl Ring {
    fn pop_front(&self) -> Option<u32> {
        let len = self.len.get();
        if len == 0 {
            return None;
        }
        let head = self.head.get();
        self.head.set((head + 1) % RING);
        self.len.set(len - 1);
        Some(self.index[head].get())
    }

    fn push_back(&self, index: u32) {
        let len = self.len.get();
        debug_assert!(len < RING);
        self.index[(self.head.get() + len) % RING].set(index);
        self.len.set(len + 1);
    }
}

/// A thread's free slots of a slab, per class; they go back to the slab when the thread ends.
pub(crate) struct Cache {
    rings: [Ring; CLASSES],
    owner: Cell<Option<&'static Slab>>,
}

impl Cache {
    pub(crate) const fn new() -> Self {
        Cache {
            rings: [const {
                Ring {
                    index: [const { Cell::new(0) }; RING],
                    head: Cell::new(0),
                    len: Cell::new(0),
                }
            }; CLASSES],
            owner: Cell::new(None),
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        if let Some(slab) = self.owner.get() {
            for (class, ring) in self.rings.iter().enumerate() {
                // A thread's caches are dropped at its end, and at exit(3) for the exiting
                // thread: from a signal handler that interrupted this thread inside a list's
                // lock, that list is the thread's own and waiting for it is forever. The ring's
                // slots are then left where they are (the thread, or the process, is ending).
                if slab.classes[class].list.held_here() {
                    continue;
                }
                slab.give_back(class, ring, ring.len.get());
            }
        }
    }
}

impl Slab {
    /// `sizes`: each a multiple of 8, at least 16 (header and link word), at most 2^20.
    pub(crate) const fn new(sizes: [usize; CLASSES], what: &'static str) -> Self {
        let mut recip = [0; CLASSES];
        let mut i = 0;
        while i < CLASSES {
            assert!(sizes[i] % 8 == 0 && sizes[i] >= 16 && sizes[i] <= 1 << 20);
            recip[i] = u64::MAX / sizes[i] as u64 + 1;
            i += 1;
        }
        Slab {
            sizes,
            recip,
            what,
            base: OnceCell::new(),
            classes: [const {
                Class {
                    committed: AtomicUsize::new(0),
                    fresh: AtomicU32::new(0),
                    list: ForkSafeMutex::new(FreeList::new()),
                }
            }; CLASSES],
        }
    }

    fn base(&self) -> Result<usize, AllocError> {
        self.base
            .get_or_try_init(|| {
                let (prot, flags) = if cfg!(miri) {
                    (libc::PROT_READ | libc::PROT_WRITE, 0)
                } else {
                    (libc::PROT_NONE, libc::MAP_NORESERVE)
                };
                // SAFETY: an anonymous reservation (PROT_NONE but under Miri); no memory is
                // touched.
                let base = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        CLASSES * RANGE,
                        prot,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                        -1,
                        0,
                    )
                };
                if base == libc::MAP_FAILED {
                    return Err(AllocError);
                }
                Ok(base as usize)
            })
            .copied()
    }

    /// Every class's shared list, held until `unlock_after_fork` (pthread_atfork): a child
    /// never inherits one held by a thread it does not have. No thread holds two at once.
    pub(crate) fn lock_for_fork(&'static self) {
        for c in &self.classes {
            c.list.lock_for_fork();
        }
    }

    pub(crate) fn unlock_after_fork(&'static self) {
        for c in self.classes.iter().rev() {
            c.list.unlock_after_fork();
        }
    }

    fn slot_addr(&self, base: usize, class: usize, index: u32) -> usize {
        base + (class << RANGE_SHIFT) + index as usize * self.sizes[class]
    }

    /// The class's shared list, locked, its addresses known.
    fn list(&self, class: usize) -> Result<ForkSafeGuard<'_, FreeList>, AllocError> {
        let base = self.base()?;
        let mut list = self.classes[class].list.lock();
        if list.first == 0 {
            list.first = base + (class << RANGE_SHIFT) + VALUE_OFFSET;
            list.size = self.sizes[class];
        }
        Ok(list)
    }

    /// Bytes of the slab committed (readable and writable), over every class: they are never
    /// given back, so this is the most its slots ever held.
    pub(crate) fn committed(&self) -> usize {
        // Relaxed: a figure for a summary, ordered with nothing.
        self.classes
            .iter()
            .map(|c| c.committed.load(Ordering::Relaxed))
            .sum()
    }

    /// A never-used slot, committing more of the range when needed.
    fn take_fresh(&self, class: usize, list: &mut FreeList) -> Option<u32> {
        let size = self.sizes[class];
        // Only ever written under the list's lock, which the caller holds.
        let fresh = self.classes[class].fresh.load(Ordering::Relaxed);
        let end = (fresh as usize + 1) * size;
        let committed = &self.classes[class].committed;
        let old = committed.load(Ordering::Relaxed);
        if end > old {
            let new = old + COMMIT_BYTES.max(size.next_multiple_of(crate::page::size()));
            if new > RANGE {
                return None;
            }
            let start = list.first - VALUE_OFFSET + old;
            // Under Miri the whole range is mapped readable and writable already.
            let rc = if cfg!(miri) {
                0
            } else {
                // SAFETY: [start, start + new - old) lies inside this class's reserved range.
                unsafe {
                    libc::mprotect(
                        start as *mut libc::c_void,
                        new - old,
                        libc::PROT_READ | libc::PROT_WRITE,
                    )
                }
            };
            if rc != 0 {
                return None;
            }
            // Published before the slot is handed out, so `locate` sees it.
            committed.store(new, Ordering::Release);
        }
        self.classes[class]
            .fresh
            .store(fresh + 1, Ordering::Release);
        Some(fresh)
    }

    /// A slot for the shared list's caller: a freed one once more than `keep` wait in
    /// quarantine, else a never-used one; when there is none of those, a quarantined one.
    fn take_shared(&self, class: usize, list: &mut FreeList, keep: usize) -> Option<u32> {
        if list.len > keep {
            return list.pop_front();
        }
        self.take_fresh(class, list).or_else(|| list.pop_front())
    }

    /// A free slot of `class`: from the thread's cache (refilled a batch at a time), else from
    /// the shared list.
    fn take_index(&'static self, class: usize, cache: Option<&Cache>) -> Result<u32, AllocError> {
        let Some(cache) = cache else {
            let mut list = self.list(class)?;
            return self
                .take_shared(class, &mut list, QUARANTINE)
                .ok_or(AllocError);
        };
        if cache.owner.get().is_none() {
            cache.owner.set(Some(self));
        }
        let ring = &cache.rings[class];
        // Keep more than LOCAL_MIN waiting, so a slot freed here is reused only after at least
        // LOCAL_MIN newer allocations.
        if ring.len.get() <= LOCAL_MIN {
            self.refill(class, ring)?;
        }
        ring.pop_front().ok_or(AllocError)
    }

    #[cold]
    fn refill(&self, class: usize, ring: &Ring) -> Result<(), AllocError> {
        let mut list = match self.list(class) {
            Ok(list) => list,
            Err(e) if ring.len.get() == 0 => return Err(e),
            Err(_) => return Ok(()),
        };
        while ring.len.get() <= LOCAL_MIN {
            for _ in 0..BATCH {
                match self.take_shared(class, &mut list, QUARANTINE + BATCH) {
                    Some(index) => ring.push_back(index),
                    // Out of memory: what the ring holds is used, quarantine or not.
                    None if ring.len.get() > 0 => return Ok(()),
                    None => return Err(AllocError),
                }
            }
        }
        Ok(())
    }

    /// Moves the `count` oldest slots of `ring` to the shared list.
    fn give_back(&self, class: usize, ring: &Ring, count: usize) {
        let Ok(mut list) = self.list(class) else {
            return;
        };
        // A linked list through the free slots: this never allocates.
        for _ in 0..count {
            match ring.pop_front() {
                Some(index) => list.push_back(index),
                None => break,
            }
        }
    }

    /// A new slot of `class` with one reference (held on its buffer alone when `buf`: see
    /// [`SlotRefs`]), its value (from [`VALUE_OFFSET`]) written in place by `init`, given the
    /// slot's address.
    ///
    /// # Safety
    /// `init` writes only inside the slot's value, and whatever its readers read.
    pub(crate) unsafe fn alloc_with(
        &'static self,
        class: usize,
        cache: Option<&Cache>,
        buf: bool,
        init: impl FnOnce(*mut u8),
    ) -> Result<*const u8, AllocError> {
        if fault::should_fail() {
            return Err(AllocError);
        }
        let index = self.take_index(class, cache)?;
        let base = *self.base.get().expect("a slot was taken");
        let slot = self.slot_addr(base, class, index) as *mut u8;
        init(slot);
        // Published: a thread that is handed the slot sees what `init` wrote.
        Self::refs_of(slot).publish(buf);
        Ok(slot)
    }

    /// The class and index of the committed slot at `ptr`; None when `ptr` is not one.
    fn locate(&self, ptr: *const u8) -> Option<(usize, u32)> {
        let offset = (ptr as usize).checked_sub(*self.base.get()?)?;
        let class = offset >> RANGE_SHIFT;
        if class >= CLASSES {
            return None;
        }
        let within = (offset & (RANGE - 1)) as u64;
        let recip = self.recip[class];
        // Lemire's test: `within` is a multiple of the size iff this product is below recip.
        if within.wrapping_mul(recip) >= recip
            || within as usize + self.sizes[class]
                > self.classes[class].committed.load(Ordering::Acquire)
        {
            return None;
        }
        Some((class, ((recip as u128 * within as u128) >> 64) as u32))
    }

    /// The references of a committed slot.
    pub(crate) fn refs_of(slot: *const u8) -> &'static SlotRefs {
        // SAFETY: callers pass committed slots, 8-aligned; their first word is always
        // initialized (zero before first use), only ever accessed as `SlotRefs`, and committed
        // memory is never given back.
        unsafe { SlotRefs::at(slot) }
    }

    pub(crate) fn classify(&self, ptr: *const u8) -> SlotState {
        match self.locate(ptr) {
            Some((class, index)) if index < self.classes[class].fresh.load(Ordering::Acquire) => {
                if Self::refs(ptr) > 0 {
                    SlotState::Live
                } else {
                    SlotState::Free
                }
            }
            _ => SlotState::Foreign,
        }
    }

    /// The references a live slot holds now.
    pub(crate) fn refs(slot: *const u8) -> u32 {
        Self::refs_of(slot).refs()
    }

    /// One more reference to a live slot (not one held on its buffer alone).
    pub(crate) fn retain(slot: *const u8) {
        Self::refs_of(slot).retain_event();
    }

    /// Gives one reference back to a live slot of this slab (not one held on its buffer
    /// alone); the last one frees the slot, into `cache` when there is one. The value needs no
    /// drop. One read-modify-write decides, so of two threads giving back the same last
    /// reference one frees and the other is reported. `last` runs before the last reference's
    /// free, while the slot is still the caller's alone.
    pub(crate) fn release(
        &'static self,
        slot: *const u8,
        cache: Option<&Cache>,
        op: &str,
        last: impl FnOnce(),
    ) {
        match Self::refs_of(slot).release_event() {
            Released::Kept => {}
            Released::Last => {
                last();
                self.free(slot, cache);
            }
            Released::Misuse => misuse(format_args!(
                "{op}({slot:p}): this {} has no reference left (released more often than retained)",
                self.what
            )),
        }
    }

    /// Frees a live slot of this slab whose last reference the caller saw go
    /// ([`Released::Last`]), into `cache` when there is one.
    #[inline]
    pub(crate) fn free(&'static self, slot: *const u8, cache: Option<&Cache>) {
        let (class, index) = self.locate(slot).expect("a live slot of this slab");
        match cache {
            // Also on a thread that only releases (copies cross threads): its cache fills up
            // and hands slots back BATCH at a time, one lock per batch.
            Some(cache) => {
                if cache.owner.get().is_none() {
                    cache.owner.set(Some(self));
                }
                let ring = &cache.rings[class];
                ring.push_back(index);
                if ring.len.get() > LOCAL_MAX {
                    self.give_back(class, ring, BATCH);
                }
            }
            None => {
                if let Ok(mut list) = self.list(class) {
                    list.push_back(index);
                }
            }
        }
    }

    /// Live slots for which `f` (given the slot's address) holds; for statistics.
    pub(crate) fn count_live(&self, f: &dyn Fn(*const u8) -> bool) -> u64 {
        let mut n = 0;
        self.for_each_live(&mut |p| n += f(p) as u64);
        n
    }

    /// Calls `f` with each live slot's address, in one walk of the slots committed: no
    /// allocation, no lock (the flight recorder's dump walks on a misuse's abort path).
    pub(crate) fn for_each_live(&self, f: &mut dyn FnMut(*const u8)) {
        let Some(&base) = self.base.get() else {
            return;
        };
        for class in 0..CLASSES {
            let size = self.sizes[class];
            let slots = self.classes[class].committed.load(Ordering::Acquire) / size;
            #[cfg(test)]
            WALKED.set(WALKED.get() + slots as u64);
            for i in 0..slots as u32 {
                let p = self.slot_addr(base, class, i) as *const u8;
                if self.classify(p) == SlotState::Live {
                    f(p);
                }
            }
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Slots this thread's walks of a slab visited (`for_each_live`), for tests of how many walks
    /// something takes.
    pub(crate) static WALKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
impl Slab {
    /// Runs `f` while this thread holds class `class`'s shared list.
    pub(crate) fn with_list_held(&self, class: usize, f: impl FnOnce()) {
        let _list = self.list(class).expect("the range is reserved");
        f();
    }

    /// Whether no thread holds class `class`'s shared list.
    pub(crate) fn list_is_free(&self, class: usize) -> bool {
        self.classes[class].list.try_lock().is_some()
    }
}

/// What a misuse's abort runs before it aborts: the flight recorder's dump, once the recorder
/// was set up (`flight::set_size`).
pub(crate) static ABORT_DUMP: OnceCell<fn()> = OnceCell::new();

/// A misuse that would corrupt memory if cmsafe went on: report it and abort.
///
/// Nothing between here and the abort may unwind: a panic would reach the C boundary's
/// `catch_unwind` and become a normal return from the misused call.
#[cold]
pub(crate) fn misuse(what: std::fmt::Arguments<'_>) -> ! {
    // A `log` logger the host installed may panic: the abort comes all the same.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        log::error!("cmsafe: {what}; aborting")
    }));
    // The log may be routed to a callback that drops it: say it on stderr too, with a write
    // that cannot panic when stderr fails.
    crate::stderr::line(format_args!("cmsafe: {what}; aborting"));
    // The last events before it, so that they survive the abort (the dump allocates nothing
    // and takes no lock).
    if let Some(dump) = ABORT_DUMP.get() {
        dump();
    }
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    static SLAB: Slab = Slab::new([16, 24, 40, 144, 624], "test value");
    thread_local! {
        static CACHE: Cache = const { Cache::new() };
    }

    fn alloc(class: usize, value: u64) -> *const u8 {
        CACHE.with(|c| {
            // SAFETY: writes the first word of the value, inside every class's slot.
            unsafe {
                SLAB.alloc_with(class, Some(c), false, |s| {
                    (s.add(VALUE_OFFSET) as *mut u64).write(value)
                })
            }
            .unwrap()
        })
    }

    fn release(slot: *const u8) {
        CACHE.with(|c| SLAB.release(slot, Some(c), "test", || {}));
    }

    fn live() -> u64 {
        SLAB.count_live(&|_| true)
    }

    /// `live` counts the whole slab: tests that assert it must not overlap.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn values_live_until_the_last_reference() {
        let _serial = SERIAL.lock().unwrap();
        let base = live();
        let a = alloc(3, 42);
        assert_eq!(SLAB.classify(a), SlotState::Live);
        assert_eq!(SLAB.locate(a).map(|(class, _)| class), Some(3));
        Slab::retain(a);
        release(a);
        assert_eq!(live(), base + 1, "one reference left");
        release(a);
        assert_eq!(live(), base);
        // The released slot is known as such, not mistaken for live.
        assert_eq!(SLAB.classify(a), SlotState::Free);
    }

    #[test]
    fn freed_slots_wait_in_quarantine_before_reuse() {
        let _serial = SERIAL.lock().unwrap();
        for class in 0..CLASSES {
            let first = alloc(class, 9);
            release(first);
            // This thread's cache hands out its oldest free slots first, and only while it
            // holds more than LOCAL_MIN of them.
            let later: Vec<_> = (0..LOCAL_MIN).map(|_| alloc(class, 0)).collect();
            assert!(!later.contains(&first), "a freed slot came back early");
            later.into_iter().for_each(release);
        }
    }

    #[test]
    fn slots_released_on_another_thread_are_reused() {
        let _serial = SERIAL.lock().unwrap();
        let base = live();
        let slots: Vec<usize> = (0..1000).map(|i| alloc(1, i) as usize).collect();
        std::thread::spawn(move || slots.into_iter().for_each(|s| release(s as *const u8)))
            .join()
            .unwrap();
        assert_eq!(live(), base);
    }

    #[test]
    fn pointers_outside_the_slab_are_not_slots() {
        let _serial = SERIAL.lock().unwrap();
        let s = alloc(4, 1);
        let local = 5u64;
        assert_eq!(
            SLAB.classify(&local as *const u64 as *const u8),
            SlotState::Foreign
        );
        assert_eq!(
            SLAB.classify(s.wrapping_add(8)),
            SlotState::Foreign,
            "not at a slot boundary"
        );
        assert_eq!(SLAB.classify(s), SlotState::Live);
        release(s);
    }

    #[test]
    fn division_by_multiply_is_exact() {
        for size in [16usize, 24, 144, 200, 272, 400, 624] {
            let recip = u64::MAX / size as u64 + 1;
            for within in (0..1u64 << 20).chain((RANGE as u64 - 4096)..RANGE as u64) {
                let divisible = within.wrapping_mul(recip) < recip;
                assert_eq!(divisible, within % size as u64 == 0, "{within} % {size}");
                let q = ((recip as u128 * within as u128) >> 64) as u64;
                assert_eq!(q, within / size as u64);
            }
        }
    }
}
