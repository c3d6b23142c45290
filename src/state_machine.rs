//! Processes written as explicit state machines: the [`Process`] contract and what a step
//! sees ([`Events`]) and says ([`StepOutput`]).
//!
//! Most processes are `async fn` bodies ([`ProcessCx`](crate::ProcessCx)); write a state
//! machine when you want every step in your hands — its yields, its status, what it does with
//! each event — or to route untyped [`Event::Message`]s by topic. Both kinds are the same
//! process underneath (PID, mailbox, states, budgets, supervision by the same scheduler).
//!
//! # Examples
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::state_machine::{Event, Events, Process, Status, StepOutput};
//!
//! /// Sums the `u64`s it is sent until it has three.
//! struct Sum { total: u64, seen: u32 }
//!
//! impl Process for Sum {
//!     type Output = u64;
//!     fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
//!         for event in events.drain() {
//!             if let Event::Message(message) = event {
//!                 self.total += message.payload.take::<u64>()?;
//!                 self.seen += 1;
//!             }
//!         }
//!         out.set_status(if self.seen == 3 { Status::Done(self.total) } else { Status::Idle });
//!         Ok(())
//!     }
//! }
//!
//! let sched = Scheduler::builder().workers(1).build()?;
//! let sum = sched.spawn(Sum { total: 0, seen: 0 }, "run", Payload::empty())?;
//! let addr = sched.handle().addr::<u64>(sum.pid());
//! for n in [1, 2, 3] {
//!     addr.send(n)?;
//! }
//! assert_eq!(sched.block_on(sum)?, 6);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::dispatch::AskCommand;
pub use crate::process::{
    Event, EventDrain, Events, InitError, Process, ProcessContext, Status, StepOutput, Tag, Topic,
};
