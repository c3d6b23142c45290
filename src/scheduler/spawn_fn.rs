//! [`SchedulerHandle::spawn_fn`]: a process written as an `async fn`.

use super::cx::ProcessCx;
use super::error::SpawnError;
use super::handle::SchedulerHandle;
use super::links::Link;
use super::process_handle::ProcessHandle;
use super::spawn_options::SpawnOptions;
use crate::process::async_fn::AsyncFnProcess;
use crate::process::context::Owner;
use crate::process::mailbox::{Incarnation, MailboxBound};
use crate::process::{BoxError, MessageType, Payload, Pid, Process};
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
        self.spawn_fn_with(SpawnOptions::new(), body)
    }

    /// [`spawn_fn`](Self::spawn_fn), linked to `parent` from before the body's first poll:
    /// no end of either can be missed by the other (see [`link`](Self::link)).
    ///
    /// # Errors
    ///
    /// As [`spawn_fn`](Self::spawn_fn).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let parent = sched.spawn_fn(|cx: ProcessCx<()>| async move {
    ///     cx.trap_exit(true);
    ///     let child = cx.scheduler().spawn_fn_linked(cx.pid(), |_: ProcessCx| async {
    ///         Err::<(), BoxError>("the child fails".into())
    ///     })?;
    ///     let exit = cx.recv_exit().await?;
    ///     Ok::<_, BoxError>(exit.pid == child.pid() && exit.reason.is_failed())
    /// })?;
    /// assert!(sched.block_on(parent)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_fn_linked<F, Fut, T, E, M>(
        &self,
        parent: Pid,
        body: F,
    ) -> Result<ProcessHandle<T, M>, SpawnError>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        self.spawn_fn_with(SpawnOptions::new().link(parent), body)
    }

    /// [`spawn_fn`](Self::spawn_fn) with an optional link made before the first poll, its
    /// mailbox bounded by `mailbox` (a supervisor's is unbounded, whatever `mailbox_capacity`
    /// says), named `kind` in `process_info` (the user's body's type: `body` may wrap it).
    pub(crate) fn spawn_fn_as<F, Fut, T, E, M>(
        &self,
        body: F,
        link: Option<Link>,
        mailbox: MailboxBound,
        kind: &'static str,
    ) -> Result<ProcessHandle<T, M>, SpawnError>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        // Named after the body: `AsyncFnProcess<..>`'s own name would bury it in generics.
        let sched = self.clone();
        let start = move |owner: Owner| body(ProcessCx::new(owner, sched));
        let incarnation = Incarnation {
            kind,
            takes: MessageType::of::<M>(),
            mailbox,
            ..Incarnation::default()
        };
        let handle = self.spawn_as(
            AsyncFnProcess::new(start),
            "run",
            Payload::empty(),
            incarnation,
            link,
        )?;
        Ok(handle.receiving())
    }

    /// [`spawn`](Self::spawn), linked to `parent` from before the process's first step (see
    /// [`link`](Self::link)).
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::{Events, Process, StepOutput};
    ///
    /// struct Fails;
    /// impl Process for Fails {
    ///     type Output = ();
    ///     fn step(&mut self, _: &mut Events, _: &mut StepOutput<()>) -> Result<(), BoxError> {
    ///         Err("fails".into())
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let parent = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// let child = sched.handle().spawn_linked(parent.pid(), Fails, "run", Payload::empty())?;
    /// # let _ = sched.block_on(child);
    /// assert!(sched.block_on(parent).unwrap_err().exit_reason().is_failed(), "ended with its child");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_linked<P: Process>(
        &self,
        parent: Pid,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<ProcessHandle<P::Output>, SpawnError> {
        self.spawn_with(SpawnOptions::new().link(parent), process, method, input)
    }
}
