//! Commands, handlers and the tokio bridge.
//!
//! A yield is a command value; the handler registered for its type runs it:
//!
//! | kind | runs | completes |
//! |---|---|---|
//! | inline | on the worker, during dispatch | at once: the completion joins the next step of the same poll (no oneshot, no allocation) |
//! | async | as a tokio task, on the configured / ambient / owned tokio runtime | through its [`YieldCompleter`] into the process's mailbox |
//! | blocking | on tokio's blocking pool | likewise |
//!
//! A command with no handler completes at once with [`CommandError::NoHandler`]; a handler that
//! panics completes its yield with [`CommandError::Panicked`]. Either way the process sees it.
//!
//! # Deadlines
//! A yield with a deadline (`StepOutput::yield_command_within`) runs under one tokio timer that
//! lives as long as the call: an async handler's future is wrapped in `tokio::time::timeout`; a
//! blocking job is awaited under `tokio::time::timeout` by one async task that owns the yield's
//! completer (`registry.rs`). Either way the task's abort handle, aborted when the process ends,
//! drops the timer too.

mod completer;
mod registry;

pub(crate) use completer::YieldCompleter;
pub(crate) use registry::{Handler, HandlerSet};

use crate::loom::Arc;
use crate::process::mailbox::ProcessCell;
use crate::process::{panic_message, CommandError, Event, Events, Pid, Yield};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Dispatches one yield (see the module docs). Returns the abort handle of the handler task for
/// async and blocking handlers.
pub(crate) fn dispatch(
    handlers: &HandlerSet,
    runtime: Option<&tokio::runtime::Handle>,
    pid: Pid,
    cell: &Arc<ProcessCell>,
    yielded: Yield,
    completions: &mut Events,
) -> Option<tokio::task::AbortHandle> {
    let Yield {
        tag,
        command,
        timeout,
    } = yielded;
    let type_name = command.type_name();
    let complete_now = |completions: &mut Events, result| {
        completions.push(Event::YieldComplete { tag, result });
    };
    let Some(handler) = handlers.get(command.value_type_id()) else {
        tracing::debug!(%pid, command = type_name, "no handler for command");
        drop(command);
        complete_now(completions, Err(CommandError::NoHandler(type_name)));
        return None;
    };
    match handler {
        Handler::Inline(run) => {
            // The handler catches its own panics (see `Handler::inline`).
            run(command, tag, completions);
            None
        }
        Handler::Async(spawn) | Handler::Blocking(spawn) => {
            let Some(runtime) = runtime else {
                // Unreachable by construction: `build` provides a runtime whenever an async or
                // blocking handler is registered. Still, never hang the process.
                complete_now(completions, Err(CommandError::Cancelled));
                return None;
            };
            let completer = YieldCompleter::new(cell.clone(), pid, tag);
            // The spawn functions catch the handler's own panics; anything escaping here is a
            // bug of ours, and the completer — dropped in the unwind — has already completed the
            // yield as `Cancelled`, so the process is not left waiting.
            match catch_unwind(AssertUnwindSafe(|| {
                spawn(command, completer, runtime, timeout)
            })) {
                Ok(abort) => abort,
                Err(panic) => {
                    tracing::error!(%pid, message = %panic_message(&*panic), "handler dispatch panicked");
                    None
                }
            }
        }
    }
}
