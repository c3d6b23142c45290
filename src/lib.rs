#![doc = include_str!("../README.md")]
//!
//! # Where things are
//! The root holds what every program uses ([`Scheduler`], [`SchedulerHandle`], [`ProcessCx`],
//! [`Addr`], [`ProcessHandle`], [`SpawnOptions`], [`Reply`], [`Message`], [`Payload`],
//! [`Pid`]); [`prelude`] imports them at once. The rest is in modules named for their concept:
//!
//! | module | what it holds |
//! |---|---|
//! | [`prelude`] | `use procsched::prelude::*;` |
//! | [`config`] | the builder, its defaults and limits |
//! | [`error`] | every error type, each with what went wrong and what to do |
//! | [`body`] | the futures an `async fn` body awaits (receives, calls, asks) |
//! | [`state_machine`] | the explicit form: `Process`, events, step output |
//! | [`supervision`] | links, monitors, exit reasons, supervisors, names (OTP's semantics) |
//! | [`metrics`] | process states, scheduler and executor metrics, their export |
//! | [`testing`] | a harness that steps one process by hand |
//! | [`executor`] | the generic work-stealing executor underneath (any `Future`) |
//! | `cluster` | nodes joined through NATS (the `cluster` feature) |
//!
//! The code lives in four private layers — `executor` → `process` / `dispatch` → `scheduler` —
//! described in `docs/design.md`.
#![deny(unsafe_op_in_unsafe_fn)]
// On docs.rs (nightly, `--cfg docsrs`): the items of an optional feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
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
#[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
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
pub use scheduler::{
    Addr, ProcessCx, ProcessHandle, Reply, Scheduler, SchedulerHandle, SpawnOptions,
};
