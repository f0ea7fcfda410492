//! Where a call came from: the first stack frame outside this library, named with dladdr(3).

use std::ffi::CStr;

use crate::sys::printable::printable;

/// An address in the program, and whether it lies in librdmacm itself (synchronous ids and
/// rsockets make librdmacm get and ack events on its own behalf).
#[derive(Clone, Copy, Debug, Default)]
pub struct Caller {
    pub addr: usize,
    pub in_librdmacm: bool,
}

fn object_base(addr: usize) -> Option<(usize, String)> {
    // SAFETY: all-zero is a valid Dl_info; dladdr only reads the address.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0 {
        return None;
    }
    let name = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: non-NULL, NUL-terminated.
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    };
    Some((info.dli_fbase as usize, name))
}

/// Loaded objects' code ranges: this library's own, and librdmacm's. Classifying a frame is
/// then two range checks; dladdr(3), which scans symbol tables, is kept for reports.
struct Ranges {
    own: Vec<(usize, usize)>,
    rdmacm: Vec<(usize, usize)>,
}

/// librdmacm is the object that holds the real rdma_get_cm_event (sys/real.rs), whatever its
/// file is called: a name is no proof (a plugin `libfoo-librdmacm-glue.so` is the program's).
fn load_ranges() -> Ranges {
    struct Acc {
        me: usize,
        rdmacm_at: usize,
        own: Vec<(usize, usize)>,
        rdmacm: Vec<(usize, usize)>,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our own `data`.
        let (info, acc) = unsafe { (&*info, &mut *(data as *mut Acc)) };
        let mut ranges = Vec::new();
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr holds dlpi_phnum program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            // Only code: a return address lies in an executable segment, and librdmacm has
            // one, so classifying a caller is one range check, not one per segment.
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
                ranges.push((start, start + ph.p_memsz as usize));
            }
        }
        let holds = |at: usize| ranges.iter().any(|&(a, b)| at >= a && at < b);
        if holds(acc.me) {
            acc.own.extend(ranges);
        } else if acc.rdmacm_at != 0 && holds(acc.rdmacm_at) {
            acc.rdmacm.extend(ranges);
        }
        0
    }
    let mut acc = Acc {
        me: load_ranges as *const () as usize,
        rdmacm_at: crate::sys::real::get_event().map_or(0, |f| f as usize),
        own: Vec::new(),
        rdmacm: Vec::new(),
    };
    // SAFETY: a valid callback and data pointer for the duration of the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut acc as *mut Acc as *mut libc::c_void) };
    Ranges {
        own: acc.own,
        rdmacm: acc.rdmacm,
    }
}

fn ranges() -> &'static Ranges {
    static RANGES: once_cell::sync::OnceCell<Ranges> = once_cell::sync::OnceCell::new();
    // librdmacm is loaded before any of its functions can call ours.
    RANGES.get_or_init(load_ranges)
}

fn within(ranges: &[(usize, usize)], addr: usize) -> bool {
    ranges.iter().any(|&(a, b)| addr >= a && addr < b)
}

/// The caller whose return address the entry point passed (0: unknown, then the stack is
/// walked).
pub fn caller_at(ret: usize) -> Caller {
    if ret == 0 {
        return caller();
    }
    Caller {
        addr: ret,
        in_librdmacm: within(&ranges().rdmacm, ret),
    }
}

/// Where the program called from: the entry point's return address, else found on the stack.
pub fn place(ret: usize) -> usize {
    if ret != 0 {
        ret
    } else {
        caller().addr
    }
}

/// Where the program called from when librdmacm may be between (its rdma_destroy_qp calls
/// ibv_destroy_qp): the first frame outside this library and librdmacm, else `place(ret)`.
pub fn program_place(ret: usize) -> usize {
    let r = ranges();
    if ret != 0 && !within(&r.rdmacm, ret) {
        return ret;
    }
    first_frame::<12>(|a| within(&r.own, a) || within(&r.rdmacm, a)).unwrap_or_else(|| place(ret))
}

/// The frame that called into the preload, found by walking the stack.
pub fn caller() -> Caller {
    let r = ranges();
    // Our wrappers are a few frames deep: unwinding further is wasted work.
    first_frame::<8>(|a| within(&r.own, a)).map_or(Caller::default(), |addr| Caller {
        addr,
        in_librdmacm: within(&r.rdmacm, addr),
    })
}

/// The first of the innermost N return addresses on the stack that `skip` does not skip.
fn first_frame<const N: usize>(skip: impl Fn(usize) -> bool) -> Option<usize> {
    let mut frames = [std::ptr::null_mut(); N];
    // SAFETY: a writable array of the given size.
    let n = unsafe { libc::backtrace(frames.as_mut_ptr(), N as i32) };
    frames
        .iter()
        .take(n.max(0) as usize)
        .map(|&f| f as usize)
        .find(|&a| !skip(a))
}

/// `symbol+0xoff (object)` or `object+0xoff`, for reports.
pub fn describe(addr: usize) -> String {
    if addr == 0 {
        return "an unknown place".to_string();
    }
    // SAFETY: as in `object_base`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0 {
        return format!("{addr:#x}");
    }
    let object = if info.dli_fname.is_null() {
        "?".to_string()
    } else {
        // SAFETY: non-NULL, NUL-terminated.
        let full = unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned();
        full.rsplit('/').next().unwrap_or("?").to_string()
    };
    // The main program's name is its argv[0] as the loader keeps it: anything its starter chose.
    let object = printable(&object);
    if !info.dli_sname.is_null() {
        // SAFETY: non-NULL, NUL-terminated.
        let sym = unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy();
        format!(
            "{}+{:#x} ({object}, {addr:#x})",
            printable(&sym),
            addr - info.dli_saddr as usize
        )
    } else {
        format!("{object}+{:#x} ({addr:#x})", addr - info.dli_fbase as usize)
    }
}

/// Where a fault happened: the faulting instruction, and when that is in a system library
/// (memcpy, strlen, printf, a system call's wrapper...), the first frame of the program's own
/// code under it: the link register, else the first word on the stack that is a return address
/// into the program's code (an address in an executable segment, just after a call).
pub fn describe_fault(code: usize, link: usize, stack: &[usize]) -> String {
    let own = object_base(caller as *const () as usize).map(|(b, _)| b);
    let is_system = |addr: usize| match object_base(addr) {
        Some((base, _)) if Some(base) == own => true,
        Some((_, name)) => {
            let file = name.rsplit('/').next().unwrap_or("");
            file.starts_with("libc.so")
                || file.starts_with("libgcc_s")
                || file.starts_with("ld-linux")
        }
        None => true,
    };
    let at = describe(code);
    if !is_system(code) {
        return at;
    }
    match std::iter::once(link)
        .chain(stack.iter().copied())
        .filter(|&a| a != 0 && a != code)
        .find(|&a| in_code(a) && after_call(a) && !is_system(a))
    {
        Some(frame) => format!("{} (in {at})", describe(frame - 1)),
        None => at,
    }
}

/// Whether `addr` lies in an executable segment of a loaded object.
fn in_code(addr: usize) -> bool {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our own `data`.
        let (info, addr) = unsafe { (&*info, *(data as *const usize)) };
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr holds dlpi_phnum program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            if ph.p_type == libc::PT_LOAD
                && ph.p_flags & libc::PF_X != 0
                && addr >= start
                && addr < start + ph.p_memsz as usize
            {
                return 1;
            }
        }
        0
    }
    let mut a = addr;
    // SAFETY: a valid callback and data pointer for the duration of the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut a as *mut usize as *mut libc::c_void) != 0 }
}

/// Whether the instruction just before `ret` (in code: `in_code`) is a call, so that `ret` is a
/// return address and not a stale word that happens to point into code.
fn after_call(ret: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // call rel32 (e8 + 4 bytes), or call r/m64 (ff /2, 2 to 7 bytes long).
        // SAFETY: `ret` lies in an executable, mapped segment, and so do the 7 bytes before it
        // unless it is within 7 bytes of the segment's start, which no return address is.
        let b: [u8; 8] = unsafe { ((ret - 8) as *const [u8; 8]).read_unaligned() };
        b[3] == 0xe8 || (2..=7).any(|n| b[8 - n] == 0xff && (b[9 - n] >> 3) & 7 == 2)
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: as above, one instruction before `ret`.
        let w = unsafe { ((ret - 4) as *const u32).read_unaligned() };
        w & 0xfc00_0000 == 0x9400_0000 || w & 0xffff_fc1f == 0xd63f_0000
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = ret;
        true
    }
}
