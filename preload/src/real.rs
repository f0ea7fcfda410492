//! librdmacm's (and libibverbs') own functions, found behind ours: resolved lazily from whichever
//! wrapper runs first (another library's constructor may call one before we are initialized),
//! and found however the program loaded the library:
//! - linked, or dlopen'ed RTLD_GLOBAL: `dlvsym(RTLD_NEXT, …)` finds it;
//! - dlopen'ed RTLD_LOCAL by a plugin (UCX loads its rdmacm transport so): it is in no global
//!   scope, so RTLD_NEXT misses it; the loaded object itself is then asked for the symbol.
//!
//! A miss is never kept (the library may be loaded later), so no wrapper answers ENOSYS while
//! the real function exists in the process. A library once found is pinned (RTLD_NODELETE): a
//! plugin's dlclose can then never leave a resolved pointer dangling.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use cmsafe::cm::{rdma_cm_event, rdma_cm_id, rdma_conn_param, rdma_event_channel};

// "C-unwind": pthread_cancel unwinds through these calls, as it would without the preload.
pub type GetEvent =
    unsafe extern "C-unwind" fn(*mut rdma_event_channel, *mut *mut rdma_cm_event) -> i32;
pub type AckEvent = unsafe extern "C-unwind" fn(*mut rdma_cm_event) -> i32;
pub type DestroyId = unsafe extern "C-unwind" fn(*mut rdma_cm_id) -> i32;
pub type MigrateId = unsafe extern "C-unwind" fn(*mut rdma_cm_id, *mut rdma_event_channel) -> i32;
pub type DestroyChannel = unsafe extern "C-unwind" fn(*mut rdma_event_channel);
pub type DestroyQp = unsafe extern "C-unwind" fn(*mut rdma_cm_id);
pub type CreateId = unsafe extern "C-unwind" fn(
    *mut rdma_event_channel,
    *mut *mut rdma_cm_id,
    *mut libc::c_void,
    u32,
) -> i32;
pub type CreateEp = unsafe extern "C-unwind" fn(
    *mut *mut rdma_cm_id,
    *mut libc::c_void,
    *mut libc::c_void,
    *mut libc::c_void,
) -> i32;
pub type CreateChannel = unsafe extern "C-unwind" fn() -> *mut rdma_event_channel;
/// rdma_accept and rdma_connect.
pub type ConnParamCall = unsafe extern "C-unwind" fn(*mut rdma_cm_id, *mut rdma_conn_param) -> i32;
pub type Reject = unsafe extern "C-unwind" fn(*mut rdma_cm_id, *const libc::c_void, u8) -> i32;
pub type Disconnect = unsafe extern "C-unwind" fn(*mut rdma_cm_id) -> i32;
// libibverbs' (verbs.h): the CQ and channel stay opaque here.
pub type GetCqEvent = unsafe extern "C-unwind" fn(
    *mut libc::c_void,
    *mut *mut libc::c_void,
    *mut *mut libc::c_void,
) -> i32;
pub type AckCqEvents = unsafe extern "C-unwind" fn(*mut libc::c_void, libc::c_uint);
/// ibv_destroy_cq, ibv_destroy_qp, ibv_destroy_srq.
pub type DestroyObj = unsafe extern "C-unwind" fn(*mut libc::c_void) -> i32;
pub type GetAsyncEvent = unsafe extern "C-unwind" fn(*mut libc::c_void, *mut libc::c_void) -> i32;
pub type AckAsyncEvent = unsafe extern "C-unwind" fn(*mut libc::c_void);

/// A shared library whose functions the preload wraps.
pub struct Library {
    /// Its SONAMEs, asked first.
    pub sonames: &'static [&'static CStr],
    /// How its file names begin, for a copy loaded under another name or path.
    pub stem: &'static str,
    /// The version its symbols carry.
    pub version: &'static CStr,
}

pub const LIBRDMACM: Library = Library {
    sonames: &[c"librdmacm.so.1"],
    stem: "librdmacm.so",
    version: c"RDMACM_1.0",
};

/// libibverbs: its CQ, async-event and destroy calls exist as IBVERBS_1.1 (the default, with today's struct ibv_cq) and as
/// IBVERBS_1.0 compatibility versions taking the old structures; the 1.1 ones are the real
/// functions behind ours.
pub const LIBIBVERBS: Library = Library {
    sonames: &[c"libibverbs.so.1"],
    stem: "libibverbs.so",
    version: c"IBVERBS_1.1",
};

/// The base address of the object that holds `addr`, and its file name.
fn object_of(addr: usize) -> Option<(usize, *const libc::c_char)> {
    // SAFETY: all-zero is a valid Dl_info; dladdr only reads the address.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0 {
        return None;
    }
    Some((info.dli_fbase as usize, info.dli_fname))
}

/// True when `addr` lies in this very library (a lookup that found our own wrapper).
fn is_ours(addr: usize) -> bool {
    let me = object_of(is_ours as *const () as usize).map(|o| o.0);
    object_of(addr).map(|o| o.0) == me
}

/// `name` at `version` in the object `handle` (or RTLD_NEXT), or 0.
fn symbol(handle: *mut libc::c_void, name: &CStr, version: &CStr) -> usize {
    // SAFETY: dlvsym/dlsym with a valid handle and valid C strings.
    let addr = unsafe {
        let p = libc::dlvsym(handle, name.as_ptr(), version.as_ptr());
        if p.is_null() {
            libc::dlsym(handle, name.as_ptr())
        } else {
            p
        }
    } as usize;
    if addr == 0 || is_ours(addr) {
        0
    } else {
        addr
    }
}

/// A handle to an already loaded object, taking no new load (RTLD_NOLOAD), pinned.
fn loaded(path: *const libc::c_char) -> *mut libc::c_void {
    // SAFETY: a valid C string; RTLD_NOLOAD never loads anything, RTLD_NODELETE pins the object.
    unsafe {
        libc::dlopen(
            path,
            libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
        )
    }
}

/// The paths of loaded objects whose file name begins with `stem`.
fn loaded_paths(stem: &str) -> Vec<std::ffi::CString> {
    struct Acc<'a> {
        stem: &'a str,
        found: Vec<std::ffi::CString>,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our own `data`.
        let (info, acc) = unsafe { (&*info, &mut *(data as *mut Acc)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: non-NULL, NUL-terminated.
            let path = unsafe { CStr::from_ptr(info.dlpi_name) };
            let file = path.to_bytes().rsplit(|&b| b == b'/').next().unwrap_or(&[]);
            if file.starts_with(acc.stem.as_bytes()) {
                acc.found.push(path.to_owned());
            }
        }
        0
    }
    let mut acc = Acc {
        stem,
        found: Vec::new(),
    };
    // SAFETY: a valid callback and data pointer for the duration of the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut acc as *mut Acc as *mut libc::c_void) };
    acc.found
}

/// Finds `name` of `lib` wherever it is loaded; 0 when it is not loaded (yet).
pub fn find(lib: &Library, name: &CStr) -> usize {
    let addr = symbol(libc::RTLD_NEXT, name, lib.version);
    let addr = if addr != 0 {
        addr
    } else {
        let by_soname = lib.sonames.iter().map(|s| loaded(s.as_ptr()));
        let by_path = loaded_paths(lib.stem)
            .into_iter()
            .map(|p| loaded(p.as_ptr()));
        by_soname
            .chain(by_path)
            .filter(|h| !h.is_null())
            .map(|h| symbol(h, name, lib.version))
            .find(|&a| a != 0)
            .unwrap_or(0)
    };
    if addr != 0 {
        // Pinned, so the address stays valid for the life of the process.
        if let Some((_, file)) = object_of(addr) {
            if !file.is_null() {
                loaded(file);
            }
        }
    }
    addr
}

/// The address of `name` in `lib`, cached in `cell` once found; 0 while it is not loaded.
/// Runs with cancellation disabled: dlopen and dl_iterate_phdr are not to be unwound halfway.
pub fn cached(cell: &AtomicUsize, lib: &Library, name: &CStr) -> usize {
    let addr = cell.load(Ordering::Acquire);
    if addr != 0 {
        return addr;
    }
    let addr = crate::cancel::uncancellable(|| find(lib, name));
    if addr != 0 {
        cell.store(addr, Ordering::Release);
    }
    addr
}

macro_rules! real {
    ($fn_name:ident, $ty:ty, $lib:expr, $sym:literal) => {
        /// The real function, or None while no loaded object defines it.
        pub fn $fn_name() -> Option<$ty> {
            static CELL: AtomicUsize = AtomicUsize::new(0);
            let addr = cached(&CELL, &$lib, $sym);
            // SAFETY: a non-zero address the dynamic linker returned for this name (at the
            // library's version) has this signature (rdma_cma.h, verbs.h).
            (addr != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(addr) })
        }
    };
}

real!(get_event, GetEvent, LIBRDMACM, c"rdma_get_cm_event");
real!(ack_event, AckEvent, LIBRDMACM, c"rdma_ack_cm_event");
real!(destroy_id, DestroyId, LIBRDMACM, c"rdma_destroy_id");
real!(migrate_id, MigrateId, LIBRDMACM, c"rdma_migrate_id");
real!(
    destroy_channel,
    DestroyChannel,
    LIBRDMACM,
    c"rdma_destroy_event_channel"
);
real!(destroy_qp, DestroyQp, LIBRDMACM, c"rdma_destroy_qp");
real!(create_id, CreateId, LIBRDMACM, c"rdma_create_id");
real!(create_ep, CreateEp, LIBRDMACM, c"rdma_create_ep");
real!(
    create_channel,
    CreateChannel,
    LIBRDMACM,
    c"rdma_create_event_channel"
);
real!(accept, ConnParamCall, LIBRDMACM, c"rdma_accept");
real!(connect, ConnParamCall, LIBRDMACM, c"rdma_connect");
real!(reject, Reject, LIBRDMACM, c"rdma_reject");
real!(disconnect, Disconnect, LIBRDMACM, c"rdma_disconnect");
real!(get_cq_event, GetCqEvent, LIBIBVERBS, c"ibv_get_cq_event");
real!(ack_cq_events, AckCqEvents, LIBIBVERBS, c"ibv_ack_cq_events");
real!(destroy_cq, DestroyObj, LIBIBVERBS, c"ibv_destroy_cq");
real!(
    get_async_event,
    GetAsyncEvent,
    LIBIBVERBS,
    c"ibv_get_async_event"
);
real!(
    ack_async_event,
    AckAsyncEvent,
    LIBIBVERBS,
    c"ibv_ack_async_event"
);
real!(destroy_ibv_qp, DestroyObj, LIBIBVERBS, c"ibv_destroy_qp");
real!(destroy_srq, DestroyObj, LIBIBVERBS, c"ibv_destroy_srq");
