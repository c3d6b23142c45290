//! Drive a process step by step with scripted events, on the calling thread.
//!
//! A [`Harness`] owns one process. Script the events its next step sees ([`Harness::send`],
//! [`Harness::complete`], [`Harness::cancel`]), run the step ([`Harness::step`]) and look at
//! what it asked for: its yields, its asks and its status. Works for state-machine processes
//! and for `async fn` bodies ([`Harness::for_fn`]: each `cx.call` shows up as a yield, and
//! [`Harness::complete`] answers it).
//!
//! **Asks a body makes** (`addr.ask(..).await`, `addr.ask_within(..).await`) are scripted
//! yields too: nothing is sent. The step reports each in [`Step::asks`] — the process asked
//! and the request, holding its [`Reply`](crate::Reply) port — and the process waits
//! (`Status::Wait`). The test answers: through that port, as the asked process would
//! (`reply.send(v)`, or handing the request to a responder it steps itself; dropping the port
//! unanswered is `AskError::NoReply`, unless a script answers the ask before the next step:
//! the port also goes when the [`Step`] holding it is dropped), or with [`Harness::reply`] (or
//! [`Harness::complete`]: `Err` is the port dropped). The next step resumes the body with the
//! answer. An `ask_within`'s timeout does not run on the clock: the test decides when it
//! passes ([`Harness::time_out`]: `AskError::TimedOut`).
//!
//! **Asks a process serves** (a request that carries a port, sent to it with
//! [`Harness::send`]) are built around a tokio `oneshot` sender (`Reply:
//! From<oneshot::Sender<R>>`), whose receiver the test reads the answer from.
//!
//! **The scheduler of the harness's own.** What the process *does* with a scheduler —
//! `ProcessCx::scheduler`, `ProcessContext::scheduler`, spawning children, sending, linking,
//! monitoring, trapping exits, registering a name — goes to a small scheduler of the
//! harness's own (built at the first [`Harness::init`]: one worker and no handlers, unless the
//! test gives a builder with [`Harness::scheduler_builder`] — the handlers its children's calls
//! need, say; [`Harness::scheduler`]),
//! so a process that spawns or supervises can be tested as it is. The process is an entry of
//! that scheduler's table, with a PID of its own ([`Harness::pid`], unique among every
//! harness's), but no task runs it: the test steps it. So what is sent to its PID — a message
//! ([`Harness::addr`]), a linked child's exit signal, a monitor's `Down` — waits in its
//! mailbox for the next step, which reads it after the scripted events; and when a step ends
//! it, its name is released and its links and monitors hear its end, as on a scheduler. (To
//! script an exit signal or a `Down`, make a real one: link the process to, or have it
//! monitor, a process the test ends.) The harness's scheduler does not count the process
//! among its own (`live_processes`, `processes`, the metrics; `registered_processes`, which
//! counts its table's entries, does), and its shutdown does not wait for it. Asks are the
//! exception: recorded, never sent.
//!
//! **Futures outside procsched** cannot wake the process: a body that awaits nothing but one (a
//! child's [`ProcessHandle`](crate::ProcessHandle), a tokio channel, timer or task) fails its
//! step with an error saying so: script what it would wait for as a message instead, or test it
//! on a scheduler. So does one of procsched's own futures that waits on a scheduler rather than
//! on a script: `cx.run(..)` (a tokio future run for the body) and a `send_wait` that finds a
//! bounded mailbox full. A state machine's [`ask_command`](crate::Addr::ask_command) is a yield
//! like any other: [`Step::yields`] shows it (an `AskCommand`, opaque), nothing is sent, and the
//! test completes it by its tag with [`Harness::complete`] (`Ok` the answer, `Err` a failed
//! ask). Awaited together with a receive, a call or an ask
//! (`tokio::time::timeout(d, cx.recv())`), it is not detected — a foreign future keeping the
//! waker cannot be told from a combinator keeping it (`FuturesUnordered` does, even empty) —
//! so the step waits for the receive or call, and a later step sees whatever the foreign
//! future did meanwhile, on the clock. On a thread with no tokio runtime, a plain `#[test]`, each step runs
//! in the tokio context of the harness's scheduler, so that making a timer there does not
//! panic. A [`ProcessContext::waker`] is `None` under a harness, as in a context made by hand.
//!
//! # Examples
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::state_machine::Status;
//! use procsched::testing::Harness;
//!
//! struct Double(u64);
//! procsched::command!(Double => u64);
//!
//! let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
//!     let doubled = cx.call(Double(21)).await?;
//!     Ok::<_, BoxError>(doubled + 1)
//! });
//! harness.init("run", Payload::empty())?;
//! let step = harness.step()?;
//! assert!(matches!(step.status, Status::Wait));
//! let (tag, command) = &step.yields[0];
//! assert_eq!(command.downcast_ref::<Double>().map(|d| d.0), Some(21));
//!
//! harness.complete(*tag, Ok(Payload::new(42u64)));
//! assert!(matches!(harness.step()?.status, Status::Done(43)));
//! # Ok::<(), procsched::BoxError>(())
//! ```
//!
//! A body that asks another process:
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::error::AskError;
//! use procsched::state_machine::Status;
//! use procsched::testing::Harness;
//!
//! enum Stock { Reserve(&'static str, Reply<bool>) }
//!
//! // Under test: reserves an item from the stock process whose address it is given.
//! async fn order(cx: ProcessCx<Addr<Stock>>) -> Result<&'static str, BoxError> {
//!     let stock = cx.recv().await?;
//!     match stock.ask(|reply| Stock::Reserve("sku-1", reply)).await {
//!         Ok(true) => Ok("reserved"),
//!         Ok(false) => Ok("sold out"),
//!         Err(AskError::NoReply) => Ok("stock down"),
//!         Err(other) => Err(other.into()),
//!     }
//! }
//!
//! let mut harness = Harness::for_fn(order);
//! harness.init("run", Payload::empty())?;
//! let stock_pid = Pid::from_raw(1 << 26 | 9).ok_or("a pid")?;
//! let stock = harness.scheduler().ok_or("built by init")?.addr::<Stock>(stock_pid);
//! harness.send(Message::new("stock", Payload::new(stock)));
//!
//! let mut step = harness.step()?;
//! assert!(matches!(step.status, Status::Wait)); // waiting for the answer
//! let asked = step.asks.pop().ok_or("one ask")?;
//! assert_eq!(asked.to, stock_pid);
//! let Stock::Reserve(sku, reply) = asked.request.take::<Stock>()?;
//! assert_eq!(sku, "sku-1");
//! let _ = reply.send(false); // as the stock process would
//! assert!(matches!(harness.step()?.status, Status::Done("sold out")));
//! # Ok::<(), procsched::BoxError>(())
//! ```

mod asks;
mod body;
mod step;
#[cfg(all(test, not(loom)))]
mod tests;

pub use asks::{Asked, ScriptError};
pub use body::Body;
pub use step::Step;

use crate::process::context::HostId;
use crate::process::{
    close_panic_message, into_message, panic_message, BoxError, CancelReason, Event, Events,
    ExitReason, InitError, Message, Payload, Pid, Process, ProcessContext, StepOutput,
};
use crate::scheduler::SchedulerBuilder;
use crate::scheduler::{stepped_pid, SteppedCell};
use crate::{Addr, ProcessCx, Scheduler, SchedulerHandle};
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// A process and the events of its next step (module docs).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::error::RecvError;
/// use procsched::state_machine::Status;
/// use procsched::testing::Harness;
///
/// // Under test: sums what it receives until it is asked to finish, then returns the sum.
/// let mut harness = Harness::for_fn(|cx: ProcessCx<u32>| async move {
///     let mut sum = 0;
///     loop {
///         match cx.recv().await {
///             Ok(n) => sum += n,
///             Err(RecvError::Cancelled(_)) => return Ok::<_, BoxError>(sum),
///             Err(other) => return Err(other.into()),
///         }
///     }
/// });
/// harness.init("run", Payload::empty())?;
/// harness.send(Message::new("n", Payload::new(2u32)));
/// harness.send(Message::new("n", Payload::new(3u32)));
/// assert!(matches!(harness.step()?.status, Status::Idle)); // both read, waiting for more
/// harness.cancel();
/// assert!(matches!(harness.step()?.status, Status::Done(5)));
/// # Ok::<(), BoxError>(())
/// ```
pub struct Harness<P: Process> {
    /// Boxed: a harness may be moved between steps, and an async-fn process must not be
    /// (`AsyncFnProcess`'s docs).
    /// Dropped by hand, contained (`Drop`): a body's future, or a process, whose destructor
    /// panics must not escape the harness's drop — in a failing test that would abort.
    process: std::mem::ManuallyDrop<Box<P>>,
    pid: Pid,
    /// The host identity of the harness's scheduler, once `init` built it (until then, one no
    /// scheduler has): the process's asks are filed under it (`asks.rs`).
    host: HostId,
    /// The process's entry in its scheduler's table (`scheduler/stepped.rs`), opened by the
    /// first `init`; dropped before the scheduler (declared first).
    cell: Option<SteppedCell>,
    /// What the process spawns and sends to runs here (module docs); built by the first
    /// `init`.
    sched: Option<Scheduler>,
    events: Events,
    out: StepOutput<P::Output>,
    closed: bool,
    /// A step ended the process (`Done`, an error, or a panic): a scheduler would step it no more, and
    /// an `async fn` body cannot be resumed.
    ended: bool,
    /// A step was given a `Cancel` and did not leave it unread (pushed, or sent through the
    /// harness's scheduler): a `Done` after it ends the process `Shutdown`, as on a scheduler
    /// (asked to finish, it heard it and did).
    heard_cancel: bool,
    /// The asks the body sent and those waiting for an answer (`asks.rs`).
    asks: asks::AskBook,
    /// A completion [`complete`](Self::complete) refused, for the next step to report (the
    /// first, if several were).
    misscripted: Option<ScriptError>,
    /// What `init` builds the harness's scheduler from
    /// ([`scheduler_builder`](Self::scheduler_builder)).
    builder: Option<SchedulerBuilder>,
}

impl<P: Process> Harness<P> {
    /// A harness for `process`; call [`init`](Self::init) first, as `spawn` would.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::{Events, Process, Status, StepOutput};
    /// use procsched::testing::Harness;
    ///
    /// /// Done once it has seen three messages.
    /// struct Counter(usize);
    ///
    /// impl Process for Counter {
    ///     type Output = usize;
    ///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<usize>) -> Result<(), BoxError> {
    ///         self.0 += events.drain().count();
    ///         if self.0 >= 3 { out.done(self.0) } else { out.idle() }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let tick = || Message::new("tick", Payload::empty());
    /// let mut harness = Harness::new(Counter(0));
    /// harness.init("run", Payload::empty())?;
    /// harness.send(tick()).send(tick());
    /// assert!(matches!(harness.step()?.status, Status::Idle));
    /// harness.send(tick());
    /// assert!(matches!(harness.step()?.status, Status::Done(3)));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn new(process: P) -> Harness<P> {
        Harness {
            process: std::mem::ManuallyDrop::new(Box::new(process)),
            pid: stepped_pid(),
            host: HostId::next(),
            cell: None,
            sched: None,
            events: Events::default(),
            out: StepOutput::default(),
            closed: false,
            ended: false,
            heard_cancel: false,
            asks: asks::AskBook::default(),
            misscripted: None,
            builder: None,
        }
    }

    /// Builds the harness's own scheduler (module docs) from `builder` at [`init`](Self::init),
    /// instead of one worker with no handlers: the handlers the process's children call, a
    /// mailbox capacity, limits. A builder given after `init` has built the scheduler changes
    /// nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::{state_machine::Status, testing::Harness};
    ///
    /// struct Price(u32);
    /// procsched::command!(Price => u32);
    ///
    /// // Under test: a process whose child calls `Price`, a command the harness does not script.
    /// let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
    ///     let child = cx.scheduler().spawn_fn(|cx: ProcessCx| async move {
    ///         Ok::<_, BoxError>(cx.call(Price(20)).await?)
    ///     })?;
    ///     cx.trap_exit(true);
    ///     cx.link(child.pid());
    ///     Ok::<_, BoxError>(cx.recv_exit().await?.reason.is_normal())
    /// });
    /// let mut builder = Scheduler::builder();
    /// builder.workers(1).inline_handler(|Price(p): Price| Ok::<_, BoxError>(p + 1));
    /// harness.scheduler_builder(builder);
    /// harness.init("run", Payload::empty())?;
    /// let mut status = harness.step()?.status;
    /// while !matches!(status, Status::Done(_)) {
    ///     status = harness.step()?.status;
    /// }
    /// assert!(matches!(status, Status::Done(true)));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn scheduler_builder(&mut self, builder: SchedulerBuilder) -> &mut Self {
        if self.sched.is_some() {
            tracing::warn!(pid = %self.pid, "a harness's scheduler builder given after `init` changes nothing");
        } else {
            self.builder = Some(builder);
        }
        self
    }

    /// The process's PID, known from [`new`](Self::new) on: its entry in the table of the
    /// harness's scheduler (module docs) from [`init`](Self::init) on, so the processes it
    /// spawns never share it, and unique among every harness's in the program (two harnessed
    /// processes can ask each other). What is sent to it through that scheduler — a message
    /// (`cx.addr().send(..)`, [`addr`](Self::addr)), a linked process's exit signal, a
    /// monitor's `Down` — reaches its next step, as on a scheduler. Unlike a scheduler's
    /// steps, a harness step is given everything that arrived since the last (no
    /// `max_batch`), and runs in no `process` span.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, state_machine::Status, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
    ///     let child = cx.scheduler().spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })?;
    ///     Ok::<_, BoxError>((cx.pid(), child.pid()))
    /// });
    /// harness.init("run", Payload::empty())?;
    /// let Status::Done((me, child)) = harness.step()?.status else { panic!("done") };
    /// assert_eq!(me, harness.pid());
    /// assert_ne!(child, me);
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The harness's own scheduler (module docs), once [`init`](Self::init) built it: where
    /// the process's children run, and what a test makes the addresses it hands the process
    /// from (an address's process need not exist for an ask to it: the harness sends none).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) });
    /// assert!(harness.scheduler().is_none());
    /// harness.init("run", Payload::empty())?;
    /// let sched = harness.scheduler().ok_or("built by init")?;
    /// let worker = sched.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(7) })?;
    /// assert_ne!(worker.pid(), harness.pid());
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn scheduler(&self) -> Option<SchedulerHandle> {
        self.sched.as_ref().map(|sched| sched.handle().clone())
    }

    /// Runs `init(method, input)`, as `spawn` does. Once: a process is initialised once in its
    /// life, and a second `init` is refused ("already started") without running the process's
    /// own, which leaves it as it was.
    ///
    /// # Errors
    ///
    /// The process's own [`InitError`], or a failed one if the harness's scheduler (module
    /// docs) could not be built.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::error::InitError;
    /// use procsched::state_machine::{Events, Process, ProcessContext, Status, StepOutput};
    /// use procsched::testing::Harness;
    ///
    /// /// `greet` is its one entry point; its input is the name to greet.
    /// #[derive(Default)]
    /// struct Greeter(String);
    ///
    /// impl Process for Greeter {
    ///     type Output = String;
    ///     fn init(&mut self, _: &ProcessContext<'_>, method: &str, input: Payload) -> Result<(), InitError> {
    ///         if method != "greet" {
    ///             return Err(InitError::unknown_method(method));
    ///         }
    ///         self.0 = input.take::<String>().map_err(InitError::failed)?;
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, _: &mut Events, out: &mut StepOutput<String>) -> Result<(), BoxError> {
    ///         out.done(format!("hello, {}", self.0));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// // What `spawn` would refuse, `init` refuses here.
    /// let mut wrong = Harness::new(Greeter::default());
    /// assert!(matches!(wrong.init("wave", Payload::empty()), Err(InitError::UnknownMethod(_))));
    ///
    /// let mut harness = Harness::new(Greeter::default());
    /// harness.init("greet", Payload::new(String::from("Ada")))?;
    /// assert!(matches!(harness.step()?.status, Status::Done(text) if text == "hello, Ada"));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn init(&mut self, method: &str, input: Payload) -> Result<(), InitError> {
        if self.ended {
            // Its first `init` failed: the process never lived, and its `close` ran.
            return Err(InitError::failed(
                "the process has ended (its init failed, or a step ended it): it is started no more",
            ));
        }
        if self.sched.is_some() {
            // A scheduler runs `init` once: a script that runs it again is at fault, and a
            // state machine's own `init` would reset what its steps built.
            return Err(InitError::failed(
                "the process was already started: `spawn` runs `init` once in a process's life",
            ));
        }
        let built = match self.builder.take() {
            Some(mut builder) => builder.build(),
            None => Scheduler::builder().workers(1).build(),
        };
        let sched = built
            .map_err(|error| InitError::failed(format!("the harness's scheduler: {error}")))?;
        // Its first claim: the slot and generation `new` gave the PID.
        let cell = sched
            .handle()
            .open_stepped(self.pid, std::any::type_name::<P>())
            .ok_or_else(|| InitError::failed("the harness's scheduler refused its process"))?;
        self.host = ProcessContext::new(self.pid, sched.handle()).host_id();
        self.cell = Some(cell);
        self.sched = Some(sched);
        // No cell in the context, so no waker into it: the body's asks are recorded, not sent,
        // and a foreign future it awaits alone fails its step (module docs).
        let ctx = ProcessContext::for_host(self.pid, self.host);
        let process = &mut self.process;
        let init = catch_unwind(AssertUnwindSafe(|| process.init(&ctx, method, input)));
        let failed = !matches!(init, Ok(Ok(())));
        if failed {
            // As a spawn whose `init` fails or panics: `close` runs (a panic in it contained),
            // and the process never lived — a link or monitor its `init` made hears `NoProc`, a
            // name it registered is released.
            self.finish_as(ExitReason::NoProc, false);
        }
        // A panic in `init` reaches the test, as a step's does.
        init.unwrap_or_else(|panic| resume_unwind(panic))
    }

    /// The process's typed address on the harness's scheduler, once [`init`](Self::init) built
    /// it: a message sent to it (`M`, the message type of an `async fn` body's
    /// `ProcessCx<M>`) waits in the process's mailbox for its next step, after the events
    /// scripted with [`push`](Self::push) and [`send`](Self::send).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, state_machine::Status, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx<u32>| async move {
    ///     Ok::<_, BoxError>(cx.recv().await? + 1)
    /// });
    /// harness.init("run", Payload::empty())?;
    /// harness.addr::<u32>().ok_or("built by init")?.send(41)?;
    /// assert!(matches!(harness.step()?.status, Status::Done(42)));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn addr<M>(&self) -> Option<Addr<M>> {
        Some(self.sched.as_ref()?.handle().addr(self.pid))
    }

    /// Queues any event for the next step.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{testing::Harness, state_machine::Event};
    ///
    /// let mut harness = Harness::for_fn(|cx: procsched::ProcessCx| async move {
    ///     cx.yield_now().await;
    ///     Ok::<_, procsched::BoxError>(())
    /// });
    /// harness.init("run", procsched::Payload::empty())?;
    /// harness.push(Event::Woken);
    /// assert!(matches!(harness.step()?.status, procsched::state_machine::Status::Continue));
    /// # Ok::<(), procsched::BoxError>(())
    /// ```
    pub fn push(&mut self, event: Event) -> &mut Self {
        self.events.push(event);
        self
    }

    /// Queues a message for the next step.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, state_machine::Status, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx<u32>| async move {
    ///     Ok::<_, BoxError>(cx.recv().await? * 2)
    /// });
    /// harness.init("run", Payload::empty())?;
    /// assert!(matches!(harness.step()?.status, Status::Idle));
    /// harness.send(Message::new("n", Payload::new(4u32)));
    /// assert!(matches!(harness.step()?.status, Status::Done(8)));
    /// # Ok::<(), procsched::BoxError>(())
    /// ```
    pub fn send(&mut self, message: Message) -> &mut Self {
        self.push(Event::Message(message))
    }

    /// Queues `value` for the next step as a typed send would carry it (`Addr<M>::send`): what
    /// an `async fn` body's `cx.recv()` of a `ProcessCx<M>` returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, state_machine::Status, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx<String>| async move {
    ///     Ok::<_, BoxError>(cx.recv().await?.len())
    /// });
    /// harness.init("run", Payload::empty())?;
    /// harness.send_typed(String::from("four"));
    /// assert!(matches!(harness.step()?.status, Status::Done(4)));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn send_typed<M: Send + 'static>(&mut self, value: M) -> &mut Self {
        self.send(into_message(value))
    }

    /// Queues shutdown's `Cancel` for the next step. A process that then ends well (`Done`,
    /// a body's `Ok`) ends `Shutdown`, as on a scheduler: its links and monitors hear that it
    /// was asked to finish and did.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{prelude::*, state_machine::Status, testing::Harness};
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
    ///     let _ = cx.cancelled().await;
    ///     Ok::<_, BoxError>("bye")
    /// });
    /// harness.init("run", Payload::empty())?;
    /// assert!(matches!(harness.step()?.status, Status::Idle));
    /// harness.cancel();
    /// assert!(matches!(harness.step()?.status, Status::Done("bye")));
    /// # Ok::<(), procsched::BoxError>(())
    /// ```
    pub fn cancel(&mut self) -> &mut Self {
        self.push(Event::Cancel {
            reason: CancelReason::Shutdown,
        })
    }

    /// Ends the process if no step ended it: `close` runs (exactly once, as on a scheduler;
    /// dropping the harness does this too), it is stepped no more, and its links and monitors
    /// hear `Shutdown`. A step that ends the process (`Done`, an error, a panic, a linked exit),
    /// or an `init` that fails, runs `close` itself before its links and monitors hear the
    /// end, as the scheduler does; a panic in `close` is contained, and heard as
    /// `Panicked("in close: …")`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut harness = procsched::testing::Harness::for_fn(|_: procsched::ProcessCx| async {
    ///     Ok::<_, procsched::BoxError>(())
    /// });
    /// harness.close();
    /// ```
    pub fn close(&mut self) {
        self.finish(ExitReason::Shutdown);
    }

    /// The process ended with `reason`: `close` runs first, as on a scheduler — once, its
    /// panic contained and heard as the reason (`Panicked("in close: …")`) — then its entry
    /// in the table closes and its links and monitors hear it (`end`).
    fn finish(&mut self, reason: ExitReason) {
        self.finish_as(reason, true);
    }

    /// [`finish`](Self::finish) of a process that ended well (`Done`): `Normal`, or
    /// `Shutdown` if it heard its cancel — and a panic in `close` then says no more than for
    /// `Normal`, as on a scheduler (which names the ending only of a process that failed).
    pub(super) fn finish_done(&mut self) {
        let reason = match self.heard_cancel {
            true => ExitReason::Shutdown,
            false => ExitReason::Normal,
        };
        self.finish_as_ending(reason, true, false);
    }

    /// [`finish`](Self::finish); a panic in `close` changes the reason heard only if
    /// `close_panic_heard` (not for a process that never lived: a failed `init`'s `NoProc`).
    fn finish_as(&mut self, reason: ExitReason, close_panic_heard: bool) {
        let failed = reason != ExitReason::Normal;
        self.finish_as_ending(reason, close_panic_heard, failed);
    }

    /// [`finish_as`](Self::finish_as); `failed`: the process ended otherwise than well, and a
    /// panic in `close` names how (`(closing after it ended …)`).
    fn finish_as_ending(&mut self, mut reason: ExitReason, close_panic_heard: bool, failed: bool) {
        self.ended = true;
        if !self.closed {
            self.closed = true;
            let process = &mut self.process;
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| process.close())) {
                let message = panic_message(&*panic);
                tracing::warn!(pid = %self.pid, panic = %message, "close panicked");
                if close_panic_heard {
                    let ending = failed.then_some(&reason);
                    let message = close_panic_message(&message, ending);
                    reason = ExitReason::Panicked(message.into());
                }
            }
        }
        self.end(reason);
    }

    /// The process ended, with `reason` (module docs of `scheduler/stepped.rs`): its entry in
    /// the table closes, its links and monitors hear it. Once; a no-op after.
    fn end(&mut self, reason: ExitReason) {
        if let Some(cell) = &mut self.cell {
            cell.finish(reason);
        }
    }
}

impl<T: Send + 'static> Harness<Body<T>> {
    /// A harness for a process written as an `async fn` (as
    /// [`SchedulerHandle::spawn_fn`](crate::SchedulerHandle::spawn_fn) would run it).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::Status;
    /// use procsched::testing::Harness;
    ///
    /// /// The body under test, as the application spawns it: `sched.spawn_fn(shout)`.
    /// async fn shout(cx: ProcessCx<String>) -> Result<String, BoxError> {
    ///     Ok(cx.recv().await?.to_uppercase())
    /// }
    ///
    /// let mut harness = Harness::for_fn(shout);
    /// harness.init("run", Payload::empty())?;
    /// harness.send(Message::new("text", Payload::new(String::from("hi"))));
    /// assert!(matches!(harness.step()?.status, Status::Done(text) if text == "HI"));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn for_fn<F, Fut, E, M>(body: F) -> Self
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        Harness::new(Body::new(body))
    }
}

impl<P: Process> Drop for Harness<P> {
    fn drop(&mut self) {
        // Also while the thread panics (a failing test): `close` runs once whatever happened,
        // and a panic in it is contained (`finish`), so it cannot abort the process; nor can
        // the process's own drop (a body's future holding a value whose drop panics), run
        // contained as the scheduler runs it.
        self.close();
        // SAFETY: `self.process` is not used again: this is the harness's drop, it runs once,
        // and no field's own drop reads the process.
        let process = unsafe { std::mem::ManuallyDrop::take(&mut self.process) };
        if crate::process::drop_contained(process) != 0 {
            tracing::warn!(pid = %self.pid, "the process's drop panicked (contained)");
        }
        // Before the scheduler goes (`cell` is declared first): its links and monitors hear
        // the process's end, if no step ended it.
        self.cell.take();
    }
}

impl<P: Process> fmt::Debug for Harness<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("pid", &self.pid)
            .field("queued_events", &self.events.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}
