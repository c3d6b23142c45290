//! `Payload`: a type-erased `Send` value that crosses process boundaries without forced clones.
//!
//! # Representation
//!
//! A payload is five words (40 bytes on 64-bit targets): a pointer to its value type's static
//! [`VTable`] and four words of [`Storage`].
//!
//! ```text
//! Payload { vtable: &'static VTable, storage: [usize; 4] }
//!             |                         |
//!             |                         +-- inline: the value itself, if size <= 32 and align <= 8
//!             |                         +-- boxed:  the value's `Box::into_raw` pointer (word 0)
//!             +-- VTable { type_id: TypeId::of::<T>(), type_name, drop }
//! ```
//!
//! - **Inline or boxed** follows from the type alone ([`Storage::fits`], a constant), so it is
//!   recorded nowhere: code that knows `T` (after a type check) knows where the value is. Zero-sized
//!   types are inline; over-aligned types (align 16, 32, ...) are boxed whatever their size.
//! - **Type checks** (`is`, `downcast*`, `take`) compare `vtable.type_id` with `TypeId::of::<T>()`:
//!   a load and a compare, no call. `type_name` is a function (`std::any::type_name` is not a
//!   `const fn`), called for `Debug` and mismatch errors only. The vtable is a constant promoted
//!   to a `static` (`VTable::of`; `TypeId::of` in a constant is why the crate needs Rust 1.91),
//!   and the non-null `&'static` gives `Option<Payload>` a niche.
//! - **Ownership**: the payload owns the value. Exactly one of these ends it: `Drop for Payload`
//!   calls `vtable.drop` (drops the inline value in place, or drops and frees the box; `None`
//!   for inline types without a destructor), or a successful `downcast`/`take` moves the value
//!   out ([`Storage::read`], which also frees the box) from a payload in `ManuallyDrop`. A failed
//!   type check touches nothing: `downcast` hands the payload back, `take` drops it.
//! - **Auto traits** are those of the former `SmallBox<dyn Any + Send>` representation, through a
//!   `PhantomData<dyn Any + Send>`: `Send` (every value is `Send`: `new` requires it), not `Sync`
//!   (a `&Payload` hands out `&T`, and `T` need not be `Sync`), not `Unpin`, not unwind-safe.
//! - A `Payload` holding a `Payload` is a value like any other (boxed: 40 bytes do not fit);
//!   only `take::<Payload>()` and the crate's `wrap` treat `Payload` specially (see their docs).

mod slot;
mod vtable;

#[cfg(test)]
pub(crate) mod tests;

pub(crate) use slot::PayloadSlot;
use std::any::{Any, TypeId};
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use vtable::{Storage, VTable};

/// A type-erased, owned, `Send` value: inputs, results, message bodies, command results.
///
/// Values of up to four machine words (32 bytes on 64-bit targets) are stored inline, so the
/// common small payloads — integers, ids, `Arc`s, short structs, `()` — never touch the heap;
/// larger values are boxed.
///
/// # Examples
///
/// ```
/// use procsched::Payload;
///
/// let p = Payload::new(42u64);
/// assert!(p.is::<u64>());
/// assert_eq!(p.downcast_ref::<u64>(), Some(&42));
/// assert_eq!(p.downcast::<u64>().unwrap(), 42);
///
/// let wrong = Payload::new("text");
/// let back = wrong.downcast::<u64>().unwrap_err(); // the payload is handed back
/// assert_eq!(back.downcast::<&str>().unwrap(), "text");
/// ```
pub struct Payload {
    /// The value's type: `TypeId`, name, destructor.
    vtable: &'static VTable,
    /// The value (inline) or its box's pointer: which one follows from the type.
    storage: Storage,
    /// `Send`, not `Sync`, as a `Box<dyn Any + Send>`; and `!Unpin`, unlike one, with every
    /// event that holds it. Deliberately: an API review asked for `Unpin`, and made so
    /// (`PhantomData<Box<dyn Any + Send>>`, or an `impl Unpin`) the ring took 3.5 % more
    /// instructions (`msgprobe ring_sm 2` under callgrind: 283.4 M against 273.2–274.5 M) —
    /// `&mut` to an `Unpin` type is `noalias` to LLVM, which then compiled the step loop
    /// differently. Hold a payload in a hand-written future through `Box::pin` or `pin!`.
    _owns: PhantomData<dyn Any + Send>,
}

impl Payload {
    /// Wraps `value`.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = procsched::Payload::new(vec![1, 2, 3]);
    /// assert_eq!(p.downcast_ref::<Vec<i32>>().map(Vec::len), Some(3));
    /// ```
    pub fn new<T: Send + 'static>(value: T) -> Payload {
        Payload {
            vtable: VTable::of::<T>(),
            storage: Storage::new(value),
            _owns: PhantomData,
        }
    }

    /// The unit payload, `Payload::new(())`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::Payload::empty().is::<()>());
    /// ```
    pub fn empty() -> Payload {
        Payload::new(())
    }

    /// `true` if the value is a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = procsched::Payload::new(1u8);
    /// assert!(p.is::<u8>() && !p.is::<u16>());
    /// ```
    #[inline]
    pub fn is<T: 'static>(&self) -> bool {
        self.vtable.type_id == TypeId::of::<T>()
    }

    /// The `TypeId` of the value.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::any::TypeId;
    /// assert_eq!(procsched::Payload::new(1u8).value_type_id(), TypeId::of::<u8>());
    /// ```
    #[inline]
    pub fn value_type_id(&self) -> TypeId {
        self.vtable.type_id
    }

    /// The name of the value's type (for diagnostics only; not unique).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(procsched::Payload::new(1u8).type_name(), "u8");
    /// ```
    #[inline]
    pub fn type_name(&self) -> &'static str {
        (self.vtable.type_name)()
    }

    /// Takes the value out as a `T`.
    ///
    /// # Errors
    ///
    /// Returns the payload unchanged if the value is not a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = procsched::Payload::new(5i64);
    /// let back = p.downcast::<u8>().unwrap_err(); // wrong type: handed back
    /// assert_eq!(back.downcast::<i64>().unwrap(), 5);
    /// ```
    #[inline]
    pub fn downcast<T: 'static>(self) -> Result<T, Payload> {
        if !self.is::<T>() {
            return Err(self);
        }
        let this = ManuallyDrop::new(self);
        // SAFETY: the storage holds a `T`: `new::<U>` pairs `VTable::of::<U>()` with
        // `Storage::new::<U>`, and `U` is `T` (same `TypeId`); the value is still there (only
        // `drop` and this move it out, each from a payload that is then gone). `this` is never
        // dropped or used again, so the value now has one owner, the caller.
        Ok(unsafe { this.storage.read::<T>() })
    }

    /// Moves the value out as a `T`, leaving the payload empty (`()`), if it is a `T`: a read
    /// where the payload lies, for a payload inside a larger value (a message in its queue
    /// slot) that moving whole would copy (`process/typed.rs`, `take_lone`).
    #[inline]
    pub(crate) fn take_value<T: 'static>(&mut self) -> Option<T> {
        if !self.is::<T>() {
            return None;
        }
        // SAFETY: the storage holds a `T`, still there (as in `downcast`). After the read the
        // value has one owner, the caller: the vtable becomes `()`'s at once, so the payload
        // never drops nor reads the moved-out value again (`()` has no destructor and no
        // bytes to read), and `Storage` has no destructor of its own. Nothing between the read
        // and the store can unwind.
        let value = unsafe { self.storage.read::<T>() };
        self.vtable = VTable::of::<()>();
        Some(value)
    }

    /// Takes the value out as a `T`, or fails with a [`TypeMismatch`] that names both types —
    /// an `Error`, so `?` works in `step`, `init` and handlers. `take::<Payload>()` is the
    /// payload itself.
    ///
    /// # Errors
    ///
    /// [`TypeMismatch`] if the value is not a `T` (the value is dropped; a panic from its
    /// destructor is contained and traced).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::Payload;
    ///
    /// assert_eq!(Payload::new(7u64).take::<u64>()?, 7);
    /// let err = Payload::new((1u64, 2i32)).take::<(u64, u64)>().unwrap_err();
    /// assert_eq!(err.to_string(), "expected a value of type `(u64, u64)`, got `(u64, i32)`");
    /// # Ok::<(), procsched::error::TypeMismatch>(())
    /// ```
    pub fn take<T: 'static>(self) -> Result<T, TypeMismatch> {
        self.take_counted().map_err(|(mismatch, _)| mismatch)
    }

    /// [`take`](Self::take), and on a mismatch how many destructor panics dropping the value
    /// contained, for a caller that knows whose value it was to count them (`contain.rs`).
    #[inline]
    pub(crate) fn take_counted<T: 'static>(self) -> Result<T, (TypeMismatch, u64)> {
        if TypeId::of::<T>() == TypeId::of::<Payload>() {
            // Taking a payload "as a Payload" is the payload itself (the inverse of `wrap`, so a
            // command whose reply type is `Payload` gets the reply as it was sent).
            let mut slot = Some(self);
            if let Some(itself) = (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
                return Ok(itself.take().expect("just filled"));
            }
            unreachable!("T is Payload");
        }
        self.downcast::<T>().map_err(|payload| {
            let mismatch = TypeMismatch {
                expected: std::any::type_name::<T>(),
                actual: payload.type_name(),
            };
            // User code may be reading it inside the scheduler (a call's reply, a receive): a
            // destructor's panic must not unwind from here (`contain.rs`).
            let panics = crate::process::drop_contained(payload);
            (mismatch, panics)
        })
    }

    /// Wraps `value`, unless it already is a `Payload` (then it is returned as is, not nested).
    pub(crate) fn wrap<T: Send + 'static>(value: T) -> Payload {
        let mut slot = Some(value);
        match (&mut slot as &mut dyn Any).downcast_mut::<Option<Payload>>() {
            Some(payload) => payload.take().expect("just filled"),
            None => Payload::new(slot.take().expect("just filled")),
        }
    }

    /// Borrows the value as a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = procsched::Payload::new(String::from("hi"));
    /// assert_eq!(p.downcast_ref::<String>().map(String::as_str), Some("hi"));
    /// ```
    #[inline]
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        if !self.is::<T>() {
            return None;
        }
        // SAFETY: the storage holds a `T` (same argument as in `downcast`); the pointer is valid
        // and the value initialized for as long as `self` is borrowed, which the returned
        // reference's lifetime ties it to. Interior mutability in `T` is allowed: the storage is
        // an `UnsafeCell`.
        Some(unsafe { &*self.storage.value_ptr::<T>() })
    }

    /// Mutably borrows the value as a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut p = procsched::Payload::new(1u32);
    /// *p.downcast_mut::<u32>().unwrap() += 1;
    /// assert_eq!(p.take::<u32>().unwrap(), 2);
    /// ```
    #[inline]
    pub fn downcast_mut<T: 'static>(&mut self) -> Option<&mut T> {
        if !self.is::<T>() {
            return None;
        }
        // SAFETY: as in `downcast_ref`, and `self` is borrowed exclusively for the returned
        // reference's lifetime, so the reference is unique.
        Some(unsafe { &mut *self.storage.value_ptr::<T>() })
    }
}

/// A value was not of the type its reader expected: returned by [`Payload::take`] and by the
/// typed readers built on it (typed command results, typed messages, typed handles).
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Payload};
///
/// fn read(p: Payload) -> Result<u64, BoxError> {
///     Ok(p.take::<u64>()?) // converts into any error type that takes `Error + Send + Sync`
/// }
/// assert!(read(Payload::new("seven")).unwrap_err().to_string().contains("`&str`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a value of type `{expected}`, got `{actual}`")]
pub struct TypeMismatch {
    expected: &'static str,
    actual: &'static str,
}

impl TypeMismatch {
    /// The type the reader asked for.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = procsched::Payload::new(1u8).take::<u16>().unwrap_err();
    /// assert_eq!((err.expected(), err.actual()), ("u16", "u8"));
    /// ```
    pub fn expected(&self) -> &'static str {
        self.expected
    }

    /// The type the value had.
    ///
    /// # Examples
    ///
    /// See [`expected`](Self::expected).
    pub fn actual(&self) -> &'static str {
        self.actual
    }
}

impl Default for Payload {
    fn default() -> Payload {
        Payload::empty()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload<{}>", self.type_name())
    }
}

impl Drop for Payload {
    #[inline]
    fn drop(&mut self) {
        if let Some(drop_value) = self.vtable.drop {
            // SAFETY: `vtable.drop` is `Storage::drop_value::<T>` for the `T` that `new` stored
            // (see `downcast`), and the value is still there: a payload whose value was moved
            // out is in `ManuallyDrop` and never gets here. Nothing uses the storage afterwards,
            // panic or not.
            unsafe { drop_value(&mut self.storage) }
        }
    }
}
