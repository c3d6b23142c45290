//! Processes written as `async fn`s: an adapter that is a [`Process`] whose `step` polls the
//! async body.
//!
//! # Binding semantics
//! - Each [`ProcessCx::call`](crate::ProcessCx::call) is a yield with its own tag. Its first poll puts the command in
//!   the step's yields; its `YieldComplete` resumes it (oneshot-style). Calls awaited
//!   concurrently (`join!`) are dispatched in one step; inline handlers complete within the same
//!   poll of the process.
//! - After a poll of the body the step's status is `Done` with the body's output (an `Err` fails
//!   the process), `Continue` after [`ProcessCx::yield_now`](crate::ProcessCx::yield_now), `Wait` (observable `Blocked`) while
//!   calls are outstanding or a foreign future is pending, and `Idle` while only a receive (or
//!   [`ProcessCx::cancelled`](crate::ProcessCx::cancelled)) is pending.
//! - `Cancel` and `MailboxOverflow` are observable: [`ProcessCx::recv`](crate::ProcessCx::recv) returns them (cancel
//!   once), [`ProcessCx::cancelled`](crate::ProcessCx::cancelled) resolves on cancel. Ignoring cancel is allowed and ends as
//!   a forced stop at shutdown's deadline, as for any process.
//! - Any other future (a tokio timer, a child's [`ProcessHandle`](crate::ProcessHandle), a
//!   channel) may be awaited too: the body is polled with a waker that delivers
//!   [`Event::Woken`] to the process, which polls the body again. Futures
//!   that need a tokio runtime find one: the workers run inside the handler runtime's context.
//! - Messages are moved into the adapter (its inbox) by the step they arrive in; a bounded
//!   mailbox still counts them against its capacity until received
//!   ([`Process::unread_messages`]); a topic's budget applies while they wait in the mailbox.
//!   Exit signals and `Down`s are moved into the adapter's signal queue likewise, and kept there
//!   until a receive takes them (as an Erlang mailbox keeps them), never counted against a
//!   capacity. After each step that changed them, the adapter publishes how many of each it
//!   holds, for `process_info` (`unread_messages`, `unread_signals`).

pub(crate) mod asking;
mod futures;
mod lazy_waker;
mod live_calls;
mod pending_mark;
mod scope;
mod signals;
mod state;
pub(crate) mod unhosted;

#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use futures::count_destructor_panics;
pub use futures::{Call, Cancelled, Recv, RecvError, RecvMessage, YieldNow};
pub(crate) use scope::current_owner;
pub(crate) use signals::forget_down;
pub use signals::{Incoming, RecvAny, RecvDown, RecvExit, RecvSignal};

use super::context::Owner;
use super::{drop_contained, BoxError, Event, Events, InitError, Payload};
use super::{Process, ProcessContext};
use super::{Status, StepOutput};
use lazy_waker::LazyWaker;
use state::CxState;
use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A step's error when the body, driven by hand (a test harness's), waits for nothing but a
/// future outside procsched. (Beside a receive, a call or an ask such a future cannot be told
/// from a combinator's own waker — `FuturesUnordered` keeps a clone of it even when empty —
/// and the step waits as for the procsched future: `testing.rs`'s docs.)
const NOT_WOKEN_BY_HAND: &str = "the body awaits a future that is not procsched's own (a \
    child's `ProcessHandle`, a tokio channel, timer or task) or one of procsched's that waits \
    on a scheduler (`cx.run`, a `send_wait` to a full mailbox), and under `testing::Harness` \
    nothing wakes it: the harness steps the process only when the test does. There, await \
    calls, asks and receives only (script a child's result or a timeout as a message with \
    `Harness::send`), or test the body on a scheduler";

impl<S, Fut> fmt::Debug for AsyncFnProcess<S, Fut> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFnProcess")
            .field("started", &matches!(self.stage, Stage::Running(_)))
            .finish_non_exhaustive()
    }
}

/// The adapter: a [`Process`] whose steps poll an async body (made by
/// [`Scheduler::spawn_fn`](crate::Scheduler::spawn_fn) and
/// [`testing::Harness::for_fn`](crate::testing::Harness::for_fn)).
///
/// # The door to the scheduler
/// This layer does not know the scheduler: the body is built by a *start* closure the layer
/// above hands in, called by `init` with the process's identity ([`Owner`]: host and PID). The
/// scheduler layer's start wraps the user's body: it builds the body's
/// [`ProcessCx`](crate::ProcessCx) from the owner and its own handle (`scheduler/cx.rs`).
///
/// # Where it lives (why the body is not boxed)
/// The body is polled in place, so it must not move from its first poll until it is dropped.
/// Rather than a heap allocation of its own per process (for a spawn, a second `malloc` on the
/// spawning thread and a `free` on a worker, which cost more than the rest of the spawn), the
/// adapter relies on where it is stepped, and it can only be stepped where it cannot move: it is
/// made only by this crate (`new` is crate-private; users get one through `spawn_fn` or
/// `Harness::for_fn`), and stepped only inside the process future — polled pinned in its
/// executor task's allocation, never moved, dropped in place (`process/future.rs`: the future
/// is `!Unpin` when its process is, and this adapter always is) — or inside a
/// [`Harness`](crate::testing::Harness) or a [`testing::Body`](crate::testing::Body), which box
/// it. Moving it before its first
/// step (spawn does: into the process future, then into the task) is fine: an unpolled body may
/// move.
pub(crate) struct AsyncFnProcess<S, Fut> {
    /// What builds the body, then (from `init` on) the body: one or the other, sharing their
    /// bytes — the process is as large as the larger of the two, not their sum.
    stage: Stage<S, Fut>,
    /// Whatever `Fut` is, the adapter is `!Unpin`: so is the process future holding it, and
    /// safe code holding a `Pin` to that future can never move it.
    _pinned: PhantomPinned,
}

/// The adapter's stage.
enum Stage<S, Fut> {
    /// Builds the body from its owner (type docs, "The door to the scheduler"); taken by
    /// `init`.
    Start(S),
    /// Transient, inside `init` (or after a panic in the body's builder).
    Starting,
    /// Built by `init`; pinned in place from the first step on (type docs). Never reassigned
    /// after `init`: dropped in place with the adapter.
    Running(Running<Fut>),
}

/// A started body and what its polls reach.
struct Running<Fut> {
    /// The process the body's scope belongs to (`scope.rs`).
    owner: Owner,
    /// Structurally pinned (the only field that is): see [`Running::project`].
    body: Fut,
    state: CxState,
    /// The waker the body is polled with (`lazy_waker.rs`).
    waker: LazyWaker,
}

impl<Fut> Running<Fut> {
    /// The pinned body, and the rest unpinned.
    #[inline]
    fn project(self: Pin<&mut Self>) -> (Owner, Pin<&mut Fut>, &mut CxState, &LazyWaker) {
        // SAFETY: `body` is structurally pinned and the other fields are not. Pinning is upheld
        // for it: it is only ever reached through this projection, as `Pin<&mut Fut>`, never
        // moved out or swapped, and it is dropped in place with its `Running` (which has no
        // `Drop` impl and no manual `Unpin` impl: it is `Unpin` only if `Fut` is). `state` and
        // `waker` are never pinned-dependent, so plain references to them are fine; the three
        // borrows are of disjoint fields.
        unsafe {
            let this = self.get_unchecked_mut();
            (
                this.owner,
                Pin::new_unchecked(&mut this.body),
                &mut this.state,
                &this.waker,
            )
        }
    }
}

impl<S, Fut> AsyncFnProcess<S, Fut> {
    /// The process whose body `start(owner)` builds, at `init`.
    pub(crate) fn new(start: S) -> Self {
        AsyncFnProcess {
            stage: Stage::Start(start),
            _pinned: PhantomPinned,
        }
    }
}

impl<S, Fut, T, E> Process for AsyncFnProcess<S, Fut>
where
    S: FnOnce(Owner) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Into<BoxError>,
{
    type Output = T;

    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        let Stage::Start(start) = std::mem::replace(&mut self.stage, Stage::Starting) else {
            unreachable!("init runs once")
        };
        let owner = ctx.owner();
        // Not polled yet: may still move (type docs).
        self.stage = Stage::Running(Running {
            owner,
            body: start(owner),
            state: CxState::default(),
            waker: LazyWaker::new(ctx.wake_target()),
        });
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<T>) -> Result<(), BoxError> {
        let Stage::Running(running) = &mut self.stage else {
            unreachable!("init built the body")
        };
        // SAFETY: from this first step until it is dropped, the adapter — and so `running`:
        // its stage is never reassigned after `init` — stays where it is: it is stepped only
        // inside a process future, which the executor polls pinned in its task allocation and
        // never moves, or boxed (a `Harness`, a `testing::Body`); no one else can make or step
        // one (type docs).
        let running = unsafe { Pin::new_unchecked(running) };
        let (owner, mut body, state, waker) = running.project();
        // A lone completion is held here for its call to take during the poll, and so is a
        // lone message behind an empty inbox, for the next receive (`state.rs`) — left in
        // `events` where the drain put it, for the receive to read in place
        // (`process/typed.rs`, `take_lone`); anything else is filed first.
        let mut arrived = None;
        let mut no_message = None;
        // Destructor panics contained by the adapter's own bookkeeping, told to the cell.
        let mut panics = 0;
        // What this step files, for futures waiting with wakers of their own (`state.rs`).
        let before = state
            .has_foreign_waiters()
            .then(|| (state.cancelled.is_some(), state.mail_mark()));
        let lone_message = match events.len() {
            0 => None,
            1 if state.inbox_is_empty()
                && matches!(events.lone_slot(), Some(Some(Event::Message(_)))) =>
            {
                events.lone_slot()
            }
            1 => {
                match events.pop() {
                    Some(Event::YieldComplete { tag, result }) => arrived = Some((tag, result)),
                    Some(event) => panics += state.route(event),
                    None => {}
                }
                None
            }
            _ => {
                if !state.file_messages(events) {
                    for event in events.drain() {
                        panics += state.route(event);
                    }
                }
                None
            }
        };
        let lone = lone_message.unwrap_or(&mut no_message);
        // Futures a combinator polls with wakers of its own, whose wait is over (`state.rs`).
        let ready = match before {
            Some((was_cancelled, mark)) => {
                let cancel_arrived = !was_cancelled && state.cancelled.is_some();
                let mail_arrived = cancel_arrived || lone.is_some() || state.mail_mark() != mark;
                state.ready_foreign(&arrived, mail_arrived, cancel_arrived)
            }
            None => Vec::new(),
        };
        state.wants = Default::default();
        state.poll_mark = state.poll_mark.wrapping_add(1).max(1);
        state.publish_unread = waker.target().is_some_and(|target| target.is_bounded());
        let polled = catch_unwind(AssertUnwindSafe(|| {
            // Before the poll, outside the scope: the combinators holding them poll them in it.
            ready.into_iter().for_each(Waker::wake);
            let reply_to = waker.target();
            waker.poll_with(|lazy| {
                let mut cx = Context::from_waker(lazy);
                let scope = scope::Scope {
                    state,
                    arrived: &mut arrived,
                    lone: &mut *lone,
                    yields: out.yields_mut(),
                    reply_to,
                    own_waker: lazy,
                };
                scope::enter(owner, scope, || body.as_mut().poll(&mut cx))
            })
        }));
        let (polled, woken_in_place) = match polled {
            Ok(polled) => polled,
            Err(panic) => {
                // What the step held for the poll is a user value: dropped contained, not by
                // this unwind (a second panic during it would abort the program).
                panics += drop_contained(arrived) + drop_contained(lone.take());
                waker.destructors_panicked(panics);
                resume_unwind(panic)
            }
        };
        // A completion no call took is kept for a later poll (or dropped, its call gone), and so
        // are those of calls dropped during the poll.
        if let Some((tag, result)) = arrived {
            panics += state.keep(tag, result);
        }
        // A message no receive took waits in the inbox, ahead of any that arrive later.
        if let Some(message) = lone.take() {
            panics += state.route(message);
        }
        panics += state.purge_forgotten();
        // Calls the body dropped: the process future aborts their handler tasks.
        state.move_dropped_calls(out.dropped_calls());
        waker.destructors_panicked(panics);
        if let (Some(target), Some((messages, signals))) = (waker.target(), state.held_changed()) {
            // What the body holds unread, for `process_info` (kept until received).
            target.set_held(messages, signals);
        }
        match polled {
            Poll::Ready(Ok(output)) => out.done(output),
            Poll::Ready(Err(error)) => return Err(error.into()),
            Poll::Pending => {
                let wants = state.wants;
                if wants.yield_now || woken_in_place {
                    out.set_status(Status::Continue);
                } else if state.has_outstanding_calls() {
                    out.wait();
                } else if wants.receives > 0 || state.has_mail_waiters() {
                    // A receive polled with its own waker in an earlier poll waits too.
                    out.idle();
                } else if waker.can_wake() {
                    // A future outside procsched is pending: it wakes us through our waker.
                    out.wait();
                } else {
                    // Only under a test harness: a scheduler's process always has a waker.
                    return Err(NOT_WOKEN_BY_HAND.into());
                }
            }
        }
        Ok(())
    }

    /// The inbox: a bounded mailbox counts what the body has not received yet, so a busy body
    /// (awaiting a call, a timer) pushes back on its senders as a state machine would.
    fn unread_messages(&self) -> Option<usize> {
        match &self.stage {
            Stage::Running(running) => Some(running.state.unread()),
            Stage::Start(_) | Stage::Starting => Some(0),
        }
    }
}
