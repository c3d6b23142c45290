//! Scaffolding shared by procsched's benchmarks (the `procsched-benches` package).
//!
//! The bench targets live beside this library (`benches/executor.rs`, `benches/process/`);
//! this crate holds what more than one of them uses:
//! - [`Rt`] / [`Spawner`] ([`runtime`]): one interface over procsched, tokio's multi-thread
//!   runtime and an `async-executor` thread pool, all with [`WORKERS`] worker threads, so one
//!   workload body can be measured on every runtime.
//! - [`CountDown`] ([`countdown`]): completion signalling that costs the same on every runtime
//!   (an atomic counter plus a `std::sync::mpsc` wake-up), so the measurement never depends on
//!   a runtime's own join machinery.
//! - [`report`]: reading criterion's saved estimates back, formatting them as Markdown tables.
//! - [`memory`]: the resident-set figures of `/proc/self/status`.
//! - [`native_ring`] and [`ring`]: the tokio-native ring of the messages bench and procsched's
//!   in its three forms (both also run by `examples/msgprobe.rs`).
//! - [`ask`]: the ask servers of the messages bench, on procsched and on tokio-native (also
//!   run by `examples/msgprobe.rs`).
//! - [`blocked`]: the receiver of the process bench's `send_to_blocked`, on procsched and on
//!   tokio-native (also run by `examples/send_size.rs`).
//!
//! The benchmarks are a workspace member of their own so that `cargo test` and the examples
//! at the root never build criterion, plotters or the peer runtimes.

pub mod ask;
pub mod blocked;
pub mod countdown;
pub mod memory;
pub mod native_ring;
pub mod report;
pub mod ring;
pub mod runtime;

pub use countdown::{CountDown, CountDownHandle};
pub use memory::proc_status_kib;
pub use report::{
    criterion_dir, format_cell, format_ns, format_ratio, format_si, median_ns, publish_report,
    target_dir,
};
pub use runtime::{AsyncExecutorPool, Rt, RtKind, Spawner, DEFAULT_WORKERS, WORKERS, WORKERS_ENV};
