//! Why a task produced no output.

use crate::loom::Mutex;
use std::any::Any;
use std::fmt;

/// The error a [`JoinHandle`](super::JoinHandle) resolves to when its task did not finish normally.
///
/// A task either panicked ([`is_panic`](Self::is_panic), with the panic's message), was cancelled
/// by [`JoinHandle::abort`](super::JoinHandle::abort) ([`is_cancelled`](Self::is_cancelled)), or
/// was dropped unfinished because its executor shut down — including a task spawned after shutdown
/// ([`is_shutdown`](Self::is_shutdown)). A future whose destructor panics when it is dropped (on
/// completion, abort or shutdown) resolves as panicked: the panic is contained and becomes the
/// outcome, as in tokio.
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
///
/// let executor = Executor::builder().workers(1).build().unwrap();
/// let handle = executor.spawn(async { panic!("boom") });
/// let err = executor.block_on(handle).unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(err.panic_message(), Some("boom"));
/// ```
pub struct JoinError {
    repr: Repr,
}

enum Repr {
    Cancelled,
    Shutdown,
    Panic {
        message: Option<String>,
        // A `Mutex` only to make the error `Sync` (the payload is `Send` only); it is locked once,
        // by `into_panic`, off every hot path.
        payload: Mutex<Option<Box<dyn Any + Send + 'static>>>,
    },
}

impl JoinError {
    pub(crate) fn cancelled() -> JoinError {
        JoinError {
            repr: Repr::Cancelled,
        }
    }

    pub(crate) fn shutdown() -> JoinError {
        JoinError {
            repr: Repr::Shutdown,
        }
    }

    pub(crate) fn panic(payload: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError {
            repr: Repr::Panic {
                message: panic_message(&*payload).map(str::to_owned),
                payload: Mutex::new(Some(payload)),
            },
        }
    }

    /// `true` if the task was cancelled by [`JoinHandle::abort`](super::JoinHandle::abort).
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let task = executor.spawn(std::future::pending::<()>());
    /// task.abort();
    /// assert!(executor.block_on(task).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// `true` if the task was dropped unfinished because the executor shut down (or it was
    /// spawned after shutdown).
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// executor.shutdown(std::time::Duration::from_secs(1));
    /// assert!(executor.block_on(executor.spawn(async {})).unwrap_err().is_shutdown());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_shutdown(&self) -> bool {
        matches!(self.repr, Repr::Shutdown)
    }

    /// `true` if the task panicked.
    ///
    /// # Examples
    ///
    /// ```
    /// # std::panic::set_hook(Box::new(|_| {}));
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let task = executor.spawn(async { panic!("boom") });
    /// assert!(executor.block_on(task).unwrap_err().is_panic());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic { .. })
    }

    /// The panic message, if the task panicked with a `&str` or `String` payload.
    ///
    /// # Examples
    ///
    /// ```
    /// # std::panic::set_hook(Box::new(|_| {}));
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let task = executor.spawn(async { panic!("boom") });
    /// assert_eq!(executor.block_on(task).unwrap_err().panic_message(), Some("boom"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic { message, .. } => message.as_deref(),
            _ => None,
        }
    }

    /// The panic payload, to resume the panic with [`std::panic::resume_unwind`].
    ///
    /// # Errors
    ///
    /// Returns `self` unchanged if the task did not panic.
    ///
    /// # Examples
    ///
    /// ```
    /// # std::panic::set_hook(Box::new(|_| {}));
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let task = executor.spawn(async { std::panic::panic_any(7u8) });
    /// let payload = executor.block_on(task).unwrap_err().try_into_panic().unwrap();
    /// assert_eq!(payload.downcast_ref::<u8>(), Some(&7));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic { payload, message } => {
                let taken = crate::loom::lock(&payload).take();
                match taken {
                    Some(payload) => Ok(payload),
                    None => Err(JoinError {
                        repr: Repr::Panic { payload, message },
                    }),
                }
            }
            repr => Err(JoinError { repr }),
        }
    }
}

/// The message of a panic payload, for the two payload types `panic!` produces.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        Some(s)
    } else {
        payload.downcast_ref::<String>().map(String::as_str)
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => f.write_str("task was cancelled"),
            Repr::Shutdown => f.write_str("task was dropped because the executor shut down"),
            Repr::Panic {
                message: Some(m), ..
            } => write!(f, "task panicked: {m}"),
            Repr::Panic { message: None, .. } => f.write_str("task panicked"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => f.write_str("JoinError::Cancelled"),
            Repr::Shutdown => f.write_str("JoinError::Shutdown"),
            Repr::Panic { message, .. } => write!(f, "JoinError::Panic({message:?})"),
        }
    }
}

impl std::error::Error for JoinError {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn panic_payloads_keep_their_message() {
        let e = JoinError::panic(Box::new(String::from("owned")));
        assert_eq!(e.panic_message(), Some("owned"));
        assert_eq!(e.to_string(), "task panicked: owned");
        let payload = e.try_into_panic().unwrap();
        assert_eq!(payload.downcast_ref::<String>().unwrap(), "owned");
        let e = JoinError::panic(Box::new(17u8));
        assert_eq!(e.panic_message(), None);
        assert!(JoinError::cancelled().try_into_panic().is_err());
    }

    #[test]
    fn join_error_is_send_sync_error() {
        fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}
        assert_error::<JoinError>();
    }
}
