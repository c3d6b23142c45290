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

// The layers (one way: cluster → scheduler → dispatch/process → executor). The cluster (feature
// `cluster`) is both a layer and its own public module.
mod dispatch;
mod process;
mod scheduler;

// The public face: what every user needs at the root, the rest in modules named for their
// concept (re-exports only; the layers above own the code).
pub mod body;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod config;
pub mod error;
pub mod executor;
pub mod metrics;
pub mod prelude;
pub mod state_machine;
pub mod supervision;
pub mod testing;

mod deadline;
mod loom;

pub use process::{BoxError, Command, Message, Payload, Pid};
pub use scheduler::{Addr, ProcessCx, ProcessHandle, Reply, Scheduler, SchedulerHandle};
