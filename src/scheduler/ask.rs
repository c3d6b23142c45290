//! Ask/reply: a typed request to a process, answered through a [`Reply<R>`] port it carries.
//!
//! The shape is ractor's `RpcReplyPort`: the request is an ordinary message of the process's
//! type that holds the port, built by the asker's closure, so any variant of a message enum can
//! ask for any reply type and the compiler checks both ends:
//!
//! ```
//! use procsched::prelude::*;
//!
//! enum Account { Deposit(u64), Balance(Reply<u64>) }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
//! let sched = Scheduler::builder().workers(1).build()?;
//! let account = sched.spawn_fn(|cx: ProcessCx<Account>| async move {
//!     let mut balance = 0;
//!     loop {
//!         match cx.recv().await? {
//!             Account::Deposit(n) => balance += n,
//!             Account::Balance(reply) => { let _ = reply.send(balance); }
//!         }
//!     }
//!     #[allow(unreachable_code)]
//!     Ok::<(), BoxError>(())
//! })?;
//! let addr = account.addr();
//! addr.send(Account::Deposit(42))?;
//! let balance = addr.ask(Account::Balance).await?;   // `|reply| Account::Balance(reply)`
//! assert_eq!(balance, 42);
//! # sched.shutdown_async(std::time::Duration::from_secs(1)).await;
//! # Ok(()) }
//! ```
//!
//! # Binding semantics
//! - **Where the answer goes.** Asked from tokio code (or any thread, any executor), the port
//!   is a oneshot channel. Asked from inside a process's body, the ask is a *yield*: the port
//!   answers into the asking process's own mailbox as the completion of a call, the process is
//!   `Blocked` meanwhile and its worker free — no channel, no task, no waker allocation.
//! - **From a state machine's step**, which cannot await: the ask is yielded as a command
//!   ([`Addr::ask_command`]) and its answer comes as that yield's completion
//!   (`src/scheduler/step_ask.rs`, `src/dispatch/ask.rs`).
//! - **Under a test harness** (`testing::Harness`), an ask from the body is recorded, not
//!   sent: the step reports it and the test scripts its answer, or its timeout.
//! - **Never a hang.** A port dropped unanswered (by the answering process, or with its mailbox
//!   when it ends) fails the ask at once with [`AskError::NoReply`]; a request that cannot be
//!   delivered fails it with [`AskError::Undelivered`] (`is_not_found` for a finished process);
//!   [`Addr::ask_within`] bounds the wait ([`AskError::TimedOut`]).
//! - **Cancellation.** An ask in flight in a body whose process is asked to finish
//!   (shutdown) fails with [`AskError::Cancelled`]: `?` then ends the body as cancelled.
//! - **Once.** A port answers once ([`Reply::send`] consumes it); an answer that comes after
//!   the asker gave up (timed out, dropped its ask, ended) is handed back to the answerer, and
//!   one that `Reply::send` delivered (`Ok`) before a timeout is the ask's answer, even if the
//!   asker looks only after its deadline (from tokio code, and in a body: `time_out_ask`).

use super::addr::Addr;
use super::ask_room::{Held, Room, Sent, Then};
use super::deadline::Deadline;
use super::error::{AskError, SendErrorKind};
use super::handle::SchedulerHandle;
use super::reply::{Elsewhere, Reply, ReplyTo};
use super::spin_wait::Spun;
use crate::process::async_fn::asking::{self, AskCall, AskPoll};
use crate::process::async_fn::unhosted::{self, UnhostedAsk};
use crate::process::{drop_contained, CancelReason, CommandError, Payload, Pid};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;

impl<M: Send + 'static> Addr<M> {
    /// Asks the process: `request` builds the request around a reply port (`|reply|
    /// Msg::Balance(reply)`, or just the variant, `Msg::Balance`), and the ask resolves to the
    /// answer the process sends on that port. Nothing is sent until the ask is first polled.
    ///
    /// Asked from outside a process (a tokio task, a thread), that first poll may look for the
    /// answer for a few microseconds before it returns `Pending`: an answer usually comes
    /// within one, and a task that parked meanwhile would pay two thread wake-ups per ask. One
    /// ask at a time spins, yielding its core after 2 µs, and a thread whose spins miss backs
    /// off; a machine with one core never spins, nor a scheduler built with
    /// [`spin_waits(false)`](crate::config::SchedulerBuilder::spin_waits) — the setting for
    /// code that joins many asks from one task, which the spins would send one at a time.
    ///
    /// # Errors
    ///
    /// [`AskError`]: undelivered, no reply (the port dropped), cancelled (the asking process
    /// was asked to finish), polled outside its process. No timeout: see
    /// [`ask_within`](Self::ask_within). A process asking itself is refused at once
    /// ([`AskError::AskedItself`]), but a longer cycle — A asks B while B asks A — is not
    /// detected: both wait until a timeout of `ask_within`, a cancel or the shutdown ends one
    /// ask (as with OTP's `gen_server:call`).
    ///
    /// The request is sent on the first poll: an ask dropped after it (a `select!` loser, a
    /// timeout) has still delivered its request, which takes a place in a bounded mailbox and
    /// is handled; only the answer is dropped.
    ///
    /// # Examples
    ///
    /// From tokio code (any executor), see [`Reply`]. From inside a process, the same call is a
    /// yield:
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(2).build()?;
    /// let doubler = sched.spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
    ///     let (n, reply) = cx.recv().await?;
    ///     let _ = reply.send(n * 2);
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// let doubler_addr = doubler.addr();
    /// let asker = sched.spawn_fn(move |_: ProcessCx| async move {
    ///     // Blocked until the answer: its worker runs other processes meanwhile.
    ///     Ok::<_, BoxError>(doubler_addr.ask(|reply| (21, reply)).await?)
    /// })?;
    /// assert_eq!(sched.block_on(asker)?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ask<R, F>(&self, request: F) -> Ask<'_, M, R, F>
    where
        R: Send + 'static,
        F: FnOnce(Reply<R>) -> M,
    {
        Ask::new(self, request, None)
    }

    /// [`ask`](Self::ask) with a timeout: past it the ask fails with [`AskError::TimedOut`]
    /// (an answer that comes later is handed back to the answerer; one delivered before it —
    /// its `Reply::send` returned `Ok` — is returned, never dropped). The timer needs no
    /// runtime: it works on any executor, and keeps real time — under tokio's paused clock too
    /// (where `call_within` and a step's `yield_command_within` follow tokio's clock). A zero timeout is no "try": the request is still
    /// sent at the first poll, and its answer is returned only if it is there by then.
    ///
    /// # Errors
    ///
    /// As [`ask`](Self::ask), and [`AskError::TimedOut`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// // Never answers: keeps the port.
    /// let silent = sched.spawn_fn(|cx: ProcessCx<Reply<u8>>| async move {
    ///     let _kept = cx.recv().await?;
    ///     let Err(why) = cx.cancelled().await;
    ///     Err::<(), _>(why)
    /// })?;
    /// let late = sched.block_on(silent.addr().ask_within(Duration::from_millis(5), |reply| reply));
    /// assert!(late.unwrap_err().is_timed_out());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ask_within<R, F>(&self, timeout: Duration, request: F) -> Ask<'_, M, R, F>
    where
        R: Send + 'static,
        F: FnOnce(Reply<R>) -> M,
    {
        Ask::new(self, request, Some(timeout))
    }
}

/// A pending ask: resolves to the answer, or to why there is none. Made by [`Addr::ask`] and
/// [`Addr::ask_within`]; sends its request when first polled.
///
/// It borrows its address, as tokio's `Sender::send` borrows its sender: an ask costs no
/// reference count (a clone of the address is one, on a line every sender of the scheduler
/// shares). To run an ask as a task of its own, move a clone of the address into it:
///
/// ```
/// use procsched::prelude::*;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().workers(1).build()?;
/// let doubler = sched.spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
///     let (n, reply) = cx.recv().await?;
///     let _ = reply.send(2 * n);
///     Ok::<_, BoxError>(())
/// })?;
/// let addr = doubler.addr();
/// let task = tokio::spawn(async move { addr.ask(|reply| (21, reply)).await });
/// assert_eq!(task.await??, 42);
/// # Ok(()) }
/// ```
///
/// Dropped before its answer came — a `select!` it lost, a timeout — an ask is forgotten: its
/// answer, when it comes, is dropped, and no later ask sees it. An ask polled in a body, then
/// moved out of it and dropped elsewhere (in a tokio task), stays outstanding on its process —
/// as a [`Call`](crate::body::Call) moved out does — until its answer comes or the process
/// ends.
#[must_use = "an ask sends nothing unless polled"]
pub struct Ask<'a, M, R, F> {
    state: State<'a, M, R, F>,
    /// The scheduler of the process asked (usually the asker's too): an ask from a body cut
    /// short by its shutdown is `Cancelled` (`in_shutdown`).
    sched: &'a SchedulerHandle,
    /// Set from the first poll if the ask has a timeout.
    timeout: Option<Duration>,
    deadline: Option<Deadline>,
    /// Set by [`wait_for_room`](Ask::wait_for_room): a full mailbox holds the request rather
    /// than refusing it.
    waits_for_room: bool,
}

enum State<'a, M, R, F> {
    /// Not sent yet. The request is taken out of its `Option` on the first poll, rather than
    /// the whole state moved out: a move reads the state back with wider loads than the
    /// `async` block that built it wrote it with, and waits for those stores to retire (a
    /// store-forwarding stall, 3 % of an ask between processes).
    Unsent {
        addr: &'a Addr<M>,
        request: Option<F>,
    },
    /// Built and held for room in a full mailbox ([`Ask::wait_for_room`]; `ask_room.rs`).
    Held(Box<Held<'a, M, R>>),
    /// Sent from a process's body: the answer is the completion of a call.
    InProcess(AskCall),
    /// Sent from outside any process: the answer comes on a channel.
    Outside(oneshot::Receiver<R>),
    Done,
}

impl<'a, M, R, F> Ask<'a, M, R, F> {
    fn new(addr: &'a Addr<M>, request: F, timeout: Option<Duration>) -> Self {
        Ask {
            state: State::Unsent {
                addr,
                request: Some(request),
            },
            sched: addr.scheduler(),
            timeout,
            deadline: None,
            waits_for_room: false,
        }
    }

    /// Makes the ask wait for room in a full bounded mailbox, as [`Addr::send_wait`] does,
    /// instead of failing with `Undelivered(MailboxFull)`: the request, built at the first
    /// poll, stands in the mailbox's line of waiting senders until room is made. The wait for
    /// room is part of the ask: an [`ask_within`](Addr::ask_within)'s timeout covers it, and
    /// an ask dropped (or timed out) while it waits gives its place in the line up and drops
    /// its request — a request whose deadline has passed when its ask is polled is never
    /// delivered, though one delivered at the edge of its deadline may time out waiting for
    /// its answer, as with any `ask_within`. Set it before the ask is first polled.
    ///
    /// Under a capacity of 0, which refuses every message, the ask fails with
    /// `Undelivered(MailboxFull)` at once (no room will ever be made); a process that ends
    /// while the ask waits fails it with `Undelivered(NotFound)` (or `Closed`). From a body
    /// the wait is a wait like any other: the process is `Blocked`, its worker free.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), BoxError> {
    /// // One message of room: a second request waits for the first to be taken.
    /// let sched = Scheduler::builder().workers(1).mailbox_capacity(1).build()?;
    /// let doubler = sched.spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
    ///     loop {
    ///         let (n, reply) = cx.recv().await?;
    ///         let _ = reply.send(2 * n);
    ///     }
    ///     #[allow(unreachable_code)]
    ///     Ok::<(), BoxError>(())
    /// })?;
    /// let addr = doubler.addr();
    /// let answers = futures::future::try_join_all(
    ///     (0..10).map(|n| addr.ask(move |reply| (n, reply)).wait_for_room()),
    /// )
    /// .await?;
    /// assert_eq!(answers.iter().sum::<u64>(), 90);
    /// # sched.shutdown_async(std::time::Duration::from_secs(1)).await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait_for_room(mut self) -> Self {
        self.waits_for_room = true;
        self
    }
}

// Nothing in an ask is pinned: the receiver and the deadline are `Unpin`, the rest is moved out
// on the first poll.
impl<M, R, F> Unpin for Ask<'_, M, R, F> {}

impl<M, R, F> Future for Ask<'_, M, R, F>
where
    M: Send + 'static,
    R: Send + 'static,
    F: FnOnce(Reply<R>) -> M,
{
    type Output = Result<R, AskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let sent_now = matches!(this.state, State::Unsent { .. });
        if sent_now {
            if let Err(error) = this.send(cx.waker()) {
                return Poll::Ready(Err(error));
            }
        } else if let State::Held(_) = this.state {
            // Past its deadline when polled, a held request is given up, never delivered. (One
            // delivered at the edge of its deadline may still time out waiting for its answer,
            // as any `ask_within`: the check and the delivery are not one instant.)
            if let Some(deadline) = &mut this.deadline {
                if Pin::new(deadline).poll(cx).is_ready() {
                    this.give_up();
                    return Poll::Ready(Err(AskError::TimedOut));
                }
            }
            if let Err(error) = poll_held(&mut this.state, cx.waker(), this.sched) {
                return Poll::Ready(Err(error));
            }
        }
        let answered = match &mut this.state {
            State::InProcess(call) => match asking::poll(call) {
                AskPoll::Answered(completion) => {
                    Some(in_shutdown(this.sched, call, answer_of(completion)))
                }
                AskPoll::Cancelled(reason) => Some(Err(AskError::Cancelled(reason))),
                AskPoll::Outside => Some(Err(AskError::OutsideProcess)),
                AskPoll::Pending => {
                    asking::note_waiter(call, cx.waker());
                    None
                }
            },
            State::Outside(receiver) => {
                // Just sent: a short spin may find the answer before this thread parks — before
                // the waker is registered, so that an answer taken by the spin wakes no one.
                let spun = sent_now
                    .then(|| this.sched.inner.spin_gate.wait_answer(receiver, cx.waker()))
                    .flatten();
                match spun {
                    Some(Spun::Answered(value)) => Some(Ok(value)),
                    Some(Spun::Closed) => Some(Err(AskError::NoReply)),
                    // Outside tokio's cooperative budget: in a join of many asks from one
                    // task, a budgeted poll past the task's 128th returned `Pending` and woke
                    // its future again, so every tick re-polled the whole join (10 000 asks
                    // joined: 4.2–5.2 µs an ask, 0.6 µs unbudgeted; `msgprobe ask_join`). An
                    // ask's answer is one value: reading it starves no one.
                    None => {
                        match Pin::new(&mut tokio::task::unconstrained(&mut *receiver)).poll(cx) {
                            Poll::Ready(Ok(value)) => Some(Ok(value)),
                            Poll::Ready(Err(_closed)) => Some(Err(AskError::NoReply)),
                            Poll::Pending => None,
                        }
                    }
                }
            }
            State::Held(held) => {
                // A body's ask hears its process's cancel while it waits for room, also when
                // polled with a waker of its own (`FuturesUnordered`): the cancel wakes the
                // wakers noted for calls.
                if let Then::InProcess(call) = held.then() {
                    asking::note_waiter(call, cx.waker());
                }
                None
            }
            State::Unsent { .. } | State::Done => panic!("an ask polled after it resolved"),
        };
        if let Some(answer) = answered {
            // Matched rather than overwritten: an ask answered in a process (the hot path)
            // then needs no call to the state's drop glue, which `Held` made out of line.
            match std::mem::replace(&mut this.state, State::Done) {
                State::InProcess(_call) => {}
                other => drop(other),
            }
            return Poll::Ready(answer);
        }
        if let Some(deadline) = &mut this.deadline {
            if Pin::new(deadline).poll(cx).is_ready() {
                // An answer sent between the poll above and the deadline was sent `Ok`: it is
                // the answer, not lost. Closed first, the channel refuses any later one (its
                // `Reply::send` gets the value back).
                if let State::Outside(receiver) = &mut this.state {
                    receiver.close();
                    if let Ok(value) = receiver.try_recv() {
                        this.state = State::Done;
                        return Poll::Ready(Ok(value));
                    }
                }
                // In a body, the same: an answer queued in its mailbox since this step began
                // was sent `Ok`, and is taken at the next step.
                if let State::InProcess(call) = &this.state {
                    if asking::time_out(call) {
                        asking::note_waiter(call, cx.waker());
                        return Poll::Pending;
                    }
                    this.state = State::Done;
                    return Poll::Ready(Err(AskError::TimedOut));
                }
                this.give_up();
                return Poll::Ready(Err(AskError::TimedOut));
            }
        }
        Poll::Pending
    }
}

impl<'a, M, R, F> Ask<'a, M, R, F>
where
    M: Send + 'static,
    R: Send + 'static,
    F: FnOnce(Reply<R>) -> M,
{
    /// The first poll: builds the request around a port that answers this poller — the body
    /// of a process (its mailbox) or anyone else (a channel) — and sends it.
    fn send(&mut self, waker: &std::task::Waker) -> Result<(), AskError> {
        let State::Unsent { addr, request } = &mut self.state else {
            unreachable!("sent once");
        };
        let addr: &'a Addr<M> = addr;
        let request = request.take().expect("sent once");
        if let Some(timeout) = self.timeout {
            self.deadline = Some(Deadline::new(crate::deadline::after(timeout)));
        }
        let started = match asking::start() {
            Ok(started) => started,
            // Asked to finish, and not told yet: this ask tells it, and sends nothing.
            Err(reason) => {
                self.state = State::Done;
                return Err(AskError::Cancelled(reason));
            }
        };
        let (reply, waiting) = match started {
            // The same PID on the same scheduler (another scheduler's process may have it).
            Some((call, _))
                if call.owner.pid == addr.pid() && call.owner.host == self.sched.inner.host_id =>
            {
                // No port was made: nothing can answer, so nothing is recorded to refuse.
                asking::forget_unsent(&call);
                self.state = State::Done;
                return Err(AskError::AskedItself);
            }
            Some((call, asker)) => {
                let to = ReplyTo::Process {
                    asker,
                    tag: call.tag,
                };
                (Reply { to }, State::InProcess(call))
            }
            None if asking::in_unhosted_body() => return self.record(addr.pid(), request),
            None => {
                let (sender, receiver) = oneshot::channel();
                let to = ReplyTo::Elsewhere(Some(Elsewhere::Channel(sender)));
                (Reply { to }, State::Outside(receiver))
            }
        };
        // User code (the request's constructor), outside any scope.
        let request = request(reply);
        if self.waits_for_room {
            return self.send_or_hold(addr, request, waker, waiting);
        }
        match addr.send(request) {
            Ok(()) => {
                // Matched rather than overwritten, as in `poll`: no call to the drop glue.
                match std::mem::replace(&mut self.state, waiting) {
                    State::Unsent { request, .. } => drop(request),
                    other => drop(other),
                }
                Ok(())
            }
            Err(refused) => {
                self.state = State::Done;
                if let State::InProcess(call) = &waiting {
                    asking::forget(call);
                }
                let kind = refused.kind();
                // The request (and its port) is user code: dropped contained and counted. Its
                // port's "no reply" lands on a call no longer live, or a receiver dropped below.
                self.sched.inner.contained(drop_contained(refused));
                let refused = Err(AskError::Undelivered(kind));
                match &waiting {
                    State::InProcess(call) => in_shutdown(self.sched, call, refused),
                    _ => refused,
                }
            }
        }
    }

    /// [`send`](Self::send) for an ask that waits for room: a request a full mailbox refuses
    /// is held in its line (`ask_room.rs`).
    #[cold]
    fn send_or_hold(
        &mut self,
        addr: &'a Addr<M>,
        request: M,
        waker: &std::task::Waker,
        waiting: State<'a, M, R, F>,
    ) -> Result<(), AskError> {
        let then = match waiting {
            State::InProcess(call) => Then::InProcess(call),
            State::Outside(receiver) => Then::Outside(receiver),
            State::Unsent { .. } | State::Held(_) | State::Done => {
                unreachable!("an ask waits in a process or outside")
            }
        };
        match Held::send(addr, request, waker, then) {
            Sent::Delivered(then) => {
                self.state = State::waiting_on(then);
                Ok(())
            }
            Sent::Held(held) => {
                self.state = State::Held(held);
                Ok(())
            }
            Sent::Refused(kind, then) => {
                self.state = State::Done;
                Err(refused_held(self.sched, kind, then))
            }
        }
    }

    /// The first poll in a body that runs without a scheduler (a test harness's): the request,
    /// built around a port the harness reads, is recorded for the test to answer, not sent
    /// (`process/async_fn/unhosted.rs`, read by `testing/asks.rs`). The ask waits as a call;
    /// the test scripts its timeout, if any.
    #[cold]
    fn record(&mut self, to: Pid, request: F) -> Result<(), AskError> {
        self.state = State::Done;
        self.deadline = None;
        let call = match asking::start_unhosted() {
            Ok(Some(call)) => call,
            Ok(None) => return Err(AskError::OutsideProcess),
            Err(reason) => return Err(AskError::Cancelled(reason)),
        };
        // As in `send`: the same PID on the same scheduler.
        if call.owner.pid == to && call.owner.host == self.sched.inner.host_id {
            asking::forget_unsent(&call);
            return Err(AskError::AskedItself);
        }
        let (sender, mut receiver) = oneshot::channel::<R>();
        // User code (the request's constructor), outside any scope.
        let request = Payload::new(request(Reply::from(sender)));
        let ask = UnhostedAsk {
            tag: call.tag,
            to,
            request,
            timeout: self.timeout,
            reply_type: std::any::TypeId::of::<R>(),
            reply_type_name: std::any::type_name::<R>(),
            answered: Box::new(move || match receiver.try_recv() {
                Ok(value) => Some(Ok(Payload::new(value))),
                Err(oneshot::error::TryRecvError::Closed) => Some(Err(CommandError::Cancelled)),
                Err(oneshot::error::TryRecvError::Empty) => None,
            }),
        };
        match unhosted::record(call.owner.host, ask) {
            Ok(()) => {
                self.state = State::InProcess(call);
                Ok(())
            }
            Err(ask) => {
                // No harness's step runs here: nothing can answer.
                asking::forget_unsent(&call);
                self.sched.inner.contained(drop_contained(ask.request));
                Err(AskError::OutsideProcess)
            }
        }
    }

    /// Timed out: the answer, if it comes, is handed back to the answerer.
    fn give_up(&mut self) {
        if let State::InProcess(call) = std::mem::replace(&mut self.state, State::Done) {
            asking::forget(&call);
        }
    }
}

impl<'a, M, R, F> State<'a, M, R, F> {
    fn waiting_on(then: Then<R>) -> Self {
        match then {
            Then::InProcess(call) => State::InProcess(call),
            Then::Outside(receiver) => State::Outside(receiver),
        }
    }
}

/// Polls a request held for room (`State::Held`): delivered, the ask waits for its answer;
/// refused, it fails.
#[cold]
fn poll_held<M: Send + 'static, R, F>(
    state: &mut State<'_, M, R, F>,
    waker: &std::task::Waker,
    sched: &SchedulerHandle,
) -> Result<(), AskError> {
    let State::Held(held) = state else {
        return Ok(());
    };
    let room = held.poll_room(waker);
    if let Room::Waiting = room {
        // A body's ask hears its process's cancel while it waits for room as while it waits
        // for an answer (`asking::poll` gives the call up then).
        if let Then::InProcess(call) = held.then() {
            if let AskPoll::Cancelled(reason) = asking::poll(call) {
                *state = State::Done;
                return Err(AskError::Cancelled(reason));
            }
        }
        return Ok(());
    }
    let State::Held(held) = std::mem::replace(state, State::Done) else {
        unreachable!("held above");
    };
    let then = held.into_then();
    match room {
        Room::Delivered => {
            *state = State::waiting_on(then);
            Ok(())
        }
        Room::Refused(kind) => Err(refused_held(sched, kind, then)),
        Room::Waiting => unreachable!("returned above"),
    }
}

/// A held request refused for good: the call, if any, forgotten; during a shutdown, an ask
/// from a body is `Cancelled` as any undelivered one (`in_shutdown`).
fn refused_held<R>(sched: &SchedulerHandle, kind: SendErrorKind, then: Then<R>) -> AskError {
    let refused = AskError::Undelivered(kind);
    match then {
        Then::InProcess(call) => {
            asking::forget(&call);
            in_shutdown::<()>(sched, &call, Err(refused)).unwrap_err()
        }
        Then::Outside(_) => refused,
    }
}

impl<M, R, F> Drop for Ask<'_, M, R, F> {
    fn drop(&mut self) {
        if let State::InProcess(call) = &self.state {
            asking::forget(call);
        }
    }
}

impl<M, R, F> fmt::Debug for Ask<'_, M, R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Unsent { .. } => "unsent",
            State::Held(_) => "waiting for room",
            State::InProcess(_) => "waiting (in a process)",
            State::Outside(_) => "waiting",
            State::Done => "done",
        };
        f.debug_struct("Ask")
            .field("reply", &std::any::type_name::<R>())
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

/// An ask from a body that the scheduler's shutdown cut short — the process asked ended (its
/// port dropped unanswered) or was ending (the request undelivered) — is `Cancelled`, as the
/// asker's own cancellation would have made it: which of the two processes heard the shutdown
/// first is a race, and the asker's outcome must not depend on it (`?` ends its body as
/// cancelled, counted graceful, either way). Not an ask sent after the asker's own cancel
/// (cleanup): that one is told what happened to it; nor one to another scheduler's process
/// (`sched` is the asked process's): that shutdown is not the asker's.
fn in_shutdown<R>(
    sched: &SchedulerHandle,
    call: &AskCall,
    answer: Result<R, AskError>,
) -> Result<R, AskError> {
    match answer {
        Err(
            AskError::NoReply
            | AskError::Undelivered(SendErrorKind::NotFound | SendErrorKind::Closed),
        ) if !call.after_cancel
            && call.owner.host == sched.inner.host_id
            && sched.is_shutting_down() =>
        {
            Err(AskError::Cancelled(CancelReason::Shutdown))
        }
        other => other,
    }
}

/// The answer a process's call completion carries.
fn answer_of<R: 'static>(completion: Result<Payload, CommandError>) -> Result<R, AskError> {
    match completion {
        Ok(payload) => payload
            .take::<R>()
            .map_err(|_| unreachable!("a port answers its own type")),
        // Only a test harness's script (`Harness::time_out`): a port never answers so.
        Err(CommandError::TimedOut) => Err(AskError::TimedOut),
        // The port's drop (`Reply`'s `Drop`).
        Err(_) => Err(AskError::NoReply),
    }
}
