//! An `async fn` child's synchronous start: OTP's `start_link` returns once the child's
//! `init/1` has; a body has no `init`, so its *first poll* stands for it. The body is wrapped
//! so that its first poll, once it returns (the body reached its first suspension point, or
//! finished), tells the supervisor, which starts the next child only then: whatever a child
//! does before its first await (trap exits, register, link, monitor) has happened before its
//! younger sibling starts. `run.rs` (`await_first_poll`) does the waiting.

use super::Request;
use crate::process::exit::{Exit, ExitReason, Signal};
use crate::process::{BoxError, Pid, RecvError};
use crate::scheduler::deadline::Deadline;
use crate::scheduler::ProcessCx;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// What a child's first poll tells its supervisor: set once, by the child's worker.
#[derive(Debug, Default)]
pub(super) struct FirstPoll {
    state: Mutex<Reported>,
}

#[derive(Debug, Default)]
struct Reported {
    /// The first poll returned `Pending` or `Ready(Ok)`: the child has started.
    started: bool,
    /// The supervisor waiting for it.
    waiter: Option<Waker>,
}

impl FirstPoll {
    /// The child has started: wakes the supervisor.
    fn report_started(&self) {
        let waiter = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            state.started = true;
            state.waiter.take()
        };
        // Outside the lock: a waker is the supervisor's (`Event::Woken` to its mailbox).
        if let Some(waiter) = waiter {
            waiter.wake();
        }
    }

    /// `Ready` once the child has started; otherwise registers `task` to be woken then.
    pub(super) fn poll_started(&self, task: &mut Context<'_>) -> Poll<()> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.started {
            return Poll::Ready(());
        }
        state.waiter = Some(task.waker().clone());
        Poll::Pending
    }

    /// Whether the child has started (read after its end was heard: its first poll, if it
    /// returned, reported before the child could end).
    pub(super) fn has_started(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .started
    }
}

/// `body`, reporting to `first_poll` when its first poll returns `Pending` or `Ready(Ok)`. A
/// first poll that fails (`Ready(Err)`) or panics reports nothing: the child ends, and its
/// supervisor hears that end as a failed start (a state machine's failed `init`).
// Not an `async fn`: its future would capture `E`, which then had to be `'static` — a bound
// `spawn_fn`'s callers do not have.
#[allow(clippy::manual_async_fn)]
pub(super) fn reporting<Fut, T, E>(
    body: Fut,
    first_poll: Arc<FirstPoll>,
) -> impl Future<Output = Result<T, BoxError>> + Send + 'static
where
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Into<BoxError>,
{
    async move {
        let mut body = pin!(body);
        let mut first_poll = Some(first_poll);
        std::future::poll_fn(move |task| {
            let polled = match body.as_mut().poll(task) {
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error.into())),
                Poll::Ready(Ok(output)) => Poll::Ready(Ok(output)),
                Poll::Pending => Poll::Pending,
            };
            if let Some(first_poll) = first_poll.take() {
                first_poll.report_started();
            }
            polled
        })
        .await
    }
}

/// How the wait for a child's first poll ended.
pub(super) enum Waited {
    /// The child has started (its first poll returned, whatever it did since).
    Started,
    /// The supervisor was asked to finish meanwhile.
    Cancelled(RecvError),
    /// The child ended before its first poll returned: it failed or panicked in it, or was
    /// terminated before it.
    Ended(ExitReason),
    /// Its first poll did not return within the supervisor's patience.
    TimedOut(Duration),
}

/// Waits, as the supervisor (`cx`), for the first poll of its new child `pid` to return —
/// an await, never a block: the supervisor's worker runs others meanwhile. The child's end is
/// heard through its link or a monitor set for the wait (a child that unlinked itself in its
/// first poll still ends it); other exit signals are kept in `pending` for later.
pub(super) async fn wait_started(
    cx: &ProcessCx<Request>,
    pending: &mut VecDeque<Exit>,
    pid: Pid,
    first_poll: &FirstPoll,
    patience: Option<Duration>,
) -> Waited {
    let monitor = cx.monitor(pid);
    let deadline = patience.map(|patience| Deadline::new(crate::deadline::after(patience)));
    let mut deadline = pin!(async move {
        match deadline {
            Some(deadline) => deadline.await,
            None => std::future::pending().await,
        }
    });
    let waited = loop {
        let polled = {
            let mut signal = pin!(cx.recv_signal());
            std::future::poll_fn(|task| {
                // The report first: a child that started and then ended has started.
                if first_poll.poll_started(task).is_ready() {
                    return Poll::Ready(None);
                }
                if let Poll::Ready(signal) = signal.as_mut().poll(task) {
                    return Poll::Ready(Some(Ok(signal)));
                }
                deadline.as_mut().poll(task).map(|()| Some(Err(())))
            })
            .await
        };
        match polled {
            None => break Waited::Started,
            Some(Err(())) => break Waited::TimedOut(patience.unwrap_or_default()),
            Some(Ok(Ok(Signal::Exit(exit)))) if exit.pid == pid => {
                if first_poll.has_started() {
                    pending.push_back(exit); // its end, as any child's
                    break Waited::Started;
                }
                break Waited::Ended(exit.reason);
            }
            // Monitors are signalled before links: its exit signal follows, handled as any
            // child's end if it started, else ignored (no child has its PID any more).
            Some(Ok(Ok(Signal::Down(down)))) if down.monitor == monitor => {
                if first_poll.has_started() {
                    cx.dispose(down);
                    break Waited::Started;
                }
                break Waited::Ended(down.reason);
            }
            Some(Ok(Ok(Signal::Exit(exit)))) => pending.push_back(exit),
            // Another monitor's `Down` (a user value's reason): contained.
            Some(Ok(Ok(signal))) => cx.dispose(signal),
            Some(Ok(Err(cancelled))) if cancelled.is_cancelled() => {
                break Waited::Cancelled(cancelled)
            }
            Some(Ok(Err(error))) => {
                // As `wait_for_end`: the wait ends rather than spin on a failing receive.
                tracing::warn!(%error, "a supervisor's receive failed");
                break Waited::Started;
            }
        }
    };
    cx.demonitor(monitor);
    waited
}
