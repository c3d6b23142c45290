//! A blocking handler's job on tokio's blocking pool: its command until it runs ([`Unrun`]),
//! and its deadline ([`spawn_blocking_within`]).

use super::handler::CommandResult;
use super::YieldCompleter;
use crate::loom::Arc;
use crate::process::mailbox::ProcessCell;
use crate::process::{drop_contained, CommandError, Pid};
use std::time::Duration;
use tracing::Instrument;

/// A blocking job's command until the job runs. A job aborted before it starts (its process
/// ended) is dropped by tokio; the command's destructor is user code, so it is dropped here,
/// its panic contained and counted for its process (`process/contain.rs`).
pub(super) struct Unrun<C> {
    command: Option<C>,
    cell: crate::loom::Arc<crate::process::mailbox::ProcessCell>,
}

impl<C> Unrun<C> {
    pub(super) fn new(
        command: C,
        cell: crate::loom::Arc<crate::process::mailbox::ProcessCell>,
    ) -> Self {
        Unrun {
            command: Some(command),
            cell,
        }
    }

    /// The command, for the job that runs it.
    pub(super) fn take(mut self) -> C {
        self.command.take().expect("taken once, by the job")
    }
}

impl<C> Drop for Unrun<C> {
    fn drop(&mut self) {
        if let Some(command) = self.command.take() {
            self.cell
                .stats
                .destructors_panicked(drop_contained(command));
        }
    }
}

/// Runs a blocking job under a deadline.
///
/// One async task owns the yield's completer and awaits the job's result under
/// `tokio::time::timeout`, so the timer lives exactly as long as the call: it is dropped when the
/// result arrives, when the deadline passes, or when the task is aborted (the process ended,
/// through the returned handle). An aborted task aborts the job too if it has not started; past
/// its deadline the job runs on, as `yield_command_within` documents.
/// The job hands its result over a oneshot rather than through its `JoinHandle`, so a result that
/// comes too late is dropped by our code, its destructor's panic contained
/// ([`LateOwner::drop_late_result`]) and counted for its process.
///
/// Exactly one completion: the task completes with the result, `TimedOut`, or `Cancelled` (the
/// job was dropped unrun, e.g. by a runtime shutdown); a task dropped before completing drops the
/// completer, which completes as `Cancelled`.
pub(super) fn spawn_blocking_within(
    runtime: &tokio::runtime::Handle,
    job: impl FnOnce() -> CommandResult + Send + 'static,
    completer: YieldCompleter,
    timeout: Duration,
    span: tracing::Span,
) -> tokio::task::AbortHandle {
    let (result_tx, result_rx) = tokio::sync::oneshot::channel();
    let owner = LateOwner {
        pid: completer.pid(),
        cell: completer.cell().clone(),
    };
    let job_owner = owner.clone();
    let job = runtime.spawn_blocking(move || {
        if let Err(late) = result_tx.send(job()) {
            job_owner.drop_late_result(late);
        }
    });
    let mut pending = PendingJob {
        job: Some(job.abort_handle()),
        result: result_rx,
        owner,
    };
    runtime
        .spawn(
            async move {
                let result = match tokio::time::timeout(timeout, &mut pending.result).await {
                    Ok(Ok(result)) => result,
                    Ok(Err(_job_dropped)) => Err(CommandError::Cancelled),
                    Err(_elapsed) => {
                        // The job runs on (documented): only its result is dropped, when it comes.
                        pending.detach();
                        Err(CommandError::TimedOut)
                    }
                };
                completer.complete(result);
                // `pending` drops here, after the completion, and disposes of a result that raced
                // in after the deadline.
            }
            .instrument(span),
        )
        .abort_handle()
}

/// The deadline task's side of a blocking job (see [`spawn_blocking_within`]). Dropped, it
/// aborts the job unless the deadline passed — which stops it only if it has not started; a
/// running blocking call cannot be interrupted — and makes sure its result, now or later, is
/// dropped by [`LateOwner::drop_late_result`].
struct PendingJob {
    /// `None` once the deadline passed: the job is left to run on.
    job: Option<tokio::task::AbortHandle>,
    result: tokio::sync::oneshot::Receiver<CommandResult>,
    owner: LateOwner,
}

impl PendingJob {
    /// Leaves the job to run on: dropping `self` will no longer abort it.
    fn detach(&mut self) {
        self.job = None;
    }
}

impl Drop for PendingJob {
    fn drop(&mut self) {
        if let Some(job) = &self.job {
            job.abort();
        }
        // After `close`, the job's `send` fails and it drops its result itself; a result sent
        // before is still in the channel and taken here. Either way not by the channel's own
        // destructor, which would not contain a panic.
        self.result.close();
        if let Ok(late) = self.result.try_recv() {
            self.owner.drop_late_result(late);
        }
    }
}

/// The process a blocking job's result belongs to, for the count and the `warn` of a late
/// result's destructor panic: on the blocking thread, no span names it.
#[derive(Clone)]
struct LateOwner {
    pid: Pid,
    cell: Arc<ProcessCell>,
}

impl LateOwner {
    /// Drops the result of a blocking job nobody waits for any more (its yield timed out or its
    /// process ended). Payload destructors are user code: a panic is contained, traced and
    /// counted for the process, as every destructor's (`process/contain.rs`).
    fn drop_late_result(&self, late: CommandResult) {
        tracing::debug!(pid = %self.pid, "dropping the late result of a blocking command");
        let panics = drop_contained(late);
        if panics > 0 {
            self.cell.stats.destructors_panicked(panics);
            tracing::warn!(
                pid = %self.pid,
                panics,
                "the destructor of a late blocking result panicked; the panic was contained"
            );
        }
    }
}
