//! `JoinHandle`: await a task's output, or abort it.

use super::error::JoinError;
use super::raw::RawTask;
use super::state::TransitionToNotified;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

/// An owned permission to await a spawned task's output.
///
/// `JoinHandle<T>` is a `Future<Output = Result<T, JoinError>>` that works from any executor
/// (tokio, async-executor, `block_on`, another procsched task). Dropping it **detaches** the task:
/// it keeps running and its output is dropped when it finishes. [`abort`](Self::abort) cancels it.
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
///
/// let executor = Executor::builder().workers(2).build().unwrap();
/// let handle = executor.spawn(async { 6 * 7 });
/// assert_eq!(executor.block_on(handle).unwrap(), 42);
/// ```
#[must_use = "dropping a JoinHandle detaches the task; await it or call `abort`"]
pub struct JoinHandle<T> {
    raw: RawTask,
    _output: PhantomData<T>,
}

// SAFETY: the handle only moves `T` out of the task (needs `T: Send`) and touches the task's
// shared state through atomics and the join-waker protocol.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only allows `abort` and `is_finished`, which are atomic operations.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// # Safety
    /// `raw` is a task whose output type is `T`, and this handle takes over its `JOIN_INTEREST`
    /// reference.
    pub(super) unsafe fn new(raw: RawTask) -> JoinHandle<T> {
        JoinHandle {
            raw,
            _output: PhantomData,
        }
    }

    /// Cancels the task.
    ///
    /// An idle or queued task is dropped without being polled again; a task being polled right now
    /// is dropped when that poll returns `Pending`; a task that already finished keeps its output.
    /// Awaiting the handle afterwards yields [`JoinError::is_cancelled`] (unless the task finished
    /// first), or [`JoinError::is_panic`] if the future's destructor panicked while it was
    /// dropped (as tokio does: the panic is contained and becomes the outcome).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::executor::Executor;
    ///
    /// let executor = Executor::builder().workers(1).build().unwrap();
    /// let handle = executor.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// assert!(executor.block_on(handle).unwrap_err().is_cancelled());
    /// ```
    pub fn abort(&self) {
        match self.raw.state().transition_to_notified_and_cancel() {
            TransitionToNotified::Submit => self.raw.schedule(),
            TransitionToNotified::DoNothing => {}
            TransitionToNotified::Dealloc => unreachable!("the handle holds a reference"),
        }
    }

    /// `true` once the task has completed (with an output, a panic or a cancellation).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::executor::Executor;
    ///
    /// let executor = Executor::builder().workers(1).build().unwrap();
    /// let handle = executor.spawn(async {});
    /// executor.block_on(async {
    ///     while !handle.is_finished() {
    ///         procsched::executor::yield_now().await;
    ///     }
    /// });
    /// assert!(handle.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.raw.state().load().is_complete()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut ret = Poll::Pending;
        // SAFETY: `ret` has the type the task's vtable writes (`JoinHandle::new`'s contract).
        unsafe {
            self.raw
                .try_read_output(&mut ret as *mut Poll<Self::Output> as *mut (), cx.waker())
        };
        ret
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        self.raw.drop_join_handle_slow();
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("state", self.raw.state())
            .finish()
    }
}
