//! [`SpawnOptions`]: what one spawn sets for its process alone (its mailbox's bound, a link to
//! a parent), and the spawns that take them. Every other spawn is one of these with default
//! options. [`ChildOptions`]: the part of them a supervised child can have (its mailbox's bound:
//! its link is its supervisor's), taken by [`Start`](crate::supervision::Start)'s spawns.
//! `SpawnOptions` holds a `ChildOptions`, so the bound is set in one place.

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
/// A supervised child is spawned with [`ChildOptions`] instead: the bound without the link,
/// its link being its supervisor's.
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
    /// What applies to the process itself, supervised or not (its mailbox bound).
    process: ChildOptions,
    link: Option<Pid>,
    /// What `process_info` names the process (`ProcessInfo::kind`) when the crate spawns a
    /// user's body inside a wrapper of its own (a cluster's registered body): the body's type,
    /// not the wrapper closure's. `None`: the spawned closure's type.
    kind: Option<&'static str>,
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
        self.process = self.process.mailbox_capacity(capacity);
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
        self.process = self.process.unbounded_mailbox();
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
    fn link_to(&self) -> Option<Link> {
        self.link.map(Link::to)
    }

    /// The process is named after `B` (a body the spawned closure wraps) in `process_info`.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn kind_of<B>(mut self) -> SpawnOptions {
        self.kind = Some(std::any::type_name::<B>());
        self
    }
}

/// Options for one supervised child ([`Start::spawn_fn_with`], [`Start::spawn_with`]): its own
/// mailbox bound, for every instance its [`ChildSpec`]'s factory starts.
///
/// They are [`SpawnOptions`] without the link: a supervised child's link is its supervisor's,
/// made by [`Start`] before the child's first poll (or step), so there is no other to ask for —
/// a child that needs another link makes it itself
/// ([`ProcessCx::link`](crate::ProcessCx::link)). The default is what
/// [`Start::spawn_fn`] does: the scheduler's
/// [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity). A bound set here
/// is each instance's for its whole life, and every send to it meets it, as with
/// `SpawnOptions`.
///
/// [`Start`]: crate::supervision::Start
/// [`Start::spawn_fn`]: crate::supervision::Start::spawn_fn
/// [`Start::spawn_fn_with`]: crate::supervision::Start::spawn_fn_with
/// [`Start::spawn_with`]: crate::supervision::Start::spawn_with
/// [`ChildSpec`]: crate::supervision::ChildSpec
///
/// # Examples
///
/// A supervised queue whose every instance holds at most 2 waiting jobs, on a scheduler whose
/// processes are otherwise unbounded:
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{ChildOptions, ChildSpec, Supervisor};
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let queue = ChildSpec::new("queue", |start| {
///     let opts = ChildOptions::new().mailbox_capacity(2);
///     start.spawn_fn_with(opts, |cx: ProcessCx<u64>| async move {
///         let _ = cx.cancelled().await;
///         Ok::<_, BoxError>(())
///     })
/// })
/// .register_as("queue");
/// let sup = sched.block_on(Supervisor::one_for_one().child(queue).start(sched.handle()))?;
/// let jobs = sched.named::<u64>("queue").expect("started");
/// jobs.send(1)?;
/// jobs.send(2)?;
/// assert!(jobs.send(3).unwrap_err().is_mailbox_full());
/// # let _ = sup;
/// # sched.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "options do nothing until a spawn takes them"]
pub struct ChildOptions {
    mailbox: MailboxBound,
}

impl ChildOptions {
    /// The defaults: the scheduler's mailbox capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::supervision::{ChildOptions, ChildSpec, Supervisor};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let worker = ChildSpec::new("worker", |start| {
    ///     // The same as `start.spawn_fn(..)`.
    ///     start.spawn_fn_with(ChildOptions::new(), |cx: ProcessCx<u8>| async move {
    ///         let _ = cx.cancelled().await;
    ///         Ok::<_, BoxError>(())
    ///     })
    /// });
    /// let sup = sched.block_on(Supervisor::one_for_one().child(worker).start(sched.handle()))?;
    /// # let _ = sup;
    /// # sched.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> ChildOptions {
        ChildOptions::default()
    }

    /// At most `capacity` messages wait in each instance's mailbox, counted and refused as the
    /// scheduler's [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity)
    /// would (`MailboxFull`; `send_wait` waits for room), whatever that is. As there, 0
    /// refuses every message (`send_wait` too, at once) and `usize::MAX` is unbounded.
    ///
    /// # Examples
    ///
    /// See [`ChildOptions`].
    pub fn mailbox_capacity(mut self, capacity: usize) -> ChildOptions {
        self.mailbox = MailboxBound::Capacity(capacity);
        self
    }

    /// No bound on each instance's mailbox, whatever the scheduler's
    /// [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity) is: for the
    /// one child among bounded processes that must take everything sent to it.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::supervision::{ChildOptions, ChildSpec, Supervisor};
    ///
    /// let sched = Scheduler::builder().workers(1).mailbox_capacity(1).build()?;
    /// let sink = ChildSpec::new("sink", |start| {
    ///     let opts = ChildOptions::new().unbounded_mailbox();
    ///     start.spawn_fn_with(opts, |cx: ProcessCx<u8>| async move {
    ///         let _ = cx.cancelled().await;
    ///         Ok::<_, BoxError>(())
    ///     })
    /// })
    /// .register_as("sink");
    /// let sup = sched.block_on(Supervisor::one_for_one().child(sink).start(sched.handle()))?;
    /// let sink = sched.named::<u8>("sink").expect("started");
    /// for n in 0..100 {
    ///     sink.send(n)?;
    /// }
    /// # let _ = sup;
    /// # sched.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unbounded_mailbox(mut self) -> ChildOptions {
        self.mailbox = MailboxBound::Unbounded;
        self
    }

    /// The mailbox bound asked for, in the form the spawns take.
    pub(crate) fn mailbox_bound(&self) -> MailboxBound {
        self.mailbox
    }
}

/// What applies to the process itself, and no link: `SpawnOptions::new()` with `child`'s
/// mailbox bound.
impl From<ChildOptions> for SpawnOptions {
    fn from(child: ChildOptions) -> SpawnOptions {
        SpawnOptions {
            process: child,
            ..SpawnOptions::default()
        }
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
        let kind = opts.kind.unwrap_or(std::any::type_name::<F>());
        self.spawn_fn_as(body, opts.link_to(), opts.process.mailbox_bound(), kind)
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
            mailbox: opts.process.mailbox_bound(),
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
