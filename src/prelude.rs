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

pub use crate::command;
pub use crate::error::{AskError, ProcessError, RecvError, SendError, SpawnError};
pub use crate::metrics::ProcessState;
pub use crate::{
    Addr, BoxError, Command, Message, Payload, Pid, ProcessCx, ProcessHandle, Reply, Scheduler,
    SchedulerHandle, SpawnOptions,
};
