//! The scheduler layer's side of async-fn processes: `spawn_fn`, and what a [`ProcessCx`]
//! reaches through its scheduler (spawning children, running futures on the handler runtime).

use super::addr::Addr;
use super::handle::SchedulerHandle;
use super::process_handle::ProcessHandle;
#[cfg(not(loom))]
use super::shared::Inner;
use crate::dispatch::Run;
use crate::process::async_fn::AsyncFnProcess;
use crate::process::{BoxError, Payload, ProcessCx, SpawnError};
use std::any::Any;
use std::future::Future;
use std::sync::Arc;

impl SchedulerHandle {
    /// This handle's shared state as the process layer holds it: the same `Arc`, no allocation.
    #[cfg(not(loom))]
    fn erased(&self) -> Arc<dyn Any + Send + Sync> {
        self.inner.clone()
    }

    /// Under loom the shared state sits in loom's `Arc`, which does not erase to std's.
    #[cfg(loom)]
    fn erased(&self) -> Arc<dyn Any + Send + Sync> {
        Arc::new(self.clone())
    }

    /// The handle an erased host stands for (the inverse of [`erased`](Self::erased)).
    fn from_erased(host: &Arc<dyn Any + Send + Sync>) -> Option<SchedulerHandle> {
        #[cfg(not(loom))]
        {
            let inner = Arc::downcast::<Inner>(host.clone()).ok()?;
            Some(SchedulerHandle { inner })
        }
        #[cfg(loom)]
        {
            host.downcast_ref::<SchedulerHandle>().cloned()
        }
    }

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
        let handle = self.spawn_as(
            AsyncFnProcess::<F, Fut, M>::new(body, self.erased()),
            "run",
            Payload::empty(),
            std::any::type_name::<F>(),
        )?;
        Ok(handle.receiving())
    }
}

/// The typed side of [`ProcessCx`], which the process layer keeps type-erased.
impl<M: Send + 'static> ProcessCx<M> {
    /// This process's own address: hand it to others so they can send it `M`s (a reply
    /// address in a request, a registration).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(2).build()?;
    /// let echo = sched.spawn_fn(|cx: ProcessCx<(u32, Addr<u32>)>| async move {
    ///     let (n, reply_to) = cx.recv().await?;
    ///     reply_to.send(n * 2)?;
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// let echo_addr = echo.addr();
    /// let asker = sched.spawn_fn(move |cx: ProcessCx<u32>| async move {
    ///     echo_addr.send((21, cx.addr()))?;
    ///     Ok::<_, BoxError>(cx.recv().await?)
    /// })?;
    /// assert_eq!(sched.block_on(asker)?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn addr(&self) -> Addr<M> {
        self.scheduler().addr(self.pid())
    }
    /// The scheduler running this process (a cheap handle: a reference count).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     Ok::<_, BoxError>(cx.scheduler().live_processes())
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scheduler(&self) -> SchedulerHandle {
        SchedulerHandle::from_erased(self.host())
            .expect("this process has no scheduler: it runs in procsched::testing::Harness")
    }

    /// Starts a child process written as an `async fn` (see [`SchedulerHandle::spawn_fn`]);
    /// await its handle to get its result.
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(2).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let child = cx.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(20) })?;
    ///     Ok::<_, BoxError>(child.await? + 1)
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, 21);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_fn<F, Fut, T, E, N>(&self, body: F) -> Result<ProcessHandle<T, N>, SpawnError>
    where
        F: FnOnce(ProcessCx<N>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        N: Send + 'static,
    {
        self.scheduler().spawn_fn(body)
    }

    /// Runs any `Send` future as a task on the scheduler's tokio runtime (the handler runtime)
    /// and resolves to its output: for work that is not a registered command. Dropping the
    /// returned [`Run`] aborts the task.
    ///
    /// Futures that only need a tokio *context* (timers, I/O) can also be awaited directly in
    /// the body: the workers run inside the handler runtime's context.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    ///
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let sched = Scheduler::builder().workers(1).tokio_handle(runtime.handle().clone()).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let slept = cx.run(async {
    ///         tokio::time::sleep(Duration::from_millis(1)).await;
    ///         "rested"
    ///     });
    ///     Ok::<_, BoxError>(slept.await?)
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, "rested");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run<F>(&self, future: F) -> Run<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // In the process's span (current during its step), so the future's events carry its PID.
        let future = tracing::Instrument::in_current_span(future);
        Run::spawn(self.scheduler().inner.process_runtime(), future)
    }
}
