//! Process-layer tests with crate-private access.

#[cfg(loom)]
mod loom_blocks;
#[cfg(loom)]
mod loom_intake;
#[cfg(loom)]
mod loom_mailbox;
#[cfg(loom)]
mod loom_process;
#[cfg(loom)]
mod loom_state;
#[cfg(loom)]
mod loom_watch;
#[cfg(loom)]
mod support;

#[cfg(not(loom))]
mod mailbox_budget;
#[cfg(not(loom))]
mod mailbox_intake;
#[cfg(not(loom))]
mod outstanding_tasks;
#[cfg(not(loom))]
mod yields_in_place;
