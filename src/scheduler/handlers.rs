//! Handler registration on a [`SchedulerBuilder`]: a handler per command type, inline, async or
//! blocking, each a typed closure erased into a [`Handler`] (`dispatch/handler.rs`).

use super::builder::SchedulerBuilder;
use crate::dispatch::Handler;
use crate::process::{BoxError, Command, CommandError, Payload};
use std::any::TypeId;
use std::future::Future;

impl SchedulerBuilder {
    /// Registers a synchronous handler for commands of type `C`, run on the worker during
    /// dispatch: it completes within the same poll, without allocating. Keep it short and
    /// non-blocking; use [`blocking_handler`](Self::blocking_handler) for blocking work.
    ///
    /// The handler replies with `C::Output`, or fails with any error that converts into a
    /// [`BoxError`] (the process sees [`CommandError::Failed`] with it as the source; a
    /// [`CommandError`] is passed through as is).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{BoxError, Scheduler};
    ///
    /// struct Double(u64);
    /// procsched::command!(Double => u64);
    ///
    /// let sched = Scheduler::builder()
    ///     .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
    ///     .build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn inline_handler<C, F, E>(&mut self, handler: F) -> &mut Self
    where
        C: Command,
        F: Fn(C) -> Result<C::Output, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.add::<C>(Handler::inline(move |command: C| reply(handler(command))))
    }

    /// Registers an async handler for commands of type `C`: each command's future runs inside
    /// the handler runtime's context (see [`tokio_handle`](Self::tokio_handle)), so it may use
    /// any tokio API — timers, I/O, `tokio::spawn`. It is polled first on the worker that
    /// dispatches the yield (a future ready at once completes within that poll); one that has
    /// to wait is polled on from then on as a task of the scheduler's own workers, woken by
    /// tokio's drivers, and completes as [`CommandError::Cancelled`](crate::error::CommandError) if
    /// the runtime shuts down first. Like a step, it should not block the thread: use a
    /// [`blocking_handler`](Self::blocking_handler) for blocking calls.
    /// Replies and errors as for [`inline_handler`](Self::inline_handler): `?` works on any
    /// error that converts into a [`BoxError`], e.g. `std::io::Error`.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::Scheduler;
    ///
    /// struct ReadFile(std::path::PathBuf);
    /// procsched::command!(ReadFile => Vec<u8>);
    ///
    /// async fn read_file(ReadFile(path): ReadFile) -> std::io::Result<Vec<u8>> {
    ///     tokio::fs::read(path).await
    /// }
    ///
    /// let sched = Scheduler::builder().async_handler(read_file).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn async_handler<C, F, Fut, E>(&mut self, handler: F) -> &mut Self
    where
        C: Command,
        F: Fn(C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<C::Output, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.add::<C>(Handler::asynchronous(move |command: C| {
            let future = handler(command);
            async move { reply(future.await) }
        }))
    }

    /// Registers a blocking handler for commands of type `C`: each command runs on the handler
    /// runtime's blocking thread pool. Replies and errors as for
    /// [`inline_handler`](Self::inline_handler).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::Scheduler;
    ///
    /// struct ReadFile(std::path::PathBuf);
    /// procsched::command!(ReadFile => Vec<u8>);
    ///
    /// let sched = Scheduler::builder()
    ///     .blocking_handler(|ReadFile(path): ReadFile| std::fs::read(path))
    ///     .build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn blocking_handler<C, F, E>(&mut self, handler: F) -> &mut Self
    where
        C: Command,
        F: Fn(C) -> Result<C::Output, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.add::<C>(Handler::blocking(move |command: C| reply(handler(command))))
    }

    fn add<C: 'static>(&mut self, handler: Handler) -> &mut Self {
        if !self.handlers.insert(TypeId::of::<C>(), handler) && self.duplicate.is_none() {
            self.duplicate = Some(std::any::type_name::<C>());
        }
        self
    }
}

/// A typed handler's result, as the type-erased completion a process receives. Inlined into
/// the handler closure: the result moves once, not through a call's return slot.
#[inline(always)]
fn reply<T: Send + 'static, E: Into<BoxError>>(
    result: Result<T, E>,
) -> Result<Payload, CommandError> {
    match result {
        Ok(output) => Ok(Payload::wrap(output)),
        Err(error) => Err(match error.into().downcast::<CommandError>() {
            Ok(command_error) => *command_error,
            Err(other) => CommandError::Failed(other),
        }),
    }
}
