//! The supervisor's body: start the children, then react to their ends and to requests.

use super::first_poll::{self, FirstPoll, Waited};
use super::spec::{ChildShutdown, Restart, Start, Strategy};
use super::{gave_up, ChildInfo, Request, Supervisor, SupervisorError, SupervisorRef};
use crate::process::async_fn::Incoming;
use crate::process::exit::{Exit, ExitReason, MonitorRef, Signal};
use crate::process::take_panic_message;
use crate::process::{BoxError, Pid, RecvError};
use crate::scheduler::deadline::Deadline;
use crate::scheduler::AskError;
use crate::scheduler::ProcessCx;
use futures::future::{select, Either};
use std::collections::{HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

mod children;
mod named;

use children::{Child, Children, Key};

/// How long a start waits for a name held by a process on its way out (`named.rs`)
/// before it fails as OTP's `already_started`, and for an `async fn` child's first poll
/// (`first_poll.rs`) — at least: see [`patience`].
pub(super) const NAME_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a start waits for what it waits on (an `async fn` child's first poll, its name's
/// previous holder to end), by the child's shutdown policy: as long as it takes for
/// `Infinity` (a supervisor: OTP's `start_link` waits for `init` without a timeout), else
/// [`NAME_RELEASE_WAIT`], or the policy's `Timeout` if longer. Not shorter than that: the wait
/// includes the time the child waits for a worker, and a short stop timeout must not fail starts
/// under load; the bound is there for a body that never returns from its first poll (a blocking
/// loop), which must not hold the supervisor for ever.
fn patience(shutdown: ChildShutdown) -> Option<std::time::Duration> {
    match shutdown {
        ChildShutdown::Infinity => None,
        ChildShutdown::Timeout(timeout) => Some(timeout.max(NAME_RELEASE_WAIT)),
        ChildShutdown::BrutalKill => Some(NAME_RELEASE_WAIT),
    }
}

/// The supervisor's state.
struct Supervising {
    cx: ProcessCx<Request>,
    strategy: Strategy,
    max_restarts: u32,
    within: std::time::Duration,
    children: Children,
    /// When the last restarts happened (at most `max_restarts` kept).
    restarts_at: VecDeque<Instant>,
    restarts: u64,
    /// The supervisor's own supervisor, if it is one's child.
    parent: Option<Pid>,
    /// Exit signals received while waiting for one child's end, handled afterwards.
    pending: VecDeque<Exit>,
    /// The supervisor was asked to finish while it waited for a child.
    cancelled: Option<RecvError>,
    /// Children with a retry queued: one retry each at a time (a sibling's
    /// restart failing the same child again must not start a second chain).
    retrying: HashSet<Arc<str>>,
}

/// The values a supervisor holds that are its user's — its children's specs (their factories'
/// captures) and the exit signals it has not handled (their reasons may hold a child's error)
/// — are disposed of one by one, each destructor's panic contained and counted on the
/// supervisor (`ProcessCx::dispose`), as the scheduler drops a process's values: a panicking
/// destructor must not end the supervisor, and with it every child it supervises.
impl Drop for Supervising {
    fn drop(&mut self) {
        let children = self.children.take_all();
        self.cx.dispose_each(children);
        self.cx.dispose_each(self.pending.drain(..));
    }
}

/// Why the supervisor ends.
enum End {
    /// Asked to finish: its children are stopped, it ends as cancelled (`Shutdown`).
    Cancelled(RecvError),
    /// It gave up (restart intensity), or its parent ended: it ends with this reason.
    Exit(ExitReason),
}

/// How a supervisor's failed start begins its exit reason: "child `<id>` could not be
/// started: …" (`SupervisorError::Start` shows it without its own preamble).
pub(super) const NAMED_CHILD_NOT_STARTED: &str = "child `";

/// The supervisor process: starts `supervisor`'s children in order, then supervises them.
pub(super) async fn supervise(
    cx: ProcessCx<Request>,
    supervisor: Supervisor,
    parent: Option<Pid>,
    started: Option<Arc<AtomicBool>>,
) -> Result<(), BoxError> {
    cx.trap_exit(true);
    // `start` refuses this before spawning; `spawn` and a subtree's start get here.
    if let Some(refused) = supervisor.refusal() {
        let why = match refused {
            SupervisorError::DuplicateId(id) => format!("two children have the id `{id}`"),
            refused => refused.to_string(),
        };
        tracing::warn!(%why, "the supervisor does not start");
        cx.dispose_each(supervisor.children);
        return Err(ExitReason::failed(why).into());
    }
    let mut state = Supervising {
        cx,
        strategy: supervisor.strategy,
        max_restarts: supervisor.max_restarts,
        within: supervisor.within,
        children: Children::default(),
        restarts_at: VecDeque::new(),
        restarts: 0,
        parent,
        pending: VecDeque::new(),
        cancelled: None,
        retrying: HashSet::new(),
    };
    // Set once a start failed during a scheduler shutdown: the rest are kept as not running.
    let mut refused = false;
    let mut specs = supervisor.children.into_iter();
    for spec in specs.by_ref() {
        let id = spec.id.clone();
        let at = state.children.push(spec);
        if refused {
            continue;
        }
        let started = state.start(at).await;
        if state.cancelled.is_some() {
            break; // asked to finish meanwhile: `run` ends at once, and the started are stopped
        }
        if started.is_err() && state.cx.scheduler().is_shutting_down() {
            // Nothing spawns in a shutdown: a start refused then is no fault of the child's, and
            // no reason for the supervisor to end `Failed` (it would read as a crash in its
            // parent, its monitors and its metrics). As a restart refused then (`restart_from`),
            // the child is kept as not running, and so are the ones after it (their starts
            // would be refused too: their factories are not called); the supervisor waits for
            // its own stop — the shutdown's cancel, or its parent's turn — and then stops the
            // started ones in reverse start order and ends `Shutdown`.
            tracing::debug!(child = %id, "not started: the scheduler is shutting down");
            refused = true;
            continue;
        }
        if let Err(error) = started {
            tracing::warn!(child = %id, %error, "a child could not be started: the supervisor ends");
            // The specs not reached are user values (`Drop for Supervising`).
            state.cx.dispose_each(specs.by_ref());
            state.stop_all().await;
            return Err(ExitReason::failed(format!(
                "{NAMED_CHILD_NOT_STARTED}{id}` could not be started: {}",
                cause(&error)
            ))
            .into());
        }
    }
    // The specs not reached (asked to finish meanwhile) are user values too.
    state.cx.dispose_each(specs);
    // Every child started (not refused by a shutdown, not asked to finish meanwhile): what
    // `Supervisor::start` reports, whatever the exits queued meanwhile do next.
    if let Some(started) = started.filter(|_| !refused && state.cancelled.is_none()) {
        started.store(true, Ordering::Release);
    }
    let end = state.run().await;
    state.stop_all().await;
    match end {
        End::Cancelled(cancelled) => Err(cancelled.into()),
        End::Exit(reason) => Err(reason.into()),
    }
}

impl Supervising {
    async fn run(&mut self) -> End {
        loop {
            if let Some(cancelled) = self.cancelled.take() {
                return End::Cancelled(cancelled);
            }
            if let Some(exit) = self.pending.pop_front() {
                if let Some(end) = self.on_exit(exit).await {
                    return end;
                }
                continue;
            }
            match self.cx.recv_any().await {
                Err(cancelled) if cancelled.is_cancelled() => return End::Cancelled(cancelled),
                Err(error) => tracing::warn!(%error, "a supervisor's receive failed"),
                Ok(Incoming::Signal(Signal::Exit(exit))) => {
                    if let Some(end) = self.on_exit(exit).await {
                        return end;
                    }
                }
                // A supervisor monitors nothing but while it waits for a child, and a `Down`
                // of such a monitor may still come after it (its reason: a user value).
                Ok(Incoming::Signal(signal)) => self.cx.dispose(signal),
                Ok(Incoming::Message(request)) => {
                    if let Some(end) = self.on_request(request).await {
                        return end;
                    }
                }
            }
        }
    }

    /// A linked process ended: its parent (the supervisor ends too) or one of its children.
    async fn on_exit(&mut self, exit: Exit) -> Option<End> {
        if Some(exit.pid) == self.parent && exit.reason.is_abnormal() {
            return Some(End::Exit(exit.reason));
        }
        let Some(at) = self.children.by_pid(exit.pid) else {
            self.cx.dispose(exit);
            return None;
        };
        self.children.set_pid(at, None);
        let restart = match self.children.spec(at).restart {
            Restart::Permanent => true,
            Restart::Transient => !exit.reason.is_clean(),
            Restart::Temporary => false,
        };
        // The reason may hold the child's error, whose `Display` is user code: contained, so
        // that it cannot end the supervisor (`process/contain.rs`).
        let reason = crate::process::display_contained(&exit.reason, Some(exit.pid));
        tracing::debug!(child = %self.children.spec(at).id, pid = %exit.pid, %reason, restart, "child ended");
        drop(reason); // its `warn`, if its `Display` panicked
        self.cx.dispose(exit);
        if !restart {
            if self.children.spec(at).restart == Restart::Temporary {
                self.forget(at);
            }
            return None;
        }
        self.restart_from(at).await
    }

    /// Restarts the child at `at` (and its siblings, by the strategy), within the intensity.
    ///
    /// A restart that fails (the factory's `Err` or panic) counts as another end of that child,
    /// as in OTP, and is tried again *later* (OTP's `try_again_restart`): behind a message the
    /// supervisor sends itself, so that between attempts it answers requests, hears its
    /// cancel, and lets the rest of the scheduler run — a child that cannot start never pins
    /// the supervisor inside one poll, however high the intensity.
    ///
    /// During a scheduler shutdown nothing can be spawned, so nothing is restarted and no
    /// restart is counted: the child stays not running, its siblings are left alone, and the
    /// supervisor waits for its own stop (its parent's turn, or the shutdown's cancel; or the
    /// forced end of the grace period) to stop the rest in reverse start order. Ending at once
    /// instead would stop its other children before their turn in the tree.
    async fn restart_from(&mut self, at: Key) -> Option<End> {
        if self.cx.scheduler().is_shutting_down() {
            tracing::debug!(child = %self.children.spec(at).id, "not restarted: the scheduler is shutting down");
            return None;
        }
        if !self.allow_restart() {
            tracing::warn!(
                max_restarts = self.max_restarts,
                within = ?self.within,
                "restart intensity reached: the supervisor stops its children and ends"
            );
            return Some(End::Exit(gave_up()));
        }
        let again: Vec<Key> = match self.strategy {
            Strategy::OneForOne => vec![at],
            Strategy::OneForAll => self.children.keys(),
            Strategy::RestForOne => self.children.keys_from(at),
        };
        if self.strategy != Strategy::OneForOne {
            self.stop_each(&again).await;
        }
        self.restarts += 1;
        // Children stopped by the strategy that are temporary are not restarted (OTP).
        let mut failed = None;
        for &index in &again {
            if self.cancelled.is_some() {
                break; // asked to finish meanwhile: the ones started are stopped
            }
            let temporary = self.children.spec(index).restart == Restart::Temporary;
            if self.children.pid(index).is_some() || (index != at && temporary) {
                continue;
            }
            if let Err(error) = self.start(index).await {
                tracing::warn!(child = %self.children.spec(index).id, %error, "restart failed");
                failed = Some(Arc::clone(&self.children.spec(index).id));
                break;
            }
        }
        // Temporary children the strategy stopped are forgotten (only those can have become
        // temporary and not running here: one that ends is forgotten at its end).
        for index in again {
            if self.children.pid(index).is_none()
                && self.children.spec(index).restart == Restart::Temporary
            {
                self.forget(index);
            }
        }
        let failed = failed?;
        if self.cx.scheduler().is_shutting_down() {
            // The shutdown began during the restart: nothing can start any more, and a retry
            // would fail the same way. As above, the children not running stay so until this
            // supervisor's own stop.
            return None;
        }
        if !self.retrying.insert(Arc::clone(&failed)) {
            return None; // its retry is on its way already
        }
        // A supervisor's mailbox is unbounded (`Supervisor::spawn_process`), and it is running:
        // the send is not refused.
        if let Err(error) = self.cx.addr().send(Request::Restart(Arc::clone(&failed))) {
            tracing::warn!(child = %failed, %error, "a restart's retry could not be queued");
            self.retrying.remove(&failed);
        }
        None
    }

    /// Tries again to restart the child `id` whose restart failed (OTP's
    /// `try_again_restart`), unless it has been removed or started since.
    async fn restart_child(&mut self, id: &str) -> Option<End> {
        let at = self
            .children
            .by_id(id)
            .filter(|&at| self.children.pid(at).is_none())?;
        Box::pin(self.restart_from(at)).await
    }

    /// Removes the child at `at`, disposing of its spec (a user value: `Drop for Supervising`).
    fn forget(&mut self, at: Key) {
        if let Some(child) = self.children.remove(at) {
            self.cx.dispose(child);
        }
    }

    /// Counts a restart against the intensity; `false` if it would exceed it.
    fn allow_restart(&mut self) -> bool {
        let now = Instant::now();
        while let Some(&first) = self.restarts_at.front() {
            if now.duration_since(first) > self.within {
                self.restarts_at.pop_front();
            } else {
                break;
            }
        }
        if self.restarts_at.len() >= self.max_restarts as usize {
            return false;
        }
        self.restarts_at.push_back(now);
        true
    }

    /// Starts the child at `at`, registering its name; the child has started when this
    /// returns (OTP's synchronous start): a state machine's `init` has run, an `async fn`
    /// body's first poll has returned (`first_poll.rs`), and a child that is a supervisor has
    /// started its own children.
    ///
    /// A named child's name is freed first ([`await_name`](Self::await_name)): its factory
    /// runs only once no process holds the name, so a new instance never runs alongside the
    /// previous one (kameo's overlapping restarts, issues #387 and #392); unnamed children may
    /// overlap, as in OTP. The name is registered right after the factory returns, in the same
    /// poll: nothing can take it in between but another thread's `register`.
    ///
    /// Asked to finish while a child starts, it still counts that child as started
    /// (`self.cancelled` is set): the stop that follows stops it, before this one ends.
    async fn start(&mut self, at: Key) -> Result<Pid, SupervisorError> {
        let patience = patience(self.children.spec(at).shutdown);
        let name = self.children.spec(at).name.clone();
        if let Some(name) = &name {
            self.await_name(name, patience).await?;
        }
        let (pid, first_poll) = self.spawn_child(at)?;
        if let Some(name) = name {
            self.register_child(pid, name, patience).await?;
        }
        self.children.set_pid(at, Some(pid));
        if let Some(first_poll) = first_poll {
            if let Err(error) = self.await_first_poll(pid, &first_poll, patience).await {
                self.children.set_pid(at, None);
                return Err(error);
            }
            if self.cancelled.is_some() {
                return Ok(pid); // counted as started: the stop that follows stops it
            }
        }
        if self.children.spec(at).supervisor {
            let started = SupervisorRef::from_pid(&self.cx.scheduler(), pid)
                .started()
                .await;
            match started {
                Ok(()) => {}
                Err(AskError::Cancelled(reason)) => {
                    self.cancelled = Some(RecvError::Cancelled(reason));
                }
                Err(_) => {
                    // It ended (its port went with its mailbox): why is its exit reason,
                    // whose chain names the grandchild that failed and how.
                    self.children.set_pid(at, None);
                    let why = match self.reason_of_end(pid).await {
                        Some(reason) => {
                            let why = format!(
                                ": {}",
                                crate::process::display_contained(&reason, Some(pid))
                            );
                            self.cx.dispose(reason);
                            why
                        }
                        None => String::new(),
                    };
                    return Err(SupervisorError::Start(format!(
                        "supervisor `{}` could not start its children{why}",
                        self.children.spec(at).id
                    )));
                }
            }
        }
        Ok(pid)
    }

    /// The exit reason of the child `pid`, which has ended or is ending: its exit signal (or
    /// its monitor's `Down`, unless that says only that it was gone). Other children's exits
    /// wait in `pending`. `None` if this supervisor is cancelled first (recorded) or its
    /// receive fails.
    async fn reason_of_end(&mut self, pid: Pid) -> Option<ExitReason> {
        let monitor = self.cx.monitor(pid);
        let reason = loop {
            match self.cx.recv_signal().await {
                Ok(Signal::Exit(exit)) if exit.pid == pid => break Some(exit.reason),
                // Monitors are signalled before links: a `NoProc` says it was gone when
                // monitored, and its exit signal is on its way.
                Ok(Signal::Down(down)) if down.monitor == monitor && !down.reason.is_no_proc() => {
                    break Some(down.reason)
                }
                Ok(Signal::Exit(exit)) => self.pending.push_back(exit),
                Ok(signal) => self.cx.dispose(signal),
                Err(cancelled) if cancelled.is_cancelled() => {
                    self.cancelled = Some(cancelled);
                    break None;
                }
                Err(error) => {
                    tracing::warn!(%error, "a supervisor's receive failed");
                    break None;
                }
            }
        };
        self.cx.demonitor(monitor);
        reason
    }

    /// Waits for the first poll of the new instance `pid` to return (`first_poll.rs`). A
    /// child that ended before — it failed or panicked in its first poll — has failed its
    /// start, as a state machine whose `init` fails; one whose first poll does not return
    /// within `patience` too, and it is terminated (it ends once that poll returns, if ever).
    async fn await_first_poll(
        &mut self,
        pid: Pid,
        first_poll: &FirstPoll,
        patience: Option<std::time::Duration>,
    ) -> Result<(), SupervisorError> {
        let waited =
            first_poll::wait_started(&self.cx, &mut self.pending, pid, first_poll, patience).await;
        match waited {
            Waited::Started => Ok(()),
            Waited::Cancelled(cancelled) => {
                self.cancelled = Some(cancelled);
                Ok(())
            }
            Waited::Ended(reason) => {
                let why = format!(
                    "it ended in its first poll: {}",
                    crate::process::display_contained(&reason, Some(pid))
                );
                self.cx.dispose(reason);
                Err(SupervisorError::Start(why))
            }
            Waited::TimedOut(patience) => {
                let _ = self.cx.scheduler().terminate(pid);
                Err(SupervisorError::Start(format!(
                    "its first poll did not return within {patience:?}"
                )))
            }
        }
    }

    /// Spawns an instance of the child at `at`; for an `async fn` body, what its first poll
    /// tells comes with it.
    fn spawn_child(&mut self, at: Key) -> Result<(Pid, Option<Arc<FirstPoll>>), SupervisorError> {
        let sched = self.cx.scheduler();
        let child = self.children.spec(at);
        let start = Start::new(&sched, self.cx.pid());
        // The factory is user code: a panic in it is a start that failed (reported to whoever
        // started the child, or spent from the intensity on a restart), never the supervisor's
        // end — its other children live on.
        let pid = std::panic::catch_unwind(AssertUnwindSafe(|| (child.factory)(&start)))
            .map_err(|panic| {
                SupervisorError::Start(format!(
                    "the child's factory panicked: {}",
                    take_panic_message(panic)
                ))
            })?
            // A failed `init`'s error is user code: its `Display` and its drop are contained.
            .map_err(|error| {
                let why = crate::process::display_contained(&error, None).to_string();
                self.cx.dispose(error);
                SupervisorError::Start(why)
            })?;
        let spawned = start.spawned();
        // A process the factory spawned otherwise (a nested supervisor) and linked to this
        // supervisor is adopted: supervised as a `Start` spawn is (`ProcessCell::adopt`).
        let adopted = || {
            let supervisor = self.cx.pid();
            sched
                .inner
                .table
                .get(pid)
                .is_some_and(|cell| cell.adopt(pid.generation(), supervisor))
        };
        if !spawned.contains(&pid) && !adopted() {
            // Not a child it can supervise: its exits do not reach this supervisor, and stopping
            // it would stop a bystander. What the factory did spawn through `Start` is stopped.
            for orphan in spawned {
                let _ = sched.terminate(orphan);
            }
            return Err(SupervisorError::Start(format!(
                "the child's factory returned {pid}, which it neither spawned through its \
                 `Start` nor linked to its supervisor"
            )));
        }
        let first_poll = start.first_poll_of(pid);
        Ok((pid, first_poll))
    }

    /// Stops the children `keys` (in start order), last started first.
    async fn stop_each(&mut self, keys: &[Key]) {
        for &key in keys.iter().rev() {
            self.stop(key).await;
        }
    }

    /// Stops every child, last started first.
    async fn stop_all(&mut self) {
        let keys = self.children.keys();
        self.stop_each(&keys).await;
    }

    /// Stops the child at `at` by its shutdown policy and waits for its end.
    ///
    /// The end is heard through the link, or through a monitor set for the stop (OTP's
    /// `monitor_child`): a child that unlinked itself still ends the wait.
    async fn stop(&mut self, at: Key) {
        let Some(pid) = self.children.set_pid(at, None) else {
            return;
        };
        let sched = self.cx.scheduler();
        let monitor = self.cx.monitor(pid);
        match self.children.spec(at).shutdown {
            ChildShutdown::BrutalKill => {
                let _ = sched.terminate(pid);
                self.wait_for_end(pid, monitor, None, false).await;
            }
            ChildShutdown::Timeout(timeout) => {
                let _ = sched.cancel(pid);
                if !self.wait_for_end(pid, monitor, Some(timeout), false).await {
                    let _ = sched.terminate(pid);
                    self.wait_for_end(pid, monitor, None, false).await;
                }
            }
            ChildShutdown::Infinity => {
                let _ = sched.cancel(pid);
                self.wait_for_end(pid, monitor, None, false).await;
            }
        }
        // Ended through the link: its `Down` is not wanted (none is delivered after this).
        self.cx.demonitor(monitor);
    }

    /// Waits for `pid`'s exit signal or `monitor`'s `Down` (keeping other exit signals for
    /// later); `false` on timeout, or — `until_cancel` — once the supervisor is asked to
    /// finish (recorded in `self.cancelled` either way).
    ///
    /// The timeout is the crate's own [`Deadline`], not tokio's timer: the supervisor may run
    /// on a scheduler whose tokio runtime has no time driver, is shutting down or is gone, and
    /// stopping a child must work there all the same.
    async fn wait_for_end(
        &mut self,
        pid: Pid,
        monitor: MonitorRef,
        timeout: Option<std::time::Duration>,
        until_cancel: bool,
    ) -> bool {
        if let Some(at) = self.pending.iter().position(|exit| exit.pid == pid) {
            let exit = self.pending.remove(at);
            self.cx.dispose(exit);
            return true;
        }
        if until_cancel && self.cancelled.is_some() {
            return false;
        }
        let wait = async {
            loop {
                match self.cx.recv_signal().await {
                    Ok(Signal::Exit(exit)) if exit.pid != pid => self.pending.push_back(exit),
                    Ok(signal) => {
                        let ended = match &signal {
                            Signal::Exit(_) => true,
                            Signal::Down(down) => down.monitor == monitor,
                        };
                        // Its reason may hold a user's error: contained.
                        self.cx.dispose(signal);
                        if ended {
                            return true;
                        }
                    }
                    Err(cancelled) if cancelled.is_cancelled() => {
                        self.cancelled = Some(cancelled);
                        if until_cancel {
                            return false;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "a supervisor's receive failed");
                        return true;
                    }
                }
            }
        };
        match timeout {
            None => wait.await,
            Some(timeout) => {
                let deadline = Deadline::new(crate::deadline::after(timeout));
                match select(pin!(wait), deadline).await {
                    Either::Left((ended, _)) => ended,
                    Either::Right(((), _)) => false,
                }
            }
        }
    }

    async fn on_request(&mut self, request: Request) -> Option<End> {
        match request {
            Request::StartChild(spec, reply) => {
                let answer = if self.children.contains_id(&spec.id) {
                    let duplicate = Err(SupervisorError::DuplicateId(spec.id.clone()));
                    self.cx.dispose(spec);
                    duplicate
                } else {
                    let at = self.children.push(spec);
                    let started = self.start(at).await;
                    if started.is_err() {
                        self.forget(at);
                    }
                    started
                };
                let _ = reply.send(answer);
            }
            Request::TerminateChild(id, reply) => {
                let answer = match self.children.by_id(&id) {
                    Some(at) => {
                        self.stop(at).await;
                        self.forget(at);
                        Ok(())
                    }
                    None => Err(SupervisorError::NoChild(id)),
                };
                let _ = reply.send(answer);
            }
            Request::WhichChildren(reply) => {
                let children = self
                    .children
                    .iter()
                    .map(|child: &Child| ChildInfo {
                        id: Arc::clone(&child.spec.id),
                        pid: child.pid,
                        restart: child.spec.restart,
                    })
                    .collect();
                let _ = reply.send(children);
            }
            Request::Restarts(reply) => {
                let _ = reply.send(self.restarts);
            }
            Request::Started(reply) => {
                let _ = reply.send(());
            }
            Request::Restart(id) => {
                self.retrying.remove(&id);
                return self.restart_child(&id).await;
            }
        }
        None
    }
}

/// What a failed start says, without `SupervisorError::Start`'s own preamble (the supervisor's
/// exit reason says which child).
fn cause(error: &SupervisorError) -> String {
    match error {
        SupervisorError::Start(why) => why.clone(),
        other => other.to_string(),
    }
}
