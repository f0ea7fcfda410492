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

use cmsafe_core::cm::{rdma_cm_event, rdma_cm_id, rdma_conn_param, rdma_event_channel};
use once_cell::sync::OnceCell;

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
pub type GetRequest = unsafe extern "C-unwind" fn(*mut rdma_cm_id, *mut *mut rdma_cm_id) -> i32;
pub type BindAddr = unsafe extern "C-unwind" fn(*mut rdma_cm_id, *mut libc::sockaddr) -> i32;
pub type ResolveAddr = unsafe extern "C-unwind" fn(
    *mut rdma_cm_id,
    *mut libc::sockaddr,
    *mut libc::sockaddr,
    libc::c_int,
) -> i32;
/// rdma_resolve_route (a timeout in ms) and rdma_listen (a backlog).
pub type IdIntCall = unsafe extern "C-unwind" fn(*mut rdma_cm_id, libc::c_int) -> i32;
pub type CreateQp =
    unsafe extern "C-unwind" fn(*mut rdma_cm_id, *mut libc::c_void, *mut libc::c_void) -> i32;
pub type SetOption = unsafe extern "C-unwind" fn(
    *mut rdma_cm_id,
    libc::c_int,
    libc::c_int,
    *mut libc::c_void,
    libc::size_t,
) -> i32;
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

/// The object that holds `addr`: an id of it (the same for every address in it) and its file
/// name. glibc's `_dl_find_object` (2.35 and later) answers from its table of mappings; dladdr,
/// the fallback, also scans the object's symbol table for the nearest symbol, which is most of
/// the preload's first-use cost in a short program (cmtime-insns).
fn object_of(addr: usize) -> Option<(usize, *const libc::c_char)> {
    match find_object_fn() {
        Some(find) => find_object(find, addr),
        None => dladdr_object(addr),
    }
}

/// glibc's struct dl_find_object (dlfcn.h): the four fields read here come first on every
/// architecture; what follows (the unwinding data, reserved words) varies, and `rest` is larger
/// than all of it.
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut libc::c_void,
    map_end: *mut libc::c_void,
    link_map: *mut libc::c_void,
    rest: [u64; 16],
}

/// `int _dl_find_object(void *address, struct dl_find_object *result)` (dlfcn.h).
type FindObject = unsafe extern "C" fn(*mut libc::c_void, *mut DlFindObject) -> libc::c_int;

/// glibc's `_dl_find_object`, looked up once (not linked: the preload still loads under an
/// older glibc).
fn find_object_fn() -> Option<FindObject> {
    static FIND: OnceCell<Option<FindObject>> = OnceCell::new();
    *FIND.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT and a valid C string.
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
        // SAFETY: a non-NULL address dlsym gave for `_dl_find_object`, whose type this is.
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, FindObject>(f) })
    })
}

fn find_object(find: FindObject, addr: usize) -> Option<(usize, *const libc::c_char)> {
    // SAFETY: all-zero is a valid value of this plain-data struct.
    let mut result: DlFindObject = unsafe { std::mem::zeroed() };
    // SAFETY: `result` is at least as large as glibc's struct; the call only writes it.
    if unsafe { find(addr as *mut libc::c_void, &mut result) } != 0 {
        return None;
    }
    let map = result.link_map;
    if map.is_null() {
        return None;
    }
    // SAFETY: a live struct link_map (link.h), which begins with l_addr and l_name.
    let name = unsafe { *(map as *const *const libc::c_char).add(1) };
    Some((map as usize, name))
}

fn dladdr_object(addr: usize) -> Option<(usize, *const libc::c_char)> {
    // SAFETY: all-zero is a valid Dl_info; dladdr only reads the address.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0 {
        return None;
    }
    Some((info.dli_fbase as usize, info.dli_fname))
}

/// This very library, as `object_of` names it, looked up once.
fn own_object() -> Option<usize> {
    static OWN: OnceCell<Option<usize>> = OnceCell::new();
    *OWN.get_or_init(|| object_of(own_object as *const () as usize).map(|o| o.0))
}

/// `name` at `version` in the object `handle` (or RTLD_NEXT), with the object that holds it (as
/// `object_of` gives it); None when there is none, or when the lookup found our own wrapper.
fn symbol(
    handle: *mut libc::c_void,
    name: &CStr,
    version: &CStr,
) -> Option<(usize, usize, *const libc::c_char)> {
    // SAFETY: dlvsym/dlsym with a valid handle and valid C strings.
    let addr = unsafe {
        let p = libc::dlvsym(handle, name.as_ptr(), version.as_ptr());
        if p.is_null() {
            libc::dlsym(handle, name.as_ptr())
        } else {
            p
        }
    } as usize;
    if addr == 0 {
        return None;
    }
    // One look-up of the object per function found.
    let object = object_of(addr);
    if object.map(|o| o.0) == own_object() {
        return None;
    }
    let (object, file) = object.unwrap_or((0, std::ptr::null()));
    Some((addr, object, file))
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
    let found = symbol(libc::RTLD_NEXT, name, lib.version).or_else(|| {
        let by_soname = lib.sonames.iter().map(|s| loaded(s.as_ptr()));
        let by_path = loaded_paths(lib.stem)
            .into_iter()
            .map(|p| loaded(p.as_ptr()));
        by_soname
            .chain(by_path)
            .filter(|h| !h.is_null())
            .find_map(|h| symbol(h, name, lib.version))
    });
    let Some((addr, object, file)) = found else {
        return 0;
    };
    pin(object, file);
    addr
}

/// Pins the object `object` (an id from `object_of`), whose file is `file`, so an address in it
/// stays valid for the life of the process: once per object for the first few, where each
/// function found is in one of two libraries.
fn pin(object: usize, file: *const libc::c_char) {
    static PINNED: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
    // SAFETY: NULL-checked; a C string of the loader's, for a loaded object.
    if file.is_null() || unsafe { *file } == 0 {
        // No file: the main program (as `_dl_find_object` names it), never unloaded.
        return;
    }
    if PINNED.iter().any(|p| p.load(Ordering::Relaxed) == object) {
        return;
    }
    if loaded(file).is_null() {
        // Not pinned (being unloaded as we look): not remembered, so the next find tries again.
        return;
    }
    if let Some(slot) = PINNED.iter().find(|p| p.load(Ordering::Relaxed) == 0) {
        // Two threads may pin the same object at once: a second dlopen is harmless.
        let _ = slot.compare_exchange(0, object, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The address of `name` in `lib`, cached in `cell` once found; 0 while it is not loaded.
/// Runs with cancellation disabled: dlopen and dl_iterate_phdr are not to be unwound halfway.
/// Inlined, so that every wrapper's call of its real function pays one load, not a call with
/// the look-up's prologue, several times per event (bench/README.md, "The counts behind the
/// code's shape").
#[inline(always)]
pub fn cached(cell: &AtomicUsize, lib: &Library, name: &CStr) -> usize {
    let addr = cell.load(Ordering::Acquire);
    if addr != 0 {
        return addr;
    }
    look_up(cell, lib, name)
}

#[cold]
#[inline(never)]
fn look_up(cell: &AtomicUsize, lib: &Library, name: &CStr) -> usize {
    let addr = crate::sys::cancel::uncancellable(|| find(lib, name));
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
real!(get_request, GetRequest, LIBRDMACM, c"rdma_get_request");
real!(connect, ConnParamCall, LIBRDMACM, c"rdma_connect");
real!(reject, Reject, LIBRDMACM, c"rdma_reject");
real!(disconnect, Disconnect, LIBRDMACM, c"rdma_disconnect");
real!(bind_addr, BindAddr, LIBRDMACM, c"rdma_bind_addr");
real!(resolve_addr, ResolveAddr, LIBRDMACM, c"rdma_resolve_addr");
real!(resolve_route, IdIntCall, LIBRDMACM, c"rdma_resolve_route");
real!(listen, IdIntCall, LIBRDMACM, c"rdma_listen");
real!(create_qp, CreateQp, LIBRDMACM, c"rdma_create_qp");
real!(set_option, SetOption, LIBRDMACM, c"rdma_set_option");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of naming an object agree on which addresses share one, and give its file.
    #[test]
    fn an_object_is_named_the_same_for_each_address_in_it() {
        let malloc = libc::malloc as *const () as usize;
        let free = libc::free as *const () as usize;
        let ours = an_object_is_named_the_same_for_each_address_in_it as *const () as usize;
        type Way = Box<dyn Fn(usize) -> Option<(usize, *const libc::c_char)>>;
        let mut ways: Vec<Way> = vec![Box::new(dladdr_object)];
        // Under a glibc older than 2.35, only dladdr's way.
        if let Some(find) = find_object_fn() {
            ways.push(Box::new(move |a| find_object(find, a)));
        }
        for way in ways {
            let (a, file) = way(malloc).expect("libc is loaded");
            let (b, _) = way(free).expect("libc is loaded");
            let (c, _) = way(ours).expect("this test is loaded");
            assert_eq!(a, b, "malloc and free are in one object");
            assert_ne!(a, c, "libc is not this test");
            // SAFETY: the loader's C string for a loaded object.
            let file = unsafe { CStr::from_ptr(file) }.to_string_lossy();
            assert!(file.contains("libc.so"), "{file}");
            assert_eq!(way(0), None, "no object holds address 0");
        }
    }

    #[test]
    fn a_function_behind_us_is_found_with_its_object() {
        // The test binary defines no malloc: RTLD_NEXT finds libc's own, in libc's object.
        let malloc = libc::malloc as *const () as usize;
        let (addr, object, file) = symbol(libc::RTLD_NEXT, c"malloc", c"GLIBC_2.2.5").unwrap();
        assert_eq!(addr, malloc);
        assert_eq!(Some((object, file)), object_of(malloc));
        assert_ne!(Some(object), own_object());
    }
}
