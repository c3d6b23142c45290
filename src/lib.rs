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
//! use procsched::{BoxError, Event, Events, InitError, Payload, Process, ProcessContext, Scheduler, StepOutput};
//!
//! struct Double(u64);
//!
//! /// Asks the `Double` handler to double its input, then finishes with the answer.
//! #[derive(Default)]
//! struct Doubler { input: u64 }
//!
//! impl Process for Doubler {
//!     fn init(&mut self, _: &ProcessContext<'_>, method: &str, input: Payload) -> Result<(), InitError> {
//!         if method != "run" {
//!             return Err(InitError::unknown_method(method));
//!         }
//!         self.input = input.downcast().map_err(|_| InitError::failed("want a u64"))?;
//!         Ok(())
//!     }
//!
//!     fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
//!         match events.pop() {
//!             None => {
//!                 out.yield_command(1, Double(self.input));
//!                 out.wait();
//!             }
//!             Some(Event::YieldComplete { tag: 1, result }) => out.done(result?),
//!             Some(other) => return Err(format!("unexpected {other:?}").into()),
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let sched = Scheduler::builder()
//!     .workers(2)
//!     .inline_handler(|Double(n): Double| Ok(Payload::new(n * 2)))
//!     .build()?;
//! let handle = sched.spawn(Doubler::default(), "run", Payload::new(21u64))?;
//! assert_eq!(sched.block_on(handle)?.downcast::<u64>().unwrap(), 42);
//! assert!(sched.spawn(Doubler::default(), "walk", Payload::new(1u64)).unwrap_err().is_unknown_method());
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
mod process;
mod scheduler;

pub use process::{
    BoxError, CancelReason, CommandError, Event, EventDrain, Events, InitError, Message, Payload,
    Pid, Process, ProcessContext, ProcessError, ProcessHandle, ProcessState, SendError, SpawnError,
    Status, StepOutput, Tag, Topic, TopicBudget,
};
pub use scheduler::{
    BuildError, Scheduler, SchedulerBuilder, SchedulerHandle, ShutdownReport, DEFAULT_DROP_TIMEOUT,
    DEFAULT_MAX_BATCH, DEFAULT_STEP_BUDGET, FORCED_STOP_WAIT,
};
