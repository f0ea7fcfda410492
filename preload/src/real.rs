//! librdmacm's own functions, found behind ours: resolved lazily and once, from whichever
//! wrapper runs first (another library's constructor may call one before we are initialized).

use std::ffi::CStr;

use once_cell::sync::OnceCell;

use cmsafe::cm::{rdma_cm_event, rdma_cm_id, rdma_event_channel};

pub type GetEvent = unsafe extern "C" fn(*mut rdma_event_channel, *mut *mut rdma_cm_event) -> i32;
pub type AckEvent = unsafe extern "C" fn(*mut rdma_cm_event) -> i32;
pub type DestroyId = unsafe extern "C" fn(*mut rdma_cm_id) -> i32;
pub type MigrateId = unsafe extern "C" fn(*mut rdma_cm_id, *mut rdma_event_channel) -> i32;
pub type DestroyChannel = unsafe extern "C" fn(*mut rdma_event_channel);
pub type DestroyQp = unsafe extern "C" fn(*mut rdma_cm_id);

/// The symbol version librdmacm gives these functions.
const VERSION: &CStr = c"RDMACM_1.0";

fn lookup(name: &CStr) -> usize {
    // SAFETY: dlvsym/dlsym with valid C strings; RTLD_NEXT searches the objects after ours.
    unsafe {
        let p = libc::dlvsym(libc::RTLD_NEXT, name.as_ptr(), VERSION.as_ptr());
        if !p.is_null() {
            return p as usize;
        }
        libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize
    }
}

macro_rules! real {
    ($fn_name:ident, $ty:ty, $sym:literal) => {
        /// The real function, or None when no later object defines it.
        pub fn $fn_name() -> Option<$ty> {
            static CELL: OnceCell<usize> = OnceCell::new();
            let addr = *CELL.get_or_init(|| lookup($sym));
            // SAFETY: a non-zero address dlsym returned for this name has this signature
            // (rdma_cma.h).
            (addr != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(addr) })
        }
    };
}

real!(get_event, GetEvent, c"rdma_get_cm_event");
real!(ack_event, AckEvent, c"rdma_ack_cm_event");
real!(destroy_id, DestroyId, c"rdma_destroy_id");
real!(migrate_id, MigrateId, c"rdma_migrate_id");
real!(
    destroy_channel,
    DestroyChannel,
    c"rdma_destroy_event_channel"
);
real!(destroy_qp, DestroyQp, c"rdma_destroy_qp");
