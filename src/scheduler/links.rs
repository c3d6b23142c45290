//! Links, monitors and trapped exits, as the scheduler offers them (Erlang/OTP's semantics):
//! who is told when a process ends, and what happens to them.
//!
//! The registrations live in the watched process's cell (`process/mailbox/watch.rs`, protocols
//! 8 and 9); this module binds them to PIDs, and [`Inner::ended`] signals them when a process ends
//! (`shared.rs`, `finished`), outside every lock.
//!
//! - **Link** (`link(a, b)`): both directions, registered on `a` first (the caller, alive),
//!   then on `b`; if `b` is already gone, `a` gets the exit signal at once with `NoProc`. When
//!   either ends with any reason but `Normal`, the other ends with the same reason — unless it
//!   traps exits: then it receives [`Exit`] instead, for every end (`Normal` included). `unlink` removes both directions; a signal
//!   already sent is not recalled.
//! - **Monitor** (`monitor`): one way, one shot: exactly one [`Down`] when the target ends, at
//!   once with `NoProc` if it is already gone. After `demonitor`, no `Down` of that monitor is
//!   delivered (one already queued is removed).

use super::error::SendError;
use super::handle::{kind_of, SchedulerHandle};
use super::shared::Inner;
use crate::process::exit::{Down, Exit, ExitReason, MonitorRef};
use crate::process::mailbox::{Admission, ProcessCell, Watch, Watcher};
use crate::process::CancelReason;
use crate::process::{contained, Pid};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::oneshot;

/// Why a link or monitor could not be set up by a process that is itself gone.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::NotRunning;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let short = sched.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })?;
/// let long = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
/// let ended = short.pid();
/// sched.block_on(short)?;
///
/// // The process that would hold the link or the monitor is gone: nothing was set up.
/// assert_eq!(sched.handle().link(ended, long.pid()), Err(NotRunning(ended)));
/// assert_eq!(sched.handle().monitor_from(ended, long.pid()), Err(NotRunning(ended)));
/// # long.addr().send(())?;
/// # sched.block_on(long)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("process {0} is not running")]
pub struct NotRunning(pub Pid);

/// A link a spawn makes before the new process's first step (`spawn_linked` and friends).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    /// The process the new one is linked to.
    pub(crate) parent: Pid,
    /// `parent` is the new process's supervisor: a scheduler shutdown leaves stopping it to
    /// `parent` (reverse start order), instead of cancelling it directly.
    pub(crate) supervised: bool,
}

impl Link {
    /// A plain link to `parent`.
    pub(crate) fn to(parent: Pid) -> Link {
        Link {
            parent,
            supervised: false,
        }
    }

    /// A link to `supervisor`, the new process's supervisor.
    pub(crate) fn supervised_by(supervisor: Pid) -> Link {
        Link {
            parent: supervisor,
            supervised: true,
        }
    }
}

impl Inner {
    /// `pid` ended with `reason`, and `watches` were registered on it (protocol 8, after step
    /// 2): its names are released first (`names.rs`), then each link and monitor is
    /// signalled. Outside every lock.
    pub(crate) fn ended(&self, pid: Pid, reason: &ExitReason, watches: Vec<Watch>) {
        if watches.iter().any(|watch| matches!(watch, Watch::Named)) {
            self.names.release(pid);
        }
        // Monitors in registration order, then links, the process's own supervisor last
        // (`ProcessCell::take_watches`).
        for watch in watches {
            match watch {
                Watch::Link(other) => self.exit_signal(other, Exit::new(pid, reason.clone())),
                Watch::Monitor { monitor, watcher } => {
                    self.down(watcher, Down::new(monitor, pid, reason.clone()));
                }
                Watch::Monitoring(monitor) => self.unwatch_target(monitor),
                Watch::Named => {}
            }
        }
    }

    /// `pid` refused a watch: it has ended (its end took its watches), or never lived here.
    /// Called before anyone hears `NoProc` of it: its end releases its names only after it
    /// refuses watches (`shared.rs`, `finished`), and a `Down` or exit signal must never be
    /// seen while a name still gives the PID. A second release finds nothing (`names.rs`,
    /// "Released before anyone hears"); no registration can follow a refusal.
    pub(crate) fn gone(&self, pid: Pid) {
        self.names.release(pid);
    }

    /// Removes `monitor` from its target (a demonitor, or its watcher's end): its `Down` is not
    /// sent.
    pub(crate) fn unwatch_target(&self, monitor: MonitorRef) {
        let target = monitor.target();
        if monitor.is_held() {
            // Another layer watches `target`, which is not this table's (`held_monitors.rs`).
            #[cfg(feature = "cluster")]
            if let Some(on_demonitor) = self.held.remove(&monitor) {
                on_demonitor();
            }
        } else if let Some(cell) = self.table.get(target) {
            cell.unwatch_monitor(target.generation(), monitor);
        }
    }

    /// Links the new process `child` (in `cell`, before its first step) and `parent`; if
    /// `parent` is gone, `child` gets the exit signal (`NoProc`).
    pub(crate) fn link_new(&self, child: Pid, cell: &ProcessCell, parent: Pid) {
        let _ = cell.watch(child.generation(), Watch::Link(parent));
        let linked = self.table.get(parent).is_some_and(|parent_cell| {
            parent_cell
                .watch(parent.generation(), Watch::Link(child))
                .is_ok()
        });
        if !linked {
            self.gone(parent);
            cell.unwatch_link(child.generation(), parent);
            let _ = cell.deliver_exit(child.generation(), Exit::new(parent, ExitReason::NoProc));
        }
    }

    /// An exit signal to `to` (protocol 9).
    ///
    /// A supervisor's child that traps exits is asked to finish by its supervisor's exit
    /// signal (`deliver_exit`, `Stopped`), which is also its one shutdown `Cancel`: a shutdown
    /// whose first pass left it to that supervisor needs to do nothing more for it.
    pub(crate) fn exit_signal(&self, to: Pid, exit: Exit) {
        if let Some(cell) = self.table.get(to) {
            let from = exit.pid;
            let delivery = cell.deliver_exit(to.generation(), exit);
            tracing::debug!(%from, %to, ?delivery, "exit signal");
        }
    }

    /// A `Down` to `watcher`.
    pub(crate) fn down(&self, watcher: Watcher, down: Down) {
        match watcher {
            Watcher::Process(pid) => {
                if let Some(cell) = self.table.get(pid) {
                    let _ = cell.deliver_down(pid.generation(), down);
                }
            }
            Watcher::Channel(channel) => {
                // User code only in the sense that a dropped receiver's drop is (the `Down`
                // handed back and dropped here may hold a user's error): contained.
                self.contained(contained(move || drop(channel.send(down))));
            }
        }
    }
}

impl SchedulerHandle {
    /// Asks process `pid` to finish: it receives [`Event::Cancel`](crate::state_machine::Event::Cancel)
    /// with [`CancelReason::Stop`] (its receives report the
    /// cancellation), as shutdown asks every process — `?` on it ends an `async fn` body as
    /// cancelled, with exit reason `Shutdown`. A process that ends well once asked (a state
    /// machine's `Done`, a body's `Ok`) ends `Shutdown` too, its handle holding its output:
    /// its links and monitors hear that it was stopped, as OTP's `shutdown`. A supervisor
    /// stops its children this way before it terminates those that do not finish in time.
    ///
    /// The cancel **queues behind the messages already in the mailbox**, as any event does
    /// (`terminate` is the way past a backlog). A state machine reads it after them. An
    /// `async fn` body's receive reports it as soon as a step has delivered it: ahead of the
    /// messages that step and earlier ones delivered to the body and it has not received yet,
    /// after those still queued in the mailbox. (Each step delivers up to `max_batch`, and steps
    /// go on delivering while the body awaits something other than a receive: a body that was
    /// not receiving may find the cancel ahead of its whole backlog.) The messages it
    /// went ahead of stay readable — receives after the `Cancelled` (or after
    /// [`cx.cancelled()`](crate::ProcessCx::cancelled) resolved) return them, and then wait:
    /// outside a shutdown nothing ends that wait but the process (drain with
    /// `cx.recv().now_or_never()` until `None`, or stop on a message of your own, sent behind
    /// the others, for a drain-then-stop). A body not started yet runs all the same, and its
    /// first receive reports the cancel.
    ///
    /// # Errors
    ///
    /// A [`SendError`] of kind `NotFound` if `pid` is gone, `Closed`
    /// if it is finishing.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let worker = sched.spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// sched.handle().cancel(worker.pid())?;
    /// let ended = sched.block_on(worker).unwrap_err();
    /// assert!(ended.is_cancelled() && ended.exit_reason().is_shutdown());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, pid: Pid) -> Result<(), SendError> {
        let admission = match self.inner.table.get(pid) {
            Some(cell) => {
                // Queued, it marks the process asked to finish (`FinishCounts::cancelled`).
                cell.deliver_cancel(pid.generation(), CancelReason::Stop)
            }
            None => Admission::Gone,
        };
        match admission {
            Admission::Accepted | Admission::Dropped => Ok(()),
            refused => Err(SendError::new(kind_of(refused), pid, None)),
        }
    }

    /// Links `a` and `b` (both directions): when either ends with a reason other than
    /// `Normal`, the other ends with the same reason; one that traps exits
    /// ([`set_trap_exit`](Self::set_trap_exit)) receives an [`Exit`] event instead, for any
    /// reason, `Normal` included. If `b` is already gone, `a` gets the signal at once, with
    /// reason `NoProc`.
    ///
    /// # Errors
    ///
    /// [`NotRunning`] if `a` is not running.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let a = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// let b = sched.spawn_fn(|cx: ProcessCx<()>| async move { cx.recv().await?; Err::<(), BoxError>("b failed".into()) })?;
    /// sched.handle().link(a.pid(), b.pid())?;
    /// b.addr().send(())?;                     // b fails: a ends with the same reason
    /// let a_ended = sched.block_on(a).unwrap_err();
    /// assert!(a_ended.exit_reason().is_failed());
    /// # let _ = sched.block_on(b);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn link(&self, a: Pid, b: Pid) -> Result<(), NotRunning> {
        let inner = &self.inner;
        let cell_a = inner.table.get(a).ok_or(NotRunning(a))?;
        cell_a
            .watch(a.generation(), Watch::Link(b))
            .map_err(|_| NotRunning(a))?;
        let linked = inner
            .table
            .get(b)
            .is_some_and(|cell_b| cell_b.watch(b.generation(), Watch::Link(a)).is_ok());
        if !linked {
            inner.gone(b);
            cell_a.unwatch_link(a.generation(), b);
            inner.exit_signal(a, Exit::new(b, ExitReason::NoProc));
        }
        Ok(())
    }

    /// Removes the link between `a` and `b`, both directions (a signal already sent is not
    /// recalled). Nothing happens if they were not linked.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let a = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// let b = sched.spawn_fn(|cx: ProcessCx<()>| async move {
    ///     cx.recv().await?;
    ///     Err::<(), BoxError>("b fails".into())
    /// })?;
    /// sched.handle().link(a.pid(), b.pid())?;
    /// sched.handle().unlink(a.pid(), b.pid());
    /// b.addr().send(())?; // b fails now, linked to nobody
    /// assert!(sched.block_on(b).is_err());
    /// a.addr().send(())?;
    /// assert!(sched.block_on(a).is_ok(), "a lives on: no exit signal reached it");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unlink(&self, a: Pid, b: Pid) {
        for (at, other) in [(a, b), (b, a)] {
            if let Some(cell) = self.inner.table.get(at) {
                cell.unwatch_link(at.generation(), other);
            }
        }
    }

    /// Sets whether `pid` traps exits: a trapping process receives a linked process's end as
    /// an [`Exit`] event (`Event::Exit`, or `cx.recv_signal()` in a body) instead of ending
    /// with it.
    ///
    /// # Errors
    ///
    /// [`NotRunning`] if `pid` is not running.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let guardian = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let exit = cx.recv_exit().await?;
    ///     Ok::<_, BoxError>(exit.reason.is_failed())
    /// })?;
    /// // Before the link: the worker's crash then reaches the guardian as a signal, instead of
    /// // ending it too.
    /// sched.handle().set_trap_exit(guardian.pid(), true)?;
    /// let worker = sched.spawn_fn(|cx: ProcessCx<()>| async move {
    ///     cx.recv().await?;
    ///     Err::<(), BoxError>("crashed".into())
    /// })?;
    /// sched.handle().link(guardian.pid(), worker.pid())?;
    /// worker.addr().send(())?;
    /// assert!(sched.block_on(guardian)?);
    /// # let _ = sched.block_on(worker);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_trap_exit(&self, pid: Pid, trap: bool) -> Result<(), NotRunning> {
        let trapped = self
            .inner
            .table
            .get(pid)
            .is_some_and(|cell| cell.set_trap_exit(pid.generation(), trap));
        trapped.then_some(()).ok_or(NotRunning(pid))
    }

    /// Process `watcher` monitors `target`: it will receive exactly one `Event::Down` (or, in
    /// a body, `cx.recv_down()`) when `target` ends — at once, with `NoProc`, if `target` is
    /// already gone.
    ///
    /// # Errors
    ///
    /// [`NotRunning`] if `watcher` is not running.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let watcher = sched.spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.recv_down().await?) })?;
    /// let target = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    ///
    /// // Set up by a third party (a registry, a state machine's step): the `Down` goes to
    /// // `watcher`, not to the caller.
    /// let monitor = sched.handle().monitor_from(watcher.pid(), target.pid())?;
    /// target.addr().send(())?;
    /// let down = sched.block_on(watcher)?;
    /// assert_eq!((down.monitor, down.pid), (monitor, target.pid()));
    /// assert!(down.reason.is_normal());
    /// # sched.block_on(target)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn monitor_from(&self, watcher: Pid, target: Pid) -> Result<MonitorRef, NotRunning> {
        let inner = &self.inner;
        let monitor = MonitorRef::next(target);
        let cell = inner.table.get(watcher).ok_or(NotRunning(watcher))?;
        if !cell.hold_monitor(watcher.generation(), monitor) {
            return Err(NotRunning(watcher));
        }
        let watch = Watch::Monitor {
            monitor,
            watcher: Watcher::Process(watcher),
        };
        if let Err(refused) = self.watch(target, watch) {
            let Watch::Monitor { watcher, .. } = refused else {
                unreachable!("a monitor comes back as itself")
            };
            inner.down(watcher, Down::new(monitor, target, ExitReason::NoProc));
        } else if !cell.accepts_watches(watcher.generation()) {
            // The watcher ended in between: its end may have looked for this monitor on the
            // target before it was there (`Watch::Monitoring`). Either that end or this check
            // comes after the watch: one of them takes it off.
            inner.unwatch_target(monitor);
        }
        Ok(monitor)
    }

    /// A *held* monitor of `target` by `watcher` (`held_monitors.rs`): nothing here watches
    /// `target` (another node's PID); the caller delivers its `Down` with
    /// [`deliver_held_down`](Self::deliver_held_down), and a demonitor runs `on_demonitor`
    /// (unless the `Down` was delivered or the watch [released](Self::release_held) first).
    #[cfg(feature = "cluster")]
    pub(crate) fn hold_monitor(
        &self,
        watcher: Pid,
        target: Pid,
        on_demonitor: super::held_monitors::OnDemonitor,
    ) -> Result<MonitorRef, NotRunning> {
        let monitor = MonitorRef::next_held(target);
        let cell = self.inner.table.get(watcher).ok_or(NotRunning(watcher))?;
        // The hook first: nobody can demonitor before this returns the reference.
        self.inner.held.insert(monitor, on_demonitor);
        if cell.hold_monitor(watcher.generation(), monitor) {
            Ok(monitor)
        } else {
            self.inner.held.remove(&monitor);
            Err(NotRunning(watcher))
        }
    }

    /// Delivers `down` to `watcher`, for a monitor made by
    /// [`hold_monitor`](Self::hold_monitor): queued once, unless `watcher` has ended or
    /// demonitored it.
    #[cfg(feature = "cluster")]
    pub(crate) fn deliver_held_down(&self, watcher: Pid, down: Down) {
        self.inner.held.remove(&down.monitor);
        self.inner.down(Watcher::Process(watcher), down);
    }

    /// The layer stopped watching held monitor `monitor` (its watcher ended, or it was
    /// demonitored): forgets its hook.
    #[cfg(feature = "cluster")]
    pub(crate) fn release_held(&self, monitor: MonitorRef) {
        self.inner.held.remove(&monitor);
    }

    /// Ends the monitor `monitor` held by `watcher`: no `Down` of it is delivered afterwards
    /// (one already queued in `watcher`'s mailbox is removed). `true` if it was active;
    /// `false`, and nothing changes, if `watcher` does not hold it (a monitor of another
    /// process, or of tokio code, stands).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::supervision::Incoming;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let watcher = sched.spawn_fn(|cx: ProcessCx<&'static str>| async move {
    ///     match cx.recv_any().await? {
    ///         Incoming::Message(text) => Ok::<_, BoxError>(text),
    ///         _ => Err("a signal after the demonitor".into()),
    ///     }
    /// })?;
    /// let target = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// let monitor = sched.handle().monitor_from(watcher.pid(), target.pid())?;
    /// assert!(sched.handle().demonitor_from(watcher.pid(), monitor));
    /// assert!(!sched.handle().demonitor_from(watcher.pid(), monitor), "ended already");
    ///
    /// target.addr().send(())?;
    /// sched.block_on(target)?;
    /// // A `Down` would have been queued before this message: none was.
    /// watcher.addr().send("no news")?;
    /// assert_eq!(sched.block_on(watcher)?, "no news");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn demonitor_from(&self, watcher: Pid, monitor: MonitorRef) -> bool {
        let inner = &self.inner;
        let held = inner
            .table
            .get(watcher)
            .is_some_and(|cell| cell.forget_monitor(watcher.generation(), monitor));
        // Only the watcher's own: a reference `watcher` does not hold is someone else's
        // monitor, which must stand. (A watcher that ended takes its monitors off their
        // targets itself, `Watch::Monitoring`; one whose `Down` came, its target is gone.)
        if held {
            inner.unwatch_target(monitor);
        }
        held
    }

    /// Monitors `target` from anywhere (tokio code, a thread): the returned [`Monitor`]
    /// resolves to the one [`Down`] — at once, with `NoProc`, if `target` is already gone.
    /// Dropping it (or [`Monitor::demonitor`]) ends the monitor.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let worker = sched.spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// let monitor = sched.monitor(worker.pid());
    /// worker.addr().send(1)?;
    /// let down = monitor.await;
    /// assert!(down.reason.is_normal());
    /// let gone = sched.monitor(worker.pid()).await;        // already gone
    /// assert!(gone.reason.is_no_proc());
    /// # sched.shutdown_async(std::time::Duration::from_secs(1)).await;
    /// # Ok(()) }
    /// ```
    pub fn monitor(&self, target: Pid) -> Monitor {
        let monitor = MonitorRef::next(target);
        let (tx, rx) = oneshot::channel();
        let watch = Watch::Monitor {
            monitor,
            watcher: Watcher::Channel(tx),
        };
        if let Err(refused) = self.watch(target, watch) {
            let Watch::Monitor { watcher, .. } = refused else {
                unreachable!("a monitor comes back as itself")
            };
            self.inner
                .down(watcher, Down::new(monitor, target, ExitReason::NoProc));
        }
        Monitor {
            sched: self.clone(),
            target,
            monitor,
            down: rx,
        }
    }

    /// Registers `watch` on `target`'s cell, or hands it back if `target` is gone — with its
    /// names released ([`Inner::gone`]), so that the caller's `NoProc` may be heard at once.
    fn watch(&self, target: Pid, watch: Watch) -> Result<(), Watch> {
        let watched = match self.inner.table.get(target) {
            Some(cell) => cell.watch(target.generation(), watch),
            None => Err(watch),
        };
        if watched.is_err() {
            self.inner.gone(target);
        }
        watched
    }
}

/// A monitor set up from outside any process ([`SchedulerHandle::monitor`]): resolves to the
/// target's one [`Down`].
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().workers(1).build()?;
/// let job = sched.spawn_fn(|cx: ProcessCx<u32>| async move {
///     let n = cx.recv().await?;
///     if n == 0 {
///         return Err::<u32, BoxError>("division by zero".into());
///     }
///     Ok(100 / n)
/// })?;
/// // Anyone with the PID can watch (a handle has one owner): a dashboard, a test, a pool.
/// let monitor = sched.monitor(job.pid());
/// let reference = monitor.reference();
/// job.addr().send(0)?;
/// let down = monitor.await;
/// assert_eq!((down.monitor, down.pid), (reference, job.pid()));
/// assert!(down.reason.is_failed());
/// # let _ = job.await;
/// # sched.shutdown_async(std::time::Duration::from_secs(1)).await;
/// # Ok(()) }
/// ```
#[must_use = "dropping a monitor ends it"]
#[derive(Debug)]
pub struct Monitor {
    sched: SchedulerHandle,
    target: Pid,
    monitor: MonitorRef,
    down: oneshot::Receiver<Down>,
}

impl Monitor {
    /// This monitor's reference.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let gone = procsched::Pid::from_raw(1 << 26).unwrap();
    /// let monitor = sched.monitor(gone);
    /// let reference = monitor.reference();
    /// assert_eq!(sched.block_on(monitor).monitor, reference);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn reference(&self) -> MonitorRef {
        self.monitor
    }

    /// Ends the monitor: its `Down` will not come. `true` if it had not fired yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let worker = sched.spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// assert!(sched.monitor(worker.pid()).demonitor());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn demonitor(self) -> bool {
        match self.sched.inner.table.get(self.target) {
            Some(cell) => cell.unwatch_monitor(self.target.generation(), self.monitor),
            None => false,
        }
    }
}

impl Future for Monitor {
    type Output = Down;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Down> {
        let (target, monitor) = (self.target, self.monitor);
        Pin::new(&mut self.down).poll(cx).map(|down| {
            // The callback always sends before it is dropped: a closed channel means the
            // scheduler dropped it unsent (it was torn down): the target is gone.
            down.unwrap_or_else(|_| Down::new(monitor, target, ExitReason::NoProc))
        })
    }
}

/// `true` once the `Down` was returned: like tokio's `JoinHandle` (and ours,
/// [`ProcessHandle`](crate::ProcessHandle)), a monitor polled again after that panics, and
/// `futures::select!` reads this to skip it.
impl futures::future::FusedFuture for Monitor {
    fn is_terminated(&self) -> bool {
        self.down.is_terminated()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if !self.down.is_terminated() {
            // Closed first: the sender the unwatch drops would otherwise wake the task that
            // polled this monitor and is now dropping it (a `select!` loop would poll again
            // for nothing).
            self.down.close();
            if let Some(cell) = self.sched.inner.table.get(self.target) {
                cell.unwatch_monitor(self.target.generation(), self.monitor);
            }
        }
    }
}
