//! The "tokio-actors" baseline: the same [`Process`] state machines, each driven by one plain
//! tokio task on a multi-thread tokio runtime.
//!
//! This is what a competent user would write instead of adopting procsched: a small driver loop
//! per process, an unbounded tokio mpsc channel as its mailbox, handlers looked up by the
//! command's `TypeId`. It follows the process rules of `src/process/mod.rs` closely enough that
//! the state machines behave identically on both peers:
//!
//! - the mailbox is drained without blocking, at most [`DEFAULT_MAX_BATCH`] events per step;
//! - inline handlers run inside the driver and their completions feed the very next step, with
//!   no channel in between; after [`DEFAULT_STEP_BUDGET`] such back-to-back steps the driver
//!   yields to tokio, as procsched re-queues;
//! - async handlers run as tokio tasks that push their `YieldComplete` straight into the
//!   process's own mailbox, so a blocked driver awaits exactly one thing (its mailbox) whatever
//!   completes first: a message or a handler. That is cheaper than the textbook
//!   `JoinHandle`/oneshot + `FuturesUnordered` design (no per-yield future node, one waker), so
//!   the baseline gets the better of the two;
//! - `Continue` is a `tokio::task::yield_now()`; `Wait`/`Idle` await the mailbox;
//! - on `Done` (or a step error) outstanding handler tasks are aborted and `close` runs.
//!
//! Addresses are mailbox senders, as in the usual tokio "actor handle" pattern: no routing
//! table, no locks. Buffers (`Events`, `StepOutput`, the outstanding-task list) live for the
//! whole life of a driver and are reused by every step.
//!
//! What the baseline deliberately leaves out, as a hand-rolled competitor would: panic isolation
//! per step / per handler beyond what tokio's task harness already gives, graceful shutdown,
//! `terminate`, process states and limits.

use std::any::TypeId;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use procsched::{
    config::{DEFAULT_MAX_BATCH, DEFAULT_STEP_BUDGET},
    error::{CommandError, InitError},
    state_machine::{Event, Events, Process, ProcessContext, Status, StepOutput, Tag},
    BoxError, Message, Payload, Pid, Scheduler, SchedulerHandle,
};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::{AbortHandle, JoinHandle};

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;

use procsched_benches::WORKERS;

use crate::net::Net;
use crate::process_peer::{self, ProcessPeer};
use crate::processes::{async_inc, gate, inc, never};
use crate::samples::{GrowthSample, LatencySample, RssSample};
use crate::workload::{Peer, Workload, SHUTDOWN_TIMEOUT, STALL_TIMEOUT};
use crate::{growth, latency};

type InlineFn = dyn Fn(Payload) -> Result<Payload, CommandError> + Send + Sync;
/// Spawns the handler's task; the task completes the yield through the given mailbox.
type SpawnFn = dyn Fn(Payload, Tag, &UnboundedSender<Event>) -> AbortHandle + Send + Sync;

enum HandlerFn {
    Inline(Box<InlineFn>),
    Async(Box<SpawnFn>),
}

/// Registers handlers and starts an [`ActorSystem`].
pub(crate) struct Builder {
    workers: usize,
    handlers: Vec<(TypeId, HandlerFn)>,
}

impl Builder {
    /// Registers a synchronous handler for commands of type `C`, run inside the driver.
    pub(crate) fn inline_handler<C, F>(&mut self, handler: F) -> &mut Self
    where
        C: Send + 'static,
        F: Fn(C) -> Result<Payload, CommandError> + Send + Sync + 'static,
    {
        let run = move |command: Payload| handler(downcast::<C>(command));
        self.handlers
            .push((TypeId::of::<C>(), HandlerFn::Inline(Box::new(run))));
        self
    }

    /// Registers an async handler for commands of type `C`: each command runs as a tokio task.
    pub(crate) fn async_handler<C, F, Fut>(&mut self, handler: F) -> &mut Self
    where
        C: Send + 'static,
        F: Fn(C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Payload, CommandError>> + Send + 'static,
    {
        let spawn = move |command: Payload, tag: Tag, mailbox: &UnboundedSender<Event>| {
            let future = handler(downcast::<C>(command));
            let mailbox = mailbox.clone();
            // Dispatch happens on a runtime worker, so this is tokio's local-queue spawn.
            tokio::spawn(async move {
                let result = future.await;
                // An error means the process has finished meanwhile: nobody wants the result.
                let _ = mailbox.send(Event::YieldComplete { tag, result });
            })
            .abort_handle()
        };
        self.handlers
            .push((TypeId::of::<C>(), HandlerFn::Async(Box::new(spawn))));
        self
    }

    /// Starts the runtime.
    pub(crate) fn build(&mut self) -> ActorSystem {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.workers)
            .thread_name("bench-actors")
            .enable_all()
            .build()
            .expect("failed to build the tokio runtime");
        // `Process::init` takes a `ProcessContext`, which can only be made from a
        // `SchedulerHandle`. The actors never use it (they reach their peers through
        // `Handle`), but it must exist: one parked procsched worker, never given work.
        let context_scheduler = Scheduler::builder()
            .workers(1)
            .thread_name("bench-actors-ctx")
            .build()
            .expect("failed to build the context scheduler");
        let mut handlers = std::mem::take(&mut self.handlers);
        handlers.shrink_to_fit();
        let handle = Handle(Arc::new(Shared {
            handlers,
            runtime: runtime.handle().clone(),
            context: context_scheduler.handle().clone(),
        }));
        ActorSystem {
            runtime,
            handle,
            _context_scheduler: context_scheduler,
        }
    }
}

/// A running baseline: a tokio multi-thread runtime and its handlers.
pub(crate) struct ActorSystem {
    runtime: tokio::runtime::Runtime,
    handle: Handle,
    _context_scheduler: Scheduler,
}

impl ActorSystem {
    /// A builder for a runtime with `workers` worker threads.
    pub(crate) fn builder(workers: usize) -> Builder {
        Builder {
            workers,
            handlers: Vec::new(),
        }
    }

    /// A clonable handle, for spawning from anywhere (including from inside a process).
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `future` on the calling thread (which does not become a worker).
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Stops the runtime; drivers still running are dropped.
    pub(crate) fn shutdown(self, timeout: Duration) {
        let ActorSystem {
            runtime,
            handle,
            _context_scheduler,
        } = self;
        drop(handle);
        runtime.shutdown_timeout(timeout);
    }
}

impl fmt::Debug for ActorSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorSystem").finish_non_exhaustive()
    }
}

/// Spawns processes onto an [`ActorSystem`]; one `Arc`, cheap to clone.
#[derive(Clone)]
pub(crate) struct Handle(Arc<Shared>);

struct Shared {
    /// Linear scan: a benchmark registers a handful, and a short `Vec` of `(TypeId, _)` beats
    /// hashing.
    handlers: Vec<(TypeId, HandlerFn)>,
    runtime: tokio::runtime::Handle,
    context: SchedulerHandle,
}

/// A process's address: its mailbox sender.
#[derive(Clone)]
pub(crate) struct Addr(UnboundedSender<Event>);

impl Addr {
    /// Delivers `message`; fails if the process has finished.
    pub(crate) fn send(&self, message: Message) -> Result<(), BoxError> {
        self.0
            .send(Event::Message(message))
            .map_err(|_| "the actor has finished".into())
    }
}

impl fmt::Debug for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Addr").finish_non_exhaustive()
    }
}

/// What `Handle::start` returns: the mailbox sender (if asked for) and the driver's join handle.
type Started = (
    Option<UnboundedSender<Event>>,
    JoinHandle<Result<Payload, BoxError>>,
);

/// What `spawn` returns: the address and the driver's join handle.
pub(crate) struct ActorHandle {
    addr: Addr,
    join: JoinHandle<Result<Payload, BoxError>>,
}

impl ActorHandle {
    /// The process's address.
    pub(crate) fn addr(&self) -> &Addr {
        &self.addr
    }

    /// Awaits the process's result.
    pub(crate) async fn join(self) -> Result<Payload, BoxError> {
        match self.join.await {
            Ok(result) => result,
            Err(error) => Err(error.into()),
        }
    }
}

impl fmt::Debug for ActorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorHandle").finish_non_exhaustive()
    }
}

/// The source of PIDs for `ProcessContext` (processes may log or compare them).
static NEXT_PID_BLOCK: AtomicU64 = AtomicU64::new(1);
/// PIDs handed to one thread at a time, so parallel spawns do not fight over one counter.
const PID_BLOCK: u64 = 1024;

thread_local! {
    /// This thread's reserved PIDs, `next..end`.
    static PIDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The address of the process whose `init` runs on this thread. A tokio actor knows its own
    /// address from construction; this is how `init` gets it without a `ProcessContext` field.
    static INITIALISING: RefCell<Option<UnboundedSender<Event>>> = const { RefCell::new(None) };
}

fn next_pid() -> Pid {
    let raw = PIDS.with(|pids| {
        let (mut next, mut end) = pids.get();
        if next == end {
            next = NEXT_PID_BLOCK.fetch_add(PID_BLOCK, Ordering::Relaxed);
            end = next + PID_BLOCK;
        }
        pids.set((next + 1, end));
        next
    });
    Pid::from_raw(raw).expect("PIDs start at 1")
}

/// The address of the process being initialised on this thread (call from `init` only).
///
/// # Panics
/// Outside an `init` run by [`Handle::spawn`].
pub(crate) fn own_addr() -> Addr {
    INITIALISING.with(|current| {
        Addr(
            current
                .borrow()
                .as_ref()
                .expect("own_addr() outside init")
                .clone(),
        )
    })
}

impl Handle {
    /// Runs `init` on the calling thread, then starts the driver task.
    ///
    /// # Errors
    /// What `init` returned.
    pub(crate) fn spawn<P: Process<Output = Payload>>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<ActorHandle, InitError> {
        let (mailbox, join) = self.start(process, method, input, true)?;
        Ok(ActorHandle {
            addr: Addr(mailbox.expect("start keeps the address when asked")),
            join,
        })
    }

    /// Like [`spawn`](Self::spawn), keeping neither address nor join handle (as a process
    /// spawning children it only hears from by message would).
    ///
    /// # Errors
    /// What `init` returned.
    pub(crate) fn spawn_detached<P: Process<Output = Payload>>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        self.start(process, method, input, false).map(drop)
    }

    fn start<P: Process<Output = Payload>>(
        &self,
        mut process: P,
        method: &str,
        input: Payload,
        keep_addr: bool,
    ) -> Result<Started, InitError> {
        let pid = next_pid();
        let (mailbox, receiver) = mpsc::unbounded_channel();
        let context = ProcessContext::new(pid, &self.0.context);
        // Moved in and out (no reference-count traffic); the previous value is restored in
        // case a process spawns from its own `init`.
        let outer = INITIALISING.with(|current| current.replace(Some(mailbox)));
        let initialised = process.init(&context, method, input);
        let mailbox = INITIALISING
            .with(|current| current.replace(outer))
            .expect("INITIALISING is restored by start only");
        if let Err(error) = initialised {
            process.close();
            return Err(error);
        }
        let kept = keep_addr.then(|| mailbox.clone());
        let driver = drive(process, receiver, mailbox, self.clone());
        // From a runtime worker, this is tokio's local-queue spawn; from elsewhere, injection.
        Ok((kept, self.0.runtime.spawn(driver)))
    }

    fn handler(&self, type_id: TypeId) -> Option<&HandlerFn> {
        self.0
            .handlers
            .iter()
            .find_map(|(id, handler)| (*id == type_id).then_some(handler))
    }

    /// Runs an inline handler right away (its completion joins `events`) or starts an async
    /// one (its completion will arrive in `mailbox`).
    fn dispatch(
        &self,
        tag: Tag,
        command: Payload,
        mailbox: &UnboundedSender<Event>,
        events: &mut Events,
        outstanding: &mut Vec<AbortHandle>,
    ) {
        match self.handler(command.value_type_id()) {
            Some(HandlerFn::Inline(run)) => events.push(Event::YieldComplete {
                tag,
                result: run(command),
            }),
            Some(HandlerFn::Async(spawn)) => outstanding.push(spawn(command, tag, mailbox)),
            None => events.push(Event::YieldComplete {
                tag,
                result: Err(CommandError::NoHandler(command.type_name())),
            }),
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("handlers", &self.0.handlers.len())
            .finish_non_exhaustive()
    }
}

/// The driver: one tokio task per process (see the module docs for the protocol).
async fn drive<P: Process<Output = Payload>>(
    mut process: P,
    mut receiver: UnboundedReceiver<Event>,
    mailbox: UnboundedSender<Event>,
    system: Handle,
) -> Result<Payload, BoxError> {
    let mut events = Events::default();
    let mut out = StepOutput::default();
    let mut outstanding: Vec<AbortHandle> = Vec::new();
    // Steps since the driver last gave tokio a chance to run something else.
    let mut budget = DEFAULT_STEP_BUDGET;
    let result = loop {
        while events.len() < DEFAULT_MAX_BATCH {
            match receiver.try_recv() {
                Ok(event) => events.push(event),
                Err(_) => break,
            }
        }
        if let Err(error) = process.step(&mut events, &mut out) {
            break Err(error);
        }
        // Like procsched: an event is presented to exactly one step.
        while events.pop().is_some() {}
        let status = out.take_status();
        if let Status::Done(result) = status {
            // Yields of a `Done` step are dropped, as procsched does.
            out.take_yields().for_each(drop);
            break Ok(result);
        }
        if out.yield_count() > 0 {
            outstanding.retain(|task| !task.is_finished());
            for (tag, command) in out.take_yields() {
                system.dispatch(tag, command, &mailbox, &mut events, &mut outstanding);
            }
        }
        budget -= 1;
        match status {
            Status::Wait | Status::Idle => {
                if events.is_empty() {
                    // Nothing completed inline: sleep until a message or a completion arrives
                    // (never `None`: this driver holds a sender itself).
                    if let Some(event) = receiver.recv().await {
                        events.push(event);
                    }
                    budget = DEFAULT_STEP_BUDGET;
                } else if budget == 0 {
                    // Inline completions keep it busy: let other tasks run, as procsched
                    // re-queues a process after its step budget.
                    tokio::task::yield_now().await;
                    budget = DEFAULT_STEP_BUDGET;
                }
            }
            // `Continue` (and any future status): run again behind other ready work.
            _ => {
                tokio::task::yield_now().await;
                budget = DEFAULT_STEP_BUDGET;
            }
        }
    };
    for task in outstanding.drain(..) {
        task.abort();
    }
    process.close();
    result
}

fn downcast<C: 'static>(command: Payload) -> C {
    match command.downcast::<C>() {
        Ok(command) => command,
        Err(other) => unreachable!("handler for {} got {other:?}", std::any::type_name::<C>()),
    }
}

// ---------------------------------------------------------------------------
// The peer, as seen from the bench thread
// ---------------------------------------------------------------------------

impl Peer for ActorSystem {
    const NAME: &'static str = "tokio-actors";

    fn build() -> Self {
        ActorSystem::builder(*WORKERS)
            .inline_handler(inc)
            .async_handler(async_inc)
            .async_handler(never)
            .async_handler(gate)
            .build()
    }

    fn bench(&self, workload: Workload, group: &mut BenchmarkGroup<'_, WallTime>) {
        process_peer::bench(self, workload, group);
    }

    fn rss(&self, workload: Workload) -> RssSample {
        process_peer::rss(self, workload)
    }

    fn latency(&self) -> LatencySample {
        latency::processes(self)
    }

    fn growth(&self, live: usize) -> GrowthSample {
        growth::processes(self, live)
    }

    fn shutdown(self) {
        ActorSystem::shutdown(self, SHUTDOWN_TIMEOUT);
    }
}

impl ProcessPeer for ActorSystem {
    type Net = Handle;
    type Handle = ActorHandle;

    fn preset(&self) -> Option<Handle> {
        Some(self.handle().clone())
    }

    fn spawn<P: Process<Output = Payload>>(&self, process: P, input: Payload) -> ActorHandle {
        match self.handle().spawn(process, "run", input) {
            Ok(handle) => handle,
            Err(error) => panic!("spawn failed: {error}"),
        }
    }

    fn addr(handle: &ActorHandle) -> Addr {
        handle.addr().clone()
    }

    fn send(&self, to: &Addr, message: Message) {
        if let Err(error) = to.send(message) {
            panic!("send failed: {error}");
        }
    }

    fn join_each(
        &self,
        handles: impl Iterator<Item = ActorHandle>,
        mut check: impl FnMut(Payload),
    ) {
        let all = async {
            for handle in handles {
                match handle.join().await {
                    Ok(payload) => check(payload),
                    Err(error) => panic!("process failed: {error}"),
                }
            }
        };
        let watched = self.block_on(async { tokio::time::timeout(STALL_TIMEOUT, all).await });
        if watched.is_err() {
            panic!("tokio-actors: processes still running after {STALL_TIMEOUT:?}");
        }
    }
}

impl Net for Handle {
    type Addr = Addr;

    fn preset(&self) -> Option<Self> {
        Some(self.clone())
    }

    fn complete(preset: Option<Self>, _: &ProcessContext<'_>) -> Self {
        preset.expect("an actor is spawned with its system handle preset")
    }

    fn own_addr(_: &ProcessContext<'_>) -> Addr {
        own_addr()
    }

    fn send_to(&self, to: &Addr, message: Message) -> Result<(), BoxError> {
        to.send(message)
    }

    fn spawn_detached<P: Process<Output = Payload>>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<(), BoxError> {
        self.spawn_detached(process, method, input)
            .map_err(Into::into)
    }
}
