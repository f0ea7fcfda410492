//! Audit mode's copies on guarded pages. Each event handed to the program lives on a page of
//! its own, with its private data; at the program's ack the page becomes inaccessible, so a later
//! read faults. The SIGSEGV handler recognizes our pages, records a use-after-ack, makes the page
//! readable again and lets the program go on (it reads the right bytes: the copy is intact).
//! Faults elsewhere go to the handler that was installed before ours.
//!
//! Acked pages wait in quarantine (FIFO, managed by the tracker) before reuse: a read of a page
//! that was reused for a newer event cannot be told from a legitimate one.

use std::sync::atomic::{AtomicUsize, Ordering};

use cmsafe_core::cm::rdma_cm_event;
use cmsafe_core::event::{param_kind, ParamKind};
use cmsafe_sync::page_state::{self, Occupant, PageState};

use cmsafe_core::fork_lock::ForkSafeMutex;

use crate::audit::{faults, segv};

/// Pages reserved, of the system's size (`page`): 256 MiB of address space with 4K pages, 4 GiB
/// with arm64's 64K ones; committed as used.
pub const PAGES: usize = 65536;
/// Where a copy's private data starts in its page (after the 80-byte rdma_cm_event): the whole
/// copy fits in 4096 bytes, the smallest page.
const PDATA_OFFSET: usize = 128;

/// The system's page size: each copy has a page of its own, sealed by mprotect(2), which works
/// only on whole pages (16K or 64K on some arm64 kernels). Read once before the reservation is
/// made, so that the signal handler, which only looks at our pages once the reservation is
/// published, finds it without a system call.
fn page() -> usize {
    cmsafe_core::page::size()
}

static BASE: AtomicUsize = AtomicUsize::new(0);
/// Each page's state, its event's sequence number, type and id: read by the signal handler, so
/// atomics only, no lock (cmsafe_sync::page_state says who changes what, and the protection a
/// page has in each state).
static STATES: [PageState; PAGES] = [const { PageState::new() }; PAGES];

/// Pages are taken in ring order, so they leave quarantine in the order they are wanted again,
/// and the free pages ahead of the cursor are made writable in runs: one mprotect for up to
/// OPEN_RUN events instead of one each (the seal at the ack stays one per event).
const OPEN_RUN: usize = 64;
/// The ring starts this many pages long and grows by as many whenever a whole lap finds no free
/// page. Every page the ring passes over stays resident once written (sealing keeps the copy),
/// so the ring is kept as short as the pages held at once (live copies plus the quarantine):
/// audit's memory is bounded by that peak, not by how many events a program has had.
const GROW: usize = 2 * OPEN_RUN;

pub struct Ring {
    cursor: usize,
    /// Pages in [cursor, opened_end) are free and already writable.
    opened_end: usize,
    /// The ring is pages [0, limit).
    limit: usize,
}
/// Taken around fork(2) with the preload's other locks (lifecycle.rs): a child forked while
/// another thread takes a page would otherwise find it locked at its first event.
pub static RING_PAGES: ForkSafeMutex<Ring> = ForkSafeMutex::new(Ring {
    cursor: 0,
    opened_end: 0,
    limit: GROW,
});

enum Lap {
    Found(usize),
    Full,
    Failed,
}

impl Ring {
    /// One lap from the cursor: the next free page, made writable with the free ones after it.
    fn lap(&mut self) -> Lap {
        for _ in 0..self.limit {
            let p = self.cursor;
            if p >= self.opened_end {
                if !STATES[p].is_free() {
                    self.advance();
                    self.opened_end = self.cursor;
                    continue;
                }
                let mut n = 1;
                while n < OPEN_RUN && p + n < self.limit && STATES[p + n].is_free() {
                    n += 1;
                }
                if !protect(p, n, libc::PROT_READ | libc::PROT_WRITE) {
                    return Lap::Failed;
                }
                populate(p, n);
                self.opened_end = p + n;
            }
            self.advance();
            return Lap::Found(p);
        }
        Lap::Full
    }

    fn advance(&mut self) {
        self.cursor += 1;
        if self.cursor >= self.limit {
            self.cursor = 0;
            self.opened_end = 0;
        }
    }
}

/// The next free page, writable, taken (LIVE) for the event `occupant`; None when every page is
/// live or in quarantine.
fn take_page(occupant: Occupant) -> Option<usize> {
    let mut r = RING_PAGES.lock();
    loop {
        match r.lap() {
            // Only the ring moves a page out of FREE, under this lock: the take succeeds (a
            // page that did not would be left to a later lap).
            Lap::Found(p) => {
                if STATES[p].take(occupant.seq, occupant.event_type, occupant.id) {
                    return Some(p);
                }
            }
            Lap::Failed => return None,
            Lap::Full if r.limit >= PAGES => return None,
            Lap::Full => {
                let old = r.limit;
                r.limit = (old + GROW).min(PAGES);
                r.cursor = old;
                r.opened_end = old;
            }
        }
    }
}

/// Inlined on the event path: the load and its test; the first call maps out of line.
#[inline]
fn base() -> Option<usize> {
    // Acquire: pairs with the compare-and-swap below that published the mapping.
    let b = BASE.load(Ordering::Acquire);
    if b != 0 {
        return Some(b);
    }
    map_base()
}

#[cold]
#[inline(never)]
fn map_base() -> Option<usize> {
    let size = PAGES * page();
    // SAFETY: an anonymous PROT_NONE reservation.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // AcqRel: publishes our mapping (and the handler installed after it is ours to install);
    // Acquire on failure: the winner's mapping, as above.
    match BASE.compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            segv::install_handler(claim_fault);
            Some(p as usize)
        }
        Err(other) => {
            // Another thread won the race: give ours back.
            // SAFETY: our own fresh mapping.
            unsafe { libc::munmap(p, size) };
            Some(other)
        }
    }
}

/// Sets the protection of `n` pages from `page` on.
fn protect(page: usize, n: usize, prot: i32) -> bool {
    let Some(b) = base() else { return false };
    let size = self::page();
    // SAFETY: pages of our reservation.
    unsafe { libc::mprotect((b + page * size) as *mut libc::c_void, n * size, prot) == 0 }
}

/// Makes `n` pages from `page`, just made writable, writable in the page tables too. A sealed
/// page comes back from mprotect(PROT_NONE -> RW) read-only in its page table entry (Linux only
/// upgrades a PTE to writable on mprotect when it is not PROT_NONE), so each event's copy would
/// otherwise take a write fault: this takes the run's in one madvise(2) instead. Failure
/// (a kernel older than 5.14: EINVAL) only means the faults come one by one, as before.
fn populate(page: usize, n: usize) {
    let Some(b) = base() else { return };
    let size = self::page();
    // SAFETY: pages of our reservation, readable and writable; the advice changes no contents.
    unsafe {
        libc::madvise(
            (b + page * size) as *mut libc::c_void,
            n * size,
            libc::MADV_POPULATE_WRITE,
        )
    };
}

/// Copies `raw` onto a fresh page: the event, and its private data (unless it is a multicast
/// context). Returns the page and the copy, or None when no page can be had.
///
/// # Safety
/// `raw` is a valid, unacked event from librdmacm.
pub unsafe fn copy_to_page(
    raw: *const rdma_cm_event,
    seq: u64,
) -> Option<(u32, *mut rdma_cm_event)> {
    let b = base()?;
    // SAFETY: `raw` is valid (caller).
    let (event_type, id) = unsafe { ((*raw).event, (*raw).id as usize) };
    let occupant = Occupant {
        seq,
        event_type,
        id,
    };
    let page = take_page(occupant)? as u32;
    let at = b + page as usize * self::page();
    let copy = at as *mut rdma_cm_event;
    // SAFETY: the page is ours and writable; `raw` is valid (caller); the struct is plain data.
    unsafe {
        std::ptr::copy_nonoverlapping(raw, copy, 1);
        let qp_type = if (*raw).id.is_null() {
            0
        } else {
            (*(*raw).id).qp_type
        };
        let kind = param_kind((*raw).event, qp_type);
        let (src, len) = match kind {
            ParamKind::Conn => (
                (*raw).param.conn.private_data,
                (*raw).param.conn.private_data_len,
            ),
            ParamKind::Ud => (
                (*raw).param.ud.private_data,
                (*raw).param.ud.private_data_len,
            ),
            // A USER event's arg and bytes cmsafe does not know are kept as copied.
            ParamKind::MulticastContext | ParamKind::Arg | ParamKind::Opaque => {
                (std::ptr::null(), 0)
            }
        };
        if !src.is_null() && len > 0 {
            let dst = (at + PDATA_OFFSET) as *mut u8;
            std::ptr::copy_nonoverlapping(src as *const u8, dst, len as usize);
            match kind {
                ParamKind::Ud => (*copy).param.ud.private_data = dst as *const libc::c_void,
                _ => (*copy).param.conn.private_data = dst as *const libc::c_void,
            }
        }
    }
    Some((page, copy))
}

/// Whether `ptr` is where a copy on one of our pages begins (live, acked or reused since): the
/// program's pointer to one of audit mode's copies, never librdmacm's.
pub fn is_page_copy(ptr: usize) -> bool {
    // Acquire: as in `base`.
    let b = BASE.load(Ordering::Acquire);
    b != 0 && {
        let size = page();
        ptr >= b && ptr < b + PAGES * size && (ptr - b).is_multiple_of(size)
    }
}

/// The program acked the event on `page`: from now on, touching it faults.
pub fn seal(page: u32) {
    // Closed only when it was LIVE: a page in any other state is not this event's any more.
    if STATES[page as usize].seal() {
        protect(page as usize, 1, libc::PROT_NONE);
    }
}

/// The page left quarantine: it may hold another event. It stays inaccessible until then.
pub fn recycle(page: u32) {
    // Sealed at its ack; a page the fault handler opened again is closed before it is freed,
    // so that no new event can take it in between and have it closed under its copy.
    STATES[page as usize].recycle(|| {
        protect(page as usize, 1, libc::PROT_NONE);
    });
}

/// The SIGSEGV handler's question (segv.rs): whether the fault at `addr`, by the code at `at`,
/// is on one of our pages, and so handled here. A read of a sealed copy is recorded as a
/// use-after-ack (faults.rs) and its page opened again, so that the read is retried and finds
/// the copy intact. Async-signal-safe: atomics, mprotect, and the fault queue's line.
fn claim_fault(addr: usize, at: &faults::Context) -> bool {
    // Acquire: the reservation's address was published (Release) after it was mapped.
    let b = BASE.load(Ordering::Acquire);
    // A reservation published means the page size was read (`base`): one atomic load here.
    let size = if b != 0 { self::page() } else { 0 };
    if !(b != 0 && addr >= b && addr < b + PAGES * size) {
        return false;
    }
    let page = (addr - b) / size;
    let open = match STATES[page].fault() {
        page_state::Fault::Reopened(o) | page_state::Fault::Recycled(o) => {
            // SAFETY: gettid is async-signal-safe.
            let thread = unsafe { libc::gettid() };
            faults::record(faults::fault(o, addr, at, thread, -1));
            true
        }
        // Another fault's finding; the page may have been closed after it opened it.
        page_state::Fault::AlreadyOpen => true,
        // Taken for a new event since the fault, and open: the access is retried.
        page_state::Fault::Live => false,
        page_state::Fault::NeverUsed => return false,
    };
    if open {
        // SAFETY: a page of our reservation; mprotect is async-signal-safe on Linux.
        unsafe {
            libc::mprotect(
                (b + page * size) as *mut libc::c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmsafe_sync::page_state::Phase;
    use std::sync::atomic::AtomicU64;

    /// Sequence numbers of the tests' events: tests share the process's pages.
    static SEQ: AtomicU64 = AtomicU64::new(1 << 40);

    fn hold() -> usize {
        // Relaxed: a unique number is all it gives.
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let p = take_page(Occupant {
            seq,
            event_type: 4,
            id: 0x1230,
        })
        .expect("a free page");
        assert_eq!(STATES[p].phase(), (Phase::Live, seq));
        p
    }

    fn release(p: usize) {
        seal(p as u32);
        recycle(p as u32);
        assert!(STATES[p].is_free());
    }

    fn limit() -> usize {
        RING_PAGES.lock().limit
    }

    /// Held by the tests that read a sealed page and look for their fault among the recorded
    /// ones: `drain_faults` empties the process's one queue, so one such test would otherwise
    /// take another's fault.
    static FAULTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn copies_begin_on_the_systems_page_boundaries() {
        let size = page();
        // SAFETY: as in `page::size`.
        assert_eq!(size as libc::c_long, unsafe {
            libc::sysconf(libc::_SC_PAGESIZE)
        });
        let b = base().expect("the reservation");
        assert_eq!(b % size, 0, "mmap gives a page-aligned reservation");
        assert!(is_page_copy(b));
        assert!(is_page_copy(b + 3 * size));
        assert!(is_page_copy(b + (PAGES - 1) * size));
        assert!(!is_page_copy(b + 3 * size + PDATA_OFFSET));
        assert!(!is_page_copy(b + size / 2));
        assert!(!is_page_copy(b + PAGES * size), "past the reservation");
        assert!(!is_page_copy(b - size));
        // A page taken is writable to its last byte, whatever the page size.
        let p = hold();
        let at = b + p * size;
        // SAFETY: the page is ours, live and writable.
        unsafe {
            *((at + size - 1) as *mut u8) = 7;
        }
        // SAFETY: as above.
        assert_eq!(unsafe { *((at + size - 1) as *const u8) }, 7);
        release(p);
    }

    #[test]
    fn a_read_after_the_seal_is_recorded_with_the_code_that_read() {
        let _one = FAULTING.lock().unwrap_or_else(|e| e.into_inner());
        let p = hold();
        let at = base().expect("the reservation") + p * page();
        // SAFETY: the page is ours, live and writable.
        unsafe { (at as *mut u64).write_volatile(0x5eed) };
        seal(p as u32);
        // SAFETY: a read of our sealed page: the handler records it, opens the page and the
        // read is retried, finding the copy intact.
        let v = unsafe { (at as *const u64).read_volatile() };
        assert_eq!(v, 0x5eed);
        let (faults, lost) = faults::drain_faults();
        assert_eq!(lost, 0);
        let f = faults
            .iter()
            .find(|f| f.data_addr == at)
            .expect("the fault recorded");
        // The faulting instruction is this test's (read_volatile is inlined or instantiated
        // here): in this executable, never 0.
        assert_ne!(f.code_addr, 0);
        let object = |addr: usize| {
            // SAFETY: all-zero is a valid Dl_info; dladdr(3) only writes it.
            let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
            // SAFETY: dladdr reads the loader's tables for any address.
            let found = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) };
            assert_ne!(found, 0);
            info.dli_fbase as usize
        };
        let here = hold as fn() -> usize as usize;
        assert_eq!(object(f.code_addr), object(here));
        release(p);
    }

    /// The guard is the run-time page, whole: a seal closes every byte of its page (4K, 16K or
    /// 64K) and nothing of the page after it, whose copy is another event's. A seal of 4096
    /// bytes on a 16K kernel would still close the whole page (mprotect rounds up), but a copy
    /// placed 4096 bytes after another would share its page and be closed with it: the live
    /// neighbour here is written after the seal, at its first and last byte.
    #[test]
    fn a_seal_closes_its_whole_page_and_not_the_next() {
        let _one = FAULTING.lock().unwrap_or_else(|e| e.into_inner());
        let size = page();
        let b = base().expect("the reservation");
        // Pages are taken in ring order: of a few held together (other tests take some too),
        // two are neighbours.
        let held: Vec<usize> = (0..16).map(|_| hold()).collect();
        let p = *held
            .iter()
            .find(|&&p| held.contains(&(p + 1)))
            .expect("two neighbouring pages among those held");
        let (at, next) = (b + p * size, b + (p + 1) * size);
        // SAFETY: both pages are ours, live and writable.
        unsafe {
            ((at + size - 1) as *mut u8).write_volatile(0x5a);
            (next as *mut u8).write_volatile(1);
        }
        seal(p as u32);
        // SAFETY: the neighbour is still live and writable: no fault.
        unsafe {
            (next as *mut u8).write_volatile(2);
            ((next + size - 1) as *mut u8).write_volatile(3);
        }
        // SAFETY: a read of the sealed page's last byte: the handler records it, opens the
        // page and the read is retried, finding the byte written before the seal.
        let v = unsafe { ((at + size - 1) as *const u8).read_volatile() };
        assert_eq!(v, 0x5a);
        let (faults, lost) = faults::drain_faults();
        assert_eq!(lost, 0);
        let ours: Vec<usize> = faults
            .iter()
            .map(|f| f.data_addr)
            .filter(|&a| a >= at && a < next + size)
            .collect();
        assert_eq!(
            ours,
            [at + size - 1],
            "one fault, at the sealed page's last byte"
        );
        held.into_iter().for_each(release);
    }

    #[test]
    fn the_ring_grows_only_to_the_pages_held_at_once() {
        let held: Vec<usize> = (0..300).map(|_| hold()).collect();
        let mut sorted = held.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 300, "each held page is a page of its own");
        // 300 pages held at once: the ring grew from 128 to the next multiple of 128.
        assert_eq!(limit(), 384);
        assert!(held.iter().all(|&p| p < 384));
        held.into_iter().for_each(release);
        // Ten thousand more events, one held at a time: the ring stays where it was.
        for _ in 0..10_000 {
            let p = hold();
            assert!(p < 384, "page {p} beyond the ring");
            release(p);
        }
        assert_eq!(limit(), 384);
    }
}
