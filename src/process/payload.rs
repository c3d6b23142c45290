//! `Payload`: a type-erased `Send` value that crosses process boundaries without forced clones.

use smallbox::space::S4;
use smallbox::{smallbox, SmallBox};
use std::any::{Any, TypeId};
use std::fmt;

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
    value: SmallBox<dyn Any + Send, S4>,
    type_name: &'static str,
}

impl Payload {
    /// Wraps `value`.
    pub fn new<T: Send + 'static>(value: T) -> Payload {
        Payload {
            value: smallbox!(value),
            type_name: std::any::type_name::<T>(),
        }
    }

    /// The unit payload, `Payload::new(())`.
    pub fn empty() -> Payload {
        Payload::new(())
    }

    /// `true` if the value is a `T`.
    pub fn is<T: 'static>(&self) -> bool {
        (*self.value).type_id() == TypeId::of::<T>()
    }

    /// The `TypeId` of the value.
    pub fn value_type_id(&self) -> TypeId {
        (*self.value).type_id()
    }

    /// The name of the value's type (for diagnostics only; not unique).
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Takes the value out as a `T`.
    ///
    /// # Errors
    ///
    /// Returns the payload unchanged if the value is not a `T`.
    pub fn downcast<T: 'static>(self) -> Result<T, Payload> {
        let type_name = self.type_name;
        match self.value.downcast::<T>() {
            Ok(value) => Ok(value.into_inner()),
            Err(value) => Err(Payload { value, type_name }),
        }
    }

    /// Borrows the value as a `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        (*self.value).downcast_ref()
    }

    /// Mutably borrows the value as a `T`.
    pub fn downcast_mut<T: 'static>(&mut self) -> Option<&mut T> {
        (*self.value).downcast_mut()
    }
}

impl Default for Payload {
    fn default() -> Payload {
        Payload::empty()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload<{}>", self.type_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_stay_inline_and_large_ones_are_boxed() {
        assert!(!Payload::new(7u64).value.is_heap());
        assert!(!Payload::new([0u64; 4]).value.is_heap());
        assert!(Payload::new([0u64; 5]).value.is_heap());
    }

    #[test]
    fn destructors_run_once_whether_taken_or_dropped() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::sync::Arc;
        let count = Arc::new(AtomicUsize::new(0));
        struct D(Arc<AtomicUsize>);
        impl Drop for D {
            fn drop(&mut self) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        drop(Payload::new(D(count.clone())));
        assert_eq!(count.load(SeqCst), 1);
        let taken = Payload::new(D(count.clone())).downcast::<D>().ok().unwrap();
        assert_eq!(count.load(SeqCst), 1);
        drop(taken);
        assert_eq!(count.load(SeqCst), 2);
    }
}
