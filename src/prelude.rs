//! The names most programs need, in one import: `use procsched::prelude::*;`.
//!
//! # Examples
//!
//! ```
//! use procsched::prelude::*;
//!
//! let sched = Scheduler::builder().workers(1).build()?;
//! let handle = sched.spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.pid()) })?;
//! let pid = handle.pid();
//! assert_eq!(sched.block_on(handle)?, pid);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::{
    Addr, AskError, BoxError, Command, CommandError, Event, Events, InitError, Message, Payload,
    Pid, Process, ProcessContext, ProcessCx, ProcessError, ProcessHandle, ProcessState, RecvError,
    Reply, Scheduler, SchedulerHandle, SendError, ShutdownReport, SpawnError, Status, StepOutput,
};
