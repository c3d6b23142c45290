//! A pending async handler's task: polled once during dispatch and still waiting, the handler
//! moves into a task of the scheduler's executor that completes its yield (`bridge.rs`).

use super::bridge::{HandlerRuntime, HandlerTask};
use super::handler::CommandResult;
use super::YieldCompleter;
use crate::process::{contained, drop_contained, take_panic_message};
use crate::process::{CommandError, Events, Payload};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use tracing::Instrument;

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
pub(super) fn spawn_pending<Fut>(
    runtime: &HandlerRuntime,
    future: std::pin::Pin<Box<CaughtHandler<Fut>>>,
    completer: YieldCompleter,
    deadline: Option<tokio::time::Instant>,
    span: tracing::Span,
    completions: &mut Events,
) -> Option<HandlerTask>
where
    Fut: Future<Output = Result<Payload, CommandError>> + Send + 'static,
{
    fn within<F: Future>(future: F, deadline: tokio::time::Instant) -> Within<F> {
        Within {
            timeout: tokio::time::timeout_at(deadline, future),
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
    Some(match (deadline, traced) {
        (None, false) => runtime.spawn_watched(pid, Job::new(future, completer)),
        (None, true) => runtime.spawn_watched(pid, Job::new(future, completer).instrument(span)),
        (Some(deadline), false) => {
            runtime.spawn_watched(pid, Job::new(within(future, deadline), completer))
        }
        (Some(deadline), true) => runtime.spawn_watched(
            pid,
            Job::new(within(future, deadline), completer).instrument(span),
        ),
    })
}

pin_project_lite::pin_project! {
    /// A handler under a deadline: `TimedOut` once it passes. The handler future stays inside
    /// when the deadline passes, for [`Job`] to drop with its destructor's panic contained and
    /// counted: an `async fn` awaiting `tokio::time::timeout` would drop it on return, inside
    /// its poll, where a panic would unwind out of the task and make the call `Cancelled`.
    struct Within<F> {
        #[pin]
        timeout: tokio::time::Timeout<F>,
    }
}

impl<F> Future for Within<F>
where
    F: Future<Output = std::thread::Result<CommandResult>>,
{
    type Output = std::thread::Result<CommandResult>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::task::ready!(self.project().timeout.poll(cx)) {
            Ok(caught) => Poll::Ready(caught),
            Err(_elapsed) => Poll::Ready(Ok(Err(CommandError::TimedOut))),
        }
    }
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
            caught.unwrap_or_else(|panic| Err(CommandError::Panicked(take_panic_message(panic))));
        completer.complete(result);
        Poll::Ready(())
    }
}
