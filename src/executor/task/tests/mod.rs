//! Task-level tests with crate-private access: Miri-friendly unit tests, and the toy scheduler
//! they share with the task's loom models (`executor/tests/loom_task.rs`).

pub(in crate::executor) mod toy;

#[cfg(not(loom))]
mod task_lifecycle;
