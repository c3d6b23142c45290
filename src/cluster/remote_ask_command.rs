//! A state machine's ask through a [`RemoteAddr`]: [`RemoteAddr::ask_command`], the cluster's
//! half of `dispatch/ask.rs` (as `scheduler/step_ask.rs` is the local half).
//!
//! To a process of this node it is the local command (`Addr::ask_command`), its refusals told
//! as [`RemoteError`]s. To another node's, the request leaves as a remote `ask`'s does (its port
//! a placeholder carrying the ask's id), and the answer can only come back through the node's
//! table of pending requests: so the command is always answered through a channel
//! ([`RemoteAnswer`]), awaited by a task on the node's runtime, which ends the wait itself at the
//! node's request timeout when the yield has no deadline of its own.

use super::decoding::DecodeScope;
use super::error::RemoteError;
use super::node::NodeShared;
use super::remote::{RemoteAddr, Route};
use super::wire::Refusal;
use crate::dispatch::{AnswerChannel, AnswerTo, AskCommand, AskStarted};
use crate::process::{drop_contained, panic_message, CommandError, Payload};
use crate::scheduler::Reply;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;

impl<M: Serialize + Send + 'static> RemoteAddr<M> {
    /// An ask for a state machine's step to yield, to a process on any node: as
    /// [`Addr::ask_command`](crate::Addr::ask_command), with a remote ask's errors. The process
    /// waits `Blocked` (`out.wait()`), its worker free, and reads the answer as the yield's
    /// [`Event::YieldComplete`](crate::state_machine::Event::YieldComplete) with its tag. The
    /// request is sent when the step's yields are dispatched.
    ///
    /// The completion's `result`:
    /// - `Ok(payload)`: the answer, an `R` (`payload.take::<R>()`);
    /// - `Err(`[`CommandError::NoReply`]`)`: the port was dropped unanswered;
    /// - `Err(`[`CommandError::TimedOut`]`)`: no answer within the yield's timeout
    ///   ([`yield_command_within`](crate::state_machine::StepOutput::yield_command_within)) or,
    ///   without one, the node's [request timeout](super::Cluster::request_timeout);
    /// - `Err(`[`CommandError::Failed`]`)` holding a [`RemoteError`]: what a remote
    ///   [`ask`](Self::ask) fails with (`NotFound`, `MailboxFull`, `WrongType`, `NoConnection`
    ///   when the node dies meanwhile, `Decode`, …).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::RemoteAddr;
    /// use procsched::prelude::*;
    /// use procsched::state_machine::{Event, Events, Process, StepOutput};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// enum Account { Balance(Reply<u64>) }
    ///
    /// /// Asks an account, wherever it lives, for its balance and ends with it.
    /// struct Auditor { account: RemoteAddr<Account>, asked: bool }
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
    ///         out.wait();
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn ask_command<R, F>(&self, request: F) -> AskCommand
    where
        R: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce(Reply<R>) -> M + Send + 'static,
    {
        let addr = self.clone();
        AskCommand::new(
            std::any::type_name::<M>(),
            Box::new(move |to| start(&addr, request, to)),
        )
        .on_runtime(self.node().runtime.clone())
    }
}

/// Sends the request through the route `addr` takes, the answer going where `to` says (a
/// remote one always through a channel).
fn start<M, R, F>(addr: &RemoteAddr<M>, request: F, to: AnswerTo) -> AskStarted
where
    M: Serialize + Send + 'static,
    R: Serialize + DeserializeOwned + Send + 'static,
    F: FnOnce(Reply<R>) -> M + Send + 'static,
{
    let node = addr.node();
    let peer = match addr.route() {
        Err(error) => return refused(error),
        Ok(Route::Local(pid)) => {
            // Through a channel, so that the node's request timeout bounds an ask without a
            // deadline here too, as it bounds a remote ask's (and `RemoteAddr::ask`'s).
            let bounded = matches!(to, AnswerTo::Process { .. });
            let to = match to {
                AnswerTo::Process { asker, .. } => AnswerTo::Channel { asker },
                to @ AnswerTo::Channel { .. } => to,
            };
            let local = node.sched.addr::<M>(pid).ask_command(request);
            return match local.start_with(to) {
                AskStarted::Awaiting(answer) if bounded => {
                    AskStarted::Awaiting(Box::new(Bounded::new(answer, node.request_timeout)))
                }
                AskStarted::Refused(CommandError::Failed(error)) => match error.downcast() {
                    Ok(error) => refused(RemoteError::from_ask(*error, Duration::ZERO)),
                    Err(error) => AskStarted::Refused(CommandError::Failed(error)),
                },
                started => started,
            };
        }
        Ok(Route::Remote(peer)) => peer,
    };
    // User code (the request's constructor and its drop).
    let (id, replied) = match addr.send_ask(&peer, request) {
        Ok(sent) => sent,
        Err(error) => return refused(error),
    };
    let answer = Box::new(RemoteAnswer::<R> {
        node: node.clone(),
        id,
        replied,
        _reply: PhantomData,
    });
    AskStarted::Awaiting(match to {
        // The yield's deadline bounds the wait: its task closes the channel when it passes.
        AnswerTo::Channel { .. } => answer,
        AnswerTo::Process { .. } => Box::new(Bounded::new(answer, node.request_timeout)),
    })
}

fn refused(error: RemoteError) -> AskStarted {
    AskStarted::Refused(CommandError::Failed(Box::new(error)))
}

/// A remote ask's answer as it comes back: the node's pending entry `id` completes `replied`.
struct RemoteAnswer<R> {
    node: Arc<NodeShared>,
    id: u64,
    replied: oneshot::Receiver<Result<bytes::Bytes, Refusal>>,
    _reply: PhantomData<fn() -> R>,
}

/// An answer channel bounded by the node's request timeout: an ask yielded without a deadline.
struct Bounded {
    answer: Box<dyn AnswerChannel>,
    timeout: Duration,
    /// The timeout's timer, made at the first poll (inside the node's runtime: the task's).
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Bounded {
    fn new(answer: Box<dyn AnswerChannel>, timeout: Duration) -> Bounded {
        Bounded {
            answer,
            timeout,
            timer: None,
        }
    }
}

impl AnswerChannel for Bounded {
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<Result<Payload, CommandError>> {
        if let Poll::Ready(answer) = self.answer.poll_answer(cx) {
            return Poll::Ready(answer);
        }
        let timeout = self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        // Closed before a last look: an answer sent in time is taken, a later one refused.
        Poll::Ready(self.answer.close().ok_or(CommandError::TimedOut))
    }

    fn close(&mut self) -> Option<Payload> {
        self.answer.close()
    }
}

impl<R: DeserializeOwned + Send + 'static> RemoteAnswer<R> {
    /// The answer's value, decoded where addresses and ports inside it find this node.
    fn decoded(&self, answer: Result<bytes::Bytes, Refusal>) -> Result<Payload, CommandError> {
        let bytes = answer.map_err(|refusal| failed(RemoteError::from_refusal(refusal)))?;
        // User code (the reply type's `Deserialize`).
        let decoded = catch_unwind(AssertUnwindSafe(|| {
            super::shared_bytes::within_frame(&bytes, || {
                DecodeScope::node(&self.node).decode_msgpack::<R>(&bytes)
            })
        }));
        match decoded {
            Ok(Ok(value)) => Ok(Payload::new(value)),
            Ok(Err(error)) => Err(failed(
                self.node.undecodable_answer("an ask's answer", error),
            )),
            Err(panic) => {
                let error = self.node.undecodable_answer(
                    "an ask's answer",
                    format!(
                        "the reply's `Deserialize` panicked: {}",
                        panic_message(&*panic)
                    ),
                );
                drop_contained(panic);
                Err(failed(error))
            }
        }
    }
}

/// A remote ask's error as a yield's: timeouts and dropped ports as any command's.
fn failed(error: RemoteError) -> CommandError {
    match error {
        RemoteError::TimedOut(_) => CommandError::TimedOut,
        RemoteError::NoReply => CommandError::NoReply,
        error => CommandError::Failed(Box::new(error)),
    }
}

impl<R: DeserializeOwned + Send + 'static> AnswerChannel for RemoteAnswer<R> {
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<Result<Payload, CommandError>> {
        match Pin::new(&mut self.replied).poll(cx) {
            Poll::Ready(Ok(answer)) => Poll::Ready(self.decoded(answer)),
            // The node stopped and dropped what it waited for.
            Poll::Ready(Err(_)) => Poll::Ready(Err(failed(RemoteError::NoConnection))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn close(&mut self) -> Option<Payload> {
        // A later answer finds nothing waiting, and is dropped where it arrives.
        self.node.forget_pending(self.id);
        self.replied.close();
        let answer = self.replied.try_recv().ok()?;
        self.decoded(answer).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AskError;

    #[test]
    fn a_remote_asks_timeouts_and_dropped_ports_complete_as_any_commands_do() {
        assert!(failed(RemoteError::TimedOut(Duration::from_secs(1))).is_timed_out());
        assert!(failed(RemoteError::NoReply).is_no_reply());
        let CommandError::Failed(error) = failed(RemoteError::NoConnection) else {
            panic!("a remote error is the command's failure");
        };
        assert!(error
            .downcast_ref::<RemoteError>()
            .is_some_and(RemoteError::is_no_connection));
    }

    #[test]
    fn a_local_asks_refusals_read_as_a_remote_asks() {
        let kinds = [
            (AskError::AskedItself, RemoteError::AskedItself),
            (
                AskError::Undelivered(crate::error::SendErrorKind::NotFound),
                RemoteError::NotFound,
            ),
        ];
        for (local, remote) in kinds {
            assert_eq!(
                RemoteError::from_ask(local, Duration::ZERO).to_string(),
                remote.to_string()
            );
        }
    }
}
