//! The [`Process`] trait: the contract every process implements, stepped by the scheduler
//! (its rules: the module docs of `process`).

use super::{BoxError, Events, InitError, Payload, ProcessContext, StepOutput};

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
    /// Any [`InitError`]; `spawn` returns it as [`SpawnError::Init`](crate::error::SpawnError::Init).
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
    /// yields and the new status into `out` (default: [`Status::Continue`](super::Status::Continue)).
    ///
    /// # Errors
    ///
    /// An error fails the process: its handle resolves to a [`ProcessError`](super::ProcessError) with
    /// [`is_failed`](super::ProcessError::is_failed), and the error as its source.
    fn step(
        &mut self,
        events: &mut Events,
        out: &mut StepOutput<Self::Output>,
    ) -> Result<(), BoxError>;

    /// Releases resources. Called exactly once, however the process ends.
    fn close(&mut self) {}
}
