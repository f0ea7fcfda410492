//! Refcounted values in fixed-size slots, carved out of one reserved address range per pool.
//!
//! Why not `Arc`: a C handle must be checkable. Every handle cmsafe returns lies in its pool's
//! range at a slot boundary, and a slot's magic word says whether it is live, so `_release` of a
//! handle already released, or of a pointer cmsafe never returned, is reported instead of
//! corrupting memory. Freed slots wait in a FIFO quarantine before reuse, which keeps a stale
//! handle detectable for as long as possible. Slots are recycled, so the steady state allocates
//! nothing, and a failed allocation is an error (ENOMEM), never an abort.
//!
//! Each thread keeps a small FIFO of free slots per pool, so the common alloc and release take
//! no lock; slots move between a thread and the pool 32 at a time.

use std::cell::{RefCell, UnsafeCell};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use once_cell::sync::OnceCell;

use crate::fault;
use crate::stats::COUNTERS;

/// Address space reserved per pool (committed as it is used).
const RESERVE_BYTES: usize = 1 << 30;
/// Committed at a time.
const COMMIT_BYTES: usize = 64 << 10;
/// Freed slots that must be waiting in the pool before one is reused.
const QUARANTINE: usize = 1024;
const MAGIC_FREE: u32 = 0xdead_f4ee;
/// A thread reuses one of its freed slots only when it holds more than this many: a released
/// handle stays detectable for at least this many newer allocations in its thread.
pub(crate) const LOCAL_MIN: usize = 128;
/// Beyond this many, a thread gives its oldest free slots back to the pool.
const LOCAL_MAX: usize = 192;
/// Slots moved between a thread and the pool at a time.
const BATCH: usize = 32;
/// Pools with a per-thread cache: see `Pool::new`'s `id`.
const POOLS: usize = 6;

#[repr(C)]
pub(crate) struct Slot<T> {
    magic: AtomicU32,
    refs: AtomicU32,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// Allocation failed (really, or injected by a test).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocError;

struct Arena {
    base: usize,
    /// Bytes committed; slots below `committed / slot size` exist.
    committed: AtomicUsize,
}

/// The pool's free slots, oldest first: a FIFO linked through the free slots themselves (each
/// holds the index of the next in its value's first word), so it costs no memory per slot.
struct FreeList {
    head: u32,
    tail: u32,
    len: usize,
    /// The arena's base and the slot size, once the arena exists.
    base: usize,
    slot: usize,
}

const NO_SLOT: u32 = u32::MAX;

impl FreeList {
    const fn new() -> Self {
        FreeList {
            head: NO_SLOT,
            tail: NO_SLOT,
            len: 0,
            base: 0,
            slot: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn next_word(&self, index: u32) -> *mut u32 {
        (self.base + index as usize * self.slot + VALUE_OFFSET) as *mut u32
    }

    fn push_back(&mut self, index: u32) {
        // SAFETY: a committed, free slot: its value is dead and only this list (held under the
        // pool's lock) writes it; the word is 4-aligned (slots are 8-aligned).
        unsafe { self.next_word(index).write(NO_SLOT) };
        if self.tail == NO_SLOT {
            self.head = index;
        } else {
            // SAFETY: as above, for the current tail.
            unsafe { self.next_word(self.tail).write(index) };
        }
        self.tail = index;
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<u32> {
        if self.head == NO_SLOT {
            return None;
        }
        let index = self.head;
        // SAFETY: a slot on this list: free, committed, its next word written by push_back.
        self.head = unsafe { self.next_word(index).read() };
        if self.head == NO_SLOT {
            self.tail = NO_SLOT;
        }
        self.len -= 1;
        Some(index)
    }
}

/// A thread's free slots of one pool, oldest first.
struct LocalCache {
    free: VecDeque<u32>,
    owner: Option<&'static dyn GiveBack>,
}

/// Where a thread's cache goes when the thread ends.
trait GiveBack: Sync {
    fn give_back(&self, indices: &mut VecDeque<u32>, count: usize);
}

impl Drop for LocalCache {
    fn drop(&mut self) {
        if let Some(pool) = self.owner {
            let n = self.free.len();
            pool.give_back(&mut self.free, n);
        }
    }
}

thread_local! {
    static LOCAL: [RefCell<LocalCache>; POOLS] = const {
        [const { RefCell::new(LocalCache { free: VecDeque::new(), owner: None }) }; POOLS]
    };
}

pub(crate) struct Pool<T> {
    /// Which per-thread cache this pool uses (distinct per pool, below POOLS).
    id: usize,
    /// What a handle of this pool is called in error reports.
    what: &'static str,
    /// The magic word of a live slot: distinct per pool, so one kind of handle passed for
    /// another is caught.
    magic_live: u32,
    arena: OnceCell<Arena>,
    free: Mutex<FreeList>,
    _values: PhantomData<T>,
}

// SAFETY: values are only reached through refcounted slots; T itself must be Send + Sync.
unsafe impl<T: Send + Sync> Sync for Pool<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Send for Pool<T> {}

impl<T: Send + Sync + 'static> GiveBack for Pool<T> {
    fn give_back(&self, indices: &mut VecDeque<u32>, count: usize) {
        let mut list = self.free.lock().unwrap_or_else(|e| e.into_inner());
        // A linked list through the free slots: this never allocates.
        for index in indices.drain(..count.min(indices.len())) {
            list.push_back(index);
        }
    }
}

impl<T: Send + Sync + 'static> Pool<T> {
    pub(crate) const fn new(id: usize, what: &'static str, magic_live: u32) -> Self {
        assert!(id < POOLS);
        Pool {
            id,
            what,
            magic_live,
            arena: OnceCell::new(),
            free: Mutex::new(FreeList::new()),
            _values: PhantomData,
        }
    }

    const SLOT: usize = size_of::<Slot<T>>();

    /// Live slots, counted by their magic word: for statistics, not for hot paths.
    #[cfg(test)]
    pub(crate) fn live(&self) -> u64 {
        let Some(arena) = self.arena.get() else {
            return 0;
        };
        let slots = arena.committed.load(Ordering::Acquire) / Self::SLOT;
        (0..slots)
            .filter(|i| {
                // SAFETY: a committed slot; its header is always initialized.
                let slot = unsafe { &*((arena.base + i * Self::SLOT) as *const Slot<T>) };
                slot.magic.load(Ordering::Relaxed) == self.magic_live
            })
            .count() as u64
    }

    fn arena(&self) -> Result<&Arena, AllocError> {
        self.arena.get_or_try_init(|| {
            // SAFETY: an anonymous PROT_NONE reservation; no memory is touched.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    RESERVE_BYTES,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(AllocError);
            }
            Ok(Arena {
                base: base as usize,
                committed: AtomicUsize::new(0),
            })
        })
    }

    /// Commits the next range of the arena and queues its slots. Called with the free list held.
    fn grow(&self, arena: &Arena, list: &mut FreeList) -> Result<(), AllocError> {
        let old = arena.committed.load(Ordering::Relaxed);
        let new = old + COMMIT_BYTES.max(Self::SLOT.next_multiple_of(4096));
        if new > RESERVE_BYTES {
            return Err(AllocError);
        }
        let (first, last) = (old / Self::SLOT, new / Self::SLOT);
        // SAFETY: [base+old, base+new) lies inside our reservation.
        let rc = unsafe {
            libc::mprotect(
                (arena.base + old) as *mut libc::c_void,
                new - old,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            return Err(AllocError);
        }
        // Published before the slots can be handed out, so `check` sees them.
        arena.committed.store(new, Ordering::Release);
        list.base = arena.base;
        list.slot = Self::SLOT;
        for i in first..last {
            list.push_back(i as u32);
        }
        Ok(())
    }

    /// A new slot holding `value` with one reference.
    #[cfg(test)]
    pub(crate) fn alloc(&'static self, value: T) -> Result<NonNull<Slot<T>>, AllocError> {
        // SAFETY: the closure initializes the whole value.
        unsafe { self.alloc_with(|p| p.write(value)) }
    }

    /// A new slot with one reference, its value written in place by `init`.
    ///
    /// # Safety
    /// `init` initializes every byte of the value it is given a pointer to.
    pub(crate) unsafe fn alloc_with(
        &'static self,
        init: impl FnOnce(*mut T),
    ) -> Result<NonNull<Slot<T>>, AllocError> {
        let index = if fault::should_fail() {
            Err(AllocError)
        } else {
            self.take_index()
        };
        let index = index.inspect_err(|_| {
            COUNTERS.alloc_failures.fetch_add(1, Ordering::Relaxed);
        })?;
        let arena = self
            .arena
            .get()
            .expect("arena exists once an index was taken");
        let slot = (arena.base + index as usize * Self::SLOT) as *mut Slot<T>;
        // SAFETY: the slot is committed, aligned (base is page-aligned and the slot size is a
        // multiple of its alignment) and ours alone: it just left the free list.
        unsafe {
            init((*slot).value.get().cast::<T>());
            (*slot).refs.store(1, Ordering::Relaxed);
            (*slot).magic.store(self.magic_live, Ordering::Release);
        }
        // SAFETY: not null: inside the arena.
        Ok(unsafe { NonNull::new_unchecked(slot) })
    }

    /// A free slot: from this thread's cache, refilled from the pool a batch at a time.
    fn take_index(&'static self) -> Result<u32, AllocError> {
        let local = LOCAL.try_with(|caches| {
            let mut cache = caches[self.id].borrow_mut();
            if cache.owner.is_none() {
                cache
                    .free
                    .try_reserve(LOCAL_MAX + BATCH)
                    .map_err(|_| AllocError)?;
                cache.owner = Some(self);
            }
            // Keep more than LOCAL_MIN waiting, so a slot freed here is reused only after at
            // least LOCAL_MIN newer allocations.
            while cache.free.len() <= LOCAL_MIN {
                let before = cache.free.len();
                self.refill(&mut cache.free)?;
                if cache.free.len() == before {
                    break;
                }
            }
            cache.free.pop_front().ok_or(AllocError)
        });
        // During thread teardown the cache is gone: use the pool directly.
        local.unwrap_or_else(|_| self.take_index_global())
    }

    /// The pool's free list, locked, grown first when it holds `keep` slots or fewer: growing
    /// keeps recently freed slots in quarantine. When growing fails the slots there are reused;
    /// an error only when there are none.
    fn free_list(&self, keep: usize) -> Result<MutexGuard<'_, FreeList>, AllocError> {
        let arena = self.arena()?;
        let mut list = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() <= keep && self.grow(arena, &mut list).is_err() && list.is_empty() {
            return Err(AllocError);
        }
        Ok(list)
    }

    /// Moves a batch from the pool to this thread's cache; fails only when both are empty.
    fn refill(&self, local: &mut VecDeque<u32>) -> Result<(), AllocError> {
        let mut list = match self.free_list(QUARANTINE + BATCH) {
            Ok(list) => list,
            Err(e) if local.is_empty() => return Err(e),
            Err(_) => return Ok(()),
        };
        let n = BATCH.min(list.len());
        local.extend(std::iter::from_fn(|| list.pop_front()).take(n));
        Ok(())
    }

    fn take_index_global(&self) -> Result<u32, AllocError> {
        self.free_list(QUARANTINE)?.pop_front().ok_or(AllocError)
    }

    /// Whether `ptr` is a slot of this pool, and the slot; no claim about its liveness.
    fn slot_of(&self, ptr: *const u8) -> Option<&Slot<T>> {
        let arena = self.arena.get()?;
        let offset = (ptr as usize).checked_sub(arena.base)?;
        if offset % Self::SLOT != 0 || offset + Self::SLOT > arena.committed.load(Ordering::Acquire)
        {
            return None;
        }
        // SAFETY: a committed, aligned slot of our arena; its header is always initialized
        // (zero before first use, then magic/refs).
        Some(unsafe { &*(ptr as *const Slot<T>) })
    }

    /// The live slot behind a handle; reports and aborts on anything else.
    #[cfg(test)]
    pub(crate) fn check(&self, ptr: *const u8, op: &str) -> &Slot<T> {
        let Some(slot) = self.slot_of(ptr) else {
            misuse(format_args!(
                "{op}({ptr:p}): not a {} cmsafe returned",
                self.what
            ))
        };
        match slot.magic.load(Ordering::Acquire) {
            m if m == self.magic_live => slot,
            MAGIC_FREE => misuse(format_args!(
                "{op}({ptr:p}): this {} was already released (double release or use after release)",
                self.what
            )),
            _ => misuse(format_args!(
                "{op}({ptr:p}): not a {} cmsafe returned",
                self.what
            )),
        }
    }

    /// The value of a live slot.
    #[cfg(test)]
    pub(crate) fn value<'a>(&self, slot: &'a Slot<T>) -> &'a T {
        // SAFETY: a live slot holds an initialized value that only its last release drops.
        unsafe { (*slot.value.get()).assume_init_ref() }
    }

    pub(crate) fn retain(&self, slot: &Slot<T>) {
        slot.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Gives one reference back; the last one drops the value and queues the slot.
    pub(crate) fn release(&self, slot: &Slot<T>, op: &str) {
        let before = if slot.refs.load(Ordering::Acquire) == 1 {
            // The one reference left is the caller's: no other thread can retain or release
            // (both take a reference), so no read-modify-write is needed to drop it.
            slot.refs.store(0, Ordering::Relaxed);
            1
        } else {
            slot.refs.fetch_sub(1, Ordering::Release)
        };
        if before == 0 {
            misuse(format_args!(
                "{op}({:p}): this {} has no reference left (released more often than retained)",
                slot as *const Slot<T>, self.what
            ));
        }
        if before != 1 {
            return;
        }
        fence(Ordering::Acquire);
        // SAFETY: the last reference: nobody else can reach the value. Dropped before the cache
        // is borrowed: the value may hold references into other pools.
        unsafe { (*slot.value.get()).assume_init_drop() };
        slot.magic.store(MAGIC_FREE, Ordering::Release);
        let arena = self.arena.get().expect("a live slot has an arena");
        let index = (((slot as *const Slot<T> as usize) - arena.base) / Self::SLOT) as u32;
        let cached = LOCAL.try_with(|caches| {
            let mut cache = caches[self.id].borrow_mut();
            if cache.owner.is_none() {
                return false;
            }
            // Capacity for LOCAL_MAX + BATCH was reserved when the cache was made.
            cache.free.push_back(index);
            if cache.free.len() > LOCAL_MAX {
                self.give_back(&mut cache.free, BATCH);
            }
            true
        });
        if cached != Ok(true) {
            self.give_back_one(index);
        }
    }

    fn give_back_one(&self, index: u32) {
        let mut list = self.free.lock().unwrap_or_else(|e| e.into_inner());
        // A linked list through the free slots: this never allocates.
        list.push_back(index);
    }
}

/// What an address is to a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Not a slot boundary of this pool.
    Foreign,
    /// A slot of this pool, released.
    Free,
    /// A slot of this pool holding a value.
    Live,
}

/// A pool seen through slot addresses: for one kind of value kept in several pools (size
/// classes), so that its handles need not know a slot's size. `slot` arguments are addresses
/// of live slots of this pool.
pub(crate) trait SlotPool: Sync {
    fn classify(&self, ptr: *const u8) -> SlotState;
    fn retain_at(&self, slot: *const u8);
    /// Gives one reference back; the last one frees the slot.
    fn release_at(&self, slot: *const u8, op: &str);
    /// Live slots for which `f` (given the slot's address) holds; for statistics.
    fn count_live(&self, f: &dyn Fn(*const u8) -> bool) -> u64;
}

impl<T: Send + Sync + 'static> SlotPool for Pool<T> {
    fn classify(&self, ptr: *const u8) -> SlotState {
        match self.slot_of(ptr) {
            None => SlotState::Foreign,
            Some(slot) => match slot.magic.load(Ordering::Acquire) {
                m if m == self.magic_live => SlotState::Live,
                MAGIC_FREE => SlotState::Free,
                _ => SlotState::Foreign,
            },
        }
    }

    fn retain_at(&self, slot: *const u8) {
        // SAFETY: per the trait, a live slot of this pool.
        self.retain(unsafe { &*(slot as *const Slot<T>) });
    }

    fn release_at(&self, slot: *const u8, op: &str) {
        // SAFETY: per the trait, a live slot of this pool.
        self.release(unsafe { &*(slot as *const Slot<T>) }, op);
    }

    fn count_live(&self, f: &dyn Fn(*const u8) -> bool) -> u64 {
        let Some(arena) = self.arena.get() else {
            return 0;
        };
        let slots = arena.committed.load(Ordering::Acquire) / Self::SLOT;
        (0..slots)
            .map(|i| (arena.base + i * Self::SLOT) as *const u8)
            .filter(|&p| self.classify(p) == SlotState::Live && f(p))
            .count() as u64
    }
}

/// Where a slot's value begins: after the magic word and the refcount.
pub(crate) const VALUE_OFFSET: usize = 8;
const _: () = assert!(std::mem::offset_of!(Slot<u64>, value) == VALUE_OFFSET);
const _: () = assert!(std::mem::offset_of!(Slot<u64>, refs) == 4);

/// The references a slot of any pool holds now, from its address.
///
/// # Safety
/// `slot` is a committed slot of some pool (its header is always initialized).
pub(crate) unsafe fn refs_of(slot: *const u8) -> u32 {
    // SAFETY: per the contract; `refs` is at offset 4 of every `Slot` (repr(C), asserted above).
    unsafe { &*(slot.add(4) as *const AtomicU32) }.load(Ordering::Acquire)
}

/// A misuse that would corrupt memory if cmsafe went on: report it and abort.
#[cold]
pub(crate) fn misuse(what: std::fmt::Arguments<'_>) -> ! {
    log::error!("cmsafe: {what}; aborting");
    // The log may be routed to a callback that drops it: say it on stderr too.
    eprintln!("cmsafe: {what}; aborting");
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    static POOL: Pool<[u64; 4]> = Pool::new(3, "test value", 0x7e57_0001);
    /// `live` counts the whole pool: tests that assert it must not overlap.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn ptr(slot: NonNull<Slot<[u64; 4]>>) -> *const u8 {
        slot.as_ptr() as *const u8
    }

    #[test]
    fn values_live_until_the_last_reference() {
        let _serial = SERIAL.lock().unwrap();
        let base = POOL.live();
        let a = POOL.alloc([1, 2, 3, 4]).unwrap();
        let slot = POOL.check(ptr(a), "test");
        assert_eq!(POOL.value(slot), &[1, 2, 3, 4]);
        POOL.retain(slot);
        POOL.release(slot, "test");
        assert_eq!(POOL.live(), base + 1, "one reference left");
        assert_eq!(POOL.value(POOL.check(ptr(a), "test")), &[1, 2, 3, 4]);
        POOL.release(slot, "test");
        assert_eq!(POOL.live(), base);
        // The released slot is known as such, not mistaken for live.
        assert_eq!(slot.magic.load(Ordering::Relaxed), MAGIC_FREE);
    }

    #[test]
    fn freed_slots_wait_in_quarantine_before_reuse() {
        let _serial = SERIAL.lock().unwrap();
        let first = POOL.alloc([9; 4]).unwrap();
        POOL.release(POOL.check(ptr(first), "test"), "test");
        let mut later = Vec::new();
        // This thread's cache hands out its oldest free slots first, and only while it holds
        // more than LOCAL_MIN of them.
        for _ in 0..LOCAL_MIN {
            let s = POOL.alloc([0; 4]).unwrap();
            assert_ne!(s, first, "a freed slot came back within the quarantine");
            later.push(s);
        }
        for s in later {
            POOL.release(POOL.check(ptr(s), "test"), "test");
        }
    }

    #[test]
    fn pointers_outside_the_pool_are_not_slots() {
        let _serial = SERIAL.lock().unwrap();
        let s = POOL.alloc([0; 4]).unwrap();
        let local = 5u64;
        assert!(POOL.slot_of(&local as *const u64 as *const u8).is_none());
        assert!(
            POOL.slot_of(ptr(s).wrapping_add(8)).is_none(),
            "not at a slot boundary"
        );
        assert!(POOL.slot_of(ptr(s)).is_some());
        POOL.release(POOL.check(ptr(s), "test"), "test");
    }
}
