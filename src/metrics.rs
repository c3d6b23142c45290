//! What a scheduler tells about itself: its counters ([`SchedulerMetrics`], from
//! [`Scheduler::metrics`](crate::Scheduler::metrics)), a process's state and details
//! ([`ProcessState`], [`ProcessInfo`]), and what a shutdown did ([`ShutdownReport`]).
//! The executor's own counters are in [`executor`](crate::executor).
//!
//! # Examples
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::metrics::ProcessState;
//! use std::time::Duration;
//!
//! let sched = Scheduler::builder().workers(1).build()?;
//! let waiting = sched.spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
//! while sched.state(waiting.pid()) != Some(ProcessState::Idle) {
//!     std::thread::yield_now(); // until it waits for its message
//! }
//! waiting.addr().send(7)?;
//! assert_eq!(sched.block_on(waiting)?, 7);
//! assert_eq!(sched.metrics().finished.done, 1);
//! let report = sched.shutdown(Duration::from_secs(1));
//! assert_eq!(report.forced, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::process::ProcessState;
pub use crate::scheduler::{
    ExitCounts, FinishCounts, MessageCounts, ProcessCounts, ProcessInfo, SchedulerMetrics,
    ShutdownReport, StepSample, YieldCounts,
};
