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
//!   a warning is traced) and from a step that fails or panics (dropped with the process, counted
//!   in its trace). Each completes, exactly once, as an [`Event::YieldComplete`] with the
//!   tag the process chose.
//! - **Any event wakes** a `Blocked` or `Idle` process: a completion wakes an idle process too, and
//!   a message wakes a blocked one.
//! - **Continue** re-queues the process on its worker, behind that worker's queued work (its
//!   local queue, the processes woken there from outside, the ones re-queued before it); the
//!   global queue, where processes spawned from outside the workers wait, is visited first every
//!   61st poll (or when the worker has nothing of its own). So a process that never waits cannot
//!   starve its worker, though on one worker a spawn from outside may wait up to 61 polls.
//! - **Flooded mailboxes** are delivered in batches (at most `max_batch` mailbox events per
//!   step, plus the completions of the previous step's inline yields), so one
//!   process cannot monopolise a worker; the rest come in the next steps.
//! - A step whose yields all completed inline is stepped again within the same poll, up to the
//!   step budget; then the process is re-queued like `Continue`.
//! - `close` runs exactly once on every path: done, failed (step error), panicked, terminated,
//!   shut down — and after a failed `init`.
//! - A panic in `init`, `step` or `close` is caught and reported (as a
//!   [`SpawnError`](crate::error::SpawnError) or a [`ProcessError`]); the worker keeps running
//!   and other processes are untouched.

pub(crate) mod async_fn;
mod command;
mod contain;
pub(crate) mod context;
mod contract;
mod error;
mod event;
pub(crate) mod exit;
mod foreign_wake;
pub(crate) mod future;
pub(crate) mod host;
pub(crate) mod mailbox;
mod output;
pub(crate) mod outstanding;
mod payload;
pub(crate) mod pid;
mod queue;
mod state;
pub(crate) mod stats;
pub(crate) mod tag_map;
mod typed;
mod unread;

#[cfg(test)]
mod tests;

pub use async_fn::{Call, Cancelled, Recv, RecvError, RecvMessage, YieldNow};
pub use async_fn::{Incoming, RecvAny, RecvDown, RecvExit, RecvSignal};
pub use command::Command;
pub use context::ProcessContext;
pub use contract::Process;
pub use error::{BoxError, CommandError, InitError, ProcessError};
pub use event::{CancelReason, Event, EventDrain, Events, Message, Tag, Topic, TopicBudget};
pub use exit::{Down, Exit, ExitNode, ExitReason, MonitorRef, Signal};
pub use output::{Status, StepOutput};
pub use payload::{Payload, TypeMismatch};
pub use pid::Pid;
pub use state::ProcessState;

pub(crate) use contain::{contained, display_contained, drop_contained, drop_each, drop_later};
pub(crate) use error::{close_panic_message, panic_message, take_panic_message};
pub(crate) use foreign_wake::{foreign_wake, wake_foreign};
pub(crate) use typed::{from_message, from_message_counted, into_message, take_lone, MessageType};

pub(crate) use output::{Yield, YieldSlot};
pub(crate) use payload::PayloadSlot;
pub(crate) use pid::{INDEX_BITS, MAX_GENERATION};
