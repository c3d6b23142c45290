//! Commands, handlers and the tokio bridge.
//!
//! A yield is a command value; the handler registered for its type runs it:
//!
//! | kind | runs | completes |
//! |---|---|---|
//! | inline | on the worker, during dispatch | at once: the completion joins the next step of the same poll (no oneshot, no allocation) |
//! | async | polled first on the worker, during dispatch; if pending, as a task of the scheduler's executor, inside the configured / ambient / owned tokio runtime's context (`bridge.rs`) | at once if ready at the first poll (as inline); else through its [`YieldCompleter`] into the process's mailbox |
//! | blocking | on tokio's blocking pool | likewise |
//!
//! A command with no handler completes at once with [`CommandError::NoHandler`] (and a `warn`
//! event) — except a state machine's ask ([`AskCommand`], `ask.rs`), which needs none; a
//! handler that panics completes its yield with [`CommandError::Panicked`] (and a `warn` event
//! with the PID and the message). Either way the process sees it.
//!
//! # Spans
//! Dispatch runs inside the process's span. An async handler's task is instrumented with a
//! `handler` span (fields `pid`, `command`: the command's type name, `kind`), a child of the
//! process's span; a blocking job enters the same kind of span on its pool thread. So a
//! handler's own `tracing` events carry the PID and the command.
//!
//! # Deadlines
//! A yield with a deadline (`StepOutput::yield_command_within`) runs under one tokio timer that
//! lives as long as the call: an async handler's future is wrapped in `tokio::time::timeout`; a
//! blocking job is awaited under `tokio::time::timeout` by one async task that owns the yield's
//! completer (`blocking_job.rs`). Either way the task's abort handle, aborted when the process ends,
//! drops the timer too. The deadline needs a runtime with timers: on one without, the yield
//! completes at once with [`CommandError::NoTimer`] ([`TimerProbe`]).

mod ask;
mod async_job;
mod blocking_job;
mod bridge;
mod completer;
mod handler;
mod registry;
mod run;
mod sentinel;

pub use ask::AskCommand;
pub(crate) use ask::{AnswerChannel, AnswerTo, AskStarted};
pub(crate) use bridge::{HandlerRuntime, HandlerTask};
pub(crate) use completer::YieldCompleter;
pub(crate) use handler::{Handler, SpawnFn};
pub(crate) use registry::HandlerSet;
pub use run::Run;

use crate::loom::Arc;
use crate::process::mailbox::ProcessCell;
use crate::process::stats::HandlerOutcome;
use crate::process::{
    drop_contained, take_panic_message, CommandError, Event, Events, Pid, YieldSlot,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// Where a yield went, for the metrics.
#[derive(Debug)]
pub(crate) enum Dispatched {
    /// Run by an inline handler, with this outcome.
    Inline(HandlerOutcome),
    /// Handed to an async handler: its task, unless it completed at once.
    Async(Option<HandlerTask>),
    /// Handed to a blocking handler: its task, unless it completed at once.
    Blocking(Option<HandlerTask>),
    /// A state machine's ask (`ask.rs`): its deadline's task, if it has one.
    Ask(Option<HandlerTask>),
    /// No handler for the command's type: completed with `NoHandler`.
    NoHandler,
}

impl Dispatched {
    /// The abort handle of the handler task, for async and blocking handlers.
    pub(crate) fn into_task(self) -> Option<HandlerTask> {
        match self {
            Dispatched::Async(task) | Dispatched::Blocking(task) | Dispatched::Ask(task) => task,
            Dispatched::Inline(_) | Dispatched::NoHandler => None,
        }
    }
}

/// Dispatches one yield (see the module docs). Inlined into the process future's dispatch: an
/// inline handler is the hot path (a lookup and one indirect call); the rest is out of line.
#[inline]
pub(crate) fn dispatch(
    handlers: &HandlerSet,
    runtime: Option<&HandlerRuntime>,
    pid: Pid,
    cell: &Arc<ProcessCell>,
    yielded: YieldSlot<'_>,
    completions: &mut Events,
) -> Dispatched {
    match handlers.get(yielded.command.value_type_id()) {
        // The handler catches its own panics (see `Handler::inline`).
        Some(Handler::Inline(run)) => {
            Dispatched::Inline(run(yielded.command, yielded.tag, pid, completions))
        }
        Some(Handler::Async(spawn)) => dispatch_task(
            &**spawn,
            false,
            handlers,
            runtime,
            pid,
            cell,
            yielded,
            completions,
        ),
        Some(Handler::Blocking(spawn)) => dispatch_task(
            &**spawn,
            true,
            handlers,
            runtime,
            pid,
            cell,
            yielded,
            completions,
        ),
        None => no_handler(handlers, pid, cell, yielded, completions),
    }
}

/// A yield whose command's type has no handler: completed at once with `NoHandler`.
#[cold]
#[inline(never)]
fn no_handler(
    handlers: &HandlerSet,
    pid: Pid,
    cell: &Arc<ProcessCell>,
    yielded: YieldSlot<'_>,
    completions: &mut Events,
) -> Dispatched {
    let timeout = yielded.timeout();
    let YieldSlot { tag, command, .. } = yielded;
    // The one command that needs no handler.
    let command = match ask::dispatch(handlers, pid, cell, tag, command, timeout, completions) {
        Ok(dispatched) => return dispatched,
        Err(command) => command,
    };
    // The name is a call (the payload's vtable holds a function): only on the cold paths.
    let type_name = command.type_name();
    tracing::warn!(%pid, command = type_name, "no handler registered for the command's type");
    cell.stats.destructors_panicked(drop_contained(command));
    let result = Err(CommandError::NoHandler(type_name));
    completions.push(Event::YieldComplete { tag, result });
    Dispatched::NoHandler
}

/// An async or blocking handler's yield: its task (or an immediate completion).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn dispatch_task(
    spawn: &SpawnFn,
    blocking: bool,
    handlers: &HandlerSet,
    runtime: Option<&HandlerRuntime>,
    pid: Pid,
    cell: &Arc<ProcessCell>,
    yielded: YieldSlot<'_>,
    completions: &mut Events,
) -> Dispatched {
    let timeout = yielded.timeout();
    let YieldSlot { tag, command, .. } = yielded;
    let complete_now = |completions: &mut Events, result| {
        completions.push(Event::YieldComplete { tag, result });
    };
    let dispatched = |task| {
        if blocking {
            Dispatched::Blocking(task)
        } else {
            Dispatched::Async(task)
        }
    };
    let Some(runtime) = runtime else {
        // Unreachable by construction: `build` provides a runtime whenever an async or
        // blocking handler is registered. Still, never hang the process.
        cell.stats.destructors_panicked(drop_contained(command));
        complete_now(completions, Err(CommandError::Cancelled));
        return dispatched(None);
    };
    if timeout.is_some() && !handlers.timers().has_timers(runtime.tokio()) {
        tracing::debug!(%pid, command = command.type_name(), "deadline on a runtime without timers");
        cell.stats.destructors_panicked(drop_contained(command));
        complete_now(completions, Err(CommandError::NoTimer));
        return dispatched(None);
    }
    let completer = YieldCompleter::new(cell.clone(), pid, tag, command.type_name());
    // The spawn functions catch the handler's own panics; anything escaping here is a
    // bug of ours, and the completer — dropped in the unwind — has already completed the
    // yield as `Cancelled`, so the process is not left waiting.
    match catch_unwind(AssertUnwindSafe(|| {
        spawn(command, completer, runtime, timeout, completions)
    })) {
        Ok(abort) => dispatched(abort),
        Err(panic) => {
            tracing::error!(%pid, panic = %take_panic_message(panic), "handler dispatch panicked");
            dispatched(None)
        }
    }
}

/// Whether the handler runtime has a time driver, which a yield's deadline needs: probed once,
/// at the first deadline dispatch, and cached.
///
/// tokio offers no query for it; the probe builds a zero-length `Sleep` inside the runtime's
/// context, which panics without a time driver (tokio's own message, printed once by the panic
/// hook). Without the probe the same panic would happen later, inside the handler task, and the
/// process would see `Cancelled` — or, for a blocking handler, its deadline silently ignored.
/// (Built with `panic = "abort"`, the probe's panic aborts, as that later one would have.)
///
/// The answer is cached with the runtime's id: a scheduler dispatches to one runtime all its
/// life, so the cache is hit after the first probe; another runtime is probed anew, uncached.
#[derive(Debug, Default, Clone)]
pub(crate) struct TimerProbe {
    probed: OnceLock<(tokio::runtime::Id, bool)>,
}

impl TimerProbe {
    /// `true` if `runtime` has a time driver.
    pub(crate) fn has_timers(&self, runtime: &tokio::runtime::Handle) -> bool {
        let id = runtime.id();
        let (probed_id, has_timers) = *self.probed.get_or_init(|| (id, probe_timers(runtime)));
        if probed_id == id {
            has_timers
        } else {
            probe_timers(runtime)
        }
    }
}

fn probe_timers(runtime: &tokio::runtime::Handle) -> bool {
    let _context = runtime.enter();
    let has_timers = catch_unwind(|| drop(tokio::time::sleep(std::time::Duration::ZERO))).is_ok();
    if !has_timers {
        tracing::warn!(
            "the handler runtime has no timers: yields with a deadline complete with \
             `CommandError::NoTimer` (build the runtime with `enable_time()` / `enable_all()`)"
        );
    }
    has_timers
}
