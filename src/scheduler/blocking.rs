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

/// What the current thread has been marked as, by the innermost live [`ThreadMark`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mark {
    /// Nothing marked it: ask the runtimes whose context it has.
    None,
    /// It entered a tokio runtime's context without driving it, and may block: the forced
    /// stop's closers (`closers.rs`), which enter the processes' runtime so that a `close` may
    /// use tokio, and may block as the thread that ran the closes before them could.
    MayBlock,
    /// It runs the future of a [`Scheduler::block_on`](crate::Scheduler::block_on): that call
    /// entered the processes' tokio runtime for the future, so a nested blocking call would
    /// otherwise be told it is "in a tokio runtime" by code that never started one.
    InBlockOn,
}

crate::loom::thread_local_const! {
    static MARK: Cell<Mark> = Cell::new(Mark::None);
}

/// Marks the current thread until dropped, then restores the mark it had: marks nest, and
/// the innermost one decides (a `block_on` on a closer thread is a `block_on` first).
pub(crate) struct ThreadMark(Mark);

impl ThreadMark {
    /// The current thread runs a `Scheduler::block_on` future.
    pub(crate) fn in_block_on() -> ThreadMark {
        ThreadMark::set(Mark::InBlockOn)
    }

    /// The current thread may block though it has a runtime context.
    pub(crate) fn may_block() -> ThreadMark {
        ThreadMark::set(Mark::MayBlock)
    }

    fn set(mark: Mark) -> ThreadMark {
        ThreadMark(MARK.with(|current| current.replace(mark)))
    }
}

impl Drop for ThreadMark {
    fn drop(&mut self) {
        MARK.with(|current| current.set(self.0));
    }
}

/// Why the current thread must not block, if it must not.
pub(crate) fn async_context() -> Option<&'static str> {
    match MARK.with(Cell::get) {
        Mark::MayBlock => None,
        Mark::InBlockOn => {
            Some("running the future of a `Scheduler::block_on` (a nested blocking call)")
        }
        Mark::None if executor::Handle::try_current().is_some() => {
            Some("a procsched worker thread (inside a process step or task)")
        }
        Mark::None if tokio::runtime::Handle::try_current().is_ok() => Some("a tokio runtime"),
        Mark::None => None,
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
