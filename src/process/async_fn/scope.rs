//! The step scope: how the futures a body awaits reach the adapter's state during a poll.
//!
//! The adapter polls the body only from inside `step`, on the worker stepping the process. For
//! that poll it publishes, in a thread-local, pointers to its own state, to the completion and
//! the message the step holds for its calls and receives (`state.rs`) and to the step's yield
//! buffer; a [`Call`](super::Call), [`Recv`](super::Recv) or other process future polled during
//! it reads them. No lock, no
//! allocation, no reference count on the path of a yield.
//! A process future polled anywhere else — moved into a task of another executor, or into the
//! body of another process (through a channel, a shared `Mutex`) — finds no scope that is its
//! own: the scope names its process ([`Owner`]: its host and PID), every future remembers the
//! process that made it, and [`with`] gives the scope only to a future of that process. The
//! others fail with a typed error, never touching another process's state (its completions,
//! its tags, its inbox).

use super::pending_mark::PendingMark;
use super::state::{Arrived, CxState};
use crate::process::context::{Owner, ProcessWake};
use crate::process::output::Yields;
use crate::process::{Event, Tag};
use std::cell::Cell;
use std::ptr;
use std::task::Waker;

/// What a poll of the body can reach.
pub(super) struct Scope<'a> {
    pub(super) state: &'a mut CxState,
    pub(super) arrived: &'a mut Arrived,
    /// The step's only event when it is a message and the inbox is empty, left where the drain
    /// put it: the next message a receive takes (`state.rs`); `None` otherwise.
    pub(super) lone: &'a mut Option<Event>,
    pub(super) yields: &'a mut Yields,
    /// Where a reply to this process goes (an ask's answer: its cell), if it runs in a
    /// scheduler.
    pub(super) reply_to: Option<&'a ProcessWake>,
    /// The waker the body is polled with (`lazy_waker.rs`): a future polled with another one
    /// sits in a combinator that polls only the futures its own wakers name
    /// (`FuturesUnordered`, `buffer_unordered`), and is woken by the adapter (`state.rs`,
    /// "Futures polled with their own waker").
    pub(super) own_waker: &'a Waker,
}

impl Scope<'_> {
    /// `true` if `waker` is the one the body is polled with.
    #[inline]
    pub(super) fn is_own_waker(&self, waker: &Waker) -> bool {
        waker.will_wake(self.own_waker)
    }

    /// A receive (or `cancelled`, a signal's receive) polled with `waker` waits: the body may
    /// park `Idle`, and a waker that is not the body's own is woken when mail arrives.
    #[inline]
    pub(super) fn wait_for_mail(&mut self, waker: &Waker, mark: &mut PendingMark) {
        mark.count(self.state);
        if !self.is_own_waker(waker) {
            self.state.wait_for_mail_with(waker);
        }
    }

    /// As [`wait_for_mail`](Self::wait_for_mail), unless the receive yielded with mail in
    /// the inbox (`CxState::yield_receive`): then no mail will come to wake it, and `true` says
    /// that `waker`, if not the body's own, is to be woken at once — outside the scope — as
    /// `yield_now`'s is (the body's own needs nothing: the step ends `Continue`).
    #[inline]
    pub(super) fn wait_for_mail_or_yield(&mut self, waker: &Waker, mark: &mut PendingMark) -> bool {
        if self.state.wants.preempted_receive {
            self.state.wants.preempted_receive = false;
            mark.count(self.state);
            return !self.is_own_waker(waker);
        }
        self.wait_for_mail(waker, mark);
        false
    }

    /// A wait that a cancellation ends (a remote ask's, a `send_wait`'s), polled with `waker`:
    /// a waker that is not the body's own is woken when the process is asked to finish (or mail
    /// arrives: a spurious wake). Unlike a receive's, it sets no `wants`; but a body whose only
    /// pending futures wait so parks `Idle` (its kept waker counts as a receive's).
    #[inline]
    pub(super) fn wait_for_cancel(&mut self, waker: &Waker) {
        if !self.is_own_waker(waker) {
            self.state.wait_for_mail_with(waker);
        }
    }

    /// Call (or ask) `tag` polled with `waker` waits for its completion: a waker that is not the
    /// body's own is woken when it arrives (or the process is asked to finish).
    /// Returns a waker it replaced: to be dropped outside the scope.
    #[inline]
    #[must_use]
    pub(super) fn wait_for_call(&mut self, tag: Tag, waker: &Waker) -> Option<Waker> {
        if self.is_own_waker(waker) {
            return None;
        }
        self.state.wait_for_call_with(tag, waker)
    }
}

struct Raw {
    owner: Owner,
    reply_to: *const ProcessWake,
    state: *mut CxState,
    arrived: *mut Arrived,
    lone: *mut Option<Event>,
    yields: *mut Yields,
    own_waker: *const Waker,
}

// Plain std `thread_local!`: a per-thread pointer, not a synchronisation primitive (the async-fn
// adapter runs outside every loom model).
std::thread_local! {
    static CURRENT: Cell<*const Raw> = const { Cell::new(ptr::null()) };
}

/// Runs `poll` with `scope`, process `owner`'s, published to the futures it polls, restoring
/// the previous scope afterwards (also when `poll` panics).
#[inline]
pub(super) fn enter<R>(owner: Owner, scope: Scope<'_>, poll: impl FnOnce() -> R) -> R {
    let raw = Raw {
        owner,
        reply_to: scope.reply_to.map_or(ptr::null(), |target| target),
        state: scope.state,
        arrived: scope.arrived,
        lone: scope.lone,
        yields: scope.yields,
        own_waker: scope.own_waker,
    };
    let previous = CURRENT.with(|current| current.replace(&raw));
    struct Restore(*const Raw);
    impl Drop for Restore {
        #[inline]
        fn drop(&mut self) {
            CURRENT.with(|current| current.set(self.0));
        }
    }
    let _restore = Restore(previous);
    poll()
}

/// The process whose body is being polled on this thread, if any.
pub(crate) fn current_owner() -> Option<Owner> {
    let raw = CURRENT.with(Cell::get);
    // SAFETY: a non-null `raw` was published by `enter`, whose frame is live; only its `owner`,
    // a `Copy` field, is read.
    (!raw.is_null()).then(|| unsafe { (*raw).owner })
}

/// A future of `owner`, polled with `waker`, waits for mail: [`Scope::wait_for_mail`]'s
/// waker half, for a receive whose scope work ran in a named function without the waker (a
/// closure capturing it was left out of line, and returned the message through memory: the
/// store-forwarding stall `futures.rs` avoids): counts it pending (`mark`) too.
#[inline]
pub(super) fn note_mail_waiter(owner: Owner, waker: &Waker, mark: &mut PendingMark) {
    let wake = with(owner, |scope| {
        scope.is_some_and(|mut scope| scope.wait_for_mail_or_yield(waker, mark))
    });
    if wake {
        // Outside the scope: a waker is user code, which may re-enter it.
        waker.wake_by_ref();
    }
}

/// Call (or ask) `tag` of `owner`, polled with `waker`, waits: [`Scope::wait_for_call`] from
/// outside the scope (as [`note_mail_waiter`]).
#[inline]
pub(super) fn note_call_waiter(owner: Owner, tag: Tag, waker: &Waker) {
    let replaced = with(owner, |scope| scope?.wait_for_call(tag, waker));
    // Outside the scope: a waker's destructor is user code, which may re-enter it.
    drop(replaced);
}

/// Gives `f` the current scope if it is `owner`'s, or `None`: outside the adapter's poll, or
/// inside another process's. `f` must not drop user values (a destructor could re-enter the
/// scope) nor poll other futures.
#[inline]
pub(super) fn with<R>(owner: Owner, f: impl FnOnce(Option<Scope<'_>>) -> R) -> R {
    let raw = CURRENT.with(Cell::get);
    // SAFETY: a non-null `raw` was published by `enter`, whose frame is live (see below); only
    // its `owner`, a `Copy` field, is read here.
    if raw.is_null() || unsafe { (*raw).owner } != owner {
        return f(None);
    }
    // SAFETY: `raw` was published by `enter`, whose frame is still live (it restores the previous
    // pointer before returning, even by unwinding), so it and the four pointers it holds — to
    // the adapter's state, the completion and the message the step holds, and its yield buffer,
    // all exclusively borrowed by `enter` for that frame, and distinct objects — are valid. Only
    // this thread reads `CURRENT`, and `with` is never re-entered while `f` runs (the process
    // futures' closures neither poll other futures nor drop user values, whose destructors
    // could), so the four `&mut` are unique for `f`'s duration. `reply_to`, null or a shared
    // borrow `enter` holds for the same frame (the adapter's wake target, never mutated during a
    // poll), is valid as a shared reference; so is `own_waker`, a shared borrow `enter` holds
    // for the same frame (the lazy waker `poll_with` lends for the poll).
    let scope = unsafe {
        let raw = &*raw;
        Scope {
            state: &mut *raw.state,
            arrived: &mut *raw.arrived,
            lone: &mut *raw.lone,
            yields: &mut *raw.yields,
            reply_to: raw.reply_to.as_ref(),
            own_waker: &*raw.own_waker,
        }
    };
    f(Some(scope))
}
