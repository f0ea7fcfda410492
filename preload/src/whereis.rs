//! Where a call came from: the first stack frame outside this library, named with dladdr(3).

use std::ffi::CStr;

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

/// The frame that called into the preload.
pub fn caller() -> Caller {
    let own = object_base(caller as *const () as usize).map(|(b, _)| b);
    let mut frames = [std::ptr::null_mut(); 24];
    // SAFETY: a writable array of the given size.
    let n = unsafe { libc::backtrace(frames.as_mut_ptr(), frames.len() as i32) };
    for &f in frames.iter().take(n.max(0) as usize) {
        let addr = f as usize;
        match object_base(addr) {
            Some((base, _)) if Some(base) == own => continue,
            Some((_, name)) => {
                return Caller {
                    addr,
                    in_librdmacm: name.contains("librdmacm"),
                }
            }
            None => {
                return Caller {
                    addr,
                    in_librdmacm: false,
                }
            }
        }
    }
    Caller::default()
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
    if !info.dli_sname.is_null() {
        // SAFETY: non-NULL, NUL-terminated.
        let sym = unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy();
        format!(
            "{sym}+{:#x} ({object}, {addr:#x})",
            addr - info.dli_saddr as usize
        )
    } else {
        format!("{object}+{:#x} ({addr:#x})", addr - info.dli_fbase as usize)
    }
}

/// The calling thread's id, as ps and gdb show it.
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Where a fault happened: the faulting instruction, and when that is in a system library
/// (memcpy, strlen, printf...), the first frame of the program's own code under it.
pub fn describe_fault(code: usize, stack: &[usize]) -> String {
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
    // The signal frame, then the faulting function's callers; a return address points just
    // after its call instruction.
    match stack
        .iter()
        .copied()
        .filter(|&a| a != 0 && a != code)
        .find(|&a| !is_system(a))
    {
        Some(frame) => format!("{} (in {at})", describe(frame - 1)),
        None => at,
    }
}
