//! Let it crash, safely: links, monitors, exit signals, supervisors and named processes, with
//! Erlang/OTP's semantics.
//!
//! - **Exit reasons** ([`ExitReason`]): one per process end, shared by handles
//!   ([`ProcessError::exit_reason`](crate::error::ProcessError::exit_reason)), links and
//!   monitors: `Normal`, `Failed`, `Panicked`, `Killed`, `Shutdown`, `NoProc`, `NoConnection`.
//! - **Links** ([`SchedulerHandle::link`](crate::SchedulerHandle::link),
//!   [`ProcessCx::spawn_link`](crate::ProcessCx::spawn_link)): both ways. A linked process's
//!   end with any reason but `Normal` ends the other with the same reason, unless it traps
//!   exits ([`ProcessCx::trap_exit`](crate::ProcessCx::trap_exit)): then it receives an
//!   [`Exit`]. Linking to a process already gone delivers the signal at once with `NoProc`.
//! - **Monitors** ([`ProcessCx::monitor`](crate::ProcessCx::monitor),
//!   [`SchedulerHandle::monitor`](crate::SchedulerHandle::monitor) from outside): one way,
//!   one shot — exactly one [`Down`], at once with `NoProc` if the target is already gone;
//!   none after a demonitor.
//! - Every exit signal and `Down` is delivered exactly once, after the ended process's `close`
//!   has run (`process/mailbox/watch.rs`, protocols 8 and 9, with their loom models).
//! - **Supervisors** ([`Supervisor`]): restart children by a strategy (`one_for_one`,
//!   `one_for_all`, `rest_for_one`), restart type (`Permanent`, `Transient`, `Temporary`) and
//!   intensity; stop them by a shutdown policy; nest into trees; add dynamic children. A
//!   child's own mailbox bound is set by its [`ChildOptions`]; its link is always its
//!   supervisor's.
//! - **Names** ([`SchedulerHandle::register`](crate::SchedulerHandle::register),
//!   [`whereis`](crate::SchedulerHandle::whereis),
//!   [`named`](crate::SchedulerHandle::named)): released when the process ends; a
//!   supervisor registers each child's name on every (re)start.
//!
//! # Examples
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::supervision::{ChildSpec, Supervisor};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
//! let sched = Scheduler::builder().workers(2).build()?;
//! let session = ChildSpec::new("session", |start| {
//!     start.spawn_fn(|cx: ProcessCx<u32>| async move {
//!         loop {
//!             if cx.recv().await? == 0 {
//!                 return Err::<(), BoxError>("a poisoned request".into());
//!             }
//!         }
//!     })
//! })
//! .register_as("session");
//! let supervisor = Supervisor::one_for_one().child(session).start(sched.handle()).await?;
//! let first = sched.handle().whereis("session").expect("started");
//! let crashed = sched.monitor(first);
//! sched.handle().addr::<u32>(first).send(0)?;                 // it crashes...
//! assert!(crashed.await.reason.is_failed());
//! while sched.handle().whereis("session").is_none_or(|pid| pid == first) {
//!     tokio::task::yield_now().await;                         // ...and comes back, with a new PID
//! }
//! assert_eq!(supervisor.restarts().await?, 1);
//! # sched.shutdown_async(std::time::Duration::from_secs(5)).await;
//! # Ok(()) }
//! ```

pub use crate::process::{Down, Exit, ExitNode, ExitReason, Incoming, MonitorRef, Signal};
pub use crate::scheduler::{
    ChildInfo, ChildOptions, ChildShutdown, ChildSpec, Monitor, NotRunning, RegisterError, Restart,
    Start, Strategy, Supervisor, SupervisorError, SupervisorRef, DEFAULT_MAX_RESTARTS,
    DEFAULT_RESTART_WINDOW,
};
