//! [`SpawnOptions`]: what one spawn sets for its process alone (its mailbox's bound, a link to
//! a parent), and the spawns that take them. Every other spawn is one of these with default
//! options.

use super::cx::ProcessCx;
use super::error::SpawnError;
use super::handle::SchedulerHandle;
use super::links::Link;
use super::process_handle::ProcessHandle;
use crate::process::mailbox::{Incarnation, MailboxBound};
use crate::process::{BoxError, Payload, Pid, Process};
use std::future::Future;

/// Options for one spawn ([`SchedulerHandle::spawn_fn_with`], [`SchedulerHandle::spawn_with`],
/// [`ProcessCx::spawn_fn_with`]): the process's own mailbox bound, and a parent to link it to.
///
/// The default is what [`spawn_fn`](SchedulerHandle::spawn_fn) does: the scheduler's
/// [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity), no link. A bound
/// set here is the process's for its whole life, whatever the scheduler's is: every send to it
/// ([`send`](SchedulerHandle::send), [`Addr::send`](crate::Addr::send),
/// [`send_wait`](crate::Addr::send_wait), an ask, a remote node's send) meets this bound.
///
/// # Examples
///
/// A pipeline whose stages have bounds of their own, on a scheduler whose processes are
/// otherwise unbounded:
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let fast = SpawnOptions::new().mailbox_capacity(1_024);
/// let slow = SpawnOptions::new().mailbox_capacity(16);
/// let parse = sched.spawn_fn_with(fast, |cx: ProcessCx<String>| async move {
///     Ok::<_, BoxError>(cx.recv().await?.len())
/// })?;
/// let store = sched.spawn_fn_with(slow, |cx: ProcessCx<usize>| async move {
///     Ok::<_, BoxError>(cx.recv().await?)
/// })?;
/// parse.addr().send("a line".to_owned())?;
/// store.addr().send(sched.block_on(parse)?)?;
/// assert_eq!(sched.block_on(store)?, 6);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "options do nothing until a spawn takes them"]
pub struct SpawnOptions {
    mailbox: MailboxBound,
    link: Option<Pid>,
}

impl SpawnOptions {
    /// The defaults: the scheduler's mailbox capacity, no link.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn_with(SpawnOptions::new(), |_: ProcessCx| async { Ok::<_, BoxError>(1) })?;
    /// assert_eq!(sched.block_on(handle)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> SpawnOptions {
        SpawnOptions::default()
    }

    /// At most `capacity` messages wait in this process's mailbox, counted and refused as the
    /// scheduler's [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity)
    /// would (`MailboxFull`; `send_wait` waits for room), whatever that is. As there, 0
    /// refuses every message (`send_wait` too, at once) and `usize::MAX` is unbounded.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?; // unbounded by default
    /// let opts = SpawnOptions::new().mailbox_capacity(0);
    /// let handle = sched.spawn_fn_with(opts, |cx: ProcessCx<u8>| async move {
    ///     let _ = cx.cancelled().await;
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// assert!(handle.addr().send(1).unwrap_err().is_mailbox_full());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn mailbox_capacity(mut self, capacity: usize) -> SpawnOptions {
        self.mailbox = MailboxBound::Capacity(capacity);
        self
    }

    /// No bound on this process's mailbox, whatever the scheduler's
    /// [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity) is: for the
    /// one process among bounded ones that must take everything sent to it.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).mailbox_capacity(1).build()?;
    /// let opts = SpawnOptions::new().unbounded_mailbox();
    /// let sink = sched.spawn_fn_with(opts, |cx: ProcessCx<u8>| async move {
    ///     let _ = cx.cancelled().await;
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// for n in 0..100 {
    ///     sink.addr().send(n)?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unbounded_mailbox(mut self) -> SpawnOptions {
        self.mailbox = MailboxBound::Unbounded;
        self
    }

    /// Links the process to `parent` from before its first poll (or step): no end of either
    /// can be missed by the other — what [`spawn_fn_linked`](SchedulerHandle::spawn_fn_linked)
    /// does (see [`link`](SchedulerHandle::link)).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let parent = sched.spawn_fn(|cx: ProcessCx<()>| async move {
    ///     cx.trap_exit(true);
    ///     let opts = SpawnOptions::new().link(cx.pid()).mailbox_capacity(8);
    ///     let child = cx.spawn_fn_with(opts, |_: ProcessCx| async {
    ///         Err::<(), BoxError>("the child fails".into())
    ///     })?;
    ///     let exit = cx.recv_exit().await?;
    ///     Ok::<_, BoxError>(exit.pid == child.pid() && exit.reason.is_failed())
    /// })?;
    /// assert!(sched.block_on(parent)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn link(mut self, parent: Pid) -> SpawnOptions {
        self.link = Some(parent);
        self
    }

    /// The link it asks for, in the form the spawns take.
    /// The mailbox bound asked for (a supervised child takes only this: its link is its
    /// supervisor's).
    pub(crate) fn mailbox_bound(&self) -> MailboxBound {
        self.mailbox
    }

    /// The parent asked for, if any.
    pub(crate) fn parent(&self) -> Option<Pid> {
        self.link
    }

    fn link_to(&self) -> Option<Link> {
        self.link.map(Link::to)
    }
}

impl SchedulerHandle {
    /// [`spawn_fn`](Self::spawn_fn) with `opts`: a mailbox bound of the process's own, a link
    /// to a parent.
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
    /// let opts = SpawnOptions::new().mailbox_capacity(2);
    /// let handle = sched.handle().spawn_fn_with(opts, |cx: ProcessCx<u32>| async move {
    ///     Ok::<_, BoxError>(cx.recv().await? + cx.recv().await?)
    /// })?;
    /// handle.addr().send(1)?;
    /// handle.addr().send(2)?;
    /// assert_eq!(sched.block_on(handle)?, 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_fn_with<F, Fut, T, E, M>(
        &self,
        opts: SpawnOptions,
        body: F,
    ) -> Result<ProcessHandle<T, M>, SpawnError>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        self.spawn_fn_as(body, opts.link_to(), opts.mailbox)
    }

    /// [`spawn`](Self::spawn) with `opts`: a mailbox bound of the process's own, a link to a
    /// parent (made before the process's first step).
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
    /// struct Parked;
    /// impl Process for Parked {
    ///     type Output = ();
    ///     fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
    ///         out.idle();
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let opts = SpawnOptions::new().mailbox_capacity(0);
    /// let parked = sched.handle().spawn_with(opts, Parked, "run", Payload::empty())?;
    /// let refused = sched.send(parked.pid(), Message::new("hi", Payload::empty()));
    /// assert!(refused.unwrap_err().is_mailbox_full());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_with<P: Process>(
        &self,
        opts: SpawnOptions,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<ProcessHandle<P::Output>, SpawnError> {
        let incarnation = Incarnation {
            kind: std::any::type_name::<P>(),
            mailbox: opts.mailbox,
            ..Incarnation::default()
        };
        self.spawn_as(process, method, input, incarnation, opts.link_to())
    }
}

impl<M: Send + 'static> ProcessCx<M> {
    /// [`spawn_fn`](Self::spawn_fn) with `opts` (see
    /// [`SchedulerHandle::spawn_fn_with`]): to link the child to this process, pass
    /// [`link(cx.pid())`](SpawnOptions::link).
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// See [`SpawnOptions::link`].
    pub fn spawn_fn_with<F, Fut, T, E, N>(
        &self,
        opts: SpawnOptions,
        body: F,
    ) -> Result<ProcessHandle<T, N>, SpawnError>
    where
        F: FnOnce(ProcessCx<N>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        N: Send + 'static,
    {
        self.scheduler().spawn_fn_with(opts, body)
    }
}
