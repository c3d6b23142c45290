//! Processes written as `async fn`s: an adapter that is a [`Process`] whose `step` polls the
//! async body.
//!
//! # Binding semantics
//! - Each [`ProcessCx::call`] is a yield with its own tag. Its first poll puts the command in
//!   the step's yields; its `YieldComplete` resumes it (oneshot-style). Calls awaited
//!   concurrently (`join!`) are dispatched in one step; inline handlers complete within the same
//!   poll of the process.
//! - After a poll of the body the step's status is `Done` with the body's output (an `Err` fails
//!   the process), `Continue` after [`ProcessCx::yield_now`], `Wait` (observable `Blocked`) while
//!   calls are outstanding or a foreign future is pending, and `Idle` while only a receive (or
//!   [`ProcessCx::cancelled`]) is pending.
//! - `Cancel` and `MailboxOverflow` are observable: [`ProcessCx::recv`] returns them (cancel
//!   once), [`ProcessCx::cancelled`] resolves on cancel. Ignoring cancel is allowed and ends as
//!   a forced stop at shutdown's deadline, as for any process.
//! - Any other future (a tokio timer, a child's [`ProcessHandle`](crate::ProcessHandle), a
//!   channel) may be awaited too: the body is polled with a waker that delivers
//!   [`Event::Woken`] to the process, which polls the body again. Futures
//!   that need a tokio runtime find one: the workers run inside the handler runtime's context.
//! - Messages are moved into the adapter when they arrive, so they no longer count against the
//!   mailbox capacity; a topic's budget still applies while they wait in the mailbox.

pub(crate) mod asking;
mod futures;
mod lazy_waker;
mod scope;
mod state;

#[cfg(all(test, not(loom)))]
mod tests;

pub use futures::{Call, Cancelled, Recv, RecvError, RecvMessage, YieldNow};
pub(crate) use scope::current_owner;

use super::context::Owner;
use super::{drop_contained, BoxError, Command, Event, Events, InitError, Message, Payload, Pid};
use super::{Process, ProcessContext};
use super::{Status, StepOutput};
use lazy_waker::LazyWaker;
use state::CxState;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::{PhantomData, PhantomPinned};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// What an async-fn process gets: its identity and the means to yield, receive and spawn.
/// Cheap to clone; `Send + Sync`.
///
/// `M` is the type of the messages the process receives: [`recv`](Self::recv) resolves to an
/// `M`, and its address ([`addr`](Self::addr), its handle's `addr`) sends only `M`s — a wrong
/// type does not compile. Several kinds of message: an enum. The default, [`Message`], is the
/// untyped form (topic, sender, payload), for processes that route by topic.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// struct Double(u64);
/// procsched::command!(Double => u64);
///
/// let sched = Scheduler::builder()
///     .workers(1)
///     .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
///     .build()?;
/// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
///     let doubled = cx.call(Double(21)).await?;
///     Ok::<_, BoxError>(doubled)
/// })?;
/// assert_eq!(sched.block_on(handle)?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ProcessCx<M = Message> {
    /// This process among every host's: its futures remember it (`scope.rs`).
    owner: Owner,
    /// The scheduler layer's shared state, type-erased (this layer does not depend on it).
    host: Arc<dyn Any + Send + Sync>,
    /// `fn() -> M`: the process only receives `M`s; the context is `Send + Sync` whatever `M` is.
    _receives: PhantomData<fn() -> M>,
}

impl<M> Clone for ProcessCx<M> {
    fn clone(&self) -> Self {
        ProcessCx {
            owner: self.owner,
            host: self.host.clone(),
            _receives: PhantomData,
        }
    }
}

impl<M: 'static> ProcessCx<M> {
    /// This process's PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.pid()) })?;
    /// let pid = handle.pid();
    /// assert_eq!(sched.block_on(handle)?, pid);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.owner.pid
    }

    /// The scheduler layer's shared state, for its typed accessors.
    pub(crate) fn host(&self) -> &Arc<dyn Any + Send + Sync> {
        &self.host
    }

    /// Yields `command` to its handler and resolves to the reply. The process is `Blocked`
    /// until the reply arrives.
    ///
    /// # Examples
    ///
    /// See [`ProcessCx`].
    pub fn call<C: Command>(&self, command: C) -> Call<C> {
        Call::new(command, None, self.owner)
    }

    /// [`call`](Self::call) with a deadline: past it the call fails with
    /// [`CommandError::TimedOut`](crate::error::CommandError::TimedOut) (async and blocking handlers).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::error::CommandError;
    /// use std::time::Duration;
    ///
    /// struct Never;
    /// procsched::command!(Never => ());
    ///
    /// let sched = Scheduler::builder()
    ///     .workers(1)
    ///     .async_handler(|Never: Never| std::future::pending::<Result<(), BoxError>>())
    ///     .build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let late = cx.call_within(Never, Duration::from_millis(10)).await;
    ///     Ok::<_, BoxError>(matches!(late, Err(CommandError::TimedOut)))
    /// })?;
    /// assert!(sched.block_on(handle)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_within<C: Command>(&self, command: C, timeout: Duration) -> Call<C> {
        Call::new(command, Some(timeout), self.owner)
    }

    /// The next message, an `M`. The process is `Idle` while it waits. Fails with
    /// [`RecvError::Cancelled`] (once) when the process is asked to finish — `?` then ends the
    /// body as *cancelled* (`ProcessError::is_cancelled`), not failed — with
    /// [`RecvError::Overflow`] when a topic's budget dropped messages, and with
    /// [`RecvError::TypeMismatch`] (dropping the message) if an untyped sender sent something
    /// that is not an `M` (a typed [`Addr<M>`](crate::Addr) cannot).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// enum Account { Deposit(u64), Close }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let account = sched.spawn_fn(|cx: ProcessCx<Account>| async move {
    ///     let mut balance = 0;
    ///     loop {
    ///         match cx.recv().await? {
    ///             Account::Deposit(n) => balance += n,
    ///             Account::Close => return Ok::<_, BoxError>(balance),
    ///         }
    ///     }
    /// })?;
    /// let addr = account.addr();
    /// addr.send(Account::Deposit(40))?;
    /// addr.send(Account::Deposit(2))?;
    /// addr.send(Account::Close)?;
    /// assert_eq!(sched.block_on(account)?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv(&self) -> Recv<M> {
        Recv::new(self.owner)
    }

    /// The next message, whole and untyped: its topic, sender and payload, whatever was sent.
    /// Fails as [`recv`](Self::recv) does (except on types).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let message = cx.recv_message().await?;
    ///     Ok::<_, BoxError>(message.topic.into_owned())
    /// })?;
    /// sched.send(handle.pid(), Message::new("ping", Payload::empty()))?;
    /// assert_eq!(sched.block_on(handle)?, "ping");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_message(&self) -> RecvMessage {
        RecvMessage::new(self.owner)
    }

    /// Resolves when the process is asked to finish (shutdown), with the reason.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let Err(why) = cx.cancelled().await;           // never `Ok`: it resolves with the reason
    ///     assert!(why.is_cancelled());
    ///     Ok::<_, BoxError>("cleaned up")                 // or `cx.cancelled().await?`: ends as cancelled
    /// })?;
    /// let report = sched.shutdown(Duration::from_secs(5));
    /// assert_eq!(report.graceful, 1);
    /// assert_eq!(sched.block_on(handle)?, "cleaned up");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancelled(&self) -> Cancelled {
        Cancelled::new(self.owner)
    }

    /// Lets other ready work run before the body continues (a `Continue` step): for long
    /// computations split into parts.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let mut sum = 0u64;
    ///     for chunk in 0..4u64 {
    ///         sum += (chunk * 1_000..(chunk + 1) * 1_000).sum::<u64>();
    ///         cx.yield_now().await;
    ///     }
    ///     Ok::<_, BoxError>(sum)
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, (0..4_000u64).sum());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn yield_now(&self) -> YieldNow {
        YieldNow::new(self.owner)
    }
}

impl<F, Fut, M> fmt::Debug for AsyncFnProcess<F, Fut, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFnProcess")
            .field("started", &matches!(self.stage, Stage::Running(_)))
            .finish_non_exhaustive()
    }
}

impl<M> fmt::Debug for ProcessCx<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessCx")
            .field("pid", &self.owner.pid)
            .finish_non_exhaustive()
    }
}

/// The adapter: a [`Process`] whose steps poll an async body (made by
/// [`Scheduler::spawn_fn`](crate::Scheduler::spawn_fn) and
/// [`testing::Harness::for_fn`](crate::testing::Harness::for_fn)).
///
/// # Where it lives (why the body is not boxed)
/// The body is polled in place, so it must not move from its first poll until it is dropped.
/// Rather than a heap allocation of its own per process (for a spawn, a second `malloc` on the
/// spawning thread and a `free` on a worker, which cost more than the rest of the spawn), the
/// adapter relies on where it is stepped, and it can only be stepped where it cannot move: it is
/// made only by this crate (`new` is crate-private; users get one through `spawn_fn` or
/// `Harness::for_fn`), and stepped only inside the process future — polled pinned in its
/// executor task's allocation, never moved, dropped in place (`process/future.rs`: the future
/// is `!Unpin` when its process is, and this adapter always is) — or inside a
/// [`Harness`](crate::testing::Harness), which boxes its process. Moving it before its first
/// step (spawn does: into the process future, then into the task) is fine: an unpolled body may
/// move.
pub struct AsyncFnProcess<F, Fut, M = Message> {
    /// What builds the body, then (from `init` on) the body: one or the other, sharing their
    /// bytes — the process is as large as the larger of the two, not their sum.
    stage: Stage<F, Fut>,
    /// The body's messages.
    _receives: PhantomData<fn() -> M>,
    /// Whatever `Fut` is, the adapter is `!Unpin`: so is the process future holding it, and
    /// safe code holding a `Pin` to that future can never move it.
    _pinned: PhantomPinned,
}

/// The adapter's stage.
enum Stage<F, Fut> {
    /// Builds the body, and what its [`ProcessCx`] hands to the scheduler layer; taken by
    /// `init`.
    Start(F, Arc<dyn Any + Send + Sync>),
    /// Transient, inside `init` (or after a panic in the body's builder).
    Starting,
    /// Built by `init`; pinned in place from the first step on (type docs). Never reassigned
    /// after `init`: dropped in place with the adapter.
    Running(Running<Fut>),
}

/// A started body and what its polls reach.
struct Running<Fut> {
    /// The process the body's scope belongs to (`scope.rs`).
    owner: Owner,
    /// Structurally pinned (the only field that is): see [`Running::project`].
    body: Fut,
    state: CxState,
    /// The waker the body is polled with (`lazy_waker.rs`).
    waker: LazyWaker,
}

impl<Fut> Running<Fut> {
    /// The pinned body, and the rest unpinned.
    #[inline]
    fn project(self: Pin<&mut Self>) -> (Owner, Pin<&mut Fut>, &mut CxState, &LazyWaker) {
        // SAFETY: `body` is structurally pinned and the other fields are not. Pinning is upheld
        // for it: it is only ever reached through this projection, as `Pin<&mut Fut>`, never
        // moved out or swapped, and it is dropped in place with its `Running` (which has no
        // `Drop` impl and no manual `Unpin` impl: it is `Unpin` only if `Fut` is). `state` and
        // `waker` are never pinned-dependent, so plain references to them are fine; the three
        // borrows are of disjoint fields.
        unsafe {
            let this = self.get_unchecked_mut();
            (
                this.owner,
                Pin::new_unchecked(&mut this.body),
                &mut this.state,
                &this.waker,
            )
        }
    }
}

impl<F, Fut, M> AsyncFnProcess<F, Fut, M> {
    /// The process running `start(cx)`; `host` is what [`ProcessCx`] hands to the scheduler
    /// layer's accessors.
    pub(crate) fn new(start: F, host: Arc<dyn Any + Send + Sync>) -> Self {
        AsyncFnProcess {
            stage: Stage::Start(start, host),
            _receives: PhantomData,
            _pinned: PhantomPinned,
        }
    }
}

impl<F, Fut, T, E, M> Process for AsyncFnProcess<F, Fut, M>
where
    M: 'static,
    F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Into<BoxError>,
{
    type Output = T;

    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        let Stage::Start(start, host) = std::mem::replace(&mut self.stage, Stage::Starting) else {
            unreachable!("init runs once")
        };
        let owner = ctx.owner();
        let cx = ProcessCx {
            owner,
            host,
            _receives: PhantomData,
        };
        // Not polled yet: may still move (type docs).
        self.stage = Stage::Running(Running {
            owner,
            body: start(cx),
            state: CxState::default(),
            waker: LazyWaker::new(ctx.wake_target()),
        });
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<T>) -> Result<(), BoxError> {
        let Stage::Running(running) = &mut self.stage else {
            unreachable!("init built the body")
        };
        // SAFETY: from this first step until it is dropped, the adapter — and so `running`:
        // its stage is never reassigned after `init` — stays where it is: it is stepped only inside a process
        // future, which the executor polls pinned in its task allocation and never moves, or
        // inside a `Harness`, which boxes it; no one else can make or step one (type docs).
        let running = unsafe { Pin::new_unchecked(running) };
        let (owner, mut body, state, waker) = running.project();
        // A lone completion is held here for its call to take during the poll, and so is a
        // lone message behind an empty inbox, for the next receive (`state.rs`) — left in
        // `events` where the drain put it, for the receive to read in place
        // (`process/typed.rs`, `take_lone`); anything else is filed first.
        let mut arrived = None;
        let mut no_message = None;
        // Destructor panics contained by the adapter's own bookkeeping, told to the cell.
        let mut panics = 0;
        let lone_message = match events.len() {
            0 => None,
            1 if state.inbox_is_empty()
                && matches!(events.lone_slot(), Some(Some(Event::Message(_)))) =>
            {
                events.lone_slot()
            }
            1 => {
                match events.pop() {
                    Some(Event::YieldComplete { tag, result }) => arrived = Some((tag, result)),
                    Some(event) => panics += state.route(event),
                    None => {}
                }
                None
            }
            _ => {
                for event in events.drain() {
                    panics += state.route(event);
                }
                None
            }
        };
        let lone = lone_message.unwrap_or(&mut no_message);
        state.wants = Default::default();
        let polled = catch_unwind(AssertUnwindSafe(|| {
            let reply_to = waker.target();
            waker.poll_with(|lazy| {
                let mut cx = Context::from_waker(lazy);
                scope::enter(
                    owner,
                    reply_to,
                    state,
                    &mut arrived,
                    &mut *lone,
                    out.yields_mut(),
                    || body.as_mut().poll(&mut cx),
                )
            })
        }));
        let (polled, woken_in_place) = match polled {
            Ok(polled) => polled,
            Err(panic) => {
                // What the step held for the poll is a user value: dropped contained, not by
                // this unwind (a second panic during it would abort the program).
                panics += drop_contained(arrived) + drop_contained(lone.take());
                waker.destructors_panicked(panics);
                resume_unwind(panic)
            }
        };
        // A completion no call took is kept for a later poll (or dropped, its call gone), and so
        // are those of calls dropped during the poll.
        if let Some((tag, result)) = arrived {
            panics += state.keep(tag, result);
        }
        // A message no receive took waits in the inbox, ahead of any that arrive later.
        if let Some(message) = lone.take() {
            panics += state.route(message);
        }
        panics += state.purge_forgotten();
        waker.destructors_panicked(panics);
        match polled {
            Poll::Ready(Ok(output)) => out.done(output),
            Poll::Ready(Err(error)) => return Err(error.into()),
            Poll::Pending => {
                let wants = state.wants;
                if wants.yield_now || woken_in_place {
                    out.set_status(Status::Continue);
                } else if state.has_outstanding_calls() {
                    out.wait();
                } else if wants.message {
                    out.idle();
                } else if waker.can_wake() {
                    // A future outside procsched is pending: it wakes us through our waker.
                    out.wait();
                } else {
                    return Err(
                        "the body awaits a future that is not a procsched call, and this \
                         process has no waker to be woken by it (it is driven by hand)"
                            .into(),
                    );
                }
            }
        }
        Ok(())
    }
}
