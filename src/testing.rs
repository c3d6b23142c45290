//! Drive a process step by step with scripted events: no scheduler, no threads.
//!
//! A [`Harness`] owns one process. Script the events its next step sees ([`Harness::send`],
//! [`Harness::complete`], [`Harness::cancel`]), run the step ([`Harness::step`]) and look at
//! what it asked for: its yields and its status. Works for state-machine processes and for
//! `async fn` bodies ([`Harness::for_fn`]: each `cx.call` shows up as a yield, and
//! [`Harness::complete`] answers it).
//!
//! A process driven here has no scheduler: `ProcessContext::scheduler` and
//! `ProcessCx::scheduler` panic, and futures outside procsched cannot wake it.
//!
//! # Examples
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::state_machine::Status;
//! use procsched::testing::Harness;
//!
//! struct Double(u64);
//! procsched::command!(Double => u64);
//!
//! let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
//!     let doubled = cx.call(Double(21)).await?;
//!     Ok::<_, BoxError>(doubled + 1)
//! });
//! harness.init("run", Payload::empty())?;
//! let step = harness.step()?;
//! assert!(matches!(step.status, Status::Wait));
//! let (tag, command) = &step.yields[0];
//! assert_eq!(command.downcast_ref::<Double>().map(|d| d.0), Some(21));
//!
//! harness.complete(*tag, Ok(Payload::new(42u64)));
//! assert!(matches!(harness.step()?.status, Status::Done(43)));
//! # Ok::<(), procsched::BoxError>(())
//! ```

use crate::process::async_fn::AsyncFnProcess;
use crate::process::context::HostId;
use crate::process::{
    BoxError, CancelReason, CommandError, Event, Events, InitError, Message, Payload, Pid, Process,
    ProcessContext, ProcessCx, Status, StepOutput, Tag,
};
use std::fmt;
use std::future::Future;
use std::sync::Arc;

/// A process and the events of its next step (module docs).
pub struct Harness<P: Process> {
    /// Boxed: a harness may be moved between steps, and an async-fn process must not be
    /// (`AsyncFnProcess`'s docs).
    process: Box<P>,
    pid: Pid,
    events: Events,
    out: StepOutput<P::Output>,
    closed: bool,
}

/// What one step produced.
#[derive(Debug)]
#[non_exhaustive]
pub struct Step<O> {
    /// The yields, in order: `(tag, command)`.
    pub yields: Vec<(Tag, Payload)>,
    /// The status the step set.
    pub status: Status<O>,
}

/// The PID every harness gives its process (slot 0, generation 1).
fn harness_pid() -> Pid {
    Pid::from_raw(1 << crate::process::INDEX_BITS).expect("non-zero")
}

impl<P: Process> Harness<P> {
    /// A harness for `process`; call [`init`](Self::init) first, as `spawn` would.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn new(process: P) -> Harness<P> {
        Harness {
            process: Box::new(process),
            pid: harness_pid(),
            events: Events::default(),
            out: StepOutput::default(),
            closed: false,
        }
    }

    /// The process's PID.
    ///
    /// # Examples
    ///
    /// ```
    /// let harness = procsched::testing::Harness::for_fn(|cx: procsched::ProcessCx| async move {
    ///     Ok::<_, procsched::BoxError>(cx.pid())
    /// });
    /// assert_eq!(harness.pid().as_u64(), 1 << 26);
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Runs `init(method, input)`, as `spawn` does.
    ///
    /// # Errors
    ///
    /// The process's own [`InitError`].
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn init(&mut self, method: &str, input: Payload) -> Result<(), InitError> {
        let host = ();
        let ctx = ProcessContext::with_host(self.pid, HostId::next(), &host);
        self.process.init(&ctx, method, input)
    }

    /// Queues any event for the next step.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{testing::Harness, state_machine::Event};
    ///
    /// let mut harness = Harness::for_fn(|cx: procsched::ProcessCx| async move {
    ///     cx.yield_now().await;
    ///     Ok::<_, procsched::BoxError>(())
    /// });
    /// harness.init("run", procsched::Payload::empty())?;
    /// harness.push(Event::Woken);
    /// assert!(matches!(harness.step()?.status, procsched::state_machine::Status::Continue));
    /// # Ok::<(), procsched::BoxError>(())
    /// ```
    pub fn push(&mut self, event: Event) -> &mut Self {
        self.events.push(event);
        self
    }

    /// Queues a message for the next step.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, state_machine::Status, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx<u32>| async move {
    ///     Ok::<_, BoxError>(cx.recv().await? * 2)
    /// });
    /// harness.init("run", Payload::empty())?;
    /// assert!(matches!(harness.step()?.status, Status::Idle));
    /// harness.send(Message::new("n", Payload::new(4u32)));
    /// assert!(matches!(harness.step()?.status, Status::Done(8)));
    /// # Ok::<(), procsched::BoxError>(())
    /// ```
    pub fn send(&mut self, message: Message) -> &mut Self {
        self.push(Event::Message(message))
    }

    /// Queues the completion of the yield `tag` for the next step.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn complete(&mut self, tag: Tag, result: Result<Payload, CommandError>) -> &mut Self {
        self.push(Event::YieldComplete { tag, result })
    }

    /// Queues shutdown's `Cancel` for the next step.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, state_machine::Status, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
    ///     let _ = cx.cancelled().await;
    ///     Ok::<_, BoxError>("bye")
    /// });
    /// harness.init("run", Payload::empty())?;
    /// assert!(matches!(harness.step()?.status, Status::Idle));
    /// harness.cancel();
    /// assert!(matches!(harness.step()?.status, Status::Done("bye")));
    /// # Ok::<(), procsched::BoxError>(())
    /// ```
    pub fn cancel(&mut self) -> &mut Self {
        self.push(Event::Cancel {
            reason: CancelReason::Shutdown,
        })
    }

    /// Runs one step with the queued events (unread ones are dropped, as the scheduler does).
    ///
    /// # Errors
    ///
    /// The step's own error. A panic in the step propagates (catch it with
    /// `std::panic::catch_unwind` to test it).
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn step(&mut self) -> Result<Step<P::Output>, BoxError> {
        let stepped = self.process.step(&mut self.events, &mut self.out);
        self.events.drain().for_each(drop);
        stepped?;
        Ok(Step {
            yields: self.out.take_yields().collect(),
            status: self.out.take_status(),
        })
    }

    /// Runs `close`, as the scheduler does exactly once when a process ends (dropping the
    /// harness does it too, if this was not called).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut harness = procsched::testing::Harness::for_fn(|_: procsched::ProcessCx| async {
    ///     Ok::<_, procsched::BoxError>(())
    /// });
    /// harness.close();
    /// ```
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.process.close();
        }
    }
}

impl<F, Fut, T, E, M> Harness<AsyncFnProcess<F, Fut, M>>
where
    M: Send + 'static,
    F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Into<BoxError>,
{
    /// A harness for a process written as an `async fn` (as
    /// [`Scheduler::spawn_fn`](crate::Scheduler::spawn_fn) would run it).
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn for_fn(body: F) -> Self {
        Harness::new(AsyncFnProcess::new(body, Arc::new(())))
    }
}

impl<P: Process> Drop for Harness<P> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.close();
        }
    }
}

impl<P: Process> fmt::Debug for Harness<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("pid", &self.pid)
            .field("queued_events", &self.events.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}
