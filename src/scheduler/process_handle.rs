//! [`ProcessHandle`]: await a process's result; its address.

use super::addr::Addr;
use super::handle::SchedulerHandle;
use crate::executor::{JoinError, JoinHandle};
use crate::process::future::StoppedResult;
use crate::process::{Message, Payload, Pid, ProcessError};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Awaits the result of a spawned process, from any async code (tokio, async-std, a procsched
/// task, [`Scheduler::block_on`](crate::Scheduler::block_on)).
///
/// Resolves to the value the process finished with (`Status::Done`) — typed: `T` is the
/// process's [`Output`](crate::state_machine::Process::Output), [`Payload`] for dynamic use — or to a
/// [`ProcessError`] saying whether it failed, panicked, was terminated or was cancelled by
/// shutdown.
///
/// `M` is what the process receives: its [`addr`](Self::addr) sends `M`s (for an async fn, the
/// `M` of its `ProcessCx<M>`; [`Message`], untyped, for a state machine).
///
/// Dropping the handle does **not** stop the process; it runs on and its result is dropped.
/// A process that awaits its own handle waits for ever — until a cancel it hears elsewhere,
/// a terminate, or a shutdown that forces it (its wait does not end on the cancel): unlike
/// an ask to itself ([`AskError::AskedItself`](crate::error::AskError::AskedItself)), this
/// is not detected.
/// Like tokio's `JoinHandle`, it resolves once: polled again after that, it panics (wrap it in
/// `futures::FutureExt::fuse` for `futures::select!`; `tokio::select!` polls a branch once).
///
/// A `tokio::time::timeout` around a handle is a fine hang guard, except under tokio's paused
/// clock (`#[tokio::test(start_paused = true)]`, `tokio::time::pause`): tokio then jumps its
/// clock forward whenever its own threads are idle, and the scheduler's workers are not tokio's,
/// so the timeout elapses at once, however soon the process would finish.
///
/// Awaited from outside the scheduler (a tokio task, a thread), the handle's first poll may
/// look for the process's end for a few microseconds before its thread parks, so that a short
/// process spawned and awaited in a loop costs no thread wake-ups
/// ([`spin_waits`](crate::config::SchedulerBuilder::spin_waits) turns it off; never from a
/// process's body).
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Payload, Scheduler, state_machine::{Events, Process, ProcessContext, StepOutput}, error::InitError};
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
pub struct ProcessHandle<T = Payload, M = Message> {
    pid: Pid,
    join: JoinHandle<Result<T, ProcessError>>,
    /// The process's scheduler, for [`addr`](Self::addr).
    sched: SchedulerHandle,
    /// Polled before: only the first poll may spin for the end (`spin_wait.rs`).
    polled: bool,
    _receives: PhantomData<fn(M)>,
}

impl<T, M> ProcessHandle<T, M> {
    pub(crate) fn new(
        pid: Pid,
        join: JoinHandle<Result<T, ProcessError>>,
        sched: SchedulerHandle,
    ) -> Self {
        ProcessHandle {
            pid,
            join,
            sched,
            polled: false,
            _receives: PhantomData,
        }
    }

    /// The same handle, for a process that receives `N`s (`spawn_fn` builds its handle as a
    /// `ProcessHandle<T, Message>` first).
    pub(crate) fn receiving<N>(self) -> ProcessHandle<T, N> {
        ProcessHandle::new(self.pid, self.join, self.sched)
    }

    /// The process's address: `send` and `ask` it `M`s, from anywhere (it outlives the handle).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx<String>| async move {
    ///     Ok::<_, BoxError>(cx.recv().await?.len())
    /// })?;
    /// let addr: Addr<String> = handle.addr();
    /// std::thread::spawn(move || addr.send("hello".to_owned()).unwrap()).join().unwrap();
    /// assert_eq!(sched.block_on(handle)?, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn addr(&self) -> Addr<M> {
        Addr::new(self.pid, self.sched.clone())
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
    /// let handle = sched.spawn_fn(|cx: ProcessCx<u8>| async move { cx.recv().await.map_err(BoxError::from) })?;
    /// assert!(!handle.is_finished()); // waits for a message
    /// sched.send(handle.pid(), Message::new("n", Payload::new(1u8)))?;
    /// assert_eq!(sched.block_on(handle)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

impl<T, M> Future for ProcessHandle<T, M> {
    type Output = Result<T, ProcessError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let pid = self.pid;
        if !std::mem::replace(&mut self.polled, true) {
            // A process that ends within microseconds of its first poll (a short one awaited
            // from a tokio task) is taken without parking this thread (`spin_wait.rs`).
            let join = &self.join;
            self.sched
                .inner
                .spin_gate
                .wait_finished(cx.waker(), || join.is_finished());
        }
        Pin::new(&mut self.join)
            .poll(cx)
            .map(|joined| match joined {
                Ok(result) => result,
                Err(e) if e.is_panic() => Err(task_panicked(pid, e)),
                Err(_) => Err(ProcessError::cancelled(pid)),
            })
    }
}

/// The error for a process task that ended in a panic. The process future catches every panic
/// of user code: the one it passes on is the result of a forced stop whose `close` panicked
/// ([`StoppedResult`]); any other is a bug of ours, reported rather than lost.
#[cold]
fn task_panicked(pid: Pid, error: JoinError) -> ProcessError {
    let message = error.panic_message().unwrap_or("internal panic").to_owned();
    match error
        .try_into_panic()
        .map(|payload| payload.downcast::<StoppedResult>())
    {
        Ok(Ok(stopped)) => stopped.0,
        _ => ProcessError::panicked(pid, message),
    }
}

impl<T, M> fmt::Debug for ProcessHandle<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("pid", &self.pid)
            .field("finished", &self.is_finished())
            .finish()
    }
}
