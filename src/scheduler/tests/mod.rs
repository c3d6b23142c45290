//! The scheduler layer's loom models (run: `RUSTFLAGS="--cfg loom -C debug-assertions"
//! LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`).

#[cfg(loom)]
mod loom_closers;
#[cfg(loom)]
mod loom_lifecycle;
#[cfg(loom)]
mod loom_table;
#[cfg(loom)]
mod loom_tasks;
#[cfg(all(test, not(loom)))]
mod watch_cleanup;
