//! [`Run`]: any `Send` future shipped to the handler runtime, awaited by a process.

use crate::process::{take_panic_message, CommandError};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future running as a task on the scheduler's tokio runtime, awaited from an async-fn
/// process (made by [`ProcessCx::run`](crate::ProcessCx::run)). Resolves to the future's output;
/// a panic in it becomes [`CommandError::Panicked`]. Dropping it aborts the task.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
///     // Both run as tokio tasks at once; the process waits without holding its worker.
///     let (a, b) = tokio::join!(cx.run(async { 20 }), cx.run(async { 22 }));
///     // A panic in the future fails its `Run`, not the process.
///     let bad = cx.run(async { "forty".parse::<u32>().unwrap() }).await;
///     Ok::<_, BoxError>((a? + b?, bad.unwrap_err().is_panicked()))
/// })?;
/// assert_eq!(sched.block_on(handle)?, (42, true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the task is aborted when this is dropped"]
#[derive(Debug)]
pub struct Run<T> {
    task: Option<tokio::task::JoinHandle<T>>,
}

impl<T: Send + 'static> Run<T> {
    /// Spawns `future` on `runtime`; without one, the `Run` fails at once.
    pub(crate) fn spawn<F>(runtime: Option<&tokio::runtime::Handle>, future: F) -> Run<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        Run {
            task: runtime.map(|runtime| runtime.spawn(future)),
        }
    }
}

impl<T> Future for Run<T> {
    type Output = Result<T, CommandError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(task) = self.task.as_mut() else {
            return Poll::Ready(Err(CommandError::failed(
                "no tokio runtime to run the future on: the scheduler's own could not be built \
                 (its error is in the log; give the builder one with `tokio_handle`)",
            )));
        };
        Pin::new(task).poll(cx).map(|joined| {
            self.task = None;
            joined.map_err(|error| match error.try_into_panic() {
                Ok(panic) => CommandError::Panicked(take_panic_message(panic)),
                Err(_) => CommandError::Cancelled,
            })
        })
    }
}

impl<T> Drop for Run<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
