//! Private data bytes in a refcounted buffer that can outlive its event and cross threads.
//!
//! The bytes live in their event's slot (see `slot`); a buffer is a pointer to them, the same
//! pointer the event's `rdma_cm_event` view carries in `private_data`. A buffer reference keeps
//! the slot alive after the event's last reference is gone.

use std::ptr::NonNull;

use cmsafe_sync::Released;

use super::local;
use super::slot::{self, Sizes, BYTES_OFFSET, HAS_PD};
use crate::pool::SlotState;
use crate::pool::{misuse, AllocError};

/// librdmacm's `private_data_len` is a `uint8_t`: private data never exceeds 255 bytes.
pub const MAX_PRIVATE_DATA: usize = 255;

/// An immutable, refcounted copy of an event's private data. Cloning takes a reference of its
/// own, which keeps the bytes after their event is released.
///
/// The length is what the transport reported, which on IB/RoCE can exceed what the peer sent
/// (a CONNECT_REQUEST carries 56 bytes, zero-padded after the peer's own).
#[repr(transparent)]
pub struct PrivateData(NonNull<u8>);

// SAFETY: the bytes are immutable and the refcounts atomic.
unsafe impl Send for PrivateData {}
// SAFETY: as above.
unsafe impl Sync for PrivateData {}

impl PrivateData {
    /// Copies `bytes` into a buffer of their own, with no event (at most [`MAX_PRIVATE_DATA`];
    /// librdmacm's `uint8_t` length never asks for more, and the rest would be cut).
    pub fn copy_from(bytes: &[u8]) -> Result<Self, AllocError> {
        let len = bytes.len().min(MAX_PRIVATE_DATA);
        let sizes = Sizes {
            pd: len,
            src: 0,
            dst: 0,
        };
        // SAFETY: every head field is written (an all-zero view but for the length, no sequence
        // number: this is no event), and `len` bytes of the tail.
        let slot = local::with(|local| unsafe {
            slot::alloc(sizes, true, local, |head, tail| {
                use std::ptr::addr_of_mut;
                addr_of_mut!((*head).cm).write_bytes(0, 1);
                addr_of_mut!((*head).cm.param.conn.private_data).write(tail.cast());
                addr_of_mut!((*head).cm.param.conn.private_data_len).write(len as u8);
                addr_of_mut!((*head).seq_flags).write(slot::seq_flags(0, HAS_PD));
                addr_of_mut!((*head).fetched_ns).write(0);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), tail, len);
            })
        })?;
        // SAFETY: inside the slot, not NULL.
        Ok(PrivateData(unsafe {
            NonNull::new_unchecked(slot.add(BYTES_OFFSET) as *mut u8)
        }))
    }

    fn slot(&self) -> *const u8 {
        self.0.as_ptr().wrapping_sub(BYTES_OFFSET)
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: a reference is held (ours or our event's); `len` bytes follow the pointer.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), self.len()) }
    }

    pub fn len(&self) -> usize {
        // SAFETY: a reference is held, so the slot is live.
        unsafe { slot::head(self.slot()) }.pd_len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The handle C sees; it carries the reference this value held.
    pub fn into_raw(self) -> *const u8 {
        std::mem::ManuallyDrop::new(self).0.as_ptr()
    }

    pub fn as_raw(&self) -> *const u8 {
        self.0.as_ptr()
    }

    /// Takes over the reference a C handle carries, after checking the handle (a released or
    /// foreign one is reported and aborts).
    pub fn from_raw(ptr: *const u8, op: &str) -> Self {
        let slot = ptr.wrapping_sub(BYTES_OFFSET);
        match slot::classify(slot) {
            // SAFETY: a live slot: its head is readable.
            SlotState::Live if unsafe { slot::head(slot) }.flags() & HAS_PD != 0 => {}
            SlotState::Free => misuse(format_args!(
                "{op}({ptr:p}): this cmsafe_buf was already released (double release or use after release)"
            )),
            _ => misuse(format_args!("{op}({ptr:p}): not a cmsafe_buf cmsafe returned")),
        }
        // SAFETY: not NULL: inside a live slot.
        PrivateData(unsafe { NonNull::new_unchecked(ptr as *mut u8) })
    }

    /// Borrows a C handle without taking its reference.
    pub fn with_raw<R>(ptr: *const u8, op: &str, f: impl FnOnce(&PrivateData) -> R) -> R {
        f(&std::mem::ManuallyDrop::new(Self::from_raw(ptr, op)))
    }

    /// Gives back a reference of the buffer's own (a C `cmsafe_buf_release`): one the event
    /// holds is not the caller's to give, and giving it is reported.
    pub fn release_own(self, op: &str) {
        // Checked live by `from_raw`; whether the buffer holds a reference of its own is
        // decided by the give-back itself, in one read-modify-write, so that two threads giving
        // back its last one cannot both pass a check made before.
        let ptr = std::mem::ManuallyDrop::new(self).0;
        Self::give_back(ptr, op);
    }

    /// Gives back the buffer reference `ptr` carries; `op` names the call in a misuse report.
    fn give_back(ptr: NonNull<u8>, op: &str) {
        let slot = ptr.as_ptr().wrapping_sub(BYTES_OFFSET);
        if local::with(|local| slot::release_buf(slot, local)) == Released::Misuse {
            misuse(format_args!(
                "{op}({ptr:p}): this cmsafe_buf has no reference of its own left (released more often than retained)"
            ));
        }
    }
}

impl Clone for PrivateData {
    fn clone(&self) -> Self {
        // A reference is held, so the slot is live. Both counts change in one operation: a
        // thread checking the event meanwhile sees its own references unchanged.
        slot::retain_buf(self.slot());
        PrivateData(self.0)
    }
}

impl Drop for PrivateData {
    fn drop(&mut self) {
        // Only owned values are dropped: the one in an event's view is only ever borrowed.
        // We hold a buffer reference, so the slot is live.
        Self::give_back(self.0, "cmsafe_buf_release");
    }
}

impl std::fmt::Debug for PrivateData {
    // Lengths only: private data often carries tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateData({} bytes)", self.len())
    }
}
