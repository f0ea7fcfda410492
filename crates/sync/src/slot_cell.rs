//! `SlotCell`: an `UnsafeCell` for data that an atomic protocol hands from one thread to another
//! (a queue's slot, a saved value): std's without loom, loom's with it, so that the models check
//! that no read ever meets a write of the same cell (loom fails a model on such a race: its
//! "causality violation").
//!
//! The two have one API, loom's: `with` and `with_mut` lend a raw pointer for the access.

// The name says what the cell is for; `with` and `with_mut` still take unsafe code to use.
#[cfg(loom)]
#[allow(clippy::unsafe_removed_from_name)]
pub(crate) use loom::cell::UnsafeCell as SlotCell;

#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct SlotCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> SlotCell<T> {
    pub(crate) const fn new(v: T) -> Self {
        SlotCell(core::cell::UnsafeCell::new(v))
    }

    /// Reads through the pointer; the caller's protocol keeps writers away meanwhile.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Writes through the pointer; the caller's protocol keeps every other access away meanwhile.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
