//! Building a scheduler: [`SchedulerBuilder`] (from [`Scheduler::builder`](crate::Scheduler::builder)),
//! its defaults, and the per-topic mailbox budget a sender can attach to a message.
//!
//! # Examples
//!
//! ```
//! use procsched::config::{DEFAULT_MAX_BATCH, DEFAULT_STEP_BUDGET};
//! use procsched::Scheduler;
//! use std::time::Duration;
//!
//! let sched = Scheduler::builder()
//!     .workers(2)
//!     .max_processes(10_000)
//!     .mailbox_capacity(1_024)
//!     .long_poll_threshold(Duration::from_millis(5))
//!     .build()?;
//! assert!(DEFAULT_MAX_BATCH > 0 && DEFAULT_STEP_BUDGET > 0);
//! # drop(sched);
//! # Ok::<(), procsched::error::BuildError>(())
//! ```

pub use crate::executor::{LongPoll, DEFAULT_LONG_POLL_THRESHOLD, DEFAULT_SPARE_KEEP_ALIVE};
pub use crate::process::TopicBudget;
pub use crate::scheduler::{
    SchedulerBuilder, DEFAULT_DROP_TIMEOUT, DEFAULT_MAX_BATCH, DEFAULT_STEP_BUDGET,
    FORCED_STOP_WAIT,
};
