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
    /// A step is synchronous: work that waits on tokio (timers, I/O) is a yield to an async
    /// handler. A step always runs inside a tokio runtime's context — its scheduler's (built
    /// inside a multi-thread runtime, given one with `tokio_handle`, or with an async or
    /// blocking handler), or else the small one the scheduler builds at its first spawn — so
    /// `tokio::spawn` or `Handle::current()` in a step work, whichever process was spawned
    /// first.
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

    /// Releases resources. Called exactly once, however the process ends once `spawn` has
    /// called [`init`](Self::init) (an `init` that fails included). A spawn refused before
    /// that (`SpawnError::Limit`, `SpawnError::ShuttingDown`) drops the value and calls
    /// neither: release what a constructor took in `Drop`, or take it in `init`.
    ///
    /// A panic here is caught: the process ends as panicked, with the message `in close: …`,
    /// followed by the reason it was already ending with if that was not a normal end
    /// (`(closing after it ended failed: …)`), so a fault `close` tripped over stays visible.
    fn close(&mut self) {}

    /// Messages this process took in earlier steps and has not handled yet, or `None` (the
    /// default) if it handles every message in the step that delivers it.
    ///
    /// A bounded mailbox ([`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity))
    /// counts them against its capacity, so that a process that stashes what it cannot handle
    /// yet still pushes back on its senders. An `async fn` body's unread inbox is counted this
    /// way. Asked after each step of a process with a bounded mailbox; keep it cheap.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::{Event, Events, Process, Status, StepOutput};
    /// use std::collections::VecDeque;
    ///
    /// /// Takes jobs one at a time: the rest wait in `stash`, still counted by the mailbox.
    /// #[derive(Default)]
    /// struct OneAtATime { stash: VecDeque<u64>, done: u64 }
    ///
    /// impl Process for OneAtATime {
    ///     type Output = u64;
    ///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
    ///         for event in events.drain() {
    ///             if let Event::Message(message) = event {
    ///                 self.stash.push_back(message.payload.take::<u64>()?);
    ///             }
    ///         }
    ///         if let Some(job) = self.stash.pop_front() {
    ///             self.done += job;
    ///         }
    ///         // Step again (the default status) while jobs wait; else wait for messages.
    ///         if self.done >= 6 {
    ///             out.set_status(Status::Done(self.done));
    ///         } else if self.stash.is_empty() {
    ///             out.set_status(Status::Idle);
    ///         }
    ///         Ok(())
    ///     }
    ///     fn unread_messages(&self) -> Option<usize> {
    ///         Some(self.stash.len())
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(1).mailbox_capacity(8).build()?;
    /// let handle = sched.spawn(OneAtATime::default(), "run", Payload::empty())?;
    /// let addr = sched.handle().addr::<u64>(handle.pid());
    /// for job in 1..=3 {
    ///     addr.send(job)?;
    /// }
    /// assert_eq!(sched.block_on(handle)?, 6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn unread_messages(&self) -> Option<usize> {
        None
    }
}
