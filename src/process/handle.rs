//! `ProcessHandle`: await a process's result.

use super::{Payload, Pid, ProcessError};
use crate::executor::JoinHandle;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Awaits the result of a spawned process, from any async code (tokio, async-std, a procsched
/// task, [`Scheduler::block_on`](crate::Scheduler::block_on)).
///
/// Resolves to the value the process finished with (`Status::Done`) — typed: `T` is the
/// process's [`Output`](crate::Process::Output), [`Payload`] for dynamic use — or to a
/// [`ProcessError`] saying whether it failed, panicked, was terminated or was cancelled by
/// shutdown.
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
///     type Output = Payload;
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
///
/// // A typed process gives a typed handle:
/// struct Typed;
/// impl Process for Typed {
///     type Output = u32;
///     fn step(&mut self, _: &mut Events, out: &mut StepOutput<u32>) -> Result<(), BoxError> {
///         out.done(7);
///         Ok(())
///     }
/// }
/// let handle: procsched::ProcessHandle<u32> = sched.spawn(Typed, "run", Payload::empty()).unwrap();
/// assert_eq!(sched.block_on(handle).unwrap(), 7);
/// ```
#[must_use = "dropping a ProcessHandle does not stop the process; await it to get its result"]
pub struct ProcessHandle<T = Payload> {
    pid: Pid,
    join: JoinHandle<Result<T, ProcessError>>,
}

impl<T> ProcessHandle<T> {
    pub(crate) fn new(pid: Pid, join: JoinHandle<Result<T, ProcessError>>) -> Self {
        ProcessHandle { pid, join }
    }

    /// The process's PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.pid()) })?;
    /// let pid = handle.pid();
    /// assert_eq!(sched.block_on(handle)?, pid);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// `true` once the process has finished.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move { cx.recv::<u8>().await.map_err(BoxError::from) })?;
    /// assert!(!handle.is_finished()); // waits for a message
    /// sched.send(handle.pid(), Message::new("n", Payload::new(1u8)))?;
    /// assert_eq!(sched.block_on(handle)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

impl<T> Future for ProcessHandle<T> {
    type Output = Result<T, ProcessError>;

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

impl<T> fmt::Debug for ProcessHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("pid", &self.pid)
            .field("finished", &self.is_finished())
            .finish()
    }
}
