//! A state machine's ask: [`Addr::ask_command`], the scheduler's half of `dispatch/ask.rs`
//! (the port and the request; dispatch says where the answer goes).

use super::addr::Addr;
use super::error::AskError;
use super::reply::{Elsewhere, Reply, ReplyTo};
use crate::dispatch::{AnswerChannel, AnswerTo, AskCommand, AskStarted};
use crate::process::{drop_contained, CommandError, Payload};
use std::future::Future;
use std::task::{Context, Poll};
use tokio::sync::oneshot;

impl<M: Send + 'static> Addr<M> {
    /// An ask for a state machine's step to yield: `request` builds the request around a reply
    /// port, as for [`ask`](Self::ask), and the answer comes back as the yield's completion,
    /// [`Event::YieldComplete`](crate::state_machine::Event::YieldComplete) with its tag, like a
    /// handler's result. The process waits `Blocked` (`out.wait()`) and its worker is free; no
    /// handler needs registering. The request is sent when the step's yields are dispatched.
    ///
    /// The completion's `result`:
    /// - `Ok(payload)`: the answer, an `R` (`payload.take::<R>()`);
    /// - `Err(`[`CommandError::NoReply`]`)`: the port was dropped unanswered (also with the
    ///   asked process's mailbox when it ended);
    /// - `Err(`[`CommandError::TimedOut`]`)`: yielded with
    ///   [`yield_command_within`](crate::state_machine::StepOutput::yield_command_within), no
    ///   answer came within the timeout (a later one is handed back to the answerer; one sent
    ///   before it is the ask's answer, never lost);
    /// - `Err(`[`CommandError::Failed`]`)` holding an [`AskError`]: nothing was sent —
    ///   [`Undelivered`](AskError::Undelivered) (no live process has the PID: `is_not_found`;
    ///   it is finishing; its mailbox is full) or [`AskedItself`](AskError::AskedItself).
    ///
    /// Tags are the step's own, as for any yield: an ask's tag must not be in use by another
    /// yield still waiting for its completion. If the asking process ends first, the answer is
    /// handed back to whoever sends it.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::{Event, Events, Process, StepOutput};
    ///
    /// enum Account { Balance(Reply<u64>) }
    ///
    /// /// Asks the account for its balance and ends with it.
    /// struct Auditor { account: Addr<Account>, asked: bool }
    ///
    /// const BALANCE: u64 = 1;
    ///
    /// impl Process for Auditor {
    ///     type Output = u64;
    ///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
    ///         if !self.asked {
    ///             self.asked = true;
    ///             out.yield_command(BALANCE, self.account.ask_command(Account::Balance));
    ///         }
    ///         for event in events.drain() {
    ///             if let Event::YieldComplete { tag: BALANCE, result } = event {
    ///                 out.done(result?.take::<u64>()?);
    ///                 return Ok(());
    ///             }
    ///         }
    ///         out.wait(); // Blocked until the answer comes: the worker is free
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(2).build()?;
    /// let account = sched.spawn_fn(|cx: ProcessCx<Account>| async move {
    ///     let Account::Balance(reply) = cx.recv().await?;
    ///     let _ = reply.send(42);
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// let auditor = Auditor { account: account.addr(), asked: false };
    /// let auditor = sched.spawn(auditor, "run", Payload::empty())?;
    /// assert_eq!(sched.block_on(auditor)?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ask_command<R, F>(&self, request: F) -> AskCommand
    where
        R: Send + 'static,
        F: FnOnce(Reply<R>) -> M + Send + 'static,
    {
        let addr = self.clone();
        AskCommand::new(
            std::any::type_name::<M>(),
            Box::new(move |to| start(&addr, request, to)),
        )
    }
}

/// Makes the port `to` says, builds the request around it and sends it.
fn start<M, R, F>(addr: &Addr<M>, request: F, to: AnswerTo) -> AskStarted
where
    M: Send + 'static,
    R: Send + 'static,
    F: FnOnce(Reply<R>) -> M,
{
    let inner = &addr.scheduler().inner;
    let asker = match &to {
        AnswerTo::Process { asker, .. } | AnswerTo::Channel { asker } => asker,
    };
    let asked = inner.table.get(addr.pid());
    if asked.is_some_and(|cell| asker.is(cell, addr.pid())) {
        return refused(AskError::AskedItself);
    }
    match to {
        AnswerTo::Process { asker, tag } => {
            let port = Reply {
                to: ReplyTo::Process {
                    asker: asker.clone(),
                    tag,
                },
            };
            // User code (the request's constructor).
            let Err(refused_request) = addr.send(request(port)) else {
                return AskStarted::Sent;
            };
            // The port's drop delivers `NoReply`: refuse it, so that the yield completes once,
            // with why the request was not delivered. Unless the port is not in the request
            // (the constructor dropped or kept it): then the port completes the yield.
            let kind = refused_request.kind();
            asker.abandon_ask(tag);
            inner.contained(drop_contained(refused_request));
            if asker.forget_abandoned(tag) {
                return AskStarted::Sent;
            }
            refused(AskError::Undelivered(kind))
        }
        AnswerTo::Channel { .. } => {
            let (sender, receiver) = oneshot::channel();
            let port = Reply {
                to: ReplyTo::Elsewhere(Some(Elsewhere::Channel(sender))),
            };
            match addr.send(request(port)) {
                Ok(()) => AskStarted::Awaiting(Box::new(Answer(receiver))),
                Err(refused_request) => {
                    let kind = refused_request.kind();
                    inner.contained(drop_contained(refused_request));
                    refused(AskError::Undelivered(kind))
                }
            }
        }
    }
}

fn refused(error: AskError) -> AskStarted {
    AskStarted::Refused(CommandError::Failed(Box::new(error)))
}

/// A deadline's channel, its reply type erased.
struct Answer<R>(oneshot::Receiver<R>);

impl<R: Send + 'static> AnswerChannel for Answer<R> {
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<Result<Payload, CommandError>> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|answer| answer.map(Payload::new).map_err(|_| CommandError::NoReply))
    }

    fn close(&mut self) -> Option<Payload> {
        self.0.close();
        self.0.try_recv().ok().map(Payload::new)
    }
}
