//! One step of a harnessed process ([`Harness::step`]) and what it produced ([`Step`]): the
//! events scripted for it and those that arrived in its mailbox, its end as the scheduler
//! would see it (`scheduler/stepped.rs`).

use super::{asks, Asked, Harness};
use crate::process::{panic_message, BoxError, Event, ExitReason, Payload, Process, Status, Tag};
use crate::scheduler::Arrived;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// What one step produced.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::Status;
/// use procsched::testing::Harness;
///
/// struct Stock(&'static str);
/// procsched::command!(Stock => u32);
///
/// let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
///     let (a, b) = tokio::join!(cx.call(Stock("sku-1")), cx.call(Stock("sku-2")));
///     Ok::<_, BoxError>(a? + b?)
/// });
/// harness.init("run", Payload::empty())?;
/// // Calls awaited together are yielded in one step, in order.
/// let step = harness.step()?;
/// assert!(matches!(step.status, Status::Wait));
/// let sku = |i: usize| step.yields[i].1.downcast_ref::<Stock>().map(|stock| stock.0);
/// assert_eq!((sku(0), sku(1)), (Some("sku-1"), Some("sku-2")));
///
/// for (tag, _) in &step.yields {
///     harness.complete(*tag, Ok(Payload::new(5u32)));
/// }
/// assert!(matches!(harness.step()?.status, Status::Done(10)));
/// # Ok::<(), BoxError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Step<O> {
    /// The yields, in order: `(tag, command)`.
    pub yields: Vec<(Tag, Payload)>,
    /// The status the step set.
    pub status: Status<O>,
    /// The asks the body sent (`addr.ask(..).await`), in order: on a scheduler they would
    /// have been sent; here each waits for the test to answer it ([`Asked`]).
    pub asks: Vec<Asked>,
}

impl<P: Process> Harness<P> {
    /// Runs one step with the queued events — those scripted ([`push`](Self::push),
    /// [`send`](Self::send), answers to asks), then what arrived in the process's mailbox since
    /// the last step (messages, exit signals and `Down`s sent to its [`pid`](Self::pid)) —
    /// dropping those it leaves unread at the step's end (a scheduler drops them too, but after
    /// a step that ends the process only once its outcome is published, so that slow
    /// destructors do not delay its handle: here, before this returns). The yields of a step
    /// that ends the process (`Done`) are dropped, as the scheduler drops them (with a
    /// warning): nothing would complete them.
    ///
    /// A step that ends the process ends it as on a scheduler: its name is released, its links
    /// get its exit signal and its monitors their `Down` — `Normal` for `Done` (`Shutdown` once
    /// a step was given a `Cancel` and did not leave it unread); `Shutdown` for its
    /// cancellation (a `RecvError::Cancelled` propagated with `?`, say); for another error,
    /// a failure with the error's message; a panic's message for a panic.
    ///
    /// # Errors
    ///
    /// The step's own error. A linked process's exit signal (the process does not trap exits)
    /// ends it before its step, which does not run: the error is then the
    /// [`ProcessError`](crate::error::ProcessError) a scheduler would report. A panic in the
    /// step propagates (catch it with `std::panic::catch_unwind` to test it). A step before
    /// [`init`](Self::init) is an error (the process is not stepped: a scheduler steps only a
    /// started process). Once a step ended the process (`Done`, an error, or a panic), every
    /// later step is an error saying so: a scheduler steps it no more. A completion [`complete`](Self::complete) refused is the
    /// next step's error (the process is not stepped; the events stay queued).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::Status;
    /// use procsched::testing::Harness;
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx<i32>| async move {
    ///     let n = cx.recv().await?;
    ///     if n < 0 {
    ///         return Err::<i32, BoxError>(format!("negative: {n}").into());
    ///     }
    ///     Ok(n)
    /// });
    /// harness.init("run", Payload::empty())?;
    /// assert!(matches!(harness.step()?.status, Status::Idle));
    /// harness.send(Message::new("n", Payload::new(-1i32)));
    /// // The body's error is the step's: on a scheduler the process would end failed with it
    /// // (a `RecvError::Cancelled` propagated with `?` would end it cancelled instead).
    /// assert_eq!(harness.step().unwrap_err().to_string(), "negative: -1");
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn step(&mut self) -> Result<Step<P::Output>, BoxError> {
        if let Some(refused) = self.misscripted.take() {
            // Not stepped: the test's script is at fault, not the process.
            return Err(refused.into());
        }
        if self.sched.is_none() && !self.ended {
            // A scheduler steps only a process whose `init` succeeded.
            return Err("the process was not started: call `init` first, as `spawn` would".into());
        }
        if self.ended {
            crate::process::drop_each(self.events.drain());
            return Err(
                "the process has ended (its init failed, or a step returned `Done` or an error, or panicked): \
                        a scheduler steps it no more"
                    .into(),
            );
        }
        // Ended unless the step returns without ending it: a step that panics ended the
        // process, as on a scheduler (an `async fn` body would not resume anyway).
        self.ended = true;
        self.asks.collect_answers(&mut self.events);
        if let Some(cell) = &self.cell {
            if let Arrived::Terminated(error) = cell.drain(&mut self.events) {
                // As on a scheduler: ended before its step, which does not run.
                crate::process::drop_each(self.events.drain());
                self.finish(error.exit_reason());
                return Err(error.into());
            }
        }
        // Making a tokio timer or I/O future panics outside a runtime: a plain `#[test]` gets the
        // harness's scheduler's for the step, so awaiting one fails it with an error instead.
        let runtime = tokio::runtime::Handle::try_current().is_err();
        let runtime = runtime.then(|| self.sched.as_ref()?.handle().tokio_runtime());
        let runtime = runtime.flatten();
        let _inside = runtime.as_ref().map(tokio::runtime::Handle::enter);
        let (process, events, out, book) = (
            &mut self.process,
            &mut self.events,
            &mut self.out,
            &mut self.asks,
        );
        let host = self.host;
        let is_cancel = |event: &Event| matches!(event, Event::Cancel { .. });
        let cancel_given = events.iter().any(is_cancel);
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            let _asks = asks::Published::new(host, book);
            process.step(events, out)
        }));
        // Given and not left unread: heard, as a scheduler reads it (`future.rs`, `finish`).
        self.heard_cancel |= cancel_given && !self.events.iter().any(is_cancel);
        let asked = self.asks.take_sent();
        // No handler task runs here to abort: the test scripts completions by tag.
        self.out.dropped_calls().clear();
        crate::process::drop_each(self.events.drain());
        let stepped = match stepped {
            Ok(stepped) => stepped,
            Err(panic) => {
                self.finish(ExitReason::Panicked(panic_message(&*panic).into()));
                resume_unwind(panic)
            }
        };
        if let Err(error) = stepped {
            let reason = self.exit_reason_of(&error);
            self.finish(reason);
            return Err(error);
        }
        let status = self.out.take_status();
        let mut yields: Vec<(Tag, Payload)> = self.out.take_yields().collect();
        if matches!(status, Status::Done(_)) {
            if !yields.is_empty() {
                // As the scheduler does: nothing would ever complete them.
                tracing::warn!(pid = %self.pid, dropped = yields.len(), "yields of a Done step are dropped");
                crate::process::drop_each(yields.drain(..));
            }
            self.finish_done();
        } else {
            self.ended = false;
        }
        self.asks.yielded(yields.iter().map(|(tag, _)| *tag));
        Ok(Step {
            yields,
            status,
            asks: asked,
        })
    }

    /// Why the process ends with a step's `error`, as its links and monitors hear it: its
    /// cancellation (a `RecvError::Cancelled` propagated with `?`, say) ends it `Shutdown`;
    /// any other error fails it, with the error's message (the error itself is the step's).
    fn exit_reason_of(&self, error: &BoxError) -> ExitReason {
        if self
            .cell
            .as_ref()
            .is_some_and(|cell| cell.is_cancellation(error))
        {
            return ExitReason::Shutdown;
        }
        match error.downcast_ref::<ExitReason>() {
            Some(reason) => reason.clone(),
            // The error's `Display` is user code: contained, as a scheduler's is.
            None => ExitReason::failed(
                crate::process::display_contained(&**error, Some(self.pid)).to_string(),
            ),
        }
    }
}
