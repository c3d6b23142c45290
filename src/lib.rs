//! procsched: a work-stealing scheduler for long-lived, stateful processes.
//!
//! Processes — workflows, agents, game entities, sessions — are explicit state machines
//! ([`Process`]): `init` picks an entry point, `step` consumes the events that arrived (yield
//! completions, messages, cancellation) and writes yields (commands for registered handlers) and a
//! status, `close` releases resources. A [`Scheduler`] runs them on a work-stealing
//! [`executor`], dispatches their yields to inline, async (tokio) or blocking handlers, routes
//! messages by [`Pid`], and shuts them down gracefully.
//!
//! ```
//! use procsched::prelude::*;
//!
//! struct Double(u64);
//! procsched::command!(Double => u64);
//!
//! /// Asks the `Double` handler to double its input, then finishes with the answer.
//! struct Doubler { input: u64 }
//!
//! impl Process for Doubler {
//!     type Output = u64;
//!
//!     fn init(&mut self, _: &ProcessContext<'_>, method: &str, input: Payload) -> Result<(), InitError> {
//!         if method != "run" {
//!             return Err(InitError::unknown_method(method));
//!         }
//!         self.input = input.take::<u64>().map_err(InitError::failed)?;
//!         Ok(())
//!     }
//!
//!     fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
//!         match events.pop() {
//!             None => {
//!                 out.yield_command(1, Double(self.input));
//!                 out.wait();
//!             }
//!             Some(Event::YieldComplete { tag: 1, result }) => out.done(result?.take::<u64>()?),
//!             Some(other) => return Err(format!("unexpected {other:?}").into()),
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let sched = Scheduler::builder()
//!     .workers(2)
//!     .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
//!     .build()?;
//! let handle = sched.spawn(Doubler { input: 0 }, "run", Payload::new(21u64))?;
//! assert_eq!(sched.block_on(handle)?, 42);
//! assert!(sched.spawn(Doubler { input: 0 }, "walk", Payload::new(1u64)).unwrap_err().is_unknown_method());
//!
//! // The same process as an async fn: each `cx.call` is a yield.
//! let handle = sched.spawn_fn(|cx: ProcessCx| async move {
//!     Ok::<_, BoxError>(cx.call(Double(21)).await?)
//! })?;
//! assert_eq!(sched.block_on(handle)?, 42);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//! | module | concept |
//! |---|---|
//! | [`executor`] | the generic work-stealing executor (knows nothing of processes) |
//! | `process` | the contract, events, step output, payloads, PIDs, mailbox, state word, the process future |
//! | `dispatch` | handlers per command type, their completion oneshots, the tokio bridge |
//! | `scheduler` | the facade: spawn, send, state, shutdown |
#![deny(unsafe_op_in_unsafe_fn)]

mod dispatch;
pub mod executor;
mod loom;
pub mod prelude;
mod process;
mod scheduler;
pub mod testing;

pub use dispatch::Run;
pub use process::{
    AsyncFnProcess, BoxError, Call, CancelReason, Cancelled, Command, CommandError, Event,
    EventDrain, Events, InitError, Message, Payload, Pid, Process, ProcessContext, ProcessCx,
    ProcessError, ProcessHandle, ProcessState, Recv, RecvError, RecvMessage, SendError,
    SendErrorKind, SpawnError, Status, StepOutput, Tag, Topic, TopicBudget, TypeMismatch, YieldNow,
};
pub use scheduler::{
    BuildError, Scheduler, SchedulerBuilder, SchedulerHandle, ShutdownReport, DEFAULT_DROP_TIMEOUT,
    DEFAULT_MAX_BATCH, DEFAULT_STEP_BUDGET, FORCED_STOP_WAIT,
};
