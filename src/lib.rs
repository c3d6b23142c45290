//! procsched: a work-stealing scheduler for long-lived, stateful processes.
//!
//! This release contains the foundation, [`executor`]: a general-purpose work-stealing executor
//! for any `Future + Send + 'static`.
//!
//! ```
//! use procsched::executor::Executor;
//!
//! let executor = Executor::builder().workers(2).build()?;
//! let answer = executor.spawn(async { 42 });
//! assert_eq!(executor.block_on(answer).unwrap(), 42);
//! # Ok::<(), std::io::Error>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

pub mod executor;
mod loom;
