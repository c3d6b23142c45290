//! The process side of an ask (`scheduler/ask.rs`) awaited in a body: a call like any other —
//! its own tag, the process `Blocked` while it waits, the answer arriving as the call's
//! completion in the process's mailbox — but whose "handler" is another process answering the
//! reply port it was sent.
//!
//! These are the few operations an ask needs of the step scope; like every process future's,
//! each acts only inside the scope of the process that started the ask (`scope.rs`).

use super::scope;
use super::state::{Arrived, Completion, CxState};
use crate::process::context::{HostId, Owner, ProcessWake};
use crate::process::{CancelReason, Tag};
use std::task::Waker;

/// An ask started in the body of `owner`.
#[derive(Debug)]
pub(crate) struct AskCall {
    pub(crate) owner: Owner,
    pub(crate) tag: Tag,
    /// The body had already been told that its process was asked to finish when the ask was
    /// sent (a cleanup ask): the cancellation is not this ask's to report. (One that arrived
    /// and was not told yet — with the answer to the body's previous ask, say — fails the ask
    /// before it is sent: [`start`].)
    pub(crate) after_cancel: bool,
}

/// Starts an ask in the body being polled on this thread: a live call tag, and where its answer
/// goes (the asking process's cell, in its incarnation: for the reply port, which alone holds
/// it). `Ok(None)` outside any body, or in one that runs without a scheduler (a test harness:
/// no cell to answer into; it records the ask instead: [`start_unhosted`]). `Err` with the
/// reason if the process was asked to finish and nothing has told the body yet: the ask tells
/// it, and sends nothing ([`untold_cancel`]).
pub(crate) fn start() -> Result<Option<(AskCall, ProcessWake)>, CancelReason> {
    let Some(owner) = scope::current_owner() else {
        return Ok(None);
    };
    scope::with(owner, |scope| {
        let Some(scope) = scope else {
            return Ok(None);
        };
        untold_cancel(scope.state)?;
        let Some(reply_to) = scope.reply_to else {
            return Ok(None);
        };
        let after_cancel = scope.state.cancel_told;
        let tag = scope.state.start_call();
        let call = AskCall {
            owner,
            tag,
            after_cancel,
        };
        Ok(Some((call, reply_to.clone())))
    })
}

/// A cancellation that arrived and that nothing has told the body yet: the ask starting now
/// tells it (`Err`), before it sends anything — a body that only asks would otherwise never
/// hear it, and a request sent would be handled for an asker that gives up on it at once.
/// Told, the body's later asks are cleanup.
fn untold_cancel(state: &mut CxState) -> Result<(), CancelReason> {
    match (state.cancelled, state.cancel_told) {
        (Some(reason), false) => {
            state.cancel_told = true;
            Err(reason)
        }
        _ => Ok(()),
    }
}

/// `true` while an `async fn` body is polled on this thread, hosted by a scheduler or driven by
/// hand: a wait there must not spin (`scheduler/spin_wait.rs`) — on a worker it holds up other
/// processes, and under a harness it would make a step's outcome depend on timing.
pub(crate) fn in_body() -> bool {
    scope::current_owner().is_some()
}

/// `true` in a body that runs without a scheduler (a test harness's: [`start`] found no cell
/// to answer into). Off the path of an ask between processes: asked only when `start` failed.
pub(crate) fn in_unhosted_body() -> bool {
    scope::current_owner().is_some_and(|owner| {
        scope::with(owner, |scope| {
            scope.is_some_and(|scope| scope.reply_to.is_none())
        })
    })
}

/// Starts an ask in a body that runs without a scheduler (a test harness records its request:
/// `testing/asks.rs`): a live call tag, answered by the harness as a call completion. `Err`
/// as [`start`].
pub(crate) fn start_unhosted() -> Result<Option<AskCall>, CancelReason> {
    let Some(owner) = scope::current_owner() else {
        return Ok(None);
    };
    scope::with(owner, |scope| {
        let Some(scope) = scope else {
            return Ok(None);
        };
        untold_cancel(scope.state)?;
        let after_cancel = scope.state.cancel_told;
        let tag = scope.state.start_call();
        Ok(Some(AskCall {
            owner,
            tag,
            after_cancel,
        }))
    })
}

/// What an ask's poll found.
#[derive(Debug)]
pub(crate) enum AskPoll {
    /// The answer (or the reply port's drop: `Err`).
    Answered(Completion),
    /// Still waiting.
    Pending,
    /// The process was asked to finish while the ask waited: the ask is over (its late answer
    /// will be dropped).
    Cancelled(CancelReason),
    /// Polled outside the body that started it.
    Outside,
}

/// Polls the ask `call`: its completion, unless a cancellation that arrived while it waited
/// comes first. Drops nothing. On `Pending`, the caller tells [`note_waiter`] the waker it was
/// polled with (apart: an `AskPoll` returned through one more frame was copied through memory,
/// a store-forwarding stall that cost a tenth of an ask between processes).
#[inline]
pub(crate) fn poll(call: &AskCall) -> AskPoll {
    scope::with(call.owner, |scope| {
        let Some(scope) = scope else {
            return AskPoll::Outside;
        };
        if let Some(completion) = scope.state.take_completion(scope.arrived, call.tag) {
            return AskPoll::Answered(completion);
        }
        match scope.state.cancelled {
            Some(reason) if !call.after_cancel => {
                give_up(scope.state, scope.arrived, scope.reply_to, call.tag);
                // Told: what the body asks next is cleanup (its receives report it still).
                scope.state.cancel_told = true;
                AskPoll::Cancelled(reason)
            }
            _ => AskPoll::Pending,
        }
    })
}

/// The ask `call`, polled with `waker`, waits ([`poll`] returned `Pending`).
#[inline]
pub(crate) fn note_waiter(call: &AskCall, waker: &Waker) {
    scope::note_call_waiter(call.owner, call.tag, waker);
}

/// The ask is dropped (or gave up) before its answer: no longer live; a late answer is refused
/// (handed back to its answerer) or, if it is on its way already, dropped when it arrives.
pub(crate) fn forget(call: &AskCall) {
    scope::with(call.owner, |scope| {
        if let Some(scope) = scope {
            give_up(scope.state, scope.arrived, scope.reply_to, call.tag);
        }
    });
}

/// The ask `call` timed out: `false` if it is given up (as [`forget`]), `true` if its answer
/// came in time after all — queued in the mailbox since the step began, the answerer told
/// `Ok` — and the ask takes it at the process's next step (which that answer's arrival has
/// asked for) instead of timing out.
pub(crate) fn time_out(call: &AskCall) -> bool {
    scope::with(call.owner, |scope| {
        let Some(scope) = scope else {
            return false;
        };
        let waits = scope.state.awaits_completion(scope.arrived, call.tag);
        match scope.reply_to {
            Some(reply_to) if waits && reply_to.time_out_ask(call.tag) => true,
            _ => {
                scope.state.forget_call(call.tag);
                false
            }
        }
    })
}

/// An ask that was never sent (no reply port exists): its call is simply no longer live.
pub(crate) fn forget_unsent(call: &AskCall) {
    scope::with(call.owner, |scope| {
        if let Some(scope) = scope {
            scope.state.forget_call(call.tag);
        }
    });
}

/// The body stops waiting for ask `tag`. If its answer has not arrived, the process's mailbox
/// is told to refuse it (`mailbox/abandoned.rs`), so that the answerer's `Reply::send` gets its
/// value back instead of `Ok` for an answer nobody reads.
fn give_up(state: &mut CxState, arrived: &Arrived, reply_to: Option<&ProcessWake>, tag: Tag) {
    let unanswered = state.awaits_completion(arrived, tag);
    state.forget_call(tag);
    if let (true, Some(reply_to)) = (unanswered, reply_to) {
        reply_to.abandon_ask(tag);
    }
}

/// For a wait the process layer does not carry itself (an ask across nodes, whose answer comes
/// on a channel, not as a call completion; a `send_wait` waiting for room): whether the body
/// that started it has been asked to finish since. Made when the wait starts, in the body being
/// polled; `None` outside any body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CancelWatch {
    owner: Owner,
    /// The body had been told already that its process was asked to finish: not this wait's
    /// to report (cleanup; see [`AskCall::after_cancel`]).
    after_cancel: bool,
}

impl CancelWatch {
    /// A watch for the body being polled on this thread, if any (`Ok(None)`: none); `Err` as
    /// [`start`](fn@start): the cancellation, told now, before the wait's request is sent.
    pub(crate) fn start() -> Result<Option<CancelWatch>, CancelReason> {
        let Some(owner) = scope::current_owner() else {
            return Ok(None);
        };
        scope::with(owner, |scope| {
            let Some(scope) = scope else {
                return Ok(None);
            };
            untold_cancel(scope.state)?;
            Ok(Some(CancelWatch {
                owner,
                after_cancel: scope.state.cancel_told,
            }))
        })
    }

    /// `true` if the wait was started in a body on `host` before the body was told of its
    /// cancellation: a wait the shutdown of `host` cuts short by ending the process waited on
    /// is that body's cancellation (as `scheduler/ask.rs`'s `in_shutdown` says for an ask).
    pub(crate) fn hears_shutdown_of(&self, host: HostId) -> bool {
        !self.after_cancel && self.owner.host == host
    }

    /// The reason, if the body's process was asked to finish after the watch started (read in
    /// that body's poll, polled with `waker`; `None` anywhere else). Reported, it counts as
    /// told.
    pub(crate) fn cancelled(&self, waker: &Waker) -> Option<CancelReason> {
        if self.after_cancel {
            return None;
        }
        scope::with(self.owner, |scope| {
            let mut scope = scope?;
            let cancelled = scope.state.cancelled;
            if cancelled.is_none() {
                scope.wait_for_cancel(waker);
            } else {
                scope.state.cancel_told = true;
            }
            cancelled
        })
    }
}
