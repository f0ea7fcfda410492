//! Audit mode's copies on guarded pages. Each event handed to the program lives on a page of
//! its own, with its private data; at the program's ack the page is closed, so a later read is
//! caught: the reader is named (a use-after-ack) and the page filled again with the copy, so the
//! program goes on reading the right bytes. Two ways to close a page (`Guard`):
//! - userfaultfd (uffd.rs), where the kernel allows it: the page is emptied and its bytes kept
//!   aside; a read by the program's code or by the kernel for a system call waits for the
//!   preload's fault thread, which names it and fills the page. The read returns what it would
//!   without the preload.
//! - otherwise mprotect(PROT_NONE), and the SIGSEGV handler (segv.rs) names the reader and opens
//!   the page; a system call that reads the page fails with EFAULT (said once at start). Faults
//!   elsewhere reach the program's own action.
//!
//! Acked pages wait in quarantine (FIFO, managed by the tracker) before reuse: a read of a page
//! that was reused for a newer event cannot be told from a legitimate one.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use cmsafe_core::cm::rdma_cm_event;
use cmsafe_core::event::{param_kind, ParamKind};
use cmsafe_sync::page_state::{self, Occupant, PageState};

use cmsafe_core::fork_lock::ForkSafeMutex;

use crate::audit::uffd::{self, Answer};
use crate::audit::{faults, segv};
use crate::sys::forked::Mark;

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

/// How pages are closed: not yet chosen, by userfaultfd, or by mprotect and SIGSEGV (a forked
/// child whose pages the parent's userfaultfd served chooses again: `guard`).
static GUARD: AtomicU8 = AtomicU8::new(UNCHOSEN);
const UNCHOSEN: u8 = 0;
const BY_FAULT_THREAD: u8 = 1;
const BY_SIGNAL: u8 = 2;

/// What each page's copy is kept as while it is emptied (userfaultfd): the event and its private
/// data, which end before `KEPT` bytes; the rest of a page is zero.
const KEPT: usize = 512;
/// The kept bytes, `KEPT` per page, in a reservation of their own (committed as pages are used).
static SHADOW: AtomicUsize = AtomicUsize::new(0);
/// Zeros, `OPEN_RUN` pages of them, never written: what a run of free pages is filled with.
static ZEROS: AtomicUsize = AtomicUsize::new(0);

/// Pages are taken in ring order, so they leave quarantine in the order they are wanted again,
/// and the free pages ahead of the cursor are made writable in runs: one mprotect for up to
/// OPEN_RUN events instead of one each (the seal at the ack stays one per event).
const OPEN_RUN: usize = 64;
/// The ring starts this many pages long and grows by as many whenever a whole lap finds no free
/// page. Every page the ring passes over stays resident once written (sealing keeps the copy),
/// so the ring is kept as short as the pages held at once (live copies plus the quarantine):
/// audit's memory is bounded by that peak, not by how many events a program has had.
const GROW: usize = 2 * OPEN_RUN;

/// Pages to a block of `FREE_IN`. The ring's length is a multiple of it (`GROW`, `PAGES`).
const BLOCK: usize = 64;

/// Free pages in each block of `BLOCK` pages: counted down by the ring as it takes one (under
/// its lock), up by `recycle` as one leaves quarantine (under the tracker's). A lap passes a
/// block where none is free at one look: the pages of events a program holds unacked stay in
/// the ring, and with thousands held, a lap that looked at each would cost each event a share
/// of them. Only a hint: the lap still takes a page by its state, so a count read stale costs a
/// page found a lap later, never a page taken twice. Every page starts free.
static FREE_IN: [AtomicU8; PAGES / BLOCK] = [const { AtomicU8::new(BLOCK as u8) }; PAGES / BLOCK];

pub struct Ring {
    cursor: usize,
    /// Pages in [cursor, opened_end) are free and already writable.
    opened_end: usize,
    /// The ring is pages [0, limit).
    limit: usize,
    /// Pages below this were opened once, and have stayed accessible since if the guard is
    /// userfaultfd (not reset when mprotect takes over: `lap` reads the guard first).
    accessible: usize,
    /// Pages and blocks the laps looked at: what taking a page costs (the tests hold it).
    #[cfg(test)]
    looked: usize,
}
/// Taken around fork(2) with the preload's other locks (lifecycle.rs): a child forked while
/// another thread takes a page would otherwise find it locked at its first event.
pub static RING_PAGES: ForkSafeMutex<Ring> = ForkSafeMutex::new(Ring {
    cursor: 0,
    opened_end: 0,
    limit: GROW,
    accessible: 0,
    #[cfg(test)]
    looked: 0,
});

/// Pages in the ring once it was mapped (0 before: no event was closed), for the exit summary:
/// the ring only grows, so this is the most it ever had. A copy of `Ring::limit` because the
/// exit path must not wait for the ring's lock, which the thread it interrupted may hold.
static RING_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The pages the ring has had at most (each a page of memory once used; with userfaultfd an
/// acked page is emptied again).
pub fn ring_pages() -> usize {
    // Relaxed: a figure for the exit summary.
    RING_SIZE.load(Ordering::Relaxed)
}

enum Lap {
    /// The page, and whether this lap opened the run it starts.
    Found(usize, bool),
    Full,
    Failed,
}

impl Ring {
    /// One lap from the cursor: the next free page, made writable with the free ones after it.
    fn lap(&mut self) -> Lap {
        let mut passed = 0;
        let mut opened = false;
        while passed < self.limit {
            let p = self.cursor;
            #[cfg(test)]
            {
                self.looked += 1;
            }
            if p >= self.opened_end {
                // Relaxed: a hint (`FREE_IN`).
                if p.is_multiple_of(BLOCK) && FREE_IN[p / BLOCK].load(Ordering::Relaxed) == 0 {
                    self.pass(BLOCK);
                    passed += BLOCK;
                    continue;
                }
                if !STATES[p].is_free() {
                    self.pass(1);
                    passed += 1;
                    continue;
                }
                let mut n = 1;
                while n < OPEN_RUN && p + n < self.limit && STATES[p + n].is_free() {
                    n += 1;
                }
                // With userfaultfd a page, once opened, stays accessible (emptied, never
                // closed): only pages past those ever opened need the call.
                if !(GUARD.load(Ordering::Acquire) == BY_FAULT_THREAD && p + n <= self.accessible) {
                    if !protect(p, n, libc::PROT_READ | libc::PROT_WRITE) {
                        return Lap::Failed;
                    }
                    self.accessible = self.accessible.max(p + n);
                }
                fill_run(p, n);
                self.opened_end = p + n;
                opened = true;
            }
            self.advance();
            return Lap::Found(p, opened);
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

    /// Past `n` pages that are not free (a block of `n` ends at the limit or before it).
    fn pass(&mut self, n: usize) {
        self.cursor += n - 1;
        self.advance();
        self.opened_end = self.cursor;
    }
}

/// The next free page, writable, taken (LIVE) for the event `occupant`; None when every page is
/// live or in quarantine.
fn take_page(occupant: Occupant) -> Option<usize> {
    guard();
    let mut r = RING_PAGES.lock();
    loop {
        match r.lap() {
            // Only the ring moves a page out of FREE, under this lock: the take succeeds (a
            // page that did not would be left to a later lap).
            Lap::Found(p, opened) => {
                if STATES[p].take(occupant.seq, occupant.event_type, occupant.id) {
                    // Relaxed: a hint (`FREE_IN`).
                    FREE_IN[p / BLOCK].fetch_sub(1, Ordering::Relaxed);
                    if opened {
                        first_touch(p);
                    }
                    return Some(p);
                }
            }
            Lap::Failed => return None,
            Lap::Full if r.limit >= PAGES => return None,
            Lap::Full => {
                let old = r.limit;
                r.limit = (old + GROW).min(PAGES);
                RING_SIZE.store(r.limit, Ordering::Relaxed);
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
        faults::notice(faults::Notice::NoPages(cmsafe_core::errno::get()));
        return None;
    }
    // AcqRel: publishes our mapping (and the handler installed after it is ours to install);
    // Acquire on failure: the winner's mapping, as above.
    match BASE.compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            RING_SIZE.fetch_max(GROW, Ordering::Relaxed);
            if let Some(line) = choose_guard(p as usize, size) {
                crate::sys::cancel::say_err!("{line}");
            }
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

/// How pages are closed, chosen when the reservation is made (module doc): userfaultfd where
/// the kernel gives it, else mprotect and the SIGSEGV handler. Returns what to say (once, with
/// no lock held) when a system call's read of an acked page would fail (EFAULT) where without
/// the preload it works.
fn choose_guard(base: usize, size: usize) -> Option<String> {
    crate::sys::forked::mark(Mark::Pages);
    if crate::sys::config::CONFIG.guard == crate::sys::config::Guard::Mprotect {
        by_signal();
        return None;
    }
    if crate::sys::seccomp::filtered() {
        // A filter may kill the process at a call it does not list: userfaultfd(2) and
        // process_vm_readv(2) are not made (faults.rs copies no stack then).
        faults::no_stack_copies();
        by_signal();
        return Some(
            "==cmsafe== a seccomp filter is in force: audit closes acked events' pages with \
             mprotect and handles SIGSEGV, and makes no userfaultfd(2) or process_vm_readv(2) \
             call the filter may forbid; a system call that reads an acked event's memory fails \
             with EFAULT under audit, where without the preload it reads freed memory, and is not \
             named"
                .to_string(),
        );
    }
    let opened = shadow()
        .and(zeros())
        .ok_or(libc::ENOMEM)
        .and_then(|_| uffd::open(base, size).map_err(|r| r.errno));
    let errno = match opened {
        Ok((reach, fd)) => {
            if uffd::start(fd, answer_fault) {
                GUARD.store(BY_FAULT_THREAD, Ordering::Release);
                return (reach == uffd::Reach::UserOnly).then(|| {
                    "==cmsafe== userfaultfd serves this process's own code only (not root, and \
                     vm.unprivileged_userfaultfd=0): a system call that reads an acked event's \
                     memory fails with EFAULT under audit, where without the preload it reads \
                     freed memory, and is not named"
                        .to_string()
                });
            }
            // The thread could not be started, or could not make its descriptors its own.
            // SAFETY: our own descriptor, which nothing else holds.
            crate::sys::cancel::uncancellable(|| unsafe { libc::close(fd) });
            libc::EAGAIN
        }
        Err(errno) => errno,
    };
    by_signal();
    Some(format!(
        "==cmsafe== userfaultfd refused ({}): audit closes acked events' pages with mprotect and \
         handles SIGSEGV; a system call that reads an acked event's memory fails with EFAULT \
         under audit, where without the preload it reads freed memory, and is not named",
        std::io::Error::from_raw_os_error(errno)
    ))
}

/// Pages closed by mprotect from now on, faults handled by the SIGSEGV handler.
fn by_signal() {
    GUARD.store(BY_SIGNAL, Ordering::Release);
    segv::install_handler(claim_fault);
}

/// How pages are closed. In a child forked (however: fork, _Fork, clone) from a process whose
/// fault thread served them, the pages are no longer registered with anything: chosen again.
#[inline]
fn guard() -> u8 {
    let g = GUARD.load(Ordering::Acquire);
    if g == BY_FAULT_THREAD && crate::sys::forked::since(Mark::Pages) {
        return choose_again();
    }
    g
}

/// In a child of a process whose fault thread served its pages, at its first event: each
/// acked copy, which the parent's userfaultfd emptied and which reads as zeros here, written
/// back (the child does not judge what its parent acked), then a way of the child's own. Done
/// here, not at the fork, so that a child that execs pays nothing for it.
#[cold]
#[inline(never)]
fn choose_again() -> u8 {
    let said = {
        // Two threads of a new child at their first event at once: one chooses.
        let _ring = RING_PAGES.lock();
        match base() {
            Some(b) if crate::sys::forked::since(Mark::Pages) => {
                write_back_acked(b);
                choose_guard(b, PAGES * page())
            }
            _ => None,
        }
    };
    if let Some(line) = said {
        crate::sys::cancel::say_err!("{line}");
    }
    GUARD.load(Ordering::Acquire)
}

/// Writes each acked page's kept copy back (a forked child's pages, no longer registered).
fn write_back_acked(b: usize) {
    let sh = SHADOW.load(Ordering::Acquire);
    let size = page();
    for (p, state) in STATES.iter().enumerate() {
        if state.phase().0 == page_state::Phase::Acked {
            // SAFETY: an acked page of our reservation, accessible and no longer registered
            // (the write fills it with a fresh page), and its kept bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (sh + p * KEPT) as *const u8,
                    (b + p * size) as *mut u8,
                    KEPT,
                )
            };
        }
    }
}

/// A reservation of `KEPT` bytes per page, or of `OPEN_RUN` pages of zeros, made once.
fn reserve(slot: &AtomicUsize, len: usize, prot: i32) -> Option<usize> {
    let at = slot.load(Ordering::Acquire);
    if at != 0 {
        return Some(at);
    }
    // SAFETY: an anonymous reservation.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // Only the thread that won the reservation's race comes here (`map_base`).
    slot.store(p as usize, Ordering::Release);
    Some(p as usize)
}

fn shadow() -> Option<usize> {
    reserve(&SHADOW, PAGES * KEPT, libc::PROT_READ | libc::PROT_WRITE)
}

fn zeros() -> Option<usize> {
    reserve(&ZEROS, OPEN_RUN * page(), libc::PROT_READ)
}

/// With userfaultfd, the first page of a run just opened is read here, taken (LIVE) and with the
/// ring's lock still held, so the rest of the run is still free: the fault thread fills the
/// whole run at once (`answer_fault`: a live page, then the free ones after it). Left to the
/// copy's write, which comes after the lock is let go, the run would be cut short by a page
/// another thread took meanwhile and had not yet written; with threads taking pages at once,
/// each event would then wait for the fault thread. The wait here is one answer of a thread
/// that takes no lock, once a run.
fn first_touch(page: usize) {
    if GUARD.load(Ordering::Acquire) != BY_FAULT_THREAD {
        return;
    }
    let Some(b) = base() else { return };
    // SAFETY: a page of our reservation, accessible (its run was opened in this lap), and ours
    // (LIVE): a read of it is answered, never a finding.
    unsafe { std::ptr::read_volatile((b + page * self::page()) as *const u8) };
}

/// Makes the `n` free pages from `page`, just made accessible, writable in the page tables:
/// with mprotect, `populate`; with userfaultfd they are empty, and the fault thread fills the
/// run when `first_touch` reads its first page (`answer_fault`).
fn fill_run(page: usize, n: usize) {
    if GUARD.load(Ordering::Acquire) != BY_FAULT_THREAD {
        populate(page, n);
    }
}

/// Keeps `page`'s copy aside for the fault thread, while the page is still LIVE: a page the copy
/// never touched is empty, and this read of it must fault as a LIVE page's (filled with zeros),
/// not as an acked one's (a use-after-ack of our own).
fn keep(page: usize) {
    if let (Some(b), Some(sh)) = (base(), shadow()) {
        // SAFETY: the page is ours and accessible, live until the seal that follows; the kept
        // bytes are its slot of the shadow reservation.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (b + page * self::page()) as *const u8,
                (sh + page * KEPT) as *mut u8,
                KEPT,
            )
        };
    }
}

/// Empties `page` (userfaultfd). False when the kernel will not (a locked page: mlockall(2)),
/// which is then closed by mprotect, as every page from then on.
fn empty(page: usize) -> bool {
    let Some(b) = base() else {
        return false;
    };
    let at = b + page * self::page();
    // SAFETY: a page of our reservation; its contents are dropped, as wanted.
    let done =
        unsafe { libc::madvise(at as *mut libc::c_void, self::page(), libc::MADV_DONTNEED) } == 0;
    if !done {
        // Said by the next delivery, outside the tracker's lock that a seal is made under.
        faults::notice(faults::Notice::NoDontneed(cmsafe_core::errno::get()));
        by_signal();
        protect(page, 1, libc::PROT_NONE);
    }
    done
}

/// The fault thread's question (uffd.rs): how to answer a fault at `addr` by thread `tid`, and
/// the finding it makes, said once the fault is answered. As `claim_fault`, but the page is
/// filled rather than opened.
fn answer_fault(addr: usize, tid: i32) -> (Answer, Option<faults::Fault>) {
    let b = BASE.load(Ordering::Acquire);
    let size = page();
    let z = ZEROS.load(Ordering::Acquire) as *const u8;
    if b == 0 || addr < b || addr >= b + PAGES * size {
        return (Answer::Zeros(z, size), None);
    }
    let page = (addr - b) / size;
    let kept = SHADOW.load(Ordering::Acquire) + page * KEPT;
    match STATES[page].fault() {
        page_state::Fault::Reopened(o) | page_state::Fault::Recycled(o) => {
            // Read while the thread waits: its system call and registers, its stack.
            let (syscall, sp, code) = uffd::blocked_thread(tid);
            let at = faults::Context { code, sp, link: 0 };
            let f = faults::fault(o, addr, &at, tid, syscall);
            (Answer::Fill(kept as *const u8, KEPT), Some(f))
        }
        page_state::Fault::AlreadyOpen => (Answer::Wake, None),
        // A page just taken (`first_touch`'s read, or a copy's first write), or a free one: the
        // run of pages the ring takes next, filled at once. Not past the ring's end: the pages
        // there are not yet accessible (another mapping), which would leave the fill to the
        // faulting page alone. Relaxed: a stale, smaller size only shortens the run.
        page_state::Fault::Live | page_state::Fault::NeverUsed => {
            let end = (page + OPEN_RUN)
                .min(RING_SIZE.load(Ordering::Relaxed).max(page + 1))
                .min(PAGES);
            let run = (page..end)
                .take_while(|&p| p == page || STATES[p].is_free())
                .count();
            (Answer::Zeros(z, run * size), None)
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
    let by = guard();
    if by == BY_FAULT_THREAD {
        keep(page as usize);
    }
    // Closed only when it was LIVE: a page in any other state is not this event's any more.
    if STATES[page as usize].seal() {
        if by == BY_FAULT_THREAD {
            empty(page as usize);
        } else {
            protect(page as usize, 1, libc::PROT_NONE);
        }
    }
}

/// The page left quarantine: it may hold another event. It stays inaccessible until then.
pub fn recycle(page: u32) {
    // Sealed at its ack; a page the fault handler opened again is closed before it is freed,
    // so that no new event can take it in between and have it closed under its copy.
    let freed = STATES[page as usize].recycle(|| {
        if GUARD.load(Ordering::Acquire) == BY_FAULT_THREAD {
            empty(page as usize);
        } else {
            protect(page as usize, 1, libc::PROT_NONE);
        }
    });
    if freed {
        // Relaxed: a hint (`FREE_IN`).
        FREE_IN[page as usize / BLOCK].fetch_add(1, Ordering::Relaxed);
    }
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
            faults::record(faults::fault(o, addr, at, thread, faults::USER));
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
        guard_under_test();
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
            ((at + KEPT - 1) as *mut u8).write_volatile(0x5a);
            ((at + size - 1) as *mut u8).write_volatile(0xa5);
            (next as *mut u8).write_volatile(1);
        }
        seal(p as u32);
        // SAFETY: the neighbour is still live and writable: no fault.
        unsafe {
            (next as *mut u8).write_volatile(2);
            ((next + size - 1) as *mut u8).write_volatile(3);
        }
        // SAFETY: a read of the sealed page's last byte: the handler records it, opens (or
        // fills) the page and the read is retried. What a copy holds is back; past it, a filled
        // page is zero (nothing of a copy lies there), an opened one as it was.
        let last = unsafe { ((at + size - 1) as *const u8).read_volatile() };
        // SAFETY: as above, now without a fault.
        let kept = unsafe { ((at + KEPT - 1) as *const u8).read_volatile() };
        assert_eq!(kept, 0x5a);
        let filled = guard_under_test() == BY_FAULT_THREAD;
        assert_eq!(last, if filled { 0 } else { 0xa5 });
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

    /// A system call that reads a sealed copy (the private data written to a pipe after the
    /// ack) returns what it returns without the preload, and the finding names the call; with
    /// mprotect the kernel's read fails (EFAULT), as said at start.
    #[test]
    fn a_system_calls_read_of_a_sealed_page_gets_the_copy() {
        let _one = FAULTING.lock().unwrap_or_else(|e| e.into_inner());
        let g = guard_under_test();
        let p = hold();
        let at = base().expect("the reservation") + p * page() + PDATA_OFFSET;
        // SAFETY: the page is ours, live and writable.
        unsafe { std::ptr::copy_nonoverlapping(b"token:42".as_ptr(), at as *mut u8, 8) };
        seal(p as u32);
        let mut fds = [0; 2];
        // SAFETY: a valid array for pipe(2); a write from our sealed page (the kernel reads it),
        // a read into our own buffer.
        let (wrote, errno, got) = unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let wrote = libc::write(fds[1], at as *const libc::c_void, 8);
            let errno = cmsafe_core::errno::get();
            let mut got = [0u8; 8];
            if wrote == 8 {
                libc::read(fds[0], got.as_mut_ptr().cast(), 8);
            }
            libc::close(fds[0]);
            libc::close(fds[1]);
            (wrote, errno, got)
        };
        let (faults, _) = faults::drain_faults();
        let ours: Vec<_> = faults.iter().filter(|f| f.data_addr == at).collect();
        if g == BY_FAULT_THREAD {
            assert_eq!(wrote, 8, "errno {errno}");
            assert_eq!(&got, b"token:42");
            assert_eq!(ours.len(), 1, "{faults:?}");
            assert_eq!(ours[0].syscall, libc::SYS_write);
        } else {
            assert_eq!((wrote, errno), (-1, libc::EFAULT));
            assert!(ours.is_empty(), "no handler sees the kernel's read");
        }
        release(p);
    }

    /// The guard the tests ran with: the fault thread where the kernel gives userfaultfd (these
    /// tests run as root), mprotect and SIGSEGV when CMSAFE_GUARD says so (the test below).
    fn guard_under_test() -> u8 {
        base().expect("the reservation");
        let g = GUARD.load(Ordering::Acquire);
        if std::env::var("CMSAFE_GUARD").as_deref() == Ok("mprotect") {
            assert_eq!(g, BY_SIGNAL, "CMSAFE_GUARD=mprotect");
        }
        g
    }

    /// The tests that read sealed pages, again in a process of their own with CMSAFE_GUARD=
    /// mprotect: the SIGSEGV handler catches what the fault thread does.
    #[test]
    fn the_mprotect_guard_catches_the_same_reads() {
        if std::env::var_os("CMSAFE_GUARD").is_some() {
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["audit::pages::tests::a_", "--test-threads=1"])
            .env("CMSAFE_GUARD", "mprotect")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("test result: ok. 3 passed"), "{stdout}");
    }

    /// Events held unacked keep their pages in the ring: a lap passes them a block at a time
    /// (`FREE_IN`), so that holding 20,000 events costs each new one no look at them. In a
    /// process of its own: the other tests' ring would see the pages held.
    #[test]
    fn laps_pass_the_pages_of_held_events_a_block_at_a_time() {
        const HELD: usize = 20_000;
        const TAKES: usize = 16_384;
        if std::env::var_os("CMSAFE_TEST_LAPS").is_none() {
            let name = "audit::pages::tests::laps_pass_the_pages_of_held_events_a_block_at_a_time";
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([name, "--exact", "--test-threads=1"])
                .env("CMSAFE_TEST_LAPS", "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("test result: ok. 1 passed"),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let held: Vec<usize> = (0..HELD).map(|_| hold()).collect();
        // The tracker's quarantine: a page is recycled once 4,096 newer ones were acked.
        let mut quarantine = std::collections::VecDeque::new();
        let mut event = || {
            let p = hold();
            seal(p as u32);
            quarantine.push_back(p);
            if quarantine.len() > 4096 {
                let old = quarantine.pop_front().unwrap();
                recycle(old as u32);
            }
        };
        // The quarantine filled (the ring grows meanwhile), then the steady state, counted.
        (0..2 * 4096).for_each(|_| event());
        let before = RING_PAGES.lock().looked;
        (0..TAKES).for_each(|_| event());
        let looked = RING_PAGES.lock().looked - before;
        // One look per page taken, and at each lap (one per quarantine's worth of pages taken)
        // a look per block of held pages. Looked at page by page, the 20,000 held would cost
        // about 80,000 looks in the four laps.
        let laps = TAKES / 4096 + 1;
        assert!(
            looked <= TAKES + laps * (HELD / BLOCK + 2 * BLOCK),
            "{looked} looks for {TAKES} pages taken beside {HELD} held"
        );
        assert!(held.iter().all(|&p| STATES[p].phase().0 == Phase::Live));
    }

    /// Whether `page` of the reservation is in memory (mincore(2)).
    fn resident(page: usize) -> bool {
        let size = self::page();
        let mut v = 0u8;
        // SAFETY: a page-aligned range of our reservation, one byte of result.
        let rc = unsafe {
            libc::mincore(
                (base().expect("the reservation") + page * size) as *mut libc::c_void,
                size,
                &mut v,
            )
        };
        assert_eq!(rc, 0, "mincore");
        v & 1 == 1
    }

    /// With userfaultfd, a page the ring hands out is already filled: its run was filled when
    /// the ring opened it, so no copy's write waits for the fault thread. With 37 pages held
    /// (runs then start off a multiple of 64) and the rest taken and released one at a time,
    /// the ring goes round its whole length: runs open everywhere, those cut by the ring's end
    /// too (the pages past it are free but not yet accessible).
    #[test]
    fn pages_are_filled_before_a_copy_is_written() {
        if guard_under_test() != BY_FAULT_THREAD {
            return;
        }
        let kept: Vec<usize> = (0..37).map(|_| hold()).collect();
        for i in 0..1000 {
            let p = hold();
            assert!(resident(p), "page {p}, the {i}th taken, not filled");
            release(p);
        }
        kept.into_iter().for_each(release);
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
