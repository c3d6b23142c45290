//! Every error procsched returns, in one place: each is an `Error` (so `?` works into
//! [`BoxError`]), most carry `is_*` predicates so callers match on meaning rather than text.
//!
//! | error | from |
//! |---|---|
//! | [`BuildError`] | [`SchedulerBuilder::build`](crate::config::SchedulerBuilder::build) |
//! | [`SpawnError`] | `spawn`, `spawn_fn` (shutting down, at the process limit, `init` failed) |
//! | [`SendError`] ([`SendErrorKind`]) | `send`, [`Addr::send`](crate::Addr::send), [`Addr::send_wait`](crate::Addr::send_wait) (also `Cancelled`: its body's cancel): hands the message back |
//! | [`ProcessError`] | awaiting a [`ProcessHandle`](crate::ProcessHandle): failed, panicked, terminated, cancelled |
//! | [`CommandError`] | a yield's reply: no handler, the handler failed or panicked, timed out, cancelled |
//! | [`RecvError`] ([`CancelReason`]) | `cx.recv()` and the other receiving futures |
//! | [`AskError`] | [`Addr::ask`](crate::Addr::ask) |
//! | [`InitError`] | a state machine's `init`: unknown entry method, bad input |
//! | [`TypeMismatch`] | [`Payload::take`](crate::Payload::take) of the wrong type |
//! | [`JoinError`] | awaiting an [`executor`](crate::executor) task |
//!
//! # Examples
//!
//! A handler's panic is told apart from its failure by a predicate, not by its text:
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::error::CommandError;
//!
//! struct Audit;
//! procsched::command!(Audit => ());
//!
//! let sched = Scheduler::builder()
//!     .workers(1)
//!     .inline_handler(|_: Audit| -> Result<(), BoxError> { panic!("audit log full") })
//!     .build()?;
//! let handle = sched.spawn_fn(|cx: ProcessCx| async move {
//!     let audited = cx.call(Audit).await;
//!     Ok::<_, BoxError>(audited.is_err_and(|error| error.is_panicked()))
//! })?;
//! assert!(sched.block_on(handle)?);
//! # let _: Option<CommandError> = None;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::executor::JoinError;
pub use crate::process::{
    BoxError, CancelReason, CommandError, InitError, ProcessError, RecvError, TypeMismatch,
};
pub use crate::scheduler::{AskError, BuildError, SendError, SendErrorKind, SpawnError};
