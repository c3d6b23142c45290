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
    ///
    /// # Examples
    ///
    /// ```
    /// let p = procsched::Payload::new(vec![1, 2, 3]);
    /// assert_eq!(p.downcast_ref::<Vec<i32>>().map(Vec::len), Some(3));
    /// ```
    pub fn new<T: Send + 'static>(value: T) -> Payload {
        Payload {
            value: smallbox!(value),
            type_name: std::any::type_name::<T>(),
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
    pub fn is<T: 'static>(&self) -> bool {
        (*self.value).type_id() == TypeId::of::<T>()
    }

    /// The `TypeId` of the value.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::any::TypeId;
    /// assert_eq!(procsched::Payload::new(1u8).value_type_id(), TypeId::of::<u8>());
    /// ```
    pub fn value_type_id(&self) -> TypeId {
        (*self.value).type_id()
    }

    /// The name of the value's type (for diagnostics only; not unique).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(procsched::Payload::new(1u8).type_name(), "u8");
    /// ```
    pub fn type_name(&self) -> &'static str {
        self.type_name
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
    pub fn downcast<T: 'static>(self) -> Result<T, Payload> {
        let type_name = self.type_name;
        match self.value.downcast::<T>() {
            Ok(value) => Ok(value.into_inner()),
            Err(value) => Err(Payload { value, type_name }),
        }
    }

    /// Takes the value out as a `T`, or fails with a [`TypeMismatch`] that names both types —
    /// an `Error`, so `?` works in `step`, `init` and handlers. `take::<Payload>()` is the
    /// payload itself.
    ///
    /// # Errors
    ///
    /// [`TypeMismatch`] if the value is not a `T` (the value is dropped).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::Payload;
    ///
    /// assert_eq!(Payload::new(7u64).take::<u64>()?, 7);
    /// let err = Payload::new((1u64, 2i32)).take::<(u64, u64)>().unwrap_err();
    /// assert_eq!(err.to_string(), "expected a value of type `(u64, u64)`, got `(u64, i32)`");
    /// # Ok::<(), procsched::TypeMismatch>(())
    /// ```
    pub fn take<T: 'static>(self) -> Result<T, TypeMismatch> {
        if TypeId::of::<T>() == TypeId::of::<Payload>() {
            // Taking a payload "as a Payload" is the payload itself (the inverse of `wrap`, so a
            // command whose reply type is `Payload` gets the reply as it was sent).
            let mut slot = Some(self);
            if let Some(itself) = (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
                return Ok(itself.take().expect("just filled"));
            }
            unreachable!("T is Payload");
        }
        let actual = self.type_name;
        self.downcast::<T>().map_err(|_| TypeMismatch {
            expected: std::any::type_name::<T>(),
            actual,
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
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        (*self.value).downcast_ref()
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
    pub fn downcast_mut<T: 'static>(&mut self) -> Option<&mut T> {
        (*self.value).downcast_mut()
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
