//! `PayloadSlot`: a payload owned where it lies, so a handler can take just its value.
//!
//! # Why
//!
//! A yield is written into the step's yields buffer by `StepOutput::yield_command` or an async-fn
//! call, in the widths the compiler chose for that code (often 8-byte stores). Moving the whole
//! yield out again (`Vec::pop`, a by-value argument) reads it back in 16-byte loads that straddle
//! those stores: the CPU cannot forward them from its store buffer and stalls until the stores
//! retire, on every yield (`docs/bench-process-history.md`, "Store-forwarding stalls on the
//! yield path").
//! A slot lets dispatch read only what it needs — the vtable word to find the handler, then the
//! command's own bytes in the handler's `downcast` — each with loads that match how it was
//! written.
//!
//! # Ownership
//!
//! A `PayloadSlot` borrows the memory of a payload whose owner has given it up
//! ([`PayloadSlot::new`]'s contract). From then on the slot is the payload's one owner, and exactly
//! one of these ends it: a successful [`downcast`](PayloadSlot::downcast) moves the value out, or
//! `Drop` drops it in place (also in an unwind). The memory itself stays the lender's, which
//! must not read or drop the payload again.

use super::Payload;
use std::any::TypeId;
use std::fmt;
use std::mem::ManuallyDrop;

/// A payload owned in place (module docs).
pub(crate) struct PayloadSlot<'a> {
    payload: &'a mut ManuallyDrop<Payload>,
}

impl<'a> PayloadSlot<'a> {
    /// Takes ownership of the payload in `payload`.
    ///
    /// # Safety
    ///
    /// `payload` holds a live payload, and its owner gives it up: after this call nothing else
    /// reads, moves or drops that payload (the slot does one of those, once).
    #[inline]
    pub(crate) unsafe fn new(payload: &'a mut ManuallyDrop<Payload>) -> PayloadSlot<'a> {
        PayloadSlot { payload }
    }

    /// Lends `payload` to `f` as a slot (the safe way to make one, for tests).
    #[cfg(test)]
    pub(crate) fn lend<R>(payload: Payload, f: impl FnOnce(PayloadSlot<'_>) -> R) -> R {
        let mut payload = ManuallyDrop::new(payload);
        // SAFETY: `payload` is live, and nothing but the slot uses it after this.
        f(unsafe { PayloadSlot::new(&mut payload) })
    }

    /// The payload's value type, as [`Payload::value_type_id`].
    #[inline]
    pub(crate) fn value_type_id(&self) -> TypeId {
        self.payload.value_type_id()
    }

    /// The payload's value type's name, as [`Payload::type_name`].
    pub(crate) fn type_name(&self) -> &'static str {
        self.payload.type_name()
    }

    /// Moves the value out if it is a `T` (reading only the value's bytes, or its box pointer);
    /// otherwise hands the slot back untouched.
    #[inline]
    pub(crate) fn downcast<T: 'static>(self) -> Result<T, PayloadSlot<'a>> {
        if !self.payload.is::<T>() {
            return Err(self);
        }
        let this = ManuallyDrop::new(self);
        // SAFETY: the storage holds a `T` (the type check above; see `Payload::downcast`), and
        // the slot owns it (`new`'s contract). `this` is never dropped, and the lender never
        // touches the payload again, so the value read here has one owner, the caller.
        Ok(unsafe { this.payload.storage.read::<T>() })
    }
}

impl Drop for PayloadSlot<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the slot owns the payload (`new`'s contract) and still holds it: a successful
        // `downcast` never lets its slot drop. It is dropped once, here.
        unsafe { ManuallyDrop::drop(self.payload) }
    }
}

impl fmt::Debug for PayloadSlot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PayloadSlot<{}>", self.type_name())
    }
}
