#![doc = include_str!("../README.md")]
//!
//! # Layout
//! | module | concept |
//! |---|---|
//! | [`executor`] | the generic work-stealing executor (knows nothing of processes) |
//! | `process` | the contract, events, step output, payloads, PIDs, mailbox, state word, the process future |
//! | `dispatch` | handlers per command type, their completion oneshots, the tokio bridge |
//! | `scheduler` | the facade: spawn, send, state, shutdown |
#![deny(unsafe_op_in_unsafe_fn)]
// Under `--cfg loom` the models compile a subset: the monitor's thread and the workers' spinning
// are compiled out (their constants are 0), so their helpers are dead and their bound checks
// trivially true. The normal build is linted without these allowances.
#![cfg_attr(loom, allow(dead_code, clippy::absurd_extreme_comparisons))]

mod dispatch;
pub mod executor;
mod loom;
pub mod prelude;
mod process;
mod scheduler;
pub mod testing;

pub use dispatch::Run;
pub use executor::block_in_place;
pub use process::{
    AsyncFnProcess, BoxError, Call, CancelReason, Cancelled, Command, CommandError, Event,
    EventDrain, Events, InitError, Message, Payload, Pid, Process, ProcessContext, ProcessCx,
    ProcessError, ProcessState, Recv, RecvError, RecvMessage, SendError, SendErrorKind, SpawnError,
    Status, StepOutput, Tag, Topic, TopicBudget, TypeMismatch, YieldNow,
};
pub use scheduler::{
    Addr, Ask, AskError, BuildError, FinishCounts, MessageCounts, ProcessCounts, ProcessHandle,
    ProcessInfo, Reply, Scheduler, SchedulerBuilder, SchedulerHandle, SchedulerMetrics,
    ShutdownReport, StepSample, YieldCounts, DEFAULT_DROP_TIMEOUT, DEFAULT_MAX_BATCH,
    DEFAULT_STEP_BUDGET, FORCED_STOP_WAIT,
};
