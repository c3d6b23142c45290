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

use super::state::{Arrived, CxState};
use crate::process::context::{Owner, ProcessWake};
use crate::process::output::Yields;
use crate::process::Event;
use std::cell::Cell;
use std::ptr;

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
}

struct Raw {
    owner: Owner,
    reply_to: *const ProcessWake,
    state: *mut CxState,
    arrived: *mut Arrived,
    lone: *mut Option<Event>,
    yields: *mut Yields,
}

// Plain std `thread_local!`: a per-thread pointer, not a synchronisation primitive (the async-fn
// adapter runs outside every loom model).
std::thread_local! {
    static CURRENT: Cell<*const Raw> = const { Cell::new(ptr::null()) };
}

/// Runs `poll` with the scope of process `owner` published to the futures it polls, restoring
/// the previous scope afterwards (also when `poll` panics).
#[inline]
pub(super) fn enter<R>(
    owner: Owner,
    reply_to: Option<&ProcessWake>,
    state: &mut CxState,
    arrived: &mut Arrived,
    lone: &mut Option<Event>,
    yields: &mut Yields,
    poll: impl FnOnce() -> R,
) -> R {
    let raw = Raw {
        owner,
        reply_to: reply_to.map_or(ptr::null(), |target| target),
        state,
        arrived,
        lone,
        yields,
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
    // poll), is valid as a shared reference.
    let scope = unsafe {
        let raw = &*raw;
        Scope {
            state: &mut *raw.state,
            arrived: &mut *raw.arrived,
            lone: &mut *raw.lone,
            yields: &mut *raw.yields,
            reply_to: raw.reply_to.as_ref(),
        }
    };
    f(Some(scope))
}
