//! A state machine's ask: a yield that sends a request and completes with its answer.
//!
//! A body asks with `addr.ask(..).await`; a step cannot await, so it yields the ask as a command
//! ([`Addr::ask_command`](crate::Addr::ask_command)) and reads the answer as the yield's
//! completion, `Event::YieldComplete { tag, result }`, as it reads any handler's. No handler is
//! registered for it: dispatch recognizes the command among the types without one (a branch on
//! the cold path, so other yields pay nothing) and runs it here, where the asking process's cell
//! and PID are at hand. The scheduler layer built the command's closure, which makes the reply
//! port and sends the request: this layer only says where the answer goes ([`AnswerTo`]).
//!
//! - **Without a deadline** the port answers straight into the asking process's mailbox as the
//!   completion of the yield's tag: the body's path, no task, no channel. The port answers once
//!   (its answer, or [`CommandError::NoReply`] from its drop), so the yield completes once.
//! - **With a deadline** (`StepOutput::yield_command_within`) the port is a channel, awaited by a
//!   task on the tokio runtime the step runs in, under `tokio::time::timeout`, that completes the
//!   yield through its [`YieldCompleter`]: exactly once, whichever of answer and timer comes
//!   first — a straight port could not tell a timer that fires after its answer was read that it
//!   came too late. The task is the yield's outstanding handle: the process's end aborts it,
//!   and closes its channel there and then ([`AskInFlight`]), so that an answer sent once the
//!   asker has ended is handed back, as it is on the straight path (the task itself is dropped
//!   later, on its runtime).
//! - **Through another node** (`RemoteAddr::ask_command`, feature `cluster`) the answer can only
//!   come through a channel, with or without a deadline: the start returns one that ends the
//!   wait itself (its node's request timeout) when no deadline was given, and the command
//!   brings its node's runtime for the task that awaits it.
//! - **Refused** (the request undelivered, or the process asked itself) it completes at once
//!   with [`CommandError::Failed`] holding the [`AskError`](crate::error::AskError).

use super::{Dispatched, HandlerSet, HandlerTask, YieldCompleter};
use crate::loom::Arc;
use crate::process::context::ProcessWake;
use crate::process::mailbox::ProcessCell;
use crate::process::PayloadSlot;
use crate::process::{drop_contained, CommandError, Event, Events, Payload, Pid, Tag};
use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

/// An ask as a state machine's yield: made by [`Addr::ask_command`](crate::Addr::ask_command),
/// yielded with [`StepOutput::yield_command`](crate::state_machine::StepOutput::yield_command)
/// (or `yield_command_within`, for a timeout), answered as that yield's
/// [`Event::YieldComplete`]. Needs no handler.
///
/// The request is built and sent when the step's yields are dispatched (right after the step),
/// not when the command is made; a command that is never yielded (dropped, or left in a
/// [`testing::Harness`](crate::testing::Harness)'s step, which dispatches nothing) sends nothing.
///
/// # Examples
///
/// See [`Addr::ask_command`](crate::Addr::ask_command).
pub struct AskCommand {
    start: StartAsk,
    /// The request's type name, for `Debug` and traces.
    request: &'static str,
    /// The runtime its answer is awaited on, when the ask brings one (a remote ask: its node's,
    /// which has timers); otherwise the step's.
    runtime: Option<tokio::runtime::Handle>,
}

/// The scheduler layer's half of an ask: makes the port `to` says, builds the request around it
/// and sends it.
pub(crate) type StartAsk = Box<dyn FnOnce(AnswerTo) -> AskStarted + Send>;

/// Where an ask's answer goes (module docs).
pub(crate) enum AnswerTo {
    /// Into the asking process's mailbox, as the completion of its yield `tag`.
    Process { asker: ProcessWake, tag: Tag },
    /// To a channel, awaited through the [`AnswerChannel`] the start returns (an ask with a
    /// deadline); `asker` is the asking process (a process asking itself is refused).
    Channel { asker: ProcessWake },
}

/// The receiving end of an ask's channel (the reply type erased).
pub(crate) trait AnswerChannel: Send {
    /// The answer, or [`CommandError::NoReply`] once the port was dropped unanswered.
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<Result<Payload, CommandError>>;

    /// Closes the channel, so that the port's `send` hands its value back from now on: the
    /// answer, if it was sent before (then the ask takes it, however late it looks).
    fn close(&mut self) -> Option<Payload>;
}

/// How an ask's start went.
pub(crate) enum AskStarted {
    /// Sent; the answer goes into the asker's mailbox.
    Sent,
    /// Sent; the answer comes through this channel. Asked for with [`AnswerTo::Channel`], or
    /// for an ask whose answer can only come through one (a remote ask, whose channel then
    /// ends the wait itself: its node's request timeout).
    Awaiting(Box<dyn AnswerChannel>),
    /// Not sent: the ask completes at once with this.
    Refused(CommandError),
}

impl AskCommand {
    /// The command whose dispatch runs `start`.
    pub(crate) fn new(request: &'static str, start: StartAsk) -> AskCommand {
        AskCommand {
            start,
            request,
            runtime: None,
        }
    }

    /// Runs the command's start, outside dispatch (a remote address's command that takes the
    /// local route runs the local one's).
    #[cfg(feature = "cluster")]
    pub(crate) fn start_with(self, to: AnswerTo) -> AskStarted {
        (self.start)(to)
    }

    /// The command, its answer awaited on `runtime` (which has timers) rather than the step's.
    #[cfg(feature = "cluster")]
    pub(crate) fn on_runtime(self, runtime: tokio::runtime::Handle) -> AskCommand {
        AskCommand {
            runtime: Some(runtime),
            ..self
        }
    }
}

impl fmt::Debug for AskCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AskCommand")
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

/// Dispatches `command` if it is an [`AskCommand`]; otherwise hands it back.
#[cold]
#[inline(never)]
pub(super) fn dispatch<'a>(
    handlers: &HandlerSet,
    pid: Pid,
    cell: &Arc<ProcessCell>,
    tag: Tag,
    command: PayloadSlot<'a>,
    timeout: Option<Duration>,
    completions: &mut Events,
) -> Result<Dispatched, PayloadSlot<'a>> {
    let AskCommand { start, runtime, .. } = command.downcast::<AskCommand>()?;
    let complete_now = |completions: &mut Events, result| {
        completions.push(Event::YieldComplete { tag, result });
        Ok(Dispatched::Ask(None))
    };
    let asker = ProcessWake::new(cell.clone(), pid.generation());
    let Some(timeout) = timeout else {
        return match start(AnswerTo::Process { asker, tag }) {
            AskStarted::Sent => Ok(Dispatched::Ask(None)),
            // A remote ask: its channel has its own timer, on its own runtime (`on_runtime`).
            AskStarted::Awaiting(mut answer) => {
                match runtime.or_else(|| tokio::runtime::Handle::try_current().ok()) {
                    Some(runtime) => Ok(awaited(&runtime, None, answer, cell, pid, tag)),
                    None => {
                        debug_assert!(
                            false,
                            "an ask answered through a channel brings its runtime"
                        );
                        cell.stats
                            .destructors_panicked(drop_contained(answer.close()));
                        complete_now(completions, Err(CommandError::NoTimer))
                    }
                }
            }
            AskStarted::Refused(error) => complete_now(completions, Err(error)),
        };
    };
    // The ask's own runtime has timers (`on_runtime`); otherwise the step's, which runs inside
    // its tokio runtime's context (the scheduler's workers enter it).
    let runtime = runtime.or_else(|| {
        tokio::runtime::Handle::try_current()
            .ok()
            .filter(|runtime| handlers.timers().has_timers(runtime))
    });
    let runtime = match runtime {
        Some(runtime) => runtime,
        None => {
            tracing::debug!(%pid, "an ask's deadline on a runtime without timers");
            cell.stats.destructors_panicked(drop_contained(start));
            return complete_now(completions, Err(CommandError::NoTimer));
        }
    };
    match start(AnswerTo::Channel { asker }) {
        AskStarted::Awaiting(answer) => {
            Ok(awaited(&runtime, Some(timeout), answer, cell, pid, tag))
        }
        AskStarted::Refused(error) => complete_now(completions, Err(error)),
        AskStarted::Sent => unreachable!("an ask to a channel awaits it"),
    }
}

/// Awaits `answer` (within `timeout`, if any) in a task on `runtime` that completes the yield
/// `tag`; the task is the yield's outstanding handle.
fn awaited(
    runtime: &tokio::runtime::Handle,
    timeout: Option<Duration>,
    answer: Box<dyn AnswerChannel>,
    cell: &Arc<ProcessCell>,
    pid: Pid,
    tag: Tag,
) -> Dispatched {
    let completer = YieldCompleter::new(cell.clone(), pid, tag, "AskCommand");
    let in_flight = std::sync::Arc::new(AskInFlight::new(answer));
    let channel = in_flight.clone();
    let task = runtime.spawn(async move {
        let result = answered_within(timeout, &channel).await;
        completer.complete(result);
    });
    Dispatched::Ask(Some(HandlerTask::Ask(task.abort_handle(), in_flight)))
}

/// The channel of an ask with a deadline, shared by its task and the asking process's
/// outstanding handle, which closes it when the process ends (module docs).
pub(crate) struct AskInFlight(Mutex<InFlight>);

/// The channel, and whether it was closed: a closed channel is never polled again (a tokio
/// `oneshot` read by `try_recv` after `close` panics if polled).
struct InFlight {
    channel: Box<dyn AnswerChannel>,
    closed: bool,
}

impl InFlight {
    /// Closes the channel, once: the answer sent before, if any.
    fn close(&mut self) -> Option<Payload> {
        if std::mem::replace(&mut self.closed, true) {
            return None;
        }
        self.channel.close()
    }
}

impl AskInFlight {
    fn new(channel: Box<dyn AnswerChannel>) -> AskInFlight {
        AskInFlight(Mutex::new(InFlight {
            channel,
            closed: false,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InFlight> {
        // Poisoned only by a panic inside `poll_answer` or `close` (user code: a reply's
        // `Deserialize` is caught inside; a destructor): the flag and the channel are still
        // consistent.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The asker ended: answers are handed back from now on. One that came before is dropped
    /// unread (it was delivered while the asker lived, as for any ask).
    pub(crate) fn close(&self) {
        drop_contained(self.lock().close());
    }
}

impl fmt::Debug for AskInFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AskInFlight").finish_non_exhaustive()
    }
}

/// The answer on `channel`, or [`CommandError::TimedOut`] if none was sent within `timeout` (if
/// any: without, the channel ends the wait itself): an
/// answer sent before the deadline is taken even if the timer is seen first (the channel is
/// closed before it is looked at a last time, so an answer is either taken or handed back to
/// its sender, never lost between the two).
async fn answered_within(
    timeout: Option<Duration>,
    channel: &AskInFlight,
) -> Result<Payload, CommandError> {
    let mut timer = std::pin::pin!(timeout.map(tokio::time::sleep));
    std::future::poll_fn(|cx| {
        let mut channel = channel.lock();
        if channel.closed {
            // The asker ended (its task is being aborted): nobody reads this.
            return Poll::Ready(Err(CommandError::Cancelled));
        }
        if let Poll::Ready(answer) = channel.channel.poll_answer(cx) {
            return Poll::Ready(answer);
        }
        let fired = timer
            .as_mut()
            .as_pin_mut()
            .is_some_and(|timer| timer.poll(cx).is_ready());
        if !fired {
            return Poll::Pending;
        }
        Poll::Ready(channel.close().ok_or(CommandError::TimedOut))
    })
    .await
}
