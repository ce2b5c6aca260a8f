//! The heap storage of a recorder's ring: a slab of preallocated values,
//! taken whole at build (never an abort: a refused allocation is an
//! error). A [`Slab`] may also point into a ring file's mapping
//! (`shm`), so the recorder indexes both storages the same way.

use std::ptr::NonNull;

use crate::error::{CaptureError, Result};

/// A boxed slice of `n` copies of `value`, or [`CaptureError::OutOfMemory`]
/// when the allocator refuses: never an abort. Every page is written here,
/// so none faults in later on the control thread.
pub(crate) fn try_boxed<T: Default>(what: &'static str, n: usize) -> Result<Slab<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| CaptureError::OutOfMemory {
            what,
            bytes: (n as u64).saturating_mul(std::mem::size_of::<T>() as u64),
        })?;
    v.resize_with(n, T::default);
    Ok(Slab::from_box(v.into_boxed_slice()))
}

/// A block of `len` values of `T`, on the heap or inside a mapping. Derefs
/// to a slice, so the recorder indexes both the same way.
pub(crate) struct Slab<T> {
    ptr: NonNull<T>,
    len: usize,
    heap: bool,
}

// SAFETY: a Slab owns its elements exclusively (heap) or is the only writer
// of its part of a mapping that lives as long as the recorder holding both;
// it hands out `&[T]` / `&mut [T]` only through `&self` / `&mut self`.
unsafe impl<T: Send> Send for Slab<T> {}
// SAFETY: as above; shared access gives only `&[T]`.
unsafe impl<T: Sync> Sync for Slab<T> {}

impl<T> Slab<T> {
    pub(crate) fn from_box(b: Box<[T]>) -> Slab<T> {
        let len = b.len();
        let raw = Box::into_raw(b) as *mut T;
        Slab {
            // SAFETY: Box::into_raw never returns null.
            ptr: unsafe { NonNull::new_unchecked(raw) },
            len,
            heap: true,
        }
    }

    /// # Safety
    /// `ptr` must point at `len` initialised, properly aligned `T`s that stay
    /// valid (and are written by nobody else) for the slab's whole life.
    pub(super) unsafe fn mapped(ptr: *mut T, len: usize) -> Slab<T> {
        Slab {
            // SAFETY: the caller passes a pointer into a live mapping.
            ptr: unsafe { NonNull::new_unchecked(ptr) },
            len,
            heap: false,
        }
    }
}

impl<T> std::ops::Deref for Slab<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: see the constructors.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for Slab<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: see the constructors; `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for Slab<T> {
    fn drop(&mut self) {
        if self.heap {
            let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
            // SAFETY: built by `from_box` from exactly this slice.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl<T> std::fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Slab({} x {} bytes, {})",
            self.len,
            size_of::<T>(),
            if self.heap { "heap" } else { "ring file" }
        )
    }
}
