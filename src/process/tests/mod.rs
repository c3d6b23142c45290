//! Process-layer tests with crate-private access.

#[cfg(loom)]
mod loom_process;

#[cfg(not(loom))]
mod mailbox_budget;
