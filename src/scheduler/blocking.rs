//! Keeps blocking calls off threads that drive async work.
//!
//! A blocking call ([`Scheduler::block_on`](crate::Scheduler::block_on), the synchronous
//! [`shutdown`](crate::Scheduler::shutdown)) made on a thread that runs async tasks stops those
//! tasks: inside a current-thread tokio runtime (the default of `#[tokio::test]`) the handlers the
//! call waits for never run, and it hangs forever; on a procsched worker it holds a worker the
//! awaited process may need. Like tokio's own `block_on`, we panic at once instead, naming the
//! async alternative.
//!
//! "Inside a tokio runtime" means the thread has a runtime context: a task, a `block_on` body
//! (`#[tokio::main]`, `#[tokio::test]`), or `spawn_blocking` — tokio offers no public way to tell
//! the last one apart, and a blocking call there is better written as an `.await` anyway.

use crate::executor;
use std::cell::Cell;

crate::loom::thread_local_const! {
    /// Set on threads that enter a tokio runtime's context without driving it: the forced
    /// stop's closers (`closers.rs`), which enter the processes' runtime so that a `close` may
    /// use tokio, and may block as the thread that ran the closes before them could.
    static MAY_BLOCK: Cell<bool> = Cell::new(false);
}

crate::loom::thread_local_const! {
    /// Set while the thread runs the future of a
    /// [`Scheduler::block_on`](crate::Scheduler::block_on): that call entered the processes'
    /// tokio runtime for the future, so a nested blocking call would otherwise be told it is
    /// "in a tokio runtime" by code that never started one.
    static IN_BLOCK_ON: Cell<bool> = Cell::new(false);
}

/// Marks the current thread as running a `Scheduler::block_on` future, until dropped.
pub(crate) struct InBlockOn(bool);

impl InBlockOn {
    pub(crate) fn mark() -> InBlockOn {
        InBlockOn(IN_BLOCK_ON.with(|inside| inside.replace(true)))
    }
}

impl Drop for InBlockOn {
    fn drop(&mut self) {
        IN_BLOCK_ON.with(|inside| inside.set(self.0));
    }
}

/// Marks the current thread as one that may block though it has a runtime context, until
/// dropped.
pub(crate) struct MayBlockHere(bool);

impl MayBlockHere {
    pub(crate) fn mark() -> MayBlockHere {
        MayBlockHere(MAY_BLOCK.with(|may| may.replace(true)))
    }
}

impl Drop for MayBlockHere {
    fn drop(&mut self) {
        MAY_BLOCK.with(|may| may.set(self.0));
    }
}

/// Why the current thread must not block, if it must not.
pub(crate) fn async_context() -> Option<&'static str> {
    if MAY_BLOCK.with(Cell::get) {
        None
    } else if IN_BLOCK_ON.with(Cell::get) {
        Some("running the future of a `Scheduler::block_on` (a nested blocking call)")
    } else if executor::Handle::try_current().is_some() {
        Some("a procsched worker thread (inside a process step or task)")
    } else if tokio::runtime::Handle::try_current().is_ok() {
        Some("a tokio runtime")
    } else {
        None
    }
}

/// Panics if the current thread drives async work; `call` names the blocking method and
/// `instead` the async alternative.
#[track_caller]
pub(crate) fn assert_may_block(call: &str, instead: &str) {
    if let Some(context) = async_context() {
        panic!(
            "`{call}` blocks the current thread, which is {context}: blocking here can deadlock \
             (the work it waits for may need this very thread). Use `{instead}` from async code."
        );
    }
}
