//! [`Handler`]: a type-erased handler of one command type, of one of three kinds — inline,
//! async, blocking — built from a typed closure; each catches its handler's panics.

use super::async_job::spawn_pending;
use super::blocking_job::{spawn_blocking_within, Unrun};
use super::bridge::{HandlerRuntime, HandlerTask};
use super::YieldCompleter;
use crate::process::stats::HandlerOutcome;
use crate::process::Payload;
use crate::process::{drop_contained, take_panic_message};
use crate::process::{CommandError, Events, PayloadSlot, Pid, Tag};
use futures::FutureExt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
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
                        let message = take_panic_message(panic);
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
                // The deadline runs from the call, not from when the handler first returns
                // `Pending`: a review's handler that spent 300 ms in its first poll timed out
                // at 400 ms for a 100 ms `call_within`. One too far to represent is none.
                let deadline: Option<tokio::time::Instant> =
                    timeout.and_then(|timeout| tokio::time::Instant::now().checked_add(timeout));
                let command = downcast::<C>(command);
                let span = handler_span::<C>(completer.pid(), "async");
                // After the handler runtime shut down, the handler is not run at all — its first
                // poll would find a dead tokio context and panic — and its yield completes as
                // `Cancelled`, as a blocking handler's does then (`bridge.rs`).
                if runtime.is_gone() {
                    let panics = drop_contained(command);
                    completer.cell().stats.destructors_panicked(panics);
                    span.in_scope(|| {
                        completer.complete_in(completions, Err(CommandError::Cancelled))
                    });
                    return None;
                }
                // Building the future is user code too: a panic here completes the yield, once.
                let future = match span.in_scope(|| catch_unwind(AssertUnwindSafe(|| f(command)))) {
                    Ok(future) => AssertUnwindSafe(future).catch_unwind(),
                    Err(panic) => {
                        let _entered = span.enter();
                        completer.complete(Err(CommandError::Panicked(take_panic_message(panic))));
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
                        Err(CommandError::Panicked(take_panic_message(panic)))
                    });
                    span.in_scope(|| completer.complete_in(completions, result));
                    return None;
                }
                spawn_pending(runtime, future, completer, deadline, span, completions)
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
                    catch_unwind(AssertUnwindSafe(|| f(command))).unwrap_or_else(|panic| {
                        Err(CommandError::Panicked(take_panic_message(panic)))
                    })
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

/// A blocking yield's result.
pub(super) type CommandResult = Result<Payload, CommandError>;

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

fn downcast<C: 'static>(command: PayloadSlot<'_>) -> C {
    match command.downcast::<C>() {
        Ok(command) => command,
        Err(other) => unreachable!("handler for {} got {other:?}", std::any::type_name::<C>()),
    }
}
