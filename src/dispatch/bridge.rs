//! Where handlers run: the tokio runtime, and the scheduler's own workers for async handlers
//! that wait.
//!
//! # A pending async handler stays on procsched's workers
//! An async handler is polled first during dispatch, on the worker stepping its process
//! (`handler.rs`). One that is still pending becomes a task of the scheduler's *own* executor
//! ([`HandlerRuntime::spawn_watched`]), not a tokio task:
//! - the workers run inside the handler runtime's context (the scheduler's builder enters it),
//!   so the handler's tokio code works as on a tokio worker: timers and I/O register with the
//!   runtime's drivers (which run on tokio's threads and wake the handler's task), and
//!   `tokio::spawn` spawns onto the runtime;
//! - a wake never crosses to a tokio worker and back: the handler's completion is pushed into its
//!   process's mailbox by the worker that ran it, and the process is usually stepped by that
//!   same worker next;
//! - a waiting handler costs a task of this executor (its header and the small future that
//!   completes the yield) next to its boxed future, instead of a tokio task cell (256 bytes,
//!   128-byte aligned, which leaves holes in the heap): `burst_spawn`'s memory per live process.
//!
//! Its task is labelled with its process's PID, so the monitor names the process if the handler
//! blocks a worker. The process ending aborts it ([`HandlerTask::abort`]); the scheduler's forced
//! stop cancels it with every other task of the executor.
//!
//! # When the handler runtime shuts down
//! A handler's tokio task used to be dropped with the runtime, which completed its yield as
//! `Cancelled`. A handler on our workers does not go away with the runtime, so a *sentinel*
//! task on the runtime stands in while any handler waits (`sentinel.rs` keeps exactly one then,
//! and none otherwise). Dropped by the runtime's shutdown (every tokio runtime drops its tasks
//! when it shuts down), it
//! 1. marks the runtime gone (`RuntimeWatch::gone`), then
//! 2. wakes every task of the scheduler's executor (`Handle::wake_owned_tasks`).
//!
//! Every poll of a watched handler ([`Watched`]) first reads the mark; set, it drops the handler
//! future and completes its yield as `Cancelled`. Dispatch reads it too: before a handler's
//! first poll, so a handler started after the shutdown is not run at all (its tokio code would
//! panic on the dead runtime), and after it, so one pending after the shutdown completes at
//! once; both as `Cancelled`. No handler misses the mark: the
//! executor's broadcast wake orders each task's next poll after step 1 (its `state.rs`,
//! "Wake by reference", checked by `loom_a_condition_set_before_waking_every_owned_task_is_seen`).
//! When the last waiting handler finishes, the sentinel is disarmed (it ends without firing).

use super::sentinel::SentinelSlot;
use crate::executor;
use crate::loom::atomic::{AtomicBool, Ordering::*};
use crate::process::Pid;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
// A plain std type: it is shared with a tokio task, outside every loom model.
use std::sync::Arc as StdArc;
use std::task::{Context, Poll};

/// The runtime handlers run on, as dispatch sees it (module docs).
pub(crate) struct HandlerRuntime {
    tokio: tokio::runtime::Handle,
    executor: executor::Handle,
    watch: StdArc<RuntimeWatch>,
}

impl HandlerRuntime {
    /// Handlers of a scheduler whose executor is `executor`, on `tokio`.
    pub(crate) fn new(tokio: tokio::runtime::Handle, executor: executor::Handle) -> Self {
        HandlerRuntime {
            tokio,
            executor,
            watch: StdArc::new(RuntimeWatch {
                gone: AtomicBool::new(false),
                sentinel: SentinelSlot::new(),
            }),
        }
    }

    /// Spawns a sentinel (module docs) on the runtime: the slot keeps the returned sender, and
    /// dropping it disarms the sentinel.
    fn make_sentinel(&self) -> tokio::sync::oneshot::Sender<()> {
        let (disarm, disarmed) = tokio::sync::oneshot::channel::<()>();
        // Made out here, so that a runtime already shut down, which drops the task unpolled,
        // still drops (and so fires) it.
        let sentinel = Sentinel {
            watch: self.watch.clone(),
            executor: self.executor.clone(),
            armed: true,
        };
        drop(self.tokio.spawn(async move {
            // Resolves (with an error) when the sender drops: no handler waits any more.
            let _ = disarmed.await;
            sentinel.disarm();
        }));
        disarm
    }

    /// The tokio runtime: blocking jobs, deadline timers, [`Run`](super::Run) futures.
    pub(crate) fn tokio(&self) -> &tokio::runtime::Handle {
        &self.tokio
    }

    /// `true` once the tokio runtime has shut down (its sentinel was dropped).
    pub(crate) fn is_gone(&self) -> bool {
        self.watch.is_gone()
    }

    /// Runs `task` (a pending handler and its completion) on the scheduler's executor, watched
    /// for the runtime's shutdown (module docs), labelled with `pid` for the monitor.
    pub(crate) fn spawn_watched<G>(&self, pid: Pid, task: G) -> HandlerTask
    where
        G: Future<Output = ()> + Send + 'static,
    {
        self.watch
            .sentinel
            .enter(|| self.make_sentinel(), |sentinel| !sentinel.is_closed());
        let watched = Watched {
            task: Some(task),
            waiting: Waiting(self.watch.clone()),
        };
        HandlerTask::Local(self.executor.spawn_labelled(watched, pid.as_u64()))
    }
}

/// Whether the handler runtime is gone (module docs, step 1), and the sentinel that will say so.
struct RuntimeWatch {
    gone: AtomicBool,
    /// A sentinel's sender while handlers wait (`sentinel.rs`).
    sentinel: SentinelSlot<tokio::sync::oneshot::Sender<()>>,
}

impl RuntimeWatch {
    fn is_gone(&self) -> bool {
        // Pairs with the sentinel's `Release` store; the broadcast wake orders the poll after it.
        self.gone.load(Acquire)
    }
}

/// Lives in a task on the handler runtime; dropped armed (the runtime shut down), it fires
/// (module docs, steps 1 and 2).
struct Sentinel {
    watch: StdArc<RuntimeWatch>,
    executor: executor::Handle,
    armed: bool,
}

impl Sentinel {
    /// The scheduler went away first: drop without firing. (A method, so that the task's
    /// `async move` captures the whole sentinel rather than just its `armed` field.)
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if self.armed {
            self.watch.gone.store(true, Release);
            let woken = self.executor.wake_owned_tasks();
            tracing::debug!(
                woken,
                "the handler runtime shut down: waiting async handlers complete as Cancelled"
            );
        }
    }
}

pin_project_lite::pin_project! {
    /// A pending handler's task on the scheduler's executor: `task` (which completes the
    /// yield), unless the runtime is gone (module docs).
    struct Watched<G> {
        #[pin]
        task: Option<G>,
        waiting: Waiting,
    }
}

/// Counts its handler as waiting (`sentinel.rs`, step 1 at spawn) until the task ends (step 2,
/// on drop: the task completed or was cancelled).
struct Waiting(StdArc<RuntimeWatch>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.sentinel.exit();
    }
}

impl<G: Future<Output = ()>> Future for Watched<G> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        if this.waiting.0.is_gone() {
            // Dropping the task drops the yield's completer, which completes it as `Cancelled`;
            // the handler future's destructor is user code.
            let mut task = this.task;
            if catch_unwind(AssertUnwindSafe(|| task.set(None))).is_err() {
                tracing::warn!("a handler's destructor panicked; the panic was contained");
            }
            return Poll::Ready(());
        }
        match this.task.as_mut().as_pin_mut() {
            Some(task) => task.poll(cx),
            None => Poll::Ready(()),
        }
    }
}

/// An async or blocking handler that has not completed at dispatch: what its process keeps, to
/// abort it if the process ends first.
#[derive(Debug)]
pub(crate) enum HandlerTask {
    /// A blocking job, or a deadline's timer task, on the tokio runtime.
    Tokio(tokio::task::AbortHandle),
    /// A pending async handler on the scheduler's executor (module docs).
    Local(executor::JoinHandle<()>),
    /// A state machine's ask with a deadline: its task, and its channel, closed at once by an
    /// abort (`ask.rs`).
    Ask(tokio::task::AbortHandle, StdArc<super::ask::AskInFlight>),
}

impl HandlerTask {
    /// Cancels the handler: its future is dropped (now, or when its current poll returns), which
    /// completes its yield as `Cancelled` — rejected, when its process has ended.
    pub(crate) fn abort(&self) {
        match self {
            HandlerTask::Tokio(task) => task.abort(),
            HandlerTask::Local(task) => task.abort(),
            HandlerTask::Ask(task, channel) => {
                channel.close();
                task.abort();
            }
        }
    }

    /// `true` once the handler's task has finished.
    pub(crate) fn is_finished(&self) -> bool {
        match self {
            HandlerTask::Tokio(task) | HandlerTask::Ask(task, _) => task.is_finished(),
            HandlerTask::Local(task) => task.is_finished(),
        }
    }
}
