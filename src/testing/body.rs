//! The `async fn` process a [`Harness`](super::Harness) drives
//! ([`Harness::for_fn`](super::Harness::for_fn)).

use crate::process::async_fn::AsyncFnProcess;
use crate::process::context::Owner;
use crate::process::{BoxError, Events, InitError, Payload, Process, ProcessContext, StepOutput};
use crate::{ProcessCx, SchedulerHandle};
use std::fmt;
use std::future::Future;

/// An `async fn` process as a [`Harness`](super::Harness) drives it
/// ([`Harness::for_fn`](super::Harness::for_fn)): boxed, so that a
/// test can name it — `Harness<Body<u64>>` — whatever the closure's type.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::Status;
/// use procsched::testing::{Body, Harness};
///
/// fn doubler() -> Harness<Body<u64>> {
///     Harness::for_fn(|cx: ProcessCx<u64>| async move { Ok::<_, BoxError>(cx.recv().await? * 2) })
/// }
///
/// let mut harness = doubler();
/// harness.init("run", Payload::empty())?;
/// harness.send(Message::new("n", Payload::new(21u64)));
/// assert!(matches!(harness.step()?.status, Status::Done(42)));
/// # Ok::<(), BoxError>(())
/// ```
pub struct Body<T> {
    stage: BodyStage<T>,
}

/// A body before and after `init` (which is when its scheduler is known).
enum BodyStage<T> {
    Unstarted(Box<MakeBody<T>>),
    /// Boxed, so the body never moves once polled (the async-fn adapter's docs).
    Started(Box<dyn Process<Output = T>>),
    /// `init` ran (and failed or panicked) or is running.
    Spent,
}

/// Builds the adapter for a body, given the scheduler its `ProcessCx` reaches.
type MakeBody<T> = dyn FnOnce(SchedulerHandle) -> Box<dyn Process<Output = T>> + Send;

impl<T: Send + 'static> Body<T> {
    pub(super) fn new<F, Fut, E, M>(body: F) -> Body<T>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        let make = move |sched: SchedulerHandle| -> Box<dyn Process<Output = T>> {
            let start = move |owner: Owner| body(ProcessCx::new(owner, sched));
            Box::new(AsyncFnProcess::new(start))
        };
        Body {
            stage: BodyStage::Unstarted(Box::new(make)),
        }
    }
}

impl<T: Send + 'static> Process for Body<T> {
    type Output = T;

    fn init(
        &mut self,
        ctx: &ProcessContext<'_>,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        // Checked before the stage is taken: a refused `init` leaves a started body as it was.
        if !matches!(self.stage, BodyStage::Unstarted(_)) {
            return Err(InitError::failed("the body was already started"));
        }
        let BodyStage::Unstarted(make) = std::mem::replace(&mut self.stage, BodyStage::Spent)
        else {
            return Err(InitError::failed("the body was already started"));
        };
        let mut process = make(ctx.scheduler());
        let started = process.init(ctx, method, input);
        self.stage = BodyStage::Started(process);
        started
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<T>) -> Result<(), BoxError> {
        match &mut self.stage {
            BodyStage::Started(process) => process.step(events, out),
            _ => Err("a body stepped before `init` started it".into()),
        }
    }

    fn close(&mut self) {
        if let BodyStage::Started(process) = &mut self.stage {
            process.close();
        }
    }
}

impl<T> fmt::Debug for Body<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match self.stage {
            BodyStage::Unstarted(_) => "unstarted",
            BodyStage::Started(_) => "started",
            BodyStage::Spent => "spent",
        };
        f.debug_struct("Body").field("stage", &stage).finish()
    }
}
