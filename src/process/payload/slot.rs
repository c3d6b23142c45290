//! `PayloadSlot`: a payload owned where it lies, so a handler can take just its value.
//!
//! # Why
//!
//! A yield is written into the step's yields buffer by `StepOutput::yield_command` or an async-fn
//! call, in the widths the compiler chose for that code (often 8-byte stores). Moving the whole
//! yield out again (`Vec::pop`, a by-value argument) reads it back in 16-byte loads that straddle
//! those stores: the CPU cannot forward them from its store buffer and stalls until the stores
//! retire, on every yield (`docs/bench-process.md`, "Store-forwarding stalls on the yield path").
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

#[cfg(test)]
mod tests {
    //! Run under Miri too (`.ci/run`): every value is moved out or dropped exactly once.
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Counts its drops; `N` bytes of ballast decide inline (≤ 24) or boxed.
    struct Counted<const N: usize>(Arc<AtomicUsize>, [u8; N]);

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn downcast_moves_the_value_out_once<const N: usize>() {
        let drops = Arc::new(AtomicUsize::new(0));
        let value = PayloadSlot::lend(Payload::new(Counted(drops.clone(), [3; N])), |slot| {
            assert_eq!(slot.value_type_id(), TypeId::of::<Counted<N>>());
            slot.downcast::<Counted<N>>().expect("a Counted")
        });
        assert_eq!((drops.load(SeqCst), value.1), (0, [3; N]));
        drop(value);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn downcast_moves_an_inline_value_out_once() {
        downcast_moves_the_value_out_once::<8>();
    }

    #[test]
    fn downcast_moves_a_boxed_value_out_once() {
        downcast_moves_the_value_out_once::<64>();
    }

    fn a_mismatch_hands_the_slot_back_and_drops_once<const N: usize>() {
        let drops = Arc::new(AtomicUsize::new(0));
        PayloadSlot::lend(Payload::new(Counted(drops.clone(), [0; N])), |slot| {
            let slot = slot.downcast::<u64>().expect_err("not a u64");
            assert!(slot.type_name().contains("Counted"));
            assert_eq!(drops.load(SeqCst), 0);
        });
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn a_mismatch_hands_an_inline_slot_back_and_drops_it_once() {
        a_mismatch_hands_the_slot_back_and_drops_once::<8>();
    }

    #[test]
    fn a_mismatch_hands_a_boxed_slot_back_and_drops_it_once() {
        a_mismatch_hands_the_slot_back_and_drops_once::<64>();
    }

    #[test]
    fn a_slot_dropped_in_an_unwind_drops_its_value_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let payload = Payload::new(Counted(drops.clone(), [0; 64]));
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            PayloadSlot::lend(payload, |slot| {
                let _owned = slot;
                panic!("the handler panics before taking its command");
            })
        }));
        assert!(unwound.is_err());
        assert_eq!(drops.load(SeqCst), 1);
    }
}
