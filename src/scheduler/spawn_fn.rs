//! [`SchedulerHandle::spawn_fn`]: a process written as an `async fn`.

use super::cx::ProcessCx;
use super::error::SpawnError;
use super::handle::SchedulerHandle;
use super::process_handle::ProcessHandle;
use crate::process::async_fn::AsyncFnProcess;
use crate::process::context::Owner;
use crate::process::{BoxError, Payload};
use std::future::Future;

impl SchedulerHandle {
    /// Starts a process written as an `async fn`: `body(cx)` runs as a procsched process — with
    /// a PID, a mailbox, observable `Blocked`/`Idle` states, step budgets, terminate and graceful
    /// shutdown. Each `cx.call(..)` is a yield; `cx.recv()` waits for a message. The handle
    /// resolves to the body's `Ok` value; an `Err` fails the process
    /// ([`ProcessError::is_failed`](crate::error::ProcessError::is_failed), with the error as source).
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShuttingDown`] during shutdown, [`SpawnError::Limit`] at the process limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// struct Price(&'static str);
    /// struct Stock(&'static str);
    /// procsched::command!(Price => u64, Stock => u32);
    ///
    /// let sched = Scheduler::builder()
    ///     .workers(2)
    ///     .inline_handler(|Price(_): Price| Ok::<_, BoxError>(250))
    ///     .async_handler(|Stock(_): Stock| async { Ok::<_, BoxError>(3) })
    ///     .build()?;
    /// let handle = sched.handle().spawn_fn(|cx: ProcessCx| async move {
    ///     // Two yields dispatched in one step; the process is Blocked until both reply.
    ///     let (price, stock) = futures::join!(cx.call(Price("sku-1")), cx.call(Stock("sku-1")));
    ///     Ok::<_, BoxError>(price? * u64::from(stock?))
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, 750);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_fn<F, Fut, T, E, M>(&self, body: F) -> Result<ProcessHandle<T, M>, SpawnError>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        // A body may await tokio directly: make sure its workers have a runtime's context.
        let _ = self.inner.process_runtime();
        // Named after the body: `AsyncFnProcess<..>`'s own name would bury it in generics.
        let sched = self.clone();
        let start = move |owner: Owner| body(ProcessCx::new(owner, sched));
        let handle = self.spawn_as(
            AsyncFnProcess::new(start),
            "run",
            Payload::empty(),
            std::any::type_name::<F>(),
        )?;
        Ok(handle.receiving())
    }
}
