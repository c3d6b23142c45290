//! Handlers registered per command type.

use super::bridge::{HandlerRuntime, HandlerTask};
use super::{TimerProbe, YieldCompleter};
use crate::process::stats::HandlerOutcome;
use crate::process::Payload;
use crate::process::{contained, drop_contained, panic_message};
use crate::process::{CommandError, Events, PayloadSlot, Pid, Tag};
use futures::FutureExt;
use std::any::TypeId;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use tracing::Instrument;
// A plain std type: it lives on tokio's threads, outside every loom model.
use std::sync::Arc as StdArc;
use std::time::Duration;

/// Runs an inline handler for process `pid` and pushes its completion (tag, result) straight
/// into the step's events: monomorphised per handler, so the result is built in place rather
/// than moved through a type-erased return value. Returns how the result counts in the metrics.
type InlineFn = dyn Fn(PayloadSlot<'_>, Tag, Pid, &mut Events) -> HandlerOutcome + Send + Sync;
/// Spawns the handler for one command: (command, its completer, the runtime, the deadline, the
/// step's completions). Returns its task, unless it completed at once.
pub(crate) type SpawnFn = dyn Fn(
        PayloadSlot<'_>,
        YieldCompleter,
        &HandlerRuntime,
        Option<Duration>,
        &mut Events,
    ) -> Option<HandlerTask>
    + Send
    + Sync;

/// A type-erased handler. The erased closures downcast the command to the type they were
/// registered for; the registry only calls them with commands of that type.
///
/// Shared (`Arc`) so that a builder can hand the same registrations to every scheduler it builds.
#[derive(Clone)]
pub(crate) enum Handler {
    Inline(StdArc<InlineFn>),
    Async(StdArc<SpawnFn>),
    Blocking(StdArc<SpawnFn>),
}

impl Handler {
    pub(crate) fn inline<C, F>(f: F) -> Handler
    where
        C: Send + 'static,
        F: Fn(C) -> Result<Payload, CommandError> + Send + Sync + 'static,
    {
        Handler::Inline(StdArc::new(
            move |command: PayloadSlot<'_>, tag: Tag, pid: Pid, completions: &mut Events| {
                let command = downcast::<C>(command);
                let result =
                    catch_unwind(AssertUnwindSafe(|| f(command))).unwrap_or_else(|panic| {
                        let message = panic_message(&*panic);
                        tracing::warn!(
                            %pid,
                            tag,
                            command = std::any::type_name::<C>(),
                            panic = %message,
                            "handler panicked"
                        );
                        Err(CommandError::Panicked(message))
                    });
                let outcome = HandlerOutcome::of(&result);
                completions.push_completion(tag, result);
                outcome
            },
        ))
    }

    pub(crate) fn asynchronous<C, F, Fut>(f: F) -> Handler
    where
        C: Send + 'static,
        F: Fn(C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Payload, CommandError>> + Send + 'static,
    {
        Handler::Async(StdArc::new(
            move |command, completer, runtime, timeout, completions: &mut Events| {
                // Building the future is user code too: a panic here completes the yield, once.
                let command = downcast::<C>(command);
                let span = handler_span::<C>(completer.pid(), "async");
                let future = match span.in_scope(|| catch_unwind(AssertUnwindSafe(|| f(command)))) {
                    Ok(future) => AssertUnwindSafe(future).catch_unwind(),
                    Err(panic) => {
                        let _entered = span.enter();
                        completer.complete(Err(CommandError::Panicked(panic_message(&*panic))));
                        return None;
                    }
                };
                // The first poll runs right here, on the worker (inside the handler runtime's
                // context: the workers run in it), so a handler that completes at once — a
                // cache hit, a computation, a message it only forwards — never leaves the
                // worker: no task, no cross-thread wake, and its completion joins this very
                // poll of the process, as an inline handler's does. A pending handler moves
                // (boxed: it has been polled) into a task of the scheduler's executor
                // (`bridge.rs`), which polls it again with its own waker; the no-op waker of
                // this first poll is never needed, since every future re-registers the waker of
                // its latest poll.
                let mut future = Box::pin(future);
                let first = span.in_scope(|| {
                    future
                        .as_mut()
                        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
                });
                if let std::task::Poll::Ready(caught) = first {
                    // Done with: the handler's future is user code, dropped contained.
                    let panics = drop_contained(future);
                    completer.cell().stats.destructors_panicked(panics);
                    let result = caught.unwrap_or_else(|panic| {
                        Err(CommandError::Panicked(panic_message(&*panic)))
                    });
                    span.in_scope(|| completer.complete_in(completions, result));
                    return None;
                }
                spawn_pending(runtime, future, completer, timeout, span, completions)
            },
        ))
    }

    pub(crate) fn blocking<C, F>(f: F) -> Handler
    where
        C: Send + 'static,
        F: Fn(C) -> Result<Payload, CommandError> + Send + Sync + 'static,
    {
        let f = StdArc::new(f);
        Handler::Blocking(StdArc::new(
            move |command, completer, runtime, timeout, _: &mut Events| {
                let f = f.clone();
                let command = Unrun::new(downcast::<C>(command), completer.cell().clone());
                let span = handler_span::<C>(completer.pid(), "blocking");
                let job_span = span.clone();
                let job = move || {
                    let _entered = job_span.enter();
                    let command = command.take();
                    catch_unwind(AssertUnwindSafe(|| f(command)))
                        .unwrap_or_else(|panic| Err(CommandError::Panicked(panic_message(&*panic))))
                };
                let runtime = runtime.tokio();
                let abort = match timeout {
                    // The job owns the completer: aborted before it starts, the job is dropped
                    // with it, which completes the yield as `Cancelled`.
                    None => runtime
                        .spawn_blocking(move || {
                            let result = job();
                            let _entered = span.enter();
                            completer.complete(result);
                        })
                        .abort_handle(),
                    Some(timeout) => spawn_blocking_within(runtime, job, completer, timeout, span),
                };
                Some(HandlerTask::Tokio(abort))
            },
        ))
    }

    pub(crate) fn needs_runtime(&self) -> bool {
        !matches!(self, Handler::Inline(_))
    }
}

/// A blocking job's command until the job runs. A job aborted before it starts (its process
/// ended) is dropped by tokio; the command's destructor is user code, so it is dropped here,
/// its panic contained and counted for its process (`process/contain.rs`).
struct Unrun<C> {
    command: Option<C>,
    cell: crate::loom::Arc<crate::process::mailbox::ProcessCell>,
}

impl<C> Unrun<C> {
    fn new(command: C, cell: crate::loom::Arc<crate::process::mailbox::ProcessCell>) -> Self {
        Unrun {
            command: Some(command),
            cell,
        }
    }

    /// The command, for the job that runs it.
    fn take(mut self) -> C {
        self.command.take().expect("taken once, by the job")
    }
}

impl<C> Drop for Unrun<C> {
    fn drop(&mut self) {
        if let Some(command) = self.command.take() {
            self.cell
                .stats
                .destructors_panicked(drop_contained(command));
        }
    }
}

/// A handler future as it runs: its panics caught.
type CaughtHandler<Fut> = futures::future::CatchUnwind<AssertUnwindSafe<Fut>>;

/// Moves a pending async handler (polled once already, so boxed) into a task of the
/// scheduler's executor that completes its yield (`bridge.rs`). The task is one of four shapes,
/// each only as large as it needs: a deadline's `tokio::time::Timeout` holds a timer entry
/// (about a hundred bytes) and a span forty, and a yield waiting on its handler carries the task
/// for as long as it waits (`burst_spawn`'s memory per live process counts it).
///
/// Once the handler runtime is gone, the handler is dropped instead and its yield completes as
/// `Cancelled`, right away (`bridge.rs`, "When the handler runtime shuts down").
fn spawn_pending<Fut>(
    runtime: &HandlerRuntime,
    future: std::pin::Pin<Box<CaughtHandler<Fut>>>,
    completer: YieldCompleter,
    timeout: Option<Duration>,
    span: tracing::Span,
    completions: &mut Events,
) -> Option<HandlerTask>
where
    Fut: Future<Output = Result<Payload, CommandError>> + Send + 'static,
{
    async fn within<F: Future<Output = std::thread::Result<CommandResult>>>(
        future: F,
        timeout: Duration,
    ) -> std::thread::Result<CommandResult> {
        match tokio::time::timeout(timeout, future).await {
            Ok(caught) => caught,
            Err(_elapsed) => Ok(Err(CommandError::TimedOut)),
        }
    }
    if runtime.is_gone() {
        let panics = drop_contained(future);
        completer.cell().stats.destructors_panicked(panics);
        span.in_scope(|| completer.complete_in(completions, Err(CommandError::Cancelled)));
        return None;
    }
    let pid = completer.pid();
    let traced = !span.is_disabled();
    Some(match (timeout, traced) {
        (None, false) => runtime.spawn_watched(pid, Job::new(future, completer)),
        (None, true) => runtime.spawn_watched(pid, Job::new(future, completer).instrument(span)),
        (Some(timeout), false) => {
            runtime.spawn_watched(pid, Job::new(within(future, timeout), completer))
        }
        (Some(timeout), true) => runtime.spawn_watched(
            pid,
            Job::new(within(future, timeout), completer).instrument(span),
        ),
    })
}

pin_project_lite::pin_project! {
    /// A pending async handler's task: awaits the handler (or its deadline), drops it, then
    /// completes the yield. The handler future is user code whose destructor may panic:
    /// dropped on its own — when it is done, or when the task is cancelled (its process ended)
    /// — each panic contained and counted for its process, so a destructor never turns a reply
    /// into a `Cancelled` nor goes uncounted (`process/contain.rs`).
    struct Job<G> {
        #[pin]
        handler: Option<G>,
        completer: Option<YieldCompleter>,
    }

    impl<G> PinnedDrop for Job<G> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if this.handler.is_some() {
                let mut handler = this.handler.as_mut();
                let panics = contained(|| handler.set(None));
                if let Some(completer) = this.completer.as_ref() {
                    completer.cell().stats.destructors_panicked(panics);
                }
            }
            // The completer (if the handler never finished) completes the yield as `Cancelled`.
        }
    }
}

impl<G> Job<G> {
    fn new(handler: G, completer: YieldCompleter) -> Self {
        Job {
            handler: Some(handler),
            completer: Some(completer),
        }
    }
}

impl<G> Future for Job<G>
where
    G: Future<Output = std::thread::Result<CommandResult>>,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let Some(handler) = this.handler.as_mut().as_pin_mut() else {
            return Poll::Ready(());
        };
        let caught = std::task::ready!(handler.poll(cx));
        let mut handler = this.handler.as_mut();
        let panics = contained(|| handler.set(None));
        let Some(completer) = this.completer.take() else {
            return Poll::Ready(());
        };
        completer.cell().stats.destructors_panicked(panics);
        let result =
            caught.unwrap_or_else(|panic| Err(CommandError::Panicked(panic_message(&*panic))));
        completer.complete(result);
        Poll::Ready(())
    }
}

/// A blocking yield's result.
type CommandResult = Result<Payload, CommandError>;

/// Runs a blocking job under a deadline.
///
/// One async task owns the yield's completer and awaits the job's result under
/// `tokio::time::timeout`, so the timer lives exactly as long as the call: it is dropped when the
/// result arrives, when the deadline passes, or when the task is aborted (the process ended,
/// through the returned handle). An aborted task aborts the job too if it has not started; past
/// its deadline the job runs on, as `yield_command_within` documents.
/// The job hands its result over a oneshot rather than through its `JoinHandle`, so a result that
/// comes too late is dropped by our code, its destructor's panic contained
/// ([`drop_late_result`]).
///
/// Exactly one completion: the task completes with the result, `TimedOut`, or `Cancelled` (the
/// job was dropped unrun, e.g. by a runtime shutdown); a task dropped before completing drops the
/// completer, which completes as `Cancelled`.
fn spawn_blocking_within(
    runtime: &tokio::runtime::Handle,
    job: impl FnOnce() -> CommandResult + Send + 'static,
    completer: YieldCompleter,
    timeout: Duration,
    span: tracing::Span,
) -> tokio::task::AbortHandle {
    let (result_tx, result_rx) = tokio::sync::oneshot::channel();
    let job = runtime.spawn_blocking(move || {
        if let Err(late) = result_tx.send(job()) {
            drop_late_result(late);
        }
    });
    let mut pending = PendingJob {
        job: Some(job.abort_handle()),
        result: result_rx,
    };
    runtime
        .spawn(
            async move {
                let result = match tokio::time::timeout(timeout, &mut pending.result).await {
                    Ok(Ok(result)) => result,
                    Ok(Err(_job_dropped)) => Err(CommandError::Cancelled),
                    Err(_elapsed) => {
                        // The job runs on (documented): only its result is dropped, when it comes.
                        pending.detach();
                        Err(CommandError::TimedOut)
                    }
                };
                completer.complete(result);
                // `pending` drops here, after the completion, and disposes of a result that raced
                // in after the deadline.
            }
            .instrument(span),
        )
        .abort_handle()
}

/// The span a handler of command type `C` runs in for process `pid` (module docs of
/// `dispatch`). Made inside the process's span, which becomes its parent.
fn handler_span<C>(pid: Pid, kind: &'static str) -> tracing::Span {
    tracing::info_span!(
        "handler",
        pid = %pid,
        command = std::any::type_name::<C>(),
        kind
    )
}

/// The deadline task's side of a blocking job (see [`spawn_blocking_within`]). Dropped, it
/// aborts the job unless the deadline passed — which stops it only if it has not started; a
/// running blocking call cannot be interrupted — and makes sure its result, now or later, is
/// dropped by [`drop_late_result`].
struct PendingJob {
    /// `None` once the deadline passed: the job is left to run on.
    job: Option<tokio::task::AbortHandle>,
    result: tokio::sync::oneshot::Receiver<CommandResult>,
}

impl PendingJob {
    /// Leaves the job to run on: dropping `self` will no longer abort it.
    fn detach(&mut self) {
        self.job = None;
    }
}

impl Drop for PendingJob {
    fn drop(&mut self) {
        if let Some(job) = &self.job {
            job.abort();
        }
        // After `close`, the job's `send` fails and it drops its result itself; a result sent
        // before is still in the channel and taken here. Either way not by the channel's own
        // destructor, which would not contain a panic.
        self.result.close();
        if let Ok(late) = self.result.try_recv() {
            drop_late_result(late);
        }
    }
}

/// Drops the result of a blocking job nobody waits for any more (its yield timed out or its
/// process ended). Payload destructors are user code: a panic is contained.
fn drop_late_result(late: CommandResult) {
    tracing::debug!("dropping the late result of a blocking command");
    if catch_unwind(AssertUnwindSafe(move || drop(late))).is_err() {
        tracing::warn!(
            "the destructor of a late blocking result panicked; the panic was contained"
        );
    }
}

fn downcast<C: 'static>(command: PayloadSlot<'_>) -> C {
    match command.downcast::<C>() {
        Ok(command) => command,
        Err(other) => unreachable!("handler for {} got {other:?}", std::any::type_name::<C>()),
    }
}

/// Up to this many handlers are found by a linear scan of their `TypeId`s (a few compares of
/// two words each, cheaper than hashing and probing); past it, through a hash index.
const LINEAR_LOOKUP_MAX: usize = 8;

/// The handlers of one scheduler, looked up by the command's `TypeId` on every yield.
#[derive(Default, Clone)]
pub(crate) struct HandlerSet {
    handlers: Vec<(TypeId, Handler)>,
    /// `TypeId` → position in `handlers`; built only past [`LINEAR_LOOKUP_MAX`] handlers.
    index: HashMap<TypeId, usize, BuildHasherDefault<TypeIdHasher>>,
    /// Whether the runtime these handlers run on has timers (for yields with a deadline). Kept
    /// here because a handler set and its runtime are built together and live together.
    timers: TimerProbe,
}

impl HandlerSet {
    /// Adds a handler; returns `false` if one is already registered for `C`.
    pub(crate) fn insert(&mut self, type_id: TypeId, handler: Handler) -> bool {
        if self.position(type_id).is_some() {
            return false;
        }
        self.handlers.push((type_id, handler));
        if self.handlers.len() > LINEAR_LOOKUP_MAX {
            if self.index.is_empty() {
                self.index = self
                    .handlers
                    .iter()
                    .enumerate()
                    .map(|(i, (t, _))| (*t, i))
                    .collect();
            } else {
                self.index.insert(type_id, self.handlers.len() - 1);
            }
        }
        true
    }

    #[inline]
    fn position(&self, type_id: TypeId) -> Option<usize> {
        if self.handlers.len() > LINEAR_LOOKUP_MAX {
            self.index.get(&type_id).copied()
        } else {
            self.handlers.iter().position(|(t, _)| *t == type_id)
        }
    }

    #[inline]
    pub(crate) fn get(&self, type_id: TypeId) -> Option<&Handler> {
        self.position(type_id).map(|i| &self.handlers[i].1)
    }

    /// Whether the handlers' runtime has timers (see [`TimerProbe`]).
    pub(crate) fn timers(&self) -> &TimerProbe {
        &self.timers
    }

    pub(crate) fn needs_runtime(&self) -> bool {
        self.handlers.iter().any(|(_, h)| h.needs_runtime())
    }
}

/// `TypeId`s are already well-distributed hashes: pass them through instead of running SipHash
/// on every yield.
#[derive(Default)]
pub(crate) struct TypeIdHasher(u64);

impl Hasher for TypeIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 ^= u64::from_ne_bytes(word);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::process::Event;

    /// One distinct command type per handler.
    struct Cmd<const N: usize>;

    fn set_of<const N: usize>(set: &mut HandlerSet) -> bool {
        set.insert(
            TypeId::of::<Cmd<N>>(),
            Handler::inline(|_: Cmd<N>| Ok(Payload::new(N))),
        )
    }

    fn run(set: &HandlerSet, command: Payload) -> Option<usize> {
        let Handler::Inline(run) = set.get(command.value_type_id())? else {
            panic!("inline handlers only");
        };
        let mut events = Events::default();
        let _ = PayloadSlot::lend(command, |command| {
            run(command, 7, Pid::from_raw(1).unwrap(), &mut events)
        });
        match events.pop() {
            Some(Event::YieldComplete { tag: 7, result }) => result.ok()?.downcast().ok(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn lookup_finds_every_handler_below_and_above_the_linear_limit() {
        let mut set = HandlerSet::default();
        assert!(set_of::<0>(&mut set));
        assert!(set_of::<1>(&mut set));
        assert!(!set_of::<1>(&mut set), "a duplicate is refused");
        assert_eq!(run(&set, Payload::new(Cmd::<1>)), Some(1));
        assert_eq!(run(&set, Payload::new(Cmd::<9>)), None);
        // Past LINEAR_LOOKUP_MAX the hash index takes over; every handler stays reachable.
        for added in [
            set_of::<2>,
            set_of::<3>,
            set_of::<4>,
            set_of::<5>,
            set_of::<6>,
            set_of::<7>,
            set_of::<8>,
            set_of::<9>,
            set_of::<10>,
        ] {
            assert!(added(&mut set));
        }
        assert!(set.handlers.len() > LINEAR_LOOKUP_MAX);
        assert!(
            !set_of::<4>(&mut set),
            "a duplicate is refused past the limit too"
        );
        assert_eq!(run(&set, Payload::new(Cmd::<0>)), Some(0));
        assert_eq!(run(&set, Payload::new(Cmd::<9>)), Some(9));
        assert_eq!(run(&set, Payload::new(Cmd::<10>)), Some(10));
        assert_eq!(run(&set, Payload::new(Cmd::<11>)), None);
    }

    #[test]
    fn an_inline_handler_panic_completes_the_yield_with_panicked() {
        let mut set = HandlerSet::default();
        set.insert(
            TypeId::of::<Cmd<0>>(),
            Handler::inline(|_: Cmd<0>| -> Result<Payload, CommandError> { panic!("boom") }),
        );
        let Some(Handler::Inline(run)) = set.get(TypeId::of::<Cmd<0>>()) else {
            panic!("registered");
        };
        let mut events = Events::default();
        // (The panic message printed here is expected.)
        let outcome = PayloadSlot::lend(Payload::new(Cmd::<0>), |command| {
            run(command, 3, Pid::from_raw(1).unwrap(), &mut events)
        });
        assert_eq!(outcome, HandlerOutcome::Panicked);
        match events.pop() {
            Some(Event::YieldComplete {
                tag: 3,
                result: Err(CommandError::Panicked(message)),
            }) => assert!(message.contains("boom")),
            other => panic!("unexpected {other:?}"),
        }
    }
}
