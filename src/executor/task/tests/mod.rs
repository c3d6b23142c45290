//! Task-level tests with crate-private access: loom models and Miri-friendly unit tests.

mod toy;

#[cfg(loom)]
mod loom_task;

#[cfg(not(loom))]
mod task_lifecycle;
