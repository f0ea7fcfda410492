//! Private data bytes in a refcounted buffer that can outlive its event and cross threads.

use std::sync::Arc;

/// librdmacm's `private_data_len` is a `uint8_t`: private data never exceeds 255 bytes.
pub const MAX_PRIVATE_DATA: usize = 255;

pub(crate) struct BufInner {
    len: u8,
    bytes: [u8; MAX_PRIVATE_DATA],
}

/// An immutable, refcounted copy of an event's private data.
///
/// The length is what the transport reported, which on IB/RoCE can exceed what the peer sent
/// (a CONNECT_REQUEST carries 56 bytes, zero-padded after the peer's own).
#[derive(Clone)]
pub struct PrivateData(pub(crate) Arc<BufInner>);

impl PrivateData {
    /// Copies `bytes` (at most [`MAX_PRIVATE_DATA`]; the rest is cut, which librdmacm's `uint8_t`
    /// length never asks for).
    pub fn copy_from(bytes: &[u8]) -> Self {
        let len = bytes.len().min(MAX_PRIVATE_DATA);
        let mut inner = BufInner {
            len: len as u8,
            bytes: [0; MAX_PRIVATE_DATA],
        };
        inner.bytes[..len].copy_from_slice(&bytes[..len]);
        PrivateData(Arc::new(inner))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0.bytes[..self.0.len as usize]
    }

    pub fn len(&self) -> usize {
        self.0.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }
}

impl std::fmt::Debug for PrivateData {
    // Lengths only: private data often carries tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateData({} bytes)", self.len())
    }
}
