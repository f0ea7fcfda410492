//! Private data bytes in a refcounted buffer that can outlive its event and cross threads.

use crate::pool::{AllocError, Handle, Pool, Pooled};

/// librdmacm's `private_data_len` is a `uint8_t`: private data never exceeds 255 bytes.
pub const MAX_PRIVATE_DATA: usize = 255;

pub(crate) struct BufData {
    len: u8,
    bytes: [u8; MAX_PRIVATE_DATA],
}

pub(crate) static BUFS: Pool<BufData> = Pool::new(1, "cmsafe_buf", 0xc5e7_b0f0);

impl Pooled for BufData {
    fn pool() -> &'static Pool<Self> {
        &BUFS
    }
    const RELEASE: &'static str = "cmsafe_buf_release";
}

/// An immutable, refcounted copy of an event's private data. Cloning is a refcount.
///
/// The length is what the transport reported, which on IB/RoCE can exceed what the peer sent
/// (a CONNECT_REQUEST carries 56 bytes, zero-padded after the peer's own).
#[derive(Clone)]
pub struct PrivateData(Handle<BufData>);

impl PrivateData {
    /// Copies `bytes` (at most [`MAX_PRIVATE_DATA`]; librdmacm's `uint8_t` length never asks
    /// for more, and the rest would be cut).
    pub fn copy_from(bytes: &[u8]) -> Result<Self, AllocError> {
        let len = bytes.len().min(MAX_PRIVATE_DATA);
        // SAFETY: writes the length and `len` bytes; the rest of the array is never read
        // (`as_bytes` stops at `len`), and slot memory is always initialized (mapped zeroed,
        // then only ever written), so no uninitialized byte exists to be read.
        let slot = unsafe {
            BUFS.alloc_with(|p| {
                std::ptr::addr_of_mut!((*p).len).write(len as u8);
                let dst = std::ptr::addr_of_mut!((*p).bytes) as *mut u8;
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len);
            })
        }?;
        Ok(PrivateData(Handle::new(slot)))
    }

    fn data(&self) -> &BufData {
        self.0.get()
    }

    pub fn as_bytes(&self) -> &[u8] {
        let data = self.data();
        &data.bytes[..data.len as usize]
    }

    pub fn len(&self) -> usize {
        self.data().len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The handle C sees; it carries the reference this value held.
    #[cfg(feature = "capi")]
    pub(crate) fn into_raw(self) -> *const u8 {
        self.0.into_raw()
    }

    #[cfg(feature = "capi")]
    pub(crate) fn as_raw(&self) -> *const u8 {
        self.0.as_raw()
    }

    /// Takes over the reference a C handle carries, after checking the handle.
    #[cfg(feature = "capi")]
    pub(crate) fn from_raw(ptr: *const u8, op: &str) -> Self {
        PrivateData(Handle::from_raw(ptr, op))
    }

    /// Borrows a C handle without taking its reference.
    #[cfg(feature = "capi")]
    pub(crate) fn with_raw<R>(ptr: *const u8, op: &str, f: impl FnOnce(&PrivateData) -> R) -> R {
        f(&std::mem::ManuallyDrop::new(Self::from_raw(ptr, op)))
    }
}

impl std::fmt::Debug for PrivateData {
    // Lengths only: private data often carries tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateData({} bytes)", self.len())
    }
}
