//! `ProcessHandle`: await a process's result.

use super::{Pid, ProcessError};
use crate::executor::JoinHandle;
use crate::Payload;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Awaits the result of a spawned process, from any async code (tokio, async-std, a procsched
/// task, [`Scheduler::block_on`](crate::Scheduler::block_on)).
///
/// Resolves to the payload the process finished with (`Status::Done`), or to a [`ProcessError`]
/// saying whether it failed, panicked, was terminated or was cancelled by shutdown.
///
/// Dropping the handle does **not** stop the process; it runs on and its result is dropped.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Events, InitError, Payload, Process, ProcessContext, Scheduler, StepOutput};
///
/// struct Answer;
/// impl Process for Answer {
///     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
///         Ok(())
///     }
///     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
///         out.done(Payload::new(42u32));
///         Ok(())
///     }
/// }
///
/// let sched = Scheduler::builder().workers(1).build().unwrap();
/// let handle = sched.spawn(Answer, "run", Payload::empty()).unwrap();
/// let result = sched.block_on(handle).unwrap();
/// assert_eq!(result.downcast::<u32>().unwrap(), 42);
/// ```
#[must_use = "dropping a ProcessHandle does not stop the process; await it to get its result"]
pub struct ProcessHandle {
    pid: Pid,
    join: JoinHandle<Result<Payload, ProcessError>>,
}

impl ProcessHandle {
    pub(crate) fn new(pid: Pid, join: JoinHandle<Result<Payload, ProcessError>>) -> Self {
        ProcessHandle { pid, join }
    }

    /// The process's PID.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// `true` once the process has finished.
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

impl Future for ProcessHandle {
    type Output = Result<Payload, ProcessError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let pid = self.pid;
        Pin::new(&mut self.join)
            .poll(cx)
            .map(|joined| match joined {
                Ok(result) => result,
                // The process future catches every panic of user code, so a task-level panic can
                // only be a bug of ours; report it rather than lose it.
                Err(e) if e.is_panic() => Err(ProcessError::panicked(
                    pid,
                    e.panic_message().unwrap_or("internal panic").to_owned(),
                )),
                Err(_) => Err(ProcessError::cancelled(pid)),
            })
    }
}

impl fmt::Debug for ProcessHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("pid", &self.pid)
            .field("finished", &self.is_finished())
            .finish()
    }
}
