//! The two halves of a [`Payload`](super::Payload): the per-type static [`VTable`] and the
//! [`Storage`] that holds the value (inline) or its box (the box's pointer, inline). The
//! representation is described in the [parent module](super).
//!
//! Nothing here knows which type a storage holds: every `unsafe fn` below takes the type as a
//! parameter and trusts its caller to name the type the storage was created with (the payload
//! proves it by comparing its vtable's `TypeId` with `TypeId::of::<T>()`).

use std::any::TypeId;
use std::cell::UnsafeCell;
use std::mem::{self, MaybeUninit};
use std::ptr;

/// The inline space: four machine words (32 bytes, aligned to 8, on 64-bit targets).
type Words = [usize; 4];

// A box's pointer always fits inline: a value that does not fit is stored as its box's pointer.
const _: () = assert!(Storage::fits::<*mut u128>());

/// A payload's value, stored inline if it [fits](Storage::fits), else boxed with the box's
/// pointer (from `Box::into_raw`) stored inline.
///
/// Which of the two, and the value's type, is not recorded here: it follows from the type alone
/// (`fits::<T>()` is a constant), and the payload's vtable records the type.
///
/// - `MaybeUninit`: the bytes are the value's own — padding included (uninitialized) and
///   pointers with their provenance — and a `MaybeUninit` (a union) is moved byte for byte, so
///   moving a payload moves its value intact.
/// - `UnsafeCell`: a `&Payload` hands out a `&T`, and `T` may have interior mutability (an
///   `AtomicU64`, a `Cell`) that it mutates through that reference; without the cell, the
///   shared reference to the payload would make the inline bytes immutable. (It also makes the
///   storage `!Sync`, which the payload is anyway.)
pub(super) struct Storage(UnsafeCell<MaybeUninit<Words>>);

impl Storage {
    /// `true` if a `T` is stored inline: at most 32 bytes (four words) and aligned to at most 8
    /// (one word) on 64-bit targets. Larger or over-aligned values are boxed.
    pub(super) const fn fits<T>() -> bool {
        mem::size_of::<T>() <= mem::size_of::<Words>()
            && mem::align_of::<T>() <= mem::align_of::<Words>()
    }

    /// Stores `value`: inline if it fits, else in a new box whose pointer is stored inline. The
    /// storage owns the value from here on; it is dropped only by [`drop_value`](Self::drop_value)
    /// or moved out only by [`read`](Self::read) (a `Storage` has no destructor of its own).
    #[inline]
    pub(super) fn new<T>(value: T) -> Storage {
        let mut words = MaybeUninit::<Words>::uninit();
        if const { Storage::fits::<T>() } {
            // SAFETY: `words` is valid for writes of `size_of::<Words>()` bytes and aligned to
            // `align_of::<Words>()`; `fits::<T>()` says a `T` is no larger and no more aligned.
            unsafe { words.as_mut_ptr().cast::<T>().write(value) };
        } else {
            let boxed: *mut T = Box::into_raw(Box::new(value));
            // SAFETY: as above, for a `*mut T` (asserted to fit, for any sized `T`, at the top of
            // this module).
            unsafe { words.as_mut_ptr().cast::<*mut T>().write(boxed) };
        }
        Storage(UnsafeCell::new(words))
    }

    /// A pointer to the value, valid for reads and writes (through the `UnsafeCell`, also from a
    /// shared borrow of the storage) for as long as the storage is borrowed and holds the value.
    ///
    /// # Safety
    ///
    /// The storage must hold a `T` (it was created by `new::<T>`, and the value was neither
    /// dropped nor moved out).
    #[inline]
    pub(super) unsafe fn value_ptr<T>(&self) -> *mut T {
        let words: *mut MaybeUninit<Words> = self.0.get();
        if const { Storage::fits::<T>() } {
            words.cast::<T>()
        } else {
            // SAFETY: the storage holds a `T` that does not fit, so `new` wrote the box's
            // `*mut T` at the start of the (aligned, initialized as far as that write goes) words.
            unsafe { words.cast::<*mut T>().read() }
        }
    }

    /// Moves the value out. The storage no longer holds a value: the caller must neither use it
    /// again nor drop its value (a payload wraps itself in `ManuallyDrop` first).
    ///
    /// # Safety
    ///
    /// As for [`value_ptr`](Self::value_ptr), and the storage is treated as empty afterwards.
    #[inline]
    pub(super) unsafe fn read<T>(&self) -> T {
        // SAFETY: the storage holds a `T` (the caller's promise); `value_ptr` points at it.
        let value = unsafe { self.value_ptr::<T>() };
        if const { Storage::fits::<T>() } {
            // SAFETY: `value` points at the inline `T`, initialized, aligned; the caller treats
            // the storage as moved out of, so this copy becomes the one owner.
            unsafe { value.read() }
        } else {
            // SAFETY: `value` came from `Box::into_raw` in `new` and was not freed (the storage
            // still held the value); the caller gives up the storage's ownership of the box.
            *unsafe { Box::from_raw(value) }
        }
    }

    /// Drops the value in place (inline) or drops and frees its box (boxed). If the value's
    /// destructor panics, the panic propagates; an inline value is not dropped again (the bytes
    /// are `MaybeUninit`) and a boxed value's box is still freed (by `Box`'s drop glue).
    ///
    /// # Safety
    ///
    /// As for [`value_ptr`](Self::value_ptr); the storage is treated as empty afterwards, even if
    /// the destructor panics.
    pub(super) unsafe fn drop_value<T>(&mut self) {
        // SAFETY: the storage holds a `T` (the caller's promise); `value_ptr` points at it.
        let value = unsafe { self.value_ptr::<T>() };
        if const { Storage::fits::<T>() } {
            // SAFETY: `value` points at the inline `T`, initialized, aligned, borrowed exclusively
            // (`&mut self`); the caller never uses the value again.
            unsafe { ptr::drop_in_place(value) }
        } else {
            // SAFETY: `value` came from `Box::into_raw` in `new` and was not freed; the caller
            // never uses the pointer again, so the box is dropped and freed once.
            drop(unsafe { Box::from_raw(value) })
        }
    }
}

/// What a payload knows about its value's type: one `static` per type (a constant promoted to
/// static memory), so a payload carries a single pointer to it.
pub(super) struct VTable {
    /// `TypeId::of::<T>()`: the type check compares it with the reader's `TypeId::of`, with no
    /// call.
    pub(super) type_id: TypeId,
    /// `std::any::type_name::<T>` (not a `const fn` on stable Rust, so a function to call): for
    /// `Debug` and type mismatch errors only.
    pub(super) type_name: fn() -> &'static str,
    /// `Storage::drop_value::<T>`, or `None` if there is nothing to do: the value is inline and
    /// has no destructor (integers, `()`, shared references), so dropping it needs no call.
    pub(super) drop: Option<unsafe fn(&mut Storage)>,
}

impl VTable {
    /// The vtable of `T`: a static, one per type (per crate that instantiates it; no code
    /// compares vtable addresses, only their `type_id`s).
    #[inline(always)]
    pub(super) fn of<T: 'static>() -> &'static VTable {
        const {
            &VTable {
                type_id: TypeId::of::<T>(),
                type_name: std::any::type_name::<T>,
                drop: if Storage::fits::<T>() && !mem::needs_drop::<T>() {
                    None
                } else {
                    Some(Storage::drop_value::<T>)
                },
            }
        }
    }
}
