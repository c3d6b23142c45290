//! The receiving side of links and monitors in an `async fn` body: [`RecvSignal`] (the next
//! [`Exit`] or [`Down`]), [`RecvDown`] (the next `Down`) and [`RecvAny`] (a message or a
//! signal, whichever comes first).
//!
//! The adapter files `Event::Exit` and `Event::Down` in the body's signal queue (`state.rs`),
//! apart from its messages, so that a body in `recv()` is not handed a signal it did not ask
//! for, and one in `recv_signal()` not a message. A body waiting in any of them is `Idle`.
//! [`RecvAny`] takes messages and signals in the order they arrived, as OTP's mailbox does: a
//! process's last messages come before its exit signal or `Down` (a child that sends its
//! result and then ends is read in that order). Like every receive, each reports the
//! process's cancellation, once.

use super::futures::publish_unread;
use super::pending_mark::PendingMark;
use super::scope::{self, Scope};
use super::state::Received;
use super::RecvError;
use crate::process::context::Owner;
use crate::process::exit::{Down, Exit, MonitorRef, Signal};
use crate::process::{from_message, take_lone};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A message or a signal: what [`RecvAny`] resolves to.
///
/// `#[non_exhaustive]`, as [`Signal`] is: a later version may add a kind of signal (or of
/// incoming), so a `match` on either needs a `_` arm — the place to ignore what a process
/// does not act on.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{Incoming, Signal};
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// // Handles jobs until a 0.
/// let worker = sched.spawn_fn(|cx: ProcessCx<u32>| async move {
///     while cx.recv().await? != 0 {}
///     Ok::<_, BoxError>(())
/// })?;
/// let worker_addr = worker.addr();
/// let dispatcher = sched.spawn_fn(move |cx: ProcessCx<u32>| async move {
///     cx.monitor(worker_addr.pid());
///     let mut forwarded = 0;
///     loop {
///         match cx.recv_any().await? {
///             Incoming::Message(job) => {
///                 worker_addr.send(job)?;
///                 forwarded += 1;
///             }
///             // The worker is gone: nothing left to forward to.
///             Incoming::Signal(Signal::Down(down)) => {
///                 return Ok::<_, BoxError>((forwarded, down.reason));
///             }
///             _ => {}                                  // `Incoming` and `Signal` may grow
///         }
///     }
/// })?;
/// for job in [3, 1, 0] {
///     dispatcher.addr().send(job)?;
/// }
/// let (forwarded, reason) = sched.block_on(dispatcher)?;
/// assert_eq!(forwarded, 3);
/// assert!(reason.is_normal());
/// # sched.block_on(worker)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Incoming<M> {
    /// A message of the process's type.
    Message(M),
    /// An exit signal (the process traps exits) or a monitor's `Down`.
    Signal(Signal),
}

/// The cancellation, if it is still to be reported (every receive reports it once).
fn cancellation(scope: &mut Scope<'_>) -> Option<RecvError> {
    let state = &mut *scope.state;
    match (state.cancelled, state.cancel_reported) {
        (Some(reason), false) => {
            state.cancel_reported = true;
            state.cancel_told = true;
            Some(RecvError::Cancelled(reason))
        }
        _ => None,
    }
}

/// The next signal. Made by [`ProcessCx::recv_signal`](crate::ProcessCx::recv_signal).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::Signal;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let parent = sched.spawn_fn(|cx: ProcessCx| async move {
///     cx.trap_exit(true);
///     let linked = cx.spawn_link(|_: ProcessCx| async { Err::<(), BoxError>("crashed".into()) })?;
///     let watched = cx.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })?.pid();
///     cx.monitor(watched);
///     // Links and monitors report on one queue, apart from messages.
///     let mut heard = Vec::new();
///     while heard.len() < 2 {
///         match cx.recv_signal().await? {
///             Signal::Exit(exit) => heard.push((exit.pid == linked, "exit")),
///             Signal::Down(down) => heard.push((down.pid == watched, "down")),
///             _ => {}
///         }
///     }
///     heard.sort();                                // which child ends first is up to the workers
///     Ok::<_, BoxError>(heard)
/// })?;
/// assert_eq!(sched.block_on(parent)?, [(true, "down"), (true, "exit")]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a receive does nothing unless awaited"]
#[derive(Debug)]
pub struct RecvSignal {
    mark: PendingMark,
}

impl RecvSignal {
    pub(crate) fn new(owner: Owner) -> RecvSignal {
        RecvSignal {
            mark: PendingMark::new(owner),
        }
    }
}

impl Future for RecvSignal {
    type Output = Result<Signal, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        scope::with(this.mark.owner(), |scope| {
            let Some(mut scope) = scope else {
                return Poll::Ready(Err(RecvError::OutsideProcess));
            };
            if let Some(cancelled) = cancellation(&mut scope) {
                return Poll::Ready(Err(cancelled));
            }
            if let Some(signal) = scope.state.take_signal(|_| true) {
                return Poll::Ready(Ok(signal));
            }
            scope.wait_for_mail(cx.waker(), &mut this.mark);
            Poll::Pending
        })
    }
}

/// The next `Down` (exit signals stay queued). Made by
/// [`ProcessCx::recv_down`](crate::ProcessCx::recv_down).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(2).build()?;
/// let coordinator = sched.spawn_fn(|cx: ProcessCx| async move {
///     let mut running = Vec::new();
///     for n in 1..=3u64 {
///         let worker = cx.spawn_fn(move |_: ProcessCx| async move { Ok::<_, BoxError>(n) })?;
///         running.push(cx.monitor(worker.pid()));
///     }
///     // Whatever order they end in (one already gone is a `NoProc` down, at once).
///     while !running.is_empty() {
///         let down = cx.recv_down().await?;
///         running.retain(|monitor| *monitor != down.monitor);
///     }
///     Ok::<_, BoxError>("all done")
/// })?;
/// assert_eq!(sched.block_on(coordinator)?, "all done");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a receive does nothing unless awaited"]
#[derive(Debug)]
pub struct RecvDown {
    mark: PendingMark,
}

impl RecvDown {
    pub(crate) fn new(owner: Owner) -> RecvDown {
        RecvDown {
            mark: PendingMark::new(owner),
        }
    }
}

impl Future for RecvDown {
    type Output = Result<Down, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        scope::with(this.mark.owner(), |scope| {
            let Some(mut scope) = scope else {
                return Poll::Ready(Err(RecvError::OutsideProcess));
            };
            if let Some(cancelled) = cancellation(&mut scope) {
                return Poll::Ready(Err(cancelled));
            }
            match scope
                .state
                .take_signal(|signal| matches!(signal, Signal::Down(_)))
            {
                Some(Signal::Down(down)) => Poll::Ready(Ok(down)),
                _ => {
                    scope.wait_for_mail(cx.waker(), &mut this.mark);
                    Poll::Pending
                }
            }
        })
    }
}

/// The next `Exit` (`Down`s stay queued). Made by
/// [`ProcessCx::recv_exit`](crate::ProcessCx::recv_exit).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let parent = sched.spawn_fn(|cx: ProcessCx| async move {
///     cx.trap_exit(true);                          // or the child's crash would end it too
///     let child = cx.spawn_link(|_: ProcessCx| async { Err::<(), BoxError>("disk full".into()) })?;
///     let exit = cx.recv_exit().await?;
///     Ok::<_, BoxError>((exit.pid == child, exit.reason.to_string()))
/// })?;
/// assert_eq!(sched.block_on(parent)?, (true, "failed: disk full".to_string()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a receive does nothing unless awaited"]
#[derive(Debug)]
pub struct RecvExit {
    mark: PendingMark,
}

impl RecvExit {
    pub(crate) fn new(owner: Owner) -> RecvExit {
        RecvExit {
            mark: PendingMark::new(owner),
        }
    }
}

impl Future for RecvExit {
    type Output = Result<Exit, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        scope::with(this.mark.owner(), |scope| {
            let Some(mut scope) = scope else {
                return Poll::Ready(Err(RecvError::OutsideProcess));
            };
            if let Some(cancelled) = cancellation(&mut scope) {
                return Poll::Ready(Err(cancelled));
            }
            match scope
                .state
                .take_signal(|signal| matches!(signal, Signal::Exit(_)))
            {
                Some(Signal::Exit(exit)) => Poll::Ready(Ok(exit)),
                _ => {
                    scope.wait_for_mail(cx.waker(), &mut this.mark);
                    Poll::Pending
                }
            }
        })
    }
}

/// The next message or signal, in the order they arrived. Made by
/// [`ProcessCx::recv_any`](crate::ProcessCx::recv_any).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{Incoming, Signal};
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let collector = sched.spawn_fn(|cx: ProcessCx<u32>| async move {
///     let me = cx.addr();
///     let worker = cx.spawn_fn(move |_: ProcessCx| async move {
///         for n in 1..=3 {
///             me.send(n)?;
///         }
///         Ok::<_, BoxError>(())
///     })?;
///     cx.monitor(worker.pid());
///     // A process's messages come before its `Down`: once it is down, every result is in.
///     let mut results = Vec::new();
///     loop {
///         match cx.recv_any().await? {
///             Incoming::Message(n) => results.push(n),
///             Incoming::Signal(Signal::Down(_)) => return Ok::<_, BoxError>(results),
///             _ => {}
///         }
///     }
/// })?;
/// assert_eq!(sched.block_on(collector)?, [1, 2, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a receive does nothing unless awaited"]
#[derive(Debug)]
pub struct RecvAny<M> {
    mark: PendingMark,
    _type: PhantomData<fn() -> M>,
}

impl<M> RecvAny<M> {
    pub(crate) fn new(owner: Owner) -> RecvAny<M> {
        RecvAny {
            mark: PendingMark::new(owner),
            _type: PhantomData,
        }
    }
}

impl<M: 'static> Future for RecvAny<M> {
    type Output = Result<Incoming<M>, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // A receive that yields with mail queued, polled with a waker not the body's: woken
        // once out of the scope.
        let mut wake = false;
        let found = scope::with(this.mark.owner(), |scope| {
            let Some(mut scope) = scope else {
                return Poll::Ready(Err(RecvError::OutsideProcess));
            };
            if let Some(cancelled) = cancellation(&mut scope) {
                return Poll::Ready(Err(cancelled));
            }
            if let Some(signal) = scope.state.take_signal_if_next() {
                return Poll::Ready(Ok(Found::Signal(signal)));
            }
            if let Some(received) = scope.state.take_mail() {
                return Poll::Ready(match received {
                    Received::Overflow(topic) => Err(RecvError::Overflow(topic)),
                    Received::Message(message) => {
                        if scope.state.publish_unread && scope.state.unread() == 0 {
                            publish_unread(scope.reply_to, 0);
                        }
                        Ok(Found::Message(message))
                    }
                });
            }
            let found = match take_lone::<M>(scope.lone) {
                Some(Ok(value)) => Found::Value(value),
                Some(Err(message)) => Found::Message(message),
                None => {
                    wake = scope.wait_for_mail_or_yield(cx.waker(), &mut this.mark);
                    return Poll::Pending;
                }
            };
            if scope.state.publish_unread && scope.state.unread() == 0 {
                publish_unread(scope.reply_to, 0);
            }
            Poll::Ready(Ok(found))
        });
        if wake {
            cx.waker().wake_by_ref();
        }
        found.map(|found| {
            Ok(match found? {
                Found::Signal(signal) => Incoming::Signal(signal),
                Found::Value(value) => Incoming::Message(value),
                Found::Message(message) => Incoming::Message(from_message::<M>(message)?),
            })
        })
    }
}

/// What [`RecvAny`] found in the scope (a message is converted outside it).
enum Found<M> {
    Signal(Signal),
    Value(M),
    Message(crate::process::Message),
}

/// Discards a `Down` for `monitor` the body has not received yet (a demonitor from the body:
/// `ProcessCx::demonitor`). Only inside `owner`'s poll; `false` elsewhere or if there was none.
pub(crate) fn forget_down(owner: Owner, monitor: MonitorRef) -> bool {
    let forgotten = scope::with(owner, |scope| {
        scope.and_then(|scope| {
            scope.state.take_signal(
                |signal| matches!(signal, Signal::Down(down) if down.monitor == monitor),
            )
        })
    });
    let found = forgotten.is_some();
    // Outside the scope: an exit reason may hold a user's error.
    crate::process::drop_contained(forgotten);
    found
}
