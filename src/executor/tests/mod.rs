//! The executor layer's loom models, in one place: the task state word against a toy scheduler
//! (`loom_task.rs`), parking and shutdown on the real worker loop (`loom_park.rs`), and the
//! monitor's hand-off and retirement (`loom_monitor.rs`). Unit tests of the task live with it
//! (`task/tests/`); those of unowned tasks and of the broadcast wake are here (`unowned.rs`,
//! `broadcast.rs`).

#[cfg(not(loom))]
mod broadcast;
#[cfg(loom)]
mod loom_monitor;
#[cfg(loom)]
mod loom_park;
#[cfg(loom)]
mod loom_task;
#[cfg(not(loom))]
mod unowned;
