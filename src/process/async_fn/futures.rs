//! The futures an async-fn process awaits: calls (yields), receives, cancellation, yield_now.
//!
//! Each remembers the process that made it ([`Owner`]) and acts only inside that process's
//! poll (`scope.rs`): polled anywhere else — another task, another process's body — it fails
//! with a typed error (`CommandError::OutsideProcess`, `RecvError::OutsideProcess`), or, for
//! `yield_now`, just yields, and never touches another process's state.

use super::pending_mark::PendingMark;
use super::scope;
use super::unhosted;
use crate::process::context::{Owner, ProcessWake};
use crate::process::output::push_yield;
use crate::process::{
    drop_contained, from_message_counted, take_lone, CancelReason, Command, CommandError,
};
use crate::process::{Message, Payload};
use crate::process::{Tag, Topic, TypeMismatch, Yield};
use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A command yielded by an async-fn process: resolves to its handler's reply.
/// Made by [`ProcessCx::call`](crate::ProcessCx::call).
///
/// The first poll hands the command to the step's yields (the process is `Blocked` while the
/// call is outstanding); its completion resumes the body.
///
/// # Dropped before it completes
/// Like any future — the losing branch of a `select!`, a timeout — a call dropped in its body
/// before its reply came is cancelled: an async handler's task is aborted at the end of the
/// step that dropped it (its future is dropped then, or when its current poll returns), as
/// dropping a [`Run`](crate::body::Run) aborts its task; so is the handler of
/// [`call_within`](crate::ProcessCx::call_within). A blocking handler cannot be stopped (it
/// runs on a thread of its own): it runs to its end. Either way no later future sees the
/// forgotten call's completion: it is dropped when it arrives, and the process keeps nothing
/// for it. (A call moved out of its body and dropped elsewhere is forgotten only when the
/// process ends.)
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// struct Price(&'static str);
/// procsched::command!(Price => u64);
/// struct Audit;
/// procsched::command!(Audit => ());
///
/// let sched = Scheduler::builder()
///     .workers(1)
///     .inline_handler(|Price(_): Price| Ok::<_, BoxError>(30))
///     .build()?;
/// let order = sched.spawn_fn(|cx: ProcessCx| async move {
///     let price = cx.call(Price("sku-1")).await?;
///     // No handler is registered for `Audit`: the call fails at once rather than hanging.
///     let audited = cx.call(Audit).await;
///     Ok::<_, BoxError>((price, audited.unwrap_err().is_no_handler()))
/// })?;
/// assert_eq!(sched.block_on(order)?, (30, true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a call does nothing unless awaited"]
#[derive(Debug)]
pub struct Call<C: Command> {
    state: CallState<C>,
    timeout: Option<Duration>,
    owner: Owner,
}

#[derive(Debug)]
enum CallState<C> {
    Unsent(C),
    Sent(Tag),
    Done,
}

impl<C: Command> Call<C> {
    pub(crate) fn new(command: C, timeout: Option<Duration>, owner: Owner) -> Call<C> {
        Call {
            state: CallState::Unsent(command),
            timeout,
            owner,
        }
    }
}

// The command is never pinned: it is moved into the yield on the first poll.
impl<C: Command> Unpin for Call<C> {}

impl<C: Command> Future for Call<C> {
    type Output = Result<C::Output, CommandError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let tag = match std::mem::replace(&mut this.state, CallState::Done) {
            CallState::Unsent(command) => {
                let timeout = this.timeout;
                let mut command = Some(command);
                let sent = scope::with(this.owner, |scope| {
                    let scope = scope?;
                    let command = command.take()?;
                    let tag = scope.state.start_call();
                    push_yield(
                        scope.yields,
                        Yield {
                            tag,
                            command: Payload::new(command),
                            timeout,
                        },
                    );
                    this.state = CallState::Sent(tag);
                    Some((tag, scope.reply_to.is_none()))
                });
                return match sent {
                    Some((tag, unhosted)) => {
                        if unhosted {
                            // A test harness's body: its completion is scripted, and checked
                            // against this (`testing/asks.rs`).
                            unhosted::record_call(
                                this.owner.host,
                                unhosted::UnhostedCall {
                                    tag,
                                    output_type: std::any::TypeId::of::<C::Output>(),
                                    output_type_name: std::any::type_name::<C::Output>(),
                                },
                            );
                        }
                        scope::note_call_waiter(this.owner, tag, cx.waker());
                        Poll::Pending
                    }
                    None => {
                        // Not sent: the command (user code) is dropped contained, outside any
                        // scope.
                        drop_contained(command);
                        Poll::Ready(Err(CommandError::OutsideProcess))
                    }
                };
            }
            CallState::Sent(tag) => tag,
            CallState::Done => panic!("a procsched call polled after it completed"),
        };
        let completion = scope::with(this.owner, |scope| {
            scope.map(|scope| scope.state.take_completion(scope.arrived, tag))
        });
        match completion {
            // The reply is unpacked (or, mistyped, dropped) outside the scope.
            Some(Some(result)) => Poll::Ready(
                result.and_then(|reply| reply.take::<C::Output>().map_err(CommandError::failed)),
            ),
            Some(None) => {
                this.state = CallState::Sent(tag);
                scope::note_call_waiter(this.owner, tag, cx.waker());
                Poll::Pending
            }
            None => Poll::Ready(Err(CommandError::OutsideProcess)),
        }
    }
}

impl<C: Command> Drop for Call<C> {
    #[inline]
    fn drop(&mut self) {
        if let CallState::Sent(tag) = self.state {
            scope::with(self.owner, |scope| {
                if let Some(scope) = scope {
                    // Still running: its handler task is aborted after the step, as a dropped
                    // `Run` aborts its task (`process/future.rs`, "Dropped calls").
                    if scope.state.awaits_completion(scope.arrived, tag) {
                        scope.state.note_dropped_call(tag);
                    }
                    scope.state.forget_call(tag);
                }
            });
        }
    }
}

/// Why [`ProcessCx::recv`](crate::ProcessCx::recv) returned no message.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::error::RecvError;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let reader = sched.spawn_fn(|cx: ProcessCx<u32>| async move {
///     let mut skipped = 0;
///     loop {
///         match cx.recv().await {
///             Ok(n) => return Ok::<_, BoxError>((n, skipped)),
///             // An untyped sender sent something else: it is dropped; keep serving.
///             Err(RecvError::TypeMismatch(_)) => skipped += 1,
///             // Cancelled (shutdown) and the rest end the body; `?` would do the same.
///             Err(other) => return Err(other.into()),
///         }
///     }
/// })?;
/// sched.send(reader.pid(), Message::new("n", Payload::new("seven")))?;
/// reader.addr().send(7)?;
/// assert_eq!(sched.block_on(reader)?, (7, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The process was asked to finish (shutdown). Reported once, by the first receive to
    /// meet it — none at all if [`cancelled`](crate::ProcessCx::cancelled) told the body
    /// first; receiving again returns what is queued, then waits for messages as usual
    /// (ignoring the request is allowed, and ends as a forced stop).
    #[error("the process was cancelled ({0:?})")]
    Cancelled(CancelReason),
    /// Messages on this topic were dropped by its budget (see
    /// [`Message::with_budget`](crate::Message::with_budget)).
    #[error("messages on topic `{0}` were dropped by its budget")]
    Overflow(Topic),
    /// The message's payload was not of the requested type (the message is dropped).
    #[error(transparent)]
    TypeMismatch(#[from] TypeMismatch),
    /// The receive (or [`Cancelled`]) was polled outside its own process: in another task, or in
    /// another process's body. Nothing was received; the other process's state is untouched.
    #[error("a procsched receive was polled outside its own process")]
    OutsideProcess,
}

impl RecvError {
    /// `true` for [`RecvError::Cancelled`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::error::{CancelReason, RecvError};
    /// assert!(RecvError::Cancelled(CancelReason::Shutdown).is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, RecvError::Cancelled(_))
    }
}

/// What a receive found in the scope.
enum Received<T> {
    /// The value, read where the step's lone message lay.
    Value(T),
    /// A whole message, to convert (outside the scope: a mismatched payload is dropped).
    Message(Message),
}

/// The next message for `owner` as a `T`, or why there is none: cancellation first, then the
/// inbox in arrival order (an overflow marker after the messages that arrived before it), then
/// the step's lone message (`state.rs`).
///
/// Named functions marked `#[inline(always)]` rather than closures, so that the whole receive
/// inlines into the body's poll: a closure left out of line returned its 40-byte result through
/// memory, written in pieces and read back whole — a store-forwarding stall that was 8 % of a
/// ring hop (`docs/bench-messages.md`).
#[inline(always)]
fn poll_received<T: 'static>(
    owner: Owner,
    waker: &Waker,
    mark: &mut PendingMark,
) -> Poll<Result<T, RecvError>> {
    match scope::with(owner, received_in::<T>) {
        Poll::Pending => {
            scope::note_mail_waiter(owner, waker, mark);
            Poll::Pending
        }
        Poll::Ready(found) => {
            mark.settle();
            Poll::Ready(converted(owner, found))
        }
    }
}

/// [`poll_received`] inside the scope (`None`: not `owner`'s).
#[inline(always)]
fn received_in<T: 'static>(
    scope: Option<scope::Scope<'_>>,
) -> Poll<Result<Received<T>, RecvError>> {
    let Some(scope) = scope else {
        return Poll::Ready(Err(RecvError::OutsideProcess));
    };
    let state = scope.state;
    if let (Some(reason), false) = (state.cancelled, state.cancel_reported) {
        state.cancel_reported = true;
        state.cancel_told = true;
        return Poll::Ready(Err(RecvError::Cancelled(reason)));
    }
    if let Some(mail) = state.mail.as_mut() {
        if let Some(topic) = mail.take_overflow_if_next() {
            return Poll::Ready(Err(RecvError::Overflow(topic)));
        }
        if mail.must_yield() {
            // Counted pending, and its waker woken if not the body's: `poll_received`.
            state.yield_receive();
            return Poll::Pending;
        }
        if let Some(message) = mail.pop_message() {
            if state.publish_unread && state.unread() == 0 {
                publish_unread(scope.reply_to, 0);
            }
            return Poll::Ready(Ok(Received::Message(message)));
        }
    }
    let taken = match take_lone::<T>(scope.lone) {
        Some(Ok(value)) => Received::Value(value),
        Some(Err(message)) => Received::Message(message),
        None => {
            // Counted pending, and the waker's half: `poll_received`.
            return Poll::Pending;
        }
    };
    if state.publish_unread && state.unread() == 0 {
        publish_unread(scope.reply_to, 0);
    }
    Poll::Ready(Ok(taken))
}

/// A bounded mailbox's receive took the body's last message: it now holds `unread`
/// (`CxState::publish_unread`).
#[cold]
#[inline(never)]
pub(super) fn publish_unread(reply_to: Option<&ProcessWake>, unread: usize) {
    if let Some(cell) = reply_to {
        cell.set_unread(unread);
    }
}

/// What [`received_in`] found, as the receive's output (outside the scope: a mismatched
/// payload is dropped here).
#[inline(always)]
fn converted<T: 'static>(
    owner: Owner,
    found: Result<Received<T>, RecvError>,
) -> Result<T, RecvError> {
    match found? {
        Received::Value(value) => Ok(value),
        Received::Message(message) => {
            from_message_counted::<T>(message).map_err(|(mismatch, panics)| {
                count_destructor_panics(owner, panics);
                mismatch.into()
            })
        }
    }
}

/// `panics` destructor panics were contained while dropping values of `owner`'s body (a
/// payload a receive could not convert, a value a crate-written body disposes of): counted on
/// its process, if its body is being polled on this thread.
#[cold]
pub(crate) fn count_destructor_panics(owner: Owner, panics: u64) {
    if panics > 0 {
        scope::with(owner, |scope| {
            if let Some(cell) = scope.and_then(|scope| scope.reply_to) {
                cell.destructors_panicked(panics);
            }
        });
    }
}

/// The next message, as a `T` (the process's message type). Made by
/// [`ProcessCx::recv`](crate::ProcessCx::recv).
///
/// Cancel-safe: a `Recv` holds no message until the poll that returns it, so one dropped
/// unfinished — the losing branch of a `tokio::select!`, a timeout — loses nothing; the next
/// receive gets what arrived meanwhile. (The same holds for every receive of a body:
/// [`RecvMessage`], `recv_exit`, `recv_down`, `recv_any`.)
///
/// Cooperative: when the executor's monitor asks the worker to yield (the body's poll has run
/// for a tick or more), a receive with a message waiting may return `Pending` once instead,
/// and wakes its waker, as [`ProcessCx::yield_now`](crate::ProcessCx::yield_now) does: the body
/// runs on after the other ready work, and that receive then returns the message.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use std::time::Duration;
///
/// async fn squarer(cx: ProcessCx<(u64, Reply<u64>)>) -> Result<(), BoxError> {
///     loop {
///         // At shutdown the receive fails with `Cancelled`: `?` ends the body as cancelled.
///         let (n, reply) = cx.recv().await?;
///         let _ = reply.send(n * n);
///     }
/// }
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let squarer = sched.spawn_fn(squarer)?;
/// assert_eq!(sched.block_on(squarer.addr().ask(|reply| (12, reply)))?, 144);
/// assert_eq!(sched.shutdown(Duration::from_secs(1)).graceful, 1);
/// assert!(sched.block_on(squarer).unwrap_err().is_cancelled());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a receive does nothing unless awaited"]
#[derive(Debug)]
pub struct Recv<T> {
    mark: PendingMark,
    _type: PhantomData<fn() -> T>,
}

impl<T> Recv<T> {
    pub(crate) fn new(owner: Owner) -> Recv<T> {
        Recv {
            mark: PendingMark::new(owner),
            _type: PhantomData,
        }
    }
}

impl<T: 'static> Future for Recv<T> {
    type Output = Result<T, RecvError>;

    // Inlined into the body's poll (`poll_received`).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        poll_received::<T>(this.mark.owner(), cx.waker(), &mut this.mark)
    }
}

/// The next message, whole (topic, sender, payload). Made by
/// [`ProcessCx::recv_message`](crate::ProcessCx::recv_message). Cancel-safe, as [`Recv`].
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let counter = sched.spawn_fn(|cx: ProcessCx| async move {
///     let mut total = 0u64;
///     loop {
///         let message = cx.recv_message().await?;
///         // Untyped: the topic says what the payload holds.
///         match &*message.topic {
///             "add" => total += message.payload.take::<u64>()?,
///             "stop" => return Ok::<_, BoxError>(total),
///             other => return Err(format!("unknown topic `{other}`").into()),
///         }
///     }
/// })?;
/// sched.send(counter.pid(), Message::new("add", Payload::new(40u64)))?;
/// sched.send(counter.pid(), Message::new("add", Payload::new(2u64)))?;
/// sched.send(counter.pid(), Message::new("stop", Payload::empty()))?;
/// assert_eq!(sched.block_on(counter)?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a receive does nothing unless awaited"]
#[derive(Debug)]
pub struct RecvMessage {
    mark: PendingMark,
}

impl RecvMessage {
    pub(crate) fn new(owner: Owner) -> RecvMessage {
        RecvMessage {
            mark: PendingMark::new(owner),
        }
    }
}

impl Future for RecvMessage {
    type Output = Result<Message, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        poll_received::<Message>(this.mark.owner(), cx.waker(), &mut this.mark)
    }
}

/// Resolves when the process is asked to finish, with the reason as an error:
/// `Err(RecvError::Cancelled(reason))` — so that `cx.cancelled().await?` ends the body as
/// cancelled — or `Err(RecvError::OutsideProcess)` if polled outside its own process. Made by
/// [`ProcessCx::cancelled`](crate::ProcessCx::cancelled).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use std::time::Duration;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
/// let consumer = sched.spawn_fn(move |cx: ProcessCx| async move {
///     let mut total = 0;
///     loop {
///         // Fed by a tokio channel, not its mailbox: `cancelled` is how it hears of shutdown.
///         tokio::select! {
///             biased;                                  // what was sent first, then the stop
///             Some(n) = rx.recv() => total += n,
///             Err(why) = cx.cancelled() => {
///                 assert!(why.is_cancelled());
///                 return Ok::<_, BoxError>(total);
///             }
///         }
///     }
/// })?;
/// tx.send(40)?;
/// tx.send(2)?;
/// sched.shutdown(Duration::from_secs(1));
/// assert_eq!(sched.block_on(consumer)?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "does nothing unless awaited"]
#[derive(Debug)]
pub struct Cancelled {
    mark: PendingMark,
}

impl Cancelled {
    pub(crate) fn new(owner: Owner) -> Cancelled {
        Cancelled {
            mark: PendingMark::new(owner),
        }
    }
}

impl Future for Cancelled {
    type Output = Result<Infallible, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        scope::with(this.mark.owner(), |scope| match scope {
            Some(mut scope) => match scope.state.cancelled {
                Some(reason) => {
                    // The body has been told: what it asks next is cleanup, and its receives
                    // return what is queued instead of telling it again (the drain after a
                    // cancel, `SchedulerHandle::cancel`).
                    scope.state.cancel_told = true;
                    scope.state.cancel_reported = true;
                    Poll::Ready(Err(RecvError::Cancelled(reason)))
                }
                None => {
                    scope.wait_for_mail(cx.waker(), &mut this.mark);
                    Poll::Pending
                }
            },
            None => Poll::Ready(Err(RecvError::OutsideProcess)),
        })
    }
}

/// Lets other ready work run first. Made by [`ProcessCx::yield_now`](crate::ProcessCx::yield_now).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::Status;
/// use procsched::testing::Harness;
///
/// let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
///     let mut sum = 0u64;
///     for chunk in 0..3u64 {
///         sum += (chunk * 1_000..(chunk + 1) * 1_000).sum::<u64>();
///         cx.yield_now().await;
///     }
///     Ok::<_, BoxError>(sum)
/// });
/// harness.init("run", Payload::empty())?;
/// // Each chunk is a step of its own: between them a worker runs other processes.
/// for _ in 0..3 {
///     assert!(matches!(harness.step()?.status, Status::Continue));
/// }
/// assert!(matches!(harness.step()?.status, Status::Done(sum) if sum == (0..3_000).sum::<u64>()));
/// # Ok::<(), BoxError>(())
/// ```
#[must_use = "does nothing unless awaited"]
#[derive(Debug)]
pub struct YieldNow {
    owner: Owner,
    yielded: bool,
}

impl YieldNow {
    pub(crate) fn new(owner: Owner) -> YieldNow {
        YieldNow {
            owner,
            yielded: false,
        }
    }
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        let wake = scope::with(self.owner, |scope| match scope {
            Some(scope) => {
                scope.state.wants.yield_now = true;
                // Polled with a waker of its own (`state.rs`): only a wake polls it again.
                !scope.is_own_waker(cx.waker())
            }
            // Outside its process: an ordinary yield to whatever polls it.
            None => true,
        });
        if wake {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}
