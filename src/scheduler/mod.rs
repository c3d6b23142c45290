//! The public facade: spawn processes, send them messages, observe and shut them down.
//!
//! A [`Scheduler`] owns a work-stealing [`Executor`](crate::executor::Executor) (one worker per
//! core), the handlers yields are dispatched to, the tokio runtime async handlers run on, and the
//! process table: pooled process cells, found by [`Pid`](crate::Pid) without a lock.
//!
//! | module | concept |
//! |---|---|
//! | `builder` | [`SchedulerBuilder`]: settings, runtime adoption, `build` |
//! | `handlers` | handler registration on the builder: inline, async, blocking |
//! | `facade` | [`Scheduler`]: the owner's API; blocking and async shutdown, `Drop` |
//! | `shutdown` | the shutdown driver: graceful, then forced, then the report; the waits for abandoned processes |
//! | `closers` | the forced stop's `close` calls, on closer threads, bounded by a deadline (its own protocol doc) |
//! | `error` | [`SpawnError`], [`SendError`] ([`SendErrorKind`]): why a spawn or a send did not go through |
//! | `handle` | [`SchedulerHandle`]: spawn, send, terminate, state — from anywhere |
//! | `cx` | async-fn processes: `spawn_fn`, and what a `ProcessCx` reaches through the scheduler |
//! | `spawn_options` | [`SpawnOptions`]: one process's own mailbox bound and link, and the spawns that take them; [`ChildOptions`]: a supervised child's (the bound only) |
//! | `addr` | [`Addr`]: a typed address, the send path from a value to a mailbox |
//! | `process_handle` | [`ProcessHandle`]: a process's result, and its address |
//! | `ask` | ask/reply: the [`Ask`] future and [`AskError`] |
//! | `reply` | the [`Reply`] port a request carries: where its answer goes |
//! | `shared` | the state every handle shares, and the process future's `Host` |
//! | `lifecycle` | admission, the shutdown phases and their accounting ([`ShutdownReport`]) |
//! | `blocking` | the guard that keeps blocking calls off async threads and workers |
//! | `deadline` | a runtime-agnostic deadline future for the async waits |
//! | `lazy_runtime` | the tokio runtime a scheduler builds for its processes when nothing else supplies one |
//! | `outlived` | an adopted tokio runtime that shut down before the scheduler: its processes move to the scheduler's own |
//! | `table` | the process table: pooled cells indexed by PID (its own protocol doc) |
//! | `free_list` | the table's free slots, traded between threads in batches |
//! | `tasks` | process tasks: spawned unowned, their references kept in the cells, cancelled by the forced stop (its own protocol doc) |
//! | `metrics` | [`SchedulerMetrics`] and the sharded counters behind it |
//! | `info` | [`ProcessInfo`]: one live process, for a console; the coarse clock of its age |
//!
//! # Protocol: spawn vs. shutdown
//! Shutdown must account for every process exactly once — as `graceful`, `forced` or
//! `abandoned` in its [`ShutdownReport`] — and a spawn racing with it must either fail with
//! [`SpawnError::ShuttingDown`] or be counted. The pieces:
//! `live` (admitted processes not yet finished), the flags `shutting_down`, `forcing` and `sealed`,
//! and the *tally* (a mutex over the counts) that every finish takes once shutdown has begun.
//!
//! **Spawn** (`handle.rs`):
//! 1. If `shutting_down` is visible already: fail (nothing was touched).
//! 2. `live += 1`, SeqCst fence, read `shutting_down`: set → `live -= 1`, fail.
//! 3. Claim and open a cell (the process table); run `init`.
//! 4. Under the tally: if `sealed`, the report is out — fail with `ShuttingDown`, run `close`,
//!    release the cell (the seal counted it as abandoned: it was inside `init`).
//! 5. If `shutting_down` and not a supervisor's child: deliver `Cancel` to ourselves. Then hand the process future to the
//!    executor, unowned, and keep the task's reference in the cell (`tasks.rs`; after the
//!    executor's shutdown the future is dropped at once: a forced finish).
//!
//! **Shutdown** (`shutdown.rs`, `lifecycle.rs`):
//! 1. Set `shutting_down` (SeqCst), fence, deliver `Cancel` to every cell in the table but
//!    supervisors' children: each supervisor stops its own, in reverse start order (OTP). The
//!    walk stops at the grace period's end: the cells it has not reached by then are forced.
//! 2. Grace: wait until `live == 0` or the deadline.
//! 3. Set `forcing`: no process starts another step.
//! 4. Stop the executor, waiting at most [`FORCED_STOP_WAIT`] for workers to leave their current
//!    poll; then cancel every process task through the cells (`tasks.rs`, a walk in pieces):
//!    every process future not being polled is dropped on a closer thread (`closers.rs`; its
//!    `close` runs, it is counted `forced`), waiting for the walk and those closes until
//!    `2 × FORCED_STOP_WAIT` after the timeout at most.
//! 5. Seal, under the tally: every cell still occupied — the table's count of them, not a walk
//!    — is a process still inside `init`, `step` or `close` (or whose forced `close` has not run
//!    yet) — `abandoned`; set `sealed`. The report is final.
//!
//! **Finish** (`shared.rs`, the process future's `Host::finished`): after `close`, if
//! `shutting_down` is set, under the tally: count `graceful` (before `forcing`), `forced` (before
//! `sealed`) or nothing (sealed: it was counted abandoned); release the cell; `live -= 1`; wake
//! the waiters when `live` reaches zero.
//!
//! **Why every process is counted once.** Admission (spawn 2) and shutdown 1 are a Dekker pair
//! (both write, fence, then read the other's word), so a spawn either sees the flag or is in
//! `live` (shutdown waits for it) and its cell is reached by shutdown's scan or sees the flag in
//! spawn 5 (the table's `create_cell` fences for cells the scan could miss). A finish counts and
//! releases its cell in one critical section of the tally, and the seal counts occupied cells in
//! another: a process is counted by its finish (before the seal) or by the seal (cell still
//! occupied), never both, never neither. A spawn that has not opened its cell by the seal is not
//! counted, and fails in spawn 4.
//!
//! Loom models (`tests/loom_lifecycle.rs`): the whole protocol through the public API,
//! `loom_scheduler_shutdown_racing_with_a_spawn`; admission against the flag,
//! `loom_admission_racing_with_begin_shutdown`; a finish against the seal,
//! `loom_finish_racing_with_the_seal_is_counted_once`; the last finish against shutdown's wait,
//! `loom_last_finish_racing_with_shutdown_wakes_the_wait`.

mod addr;
mod ask;
mod ask_room;
mod blocking;
mod builder;
mod closers;
mod cx;
pub(crate) mod deadline;
mod error;
mod facade;
mod free_list;
mod handle;
mod handlers;
#[cfg(feature = "cluster")]
mod held_monitors;
mod hosts;
mod info;
mod lazy_runtime;
mod lifecycle;
mod links;
mod metrics;
mod names;
mod outlived;
mod process_handle;
mod reply;
mod send_wait;
mod shared;
mod shutdown;
mod spawn_fn;
mod spawn_options;
mod spin_wait;
mod step_ask;
mod stepped;
mod supervisor;
mod table;
mod tasks;

#[cfg(test)]
mod tests;

pub use addr::Addr;
pub use ask::Ask;
pub use builder::{
    BuildError, SchedulerBuilder, DEFAULT_DROP_TIMEOUT, DEFAULT_MAX_BATCH, DEFAULT_STEP_BUDGET,
};
pub use cx::ProcessCx;
pub use error::{AskError, SendError, SendErrorKind, SpawnError};
pub use facade::Scheduler;
pub use handle::SchedulerHandle;
pub use info::ProcessInfo;
pub use lifecycle::ShutdownReport;
pub use links::{Monitor, NotRunning};
pub use metrics::{
    ExitCounts, FinishCounts, MessageCounts, ProcessCounts, SchedulerMetrics, StepSample,
    YieldCounts,
};
pub use names::RegisterError;
pub use process_handle::ProcessHandle;
#[cfg(feature = "cluster")]
pub(crate) use reply::RemoteAnswer;
pub use reply::Reply;
pub use send_wait::SendWait;
pub use shutdown::FORCED_STOP_WAIT;
pub use spawn_options::{ChildOptions, SpawnOptions};
pub(crate) use stepped::{stepped_pid, Arrived, SteppedCell};
pub use supervisor::{
    ChildInfo, ChildShutdown, ChildSpec, Restart, Start, Strategy, Supervisor, SupervisorError,
    SupervisorRef, DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_WINDOW,
};
