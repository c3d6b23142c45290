//! The process contract: a stateful state machine stepped by the scheduler.
//!
//! A [`Process`] is written as an explicit state machine with three methods:
//!
//! | method | called | purpose |
//! |---|---|---|
//! | [`init`](Process::init) | once, inside `spawn`, before it returns | pick an entry point (`method`) and take its input; an error is returned from `spawn` |
//! | [`step`](Process::step) | repeatedly, on a worker | consume the [`Events`] that arrived, write yields and a [`Status`] into the [`StepOutput`] |
//! | [`close`](Process::close) | exactly once, however the process ends | release resources |
//!
//! # Rules
//! - **Yields** are dispatched whatever the status, except with `Done` (then they are dropped and
//!   a warning is traced). Each completes, exactly once, as an [`Event::YieldComplete`] with the
//!   tag the process chose.
//! - **Any event wakes** a `Blocked` or `Idle` process: a completion wakes an idle process too, and
//!   a message wakes a blocked one.
//! - **Continue** re-queues the process *behind* other ready work (its worker's queued work first;
//!   the global queue is visited at least every 61 tasks), so a process that never waits cannot
//!   starve its worker.
//! - **Flooded mailboxes** are delivered in batches (at most `max_batch` mailbox events per
//!   step, plus the completions of the previous step's inline yields), so one
//!   process cannot monopolise a worker; the rest come in the next steps.
//! - A step whose yields all completed inline is stepped again within the same poll, up to the
//!   step budget; then the process is re-queued like `Continue`.
//! - `close` runs exactly once on every path: done, failed (step error), panicked, terminated,
//!   shut down — and after a failed `init`.
//! - A panic in `init`, `step` or `close` is caught and reported (as a [`SpawnError`] or a
//!   [`ProcessError`]); the worker keeps running and other processes are untouched.

pub(crate) mod async_fn;
mod command;
mod contain;
pub(crate) mod context;
mod error;
mod event;
pub(crate) mod future;
pub(crate) mod mailbox;
mod output;
mod payload;
mod pid;
mod queue;
mod state;
pub(crate) mod stats;
mod typed;

#[cfg(test)]
mod tests;

pub use async_fn::{Call, Cancelled, Recv, RecvError, RecvMessage, YieldNow};
pub use command::Command;
pub use context::ProcessContext;
pub use error::{
    BoxError, CommandError, InitError, ProcessError, SendError, SendErrorKind, SpawnError,
};
pub use event::{CancelReason, Event, EventDrain, Events, Message, Tag, Topic, TopicBudget};
pub use output::{Status, StepOutput};
pub use payload::{Payload, TypeMismatch};
pub use pid::Pid;
pub use state::ProcessState;

pub(crate) use contain::{contained, drop_contained, drop_each};
pub(crate) use error::panic_message;
pub(crate) use typed::{from_message, into_message, take_lone};

pub(crate) use output::{Yield, YieldSlot};
pub(crate) use payload::PayloadSlot;
pub(crate) use pid::{INDEX_BITS, MAX_GENERATION};

/// A long-lived, stateful process, written as an explicit state machine.
///
/// Processes can also be written as plain `async fn`s ([`Scheduler::spawn_fn`](crate::Scheduler::spawn_fn));
/// those run as a `Process` too, through an adapter.
///
/// # Examples
///
/// A counter that asks a `Lookup` handler for a value `n` times, then finishes with the sum:
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::{Event, Events, Process, StepOutput};
///
/// struct Lookup(u64);
/// procsched::command!(Lookup => u64);
///
/// struct Summer { remaining: u64, sum: u64 }
///
/// impl Process for Summer {
///     type Output = u64;
///
///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
///         for event in events.drain() {
///             if let Event::YieldComplete { result, .. } = event {
///                 self.sum += result?.take::<u64>()?;
///             }
///         }
///         if self.remaining == 0 {
///             out.done(self.sum);
///         } else {
///             out.yield_command(self.remaining, Lookup(self.remaining));
///             self.remaining -= 1;
///             out.wait();
///         }
///         Ok(())
///     }
/// }
///
/// let sched = Scheduler::builder()
///     .workers(2)
///     .inline_handler(|Lookup(n): Lookup| Ok::<_, BoxError>(n * 10))
///     .build()?;
/// let handle = sched.spawn(Summer { remaining: 3, sum: 0 }, "sum", Payload::empty())?;
/// assert_eq!(sched.block_on(handle)?, 60);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Process: Send + 'static {
    /// What the process finishes with ([`StepOutput::done`]): the value its
    /// [`ProcessHandle`](crate::ProcessHandle) resolves to. Use [`Payload`] for a dynamically typed result.
    type Output: Send + 'static;

    /// Prepares the process for the entry point `method` with its `input`. Runs inside `spawn`;
    /// an error (typically [`InitError::UnknownMethod`]) is returned from `spawn` and the process
    /// never steps (its `close` is still called).
    ///
    /// The default accepts every method and ignores the input: enough for a process with one
    /// entry point that gets its data from its constructor.
    ///
    /// # Errors
    ///
    /// Any [`InitError`]; `spawn` returns it as [`SpawnError::Init`].
    fn init(
        &mut self,
        ctx: &ProcessContext<'_>,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        let _ = (ctx, method, input);
        Ok(())
    }

    /// Advances the state machine with the events that arrived since the previous step, writing
    /// yields and the new status into `out` (default: [`Status::Continue`]).
    ///
    /// # Errors
    ///
    /// An error fails the process: its handle resolves to a [`ProcessError`] with
    /// [`is_failed`](ProcessError::is_failed), and the error as its source.
    fn step(
        &mut self,
        events: &mut Events,
        out: &mut StepOutput<Self::Output>,
    ) -> Result<(), BoxError>;

    /// Releases resources. Called exactly once, however the process ends.
    fn close(&mut self) {}
}
