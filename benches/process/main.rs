//! Process-level benchmarks: procsched's `Scheduler` against the same [`Process`] state machines
//! driven as tokio actors (one tokio task per process, see `actors.rs`).
//!
//! Every workload is a criterion group with one benchmark per peer, `<workload>/procsched` and
//! `<workload>/tokio-actors`. Both peers get the same number of worker threads
//! (`PROCSCHED_BENCH_WORKERS`, default 2): procsched runs its processes on that many workers and
//! its async handlers on a tokio runtime of that many threads (the `tokio_handle` it is given);
//! the actors run processes and handlers on one tokio runtime of that many threads. Inline
//! workloads leave procsched's tokio runtime parked.
//!
//! | workload | one iteration |
//! |---|---|
//! | `single_step` | spawn [`BURST`] processes that are done on their first step, await all |
//! | `one_yield` | spawn [`BURST`] processes doing one inline yield, await all |
//! | `many_yields` | [`MANY_YIELDS_PROCESSES`] processes, each doing [`MANY_YIELDS`] inline yields one after the other |
//! | `async_yields` | [`ASYNC_PROCESSES`] processes × [`ASYNC_YIELDS`] async-handler yields |
//! | `send_to_blocked` | [`SEND_BATCH`] sends from the bench thread to a process blocked on a yield that never completes |
//! | `burst_spawn` | spawn [`BURST_SPAWN`] processes doing one async yield, as fast as possible, await all |
//! | `parallel_spawn` | [`PARALLEL_PER_THREAD`] processes (two inline yields each) spawned from each of `WORKERS` threads at once |
//! | `ring` | [`RING_SIZE`] processes pass a token [`RING_HOPS`] hops (spawn, link, run, stop) |
//! | `fan_in` | `WORKERS` threads × [`FAN_IN_THREAD_MSGS`] + [`FAN_IN_PROCESSES`] processes × [`FAN_IN_PROCESS_MSGS`] messages into one counting process |
//! | `skynet` | a 10-ary tree with [`SKYNET_LEAVES`] leaves, children spawned from their parent's step, results sent to the parent |
//!
//! After criterion finishes, the medians it saved are collected into a Markdown table (with a
//! per-process / per-yield / per-send / msgs-per-second column), printed and written to
//! `target/bench-process.md`; the procsched/tokio-actors ratios are drawn to
//! `target/bench-process.svg`. Peak RSS per process of `burst_spawn` and `skynet` is measured in
//! a fresh child process per peer (the bench re-runs itself), so neither criterion's iterations
//! nor the other peer's freed-but-retained heap skew the high-water mark.
//!
//! ```text
//! cargo bench -p procsched-benches --bench process               # full run, about 3 minutes on 2 cores
//! cargo bench -p procsched-benches --bench process -- --quick    # smoke run, about 1 minute
//! cargo bench -p procsched-benches --bench process -- ring       # one workload
//! ```
//!
//! Every iteration checks its results (counts, sums) with cheap asserts, and every wait has a
//! watchdog, so a lost wake-up fails loudly instead of hanging.
//!
//! `--quick` times a few iterations right after each peer starts; its numbers can swing by 2x
//! between runs (more on a shared machine), so compare peers on full runs. Both peers use the
//! system allocator, whose behaviour (glibc returning freed heap to the OS between bursts) is a
//! visible part of the spawn-heavy workloads.

mod actors;
use procsched_benches as common;

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use actors::ActorSystem;
use common::WORKERS;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use procsched::{
    BoxError, CommandError, Event, Events, InitError, Message, Payload, Pid, Process,
    ProcessContext, ProcessHandle, Scheduler, SchedulerHandle, StepOutput,
};

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

/// Processes per iteration of `single_step` and `one_yield`.
const BURST: usize = 10_000;
/// Inline yields of each process of `many_yields`.
const MANY_YIELDS: u64 = 100;
/// Processes of `many_yields`, run at once: enough that the yields, not the one wake of the
/// joining thread, dominate an iteration (with a single process, both peers measure mostly
/// cross-thread wake latency).
const MANY_YIELDS_PROCESSES: usize = 100;
/// Processes of `async_yields`.
const ASYNC_PROCESSES: usize = 1_000;
/// Async yields per process of `async_yields`.
const ASYNC_YIELDS: u64 = 10;
/// Sends per iteration of `send_to_blocked`.
const SEND_BATCH: u64 = 10_000;
/// Processes per iteration of `burst_spawn`.
const BURST_SPAWN: usize = 100_000;
/// Processes spawned by each spawning thread in `parallel_spawn`.
const PARALLEL_PER_THREAD: usize = 10_000;
/// Processes in the `ring`.
const RING_SIZE: usize = 1_000;
/// Hops of the `ring` token.
const RING_HOPS: u64 = 100_000;
/// Messages each of the `WORKERS` plain threads sends in `fan_in`.
const FAN_IN_THREAD_MSGS: u64 = 5_000;
/// Sending processes in `fan_in`.
const FAN_IN_PROCESSES: usize = 1_000;
/// Messages each sending process sends in `fan_in`.
const FAN_IN_PROCESS_MSGS: u64 = 5;
/// Leaves of the `skynet` tree (a power of ten).
const SKYNET_LEAVES: u64 = 1_000_000;

/// How long any wait of the bench thread may take before the workload is declared stuck. A
/// watchdog, not synchronisation: it turns a lost wake-up into a panic with a message.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long stopping a peer may take.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

fn fan_in_total() -> u64 {
    *WORKERS as u64 * FAN_IN_THREAD_MSGS + FAN_IN_PROCESSES as u64 * FAN_IN_PROCESS_MSGS
}

/// Processes in the `skynet` tree: every level of the 10-ary tree down to the leaves.
fn skynet_processes() -> u64 {
    let mut total = 0;
    let mut level = SKYNET_LEAVES;
    while level >= 1 {
        total += level;
        level /= 10;
    }
    total
}

// ---------------------------------------------------------------------------
// Commands and handlers (the same on both peers)
// ---------------------------------------------------------------------------

/// Inline: `n + 1`.
struct Inc(u64);
/// Async, completed from a tokio task: `n + 1`.
struct AsyncInc(u64);
/// Async, never completes: the process stays blocked on it.
struct Never;
/// Async, completes when the gate opens (RSS runs only: keeps every process alive at once).
struct Gate(Arc<GateState>);

fn inc(Inc(n): Inc) -> Result<Payload, CommandError> {
    Ok(Payload::new(n + 1))
}

async fn async_inc(AsyncInc(n): AsyncInc) -> Result<Payload, CommandError> {
    Ok(Payload::new(n + 1))
}

async fn never(_: Never) -> Result<Payload, CommandError> {
    std::future::pending().await
}

async fn gate(Gate(state): Gate) -> Result<Payload, CommandError> {
    if state.arrived.fetch_add(1, Ordering::AcqRel) + 1 == state.expected {
        // The receiver only goes away if the measurement already failed.
        let _ = state.all_in.send(());
    }
    // `Err` means the semaphore was closed, which is how the gate opens.
    let _ = state.open.acquire().await;
    Ok(Payload::new(1u64))
}

/// The gate of [`Gate`]: counts arrivals, tells the bench thread when all are in, then holds
/// them until it is closed.
struct GateState {
    arrived: AtomicUsize,
    expected: usize,
    all_in: mpsc::SyncSender<()>,
    open: tokio::sync::Semaphore,
}

// ---------------------------------------------------------------------------
// How a process reaches other processes, per peer
// ---------------------------------------------------------------------------

/// What a process keeps to spawn and send from inside `step`: a [`SchedulerHandle`] on
/// procsched, an [`actors::Handle`] on the actors. Processes that talk to others are generic
/// over it, so the very same state machine runs on both peers.
trait Net: Clone + Send + Sync + 'static {
    /// A process's address: a [`Pid`] on procsched, a mailbox sender on the actors.
    type Addr: Clone + Send + Sync + 'static;

    /// What the spawner puts into a new process for its `init` to finish with
    /// [`complete`](Self::complete). procsched: nothing, `init` takes `ctx.scheduler()`.
    fn preset(&self) -> Option<Self>;

    /// Run in `init`: the handle the process keeps.
    fn complete(preset: Option<Self>, ctx: &ProcessContext<'_>) -> Self;

    /// Run in `init`: the process's own address.
    fn own_addr(ctx: &ProcessContext<'_>) -> Self::Addr;

    /// Sends `message` to `to`.
    fn send_to(&self, to: &Self::Addr, message: Message) -> Result<(), BoxError>;

    /// Spawns a process without keeping its handle.
    fn spawn_detached<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<(), BoxError>;
}

impl Net for SchedulerHandle {
    type Addr = Pid;

    fn preset(&self) -> Option<Self> {
        None
    }

    fn complete(_: Option<Self>, ctx: &ProcessContext<'_>) -> Self {
        ctx.scheduler().clone()
    }

    fn own_addr(ctx: &ProcessContext<'_>) -> Pid {
        ctx.pid()
    }

    fn send_to(&self, to: &Pid, message: Message) -> Result<(), BoxError> {
        self.send(*to, message).map_err(Into::into)
    }

    fn spawn_detached<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<(), BoxError> {
        // Dropping a `ProcessHandle` detaches the process.
        self.spawn(process, method, input)
            .map(drop)
            .map_err(Into::into)
    }
}

impl Net for actors::Handle {
    type Addr = actors::Addr;

    fn preset(&self) -> Option<Self> {
        Some(self.clone())
    }

    fn complete(preset: Option<Self>, _: &ProcessContext<'_>) -> Self {
        preset.expect("an actor is spawned with its system handle preset")
    }

    fn own_addr(_: &ProcessContext<'_>) -> actors::Addr {
        actors::own_addr()
    }

    fn send_to(&self, to: &actors::Addr, message: Message) -> Result<(), BoxError> {
        to.send(message)
    }

    fn spawn_detached<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<(), BoxError> {
        self.spawn_detached(process, method, input)
            .map_err(Into::into)
    }
}

// ---------------------------------------------------------------------------
// The processes
// ---------------------------------------------------------------------------

fn expect_run(method: &str) -> Result<(), InitError> {
    match method {
        "run" => Ok(()),
        other => Err(InitError::unknown_method(other)),
    }
}

fn downcast_u64(payload: Payload) -> Result<u64, BoxError> {
    payload
        .downcast::<u64>()
        .map_err(|other| format!("expected a u64, got {other:?}").into())
}

/// Done on its first step (`single_step`).
struct Once;

impl Process for Once {
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        out.done(Payload::empty());
        Ok(())
    }
}

/// Yields one command, finishes with its result (`one_yield`, `burst_spawn`, RSS runs).
struct YieldOnce<C> {
    command: Option<C>,
}

impl<C: Send + 'static> YieldOnce<C> {
    fn new(command: C) -> Self {
        YieldOnce {
            command: Some(command),
        }
    }
}

impl<C: Send + 'static> Process for YieldOnce<C> {
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if let Some(command) = self.command.take() {
            out.yield_command(1, command);
            out.wait();
            return Ok(());
        }
        match events.pop() {
            Some(Event::YieldComplete { tag: 1, result }) => out.done(result?),
            other => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    }
}

/// Counts to `n` by yielding `Inc`/`AsyncInc` `n` times, one after the other, feeding each
/// result into the next command (`many_yields`, `async_yields`, `parallel_spawn`).
struct Counter<C> {
    remaining: u64,
    value: u64,
    waiting: bool,
    command: PhantomData<fn() -> C>,
}

impl<C> Counter<C> {
    fn new(yields: u64) -> Self {
        Counter {
            remaining: yields,
            value: 0,
            waiting: false,
            command: PhantomData,
        }
    }
}

impl<C: From<u64> + Send + 'static> Process for Counter<C> {
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            match event {
                Event::YieldComplete { result, .. } => {
                    self.value = downcast_u64(result?)?;
                    self.waiting = false;
                }
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if !self.waiting {
            if self.remaining == 0 {
                out.done(Payload::new(self.value));
                return Ok(());
            }
            self.remaining -= 1;
            self.waiting = true;
            out.yield_command(self.remaining, C::from(self.value));
        }
        out.wait();
        Ok(())
    }
}

impl From<u64> for Inc {
    fn from(n: u64) -> Self {
        Inc(n)
    }
}

impl From<u64> for AsyncInc {
    fn from(n: u64) -> Self {
        AsyncInc(n)
    }
}

/// Blocks on a [`Never`] yield and counts the messages it is sent (`send_to_blocked`). `flush`
/// reports the count to the bench thread; `stop` finishes with it.
struct Blocked {
    started: bool,
    received: u64,
    ack: mpsc::Sender<u64>,
}

impl Process for Blocked {
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.yield_command(1, Never);
        }
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            match &*message.topic {
                "flush" => self.ack.send(self.received)?,
                "stop" => {
                    out.done(Payload::new(self.received));
                    return Ok(());
                }
                _ => self.received += 1,
            }
        }
        out.wait();
        Ok(())
    }
}

/// One process of the `ring`: learns its successor from a `link` message, forwards the
/// `token` (hops left) to it, and on the last hop sends `stop` round the ring. Finishes with
/// the number of tokens it handled.
struct Ring<N: Net> {
    net: Option<N>,
    next: Option<N::Addr>,
    handled: u64,
}

impl<N: Net> Ring<N> {
    fn new(preset: Option<N>) -> Self {
        Ring {
            net: preset,
            next: None,
            handled: 0,
        }
    }
}

impl<N: Net> Process for Ring<N> {
    fn init(
        &mut self,
        ctx: &ProcessContext<'_>,
        method: &str,
        _: Payload,
    ) -> Result<(), InitError> {
        expect_run(method)?;
        self.net = Some(N::complete(self.net.take(), ctx));
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        let net = self.net.as_ref().ok_or("not initialised")?;
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            match &*message.topic {
                "link" => {
                    let next = message.payload.downcast::<N::Addr>();
                    self.next = Some(next.map_err(|p| format!("bad link {p:?}"))?);
                }
                "token" => {
                    let next = self.next.as_ref().ok_or("token before link")?;
                    self.handled += 1;
                    match downcast_u64(message.payload)? {
                        0 => {
                            net.send_to(next, Message::new("stop", Payload::empty()))?;
                            out.done(Payload::new(self.handled));
                            return Ok(());
                        }
                        hops => net.send_to(next, Message::new("token", Payload::new(hops - 1)))?,
                    }
                }
                "stop" => {
                    if let Some(next) = &self.next {
                        // The stop ends where it started, at a process that has finished.
                        let _ = net.send_to(next, Message::new("stop", Payload::empty()));
                    }
                    out.done(Payload::new(self.handled));
                    return Ok(());
                }
                other => return Err(format!("unexpected topic {other}").into()),
            }
        }
        out.idle();
        Ok(())
    }
}

/// Sends [`FAN_IN_PROCESS_MSGS`] messages to the address it is given, then finishes (`fan_in`).
struct FanSender<N: Net> {
    net: Option<N>,
    to: Option<N::Addr>,
}

impl<N: Net> Process for FanSender<N> {
    fn init(
        &mut self,
        ctx: &ProcessContext<'_>,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        expect_run(method)?;
        self.net = Some(N::complete(self.net.take(), ctx));
        let to = input.downcast::<N::Addr>();
        self.to = Some(to.map_err(|p| InitError::failed(format!("bad target {p:?}")))?);
        Ok(())
    }

    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        let (net, to) = self.net.as_ref().zip(self.to.as_ref()).ok_or("no init")?;
        for _ in 0..FAN_IN_PROCESS_MSGS {
            net.send_to(to, Message::new("add", Payload::new(1u64)))?;
        }
        out.done(Payload::empty());
        Ok(())
    }
}

/// Counts the messages it receives and finishes with the count once it reaches the expected
/// total (`fan_in`).
struct FanCounter {
    expected: u64,
    received: u64,
}

impl Process for FanCounter {
    fn init(
        &mut self,
        _: &ProcessContext<'_>,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        expect_run(method)?;
        self.expected = downcast_u64(input).map_err(InitError::failed)?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            self.received += downcast_u64(message.payload)?;
        }
        if self.received >= self.expected {
            out.done(Payload::new(self.received));
        } else {
            out.idle();
        }
        Ok(())
    }
}

/// Where a `skynet` process sits in the tree.
struct SkynetArgs<A> {
    /// Index of its first leaf.
    start: u64,
    /// Leaves under it (a power of ten).
    size: u64,
    /// Where to send its sum; `None` for the root, which finishes with it instead.
    parent: Option<A>,
}

/// A `skynet` node: a leaf reports its index, a parent spawns ten children from its first
/// step, sums what they send and reports the sum to its own parent.
struct Skynet<N: Net> {
    net: Option<N>,
    me: Option<N::Addr>,
    parent: Option<N::Addr>,
    start: u64,
    size: u64,
    /// Children that have not reported yet; `None` until they are spawned.
    pending: Option<u64>,
    sum: u64,
}

impl<N: Net> Skynet<N> {
    fn new(preset: Option<N>) -> Self {
        Skynet {
            net: preset,
            me: None,
            parent: None,
            start: 0,
            size: 0,
            pending: None,
            sum: 0,
        }
    }
}

/// Sends a `skynet` node's `value` to its parent and finishes, or finishes with it at the root.
fn report<N: Net>(
    net: &N,
    parent: Option<N::Addr>,
    value: u64,
    out: &mut StepOutput,
) -> Result<(), BoxError> {
    match parent {
        Some(parent) => {
            net.send_to(&parent, Message::new("sum", Payload::new(value)))?;
            out.done(Payload::empty());
        }
        None => out.done(Payload::new(value)),
    }
    Ok(())
}

impl<N: Net> Process for Skynet<N> {
    fn init(
        &mut self,
        ctx: &ProcessContext<'_>,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        expect_run(method)?;
        let args = input
            .downcast::<SkynetArgs<N::Addr>>()
            .map_err(|p| InitError::failed(format!("bad input {p:?}")))?;
        self.net = Some(N::complete(self.net.take(), ctx));
        // Only parents are written to.
        if args.size > 1 {
            self.me = Some(N::own_addr(ctx));
        }
        (self.start, self.size, self.parent) = (args.start, args.size, args.parent);
        gauge::spawned();
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        // Borrowed, not cloned: a clone per step would bounce the handle's reference count
        // between the workers.
        let net = self.net.as_ref().ok_or("not initialised")?;
        if self.size == 1 {
            return report(net, self.parent.take(), self.start, out);
        }
        let Some(pending) = &mut self.pending else {
            let child_size = self.size / 10;
            for child in 0..10 {
                let args = SkynetArgs {
                    start: self.start + child * child_size,
                    size: child_size,
                    parent: self.me.clone(),
                };
                let process = Skynet::<N>::new(net.preset());
                net.spawn_detached(process, "run", Payload::new(args))?;
            }
            self.pending = Some(10);
            out.idle();
            return Ok(());
        };
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            self.sum += downcast_u64(message.payload)?;
            *pending -= 1;
        }
        if *pending == 0 {
            report(net, self.parent.take(), self.sum, out)
        } else {
            out.idle();
            Ok(())
        }
    }

    fn close(&mut self) {
        // `size` is set by a successful `init`, the only one counted as spawned.
        if self.size > 0 {
            gauge::closed();
        }
    }
}

/// Live `skynet` processes, counted only in RSS runs (one relaxed load otherwise).
mod gauge {
    use super::*;

    static ON: AtomicBool = AtomicBool::new(false);
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    pub(super) fn enable() {
        ON.store(true, Ordering::Relaxed);
    }

    pub(super) fn spawned() {
        if ON.load(Ordering::Relaxed) {
            let live = LIVE.fetch_add(1, Ordering::Relaxed) + 1;
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
    }

    pub(super) fn closed() {
        if ON.load(Ordering::Relaxed) {
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(super) fn peak() -> usize {
        PEAK.load(Ordering::Relaxed)
    }
}

// ---------------------------------------------------------------------------
// The peers, as seen from the bench thread
// ---------------------------------------------------------------------------

/// One side of the comparison: builds itself with [`WORKERS`] threads and the handlers above,
/// spawns, sends and joins from outside.
trait Peer: Sync + Sized {
    /// criterion function id and table column.
    const NAME: &'static str;
    /// What its processes use to reach others.
    type Net: Net;
    /// What `spawn` returns.
    type Handle: Send;

    /// Starts the peer (outside any timed region).
    fn build() -> Self;

    /// The preset for processes spawned from the bench thread.
    fn preset(&self) -> Option<Self::Net>;

    /// Spawns; panics if `init` fails (the processes here never refuse).
    fn spawn<P: Process>(&self, process: P, input: Payload) -> Self::Handle;

    /// The address of a spawned process.
    fn addr(handle: &Self::Handle) -> <Self::Net as Net>::Addr;

    /// Sends from outside; panics if the process is gone.
    fn send(&self, to: &<Self::Net as Net>::Addr, message: Message);

    /// Awaits `handles` in order, passing each result to `check`; panics on a process error or
    /// after [`STALL_TIMEOUT`].
    fn join_each(&self, handles: impl Iterator<Item = Self::Handle>, check: impl FnMut(Payload));

    /// [`join_each`](Self::join_each) over `handles`, leaving it empty (capacity kept).
    fn join_all(&self, handles: &mut Vec<Self::Handle>, check: impl FnMut(Payload)) {
        self.join_each(handles.drain(..), check);
    }

    /// Awaits one process's result.
    fn join(&self, handle: Self::Handle) -> Payload {
        let mut result = None;
        self.join_each(std::iter::once(handle), |payload| result = Some(payload));
        result.expect("join_each passed the result on")
    }

    /// Stops the peer and its threads.
    fn shutdown(self);
}

/// procsched: a [`Scheduler`] with `WORKERS` workers, its async handlers on a tokio runtime
/// with `WORKERS` threads.
struct Procsched {
    scheduler: Scheduler,
    io: tokio::runtime::Runtime,
}

impl Peer for Procsched {
    const NAME: &'static str = "procsched";
    type Net = SchedulerHandle;
    type Handle = ProcessHandle;

    fn build() -> Self {
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(*WORKERS)
            .thread_name("bench-procsched-io")
            .enable_all()
            .build()
            .expect("failed to build the tokio runtime");
        let scheduler = Scheduler::builder()
            .workers(*WORKERS)
            .thread_name("bench-procsched")
            .tokio_handle(io.handle().clone())
            .inline_handler(inc)
            .async_handler(async_inc)
            .async_handler(never)
            .async_handler(gate)
            .build()
            .expect("failed to build the scheduler");
        Procsched { scheduler, io }
    }

    fn preset(&self) -> Option<SchedulerHandle> {
        None
    }

    fn spawn<P: Process>(&self, process: P, input: Payload) -> ProcessHandle {
        match self.scheduler.spawn(process, "run", input) {
            Ok(handle) => handle,
            Err(error) => panic!("spawn failed: {error}"),
        }
    }

    fn addr(handle: &ProcessHandle) -> Pid {
        handle.pid()
    }

    fn send(&self, to: &Pid, message: Message) {
        if let Err(error) = self.scheduler.send(*to, message) {
            panic!("send failed: {error}");
        }
    }

    fn join_each(
        &self,
        handles: impl Iterator<Item = ProcessHandle>,
        mut check: impl FnMut(Payload),
    ) {
        let all = async {
            for handle in handles {
                match handle.await {
                    Ok(payload) => check(payload),
                    Err(error) => panic!("process failed: {error}"),
                }
            }
        };
        // The watchdog's timer lives on the tokio runtime; `enter` lets it register there
        // while procsched's `block_on` polls.
        let watched = {
            let _runtime = self.io.enter();
            tokio::time::timeout(STALL_TIMEOUT, all)
        };
        if self.scheduler.block_on(watched).is_err() {
            panic!("procsched: processes still running after {STALL_TIMEOUT:?}");
        }
    }

    fn shutdown(self) {
        let report = self.scheduler.shutdown(SHUTDOWN_TIMEOUT);
        if report.forced > 0 {
            eprintln!("warning: procsched had to force {report:?} at shutdown");
        }
        drop(self.scheduler);
        self.io.shutdown_timeout(SHUTDOWN_TIMEOUT);
    }
}

impl Peer for ActorSystem {
    const NAME: &'static str = "tokio-actors";
    type Net = actors::Handle;
    type Handle = actors::ActorHandle;

    fn build() -> Self {
        ActorSystem::builder(*WORKERS)
            .inline_handler(inc)
            .async_handler(async_inc)
            .async_handler(never)
            .async_handler(gate)
            .build()
    }

    fn preset(&self) -> Option<actors::Handle> {
        Some(self.handle().clone())
    }

    fn spawn<P: Process>(&self, process: P, input: Payload) -> actors::ActorHandle {
        match self.handle().spawn(process, "run", input) {
            Ok(handle) => handle,
            Err(error) => panic!("spawn failed: {error}"),
        }
    }

    fn addr(handle: &actors::ActorHandle) -> actors::Addr {
        handle.addr().clone()
    }

    fn send(&self, to: &actors::Addr, message: Message) {
        if let Err(error) = to.send(message) {
            panic!("send failed: {error}");
        }
    }

    fn join_each(
        &self,
        handles: impl Iterator<Item = actors::ActorHandle>,
        mut check: impl FnMut(Payload),
    ) {
        let all = async {
            for handle in handles {
                match handle.join().await {
                    Ok(payload) => check(payload),
                    Err(error) => panic!("process failed: {error}"),
                }
            }
        };
        let watched = self.block_on(async { tokio::time::timeout(STALL_TIMEOUT, all).await });
        if watched.is_err() {
            panic!("tokio-actors: processes still running after {STALL_TIMEOUT:?}");
        }
    }

    fn shutdown(self) {
        ActorSystem::shutdown(self, SHUTDOWN_TIMEOUT);
    }
}

// ---------------------------------------------------------------------------
// The workloads
// ---------------------------------------------------------------------------

/// Every workload, in run and table order; the criterion group is its `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    SingleStep,
    OneYield,
    ManyYields,
    AsyncYields,
    SendToBlocked,
    BurstSpawn,
    ParallelSpawn,
    Ring,
    FanIn,
    Skynet,
}

/// How a workload's iteration time is turned into the table's per-unit column.
enum Unit {
    /// Iteration time divided by `count`, e.g. `ns/process`.
    Per { count: f64, what: &'static str },
    /// `count` items per iteration, shown as a rate.
    Rate { count: f64, what: &'static str },
}

impl Workload {
    const ALL: [Workload; 10] = [
        Workload::SingleStep,
        Workload::OneYield,
        Workload::ManyYields,
        Workload::AsyncYields,
        Workload::SendToBlocked,
        Workload::BurstSpawn,
        Workload::ParallelSpawn,
        Workload::Ring,
        Workload::FanIn,
        Workload::Skynet,
    ];

    fn name(self) -> &'static str {
        match self {
            Workload::SingleStep => "single_step",
            Workload::OneYield => "one_yield",
            Workload::ManyYields => "many_yields",
            Workload::AsyncYields => "async_yields",
            Workload::SendToBlocked => "send_to_blocked",
            Workload::BurstSpawn => "burst_spawn",
            Workload::ParallelSpawn => "parallel_spawn",
            Workload::Ring => "ring",
            Workload::FanIn => "fan_in",
            Workload::Skynet => "skynet",
        }
    }

    fn unit(self) -> Unit {
        let per = |count: f64, what| Unit::Per { count, what };
        match self {
            Workload::SingleStep | Workload::OneYield => per(BURST as f64, "process"),
            Workload::ManyYields => {
                per((MANY_YIELDS_PROCESSES as u64 * MANY_YIELDS) as f64, "yield")
            }
            Workload::AsyncYields => per((ASYNC_PROCESSES as u64 * ASYNC_YIELDS) as f64, "yield"),
            Workload::SendToBlocked => per(SEND_BATCH as f64, "send"),
            Workload::BurstSpawn => per(BURST_SPAWN as f64, "process"),
            Workload::ParallelSpawn => per((*WORKERS * PARALLEL_PER_THREAD) as f64, "process"),
            Workload::Ring => per(RING_HOPS as f64, "hop"),
            Workload::FanIn => Unit::Rate {
                count: fan_in_total() as f64,
                what: "msgs/s",
            },
            Workload::Skynet => per(skynet_processes() as f64, "process"),
        }
    }

    /// Per-group criterion settings, chosen so the whole run fits the time budget (module
    /// docs). Long iterations get `Flat` sampling: `Linear` would run 1 + 2 + … + n
    /// iterations, 55 for ten samples.
    fn configure(self, group: &mut BenchmarkGroup<'_, WallTime>) {
        match self {
            Workload::BurstSpawn | Workload::Skynet => {
                // `--quick` doubles the iteration count until the estimate settles or the
                // measurement time is spent, so with iterations of seconds a long measurement
                // time would let a single quick benchmark run for half a minute.
                let measurement = if quick_mode() { 4 } else { 10 };
                group
                    .sample_size(10)
                    .sampling_mode(SamplingMode::Flat)
                    .warm_up_time(Duration::from_millis(500))
                    .measurement_time(Duration::from_secs(measurement));
            }
            Workload::Ring | Workload::ParallelSpawn | Workload::FanIn => {
                group
                    .sample_size(10)
                    .sampling_mode(SamplingMode::Flat)
                    .measurement_time(Duration::from_secs(3));
            }
            _ => {}
        }
    }

    fn bench<R: Peer>(self, group: &mut BenchmarkGroup<'_, WallTime>) {
        let peer = R::build();
        match self {
            Workload::SingleStep => {
                let mut handles = Vec::with_capacity(BURST);
                group.bench_function(R::NAME, |b| b.iter(|| single_step(&peer, &mut handles)));
            }
            Workload::OneYield => {
                let mut handles = Vec::with_capacity(BURST);
                group.bench_function(R::NAME, |b| b.iter(|| one_yield(&peer, &mut handles)));
            }
            Workload::ManyYields => {
                let mut handles = Vec::with_capacity(MANY_YIELDS_PROCESSES);
                group.bench_function(R::NAME, |b| b.iter(|| many_yields(&peer, &mut handles)));
            }
            Workload::AsyncYields => {
                let mut handles = Vec::with_capacity(ASYNC_PROCESSES);
                group.bench_function(R::NAME, |b| b.iter(|| async_yields(&peer, &mut handles)));
            }
            Workload::SendToBlocked => send_to_blocked(&peer, group),
            Workload::BurstSpawn => {
                let mut handles = Vec::with_capacity(BURST_SPAWN);
                group.bench_function(R::NAME, |b| b.iter(|| burst_spawn(&peer, &mut handles)));
            }
            Workload::ParallelSpawn => {
                let mut per_thread: Vec<Vec<R::Handle>> = (0..*WORKERS)
                    .map(|_| Vec::with_capacity(PARALLEL_PER_THREAD))
                    .collect();
                group.bench_function(R::NAME, |b| {
                    b.iter(|| parallel_spawn(&peer, &mut per_thread))
                });
            }
            Workload::Ring => {
                let mut handles = Vec::with_capacity(RING_SIZE);
                group.bench_function(R::NAME, |b| b.iter(|| ring(&peer, &mut handles)));
            }
            Workload::FanIn => {
                let mut handles = Vec::with_capacity(FAN_IN_PROCESSES);
                group.bench_function(R::NAME, |b| b.iter(|| fan_in(&peer, &mut handles)));
            }
            Workload::Skynet => {
                group.bench_function(R::NAME, |b| b.iter(|| skynet(&peer, SKYNET_LEAVES)));
            }
        }
        peer.shutdown();
    }
}

/// Spawn [`BURST`] processes that finish on their first step; await all.
fn single_step<R: Peer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..BURST {
        handles.push(peer.spawn(Once, Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert!(result.is::<()>());
        finished += 1;
    });
    assert_eq!(finished, BURST);
}

/// Spawn [`BURST`] processes that yield once to the inline `Inc` handler; await all.
fn one_yield<R: Peer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..BURST {
        handles.push(peer.spawn(YieldOnce::new(Inc(0)), Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert_eq!(result.downcast::<u64>().ok(), Some(1));
        finished += 1;
    });
    assert_eq!(finished, BURST);
}

/// [`MANY_YIELDS_PROCESSES`] processes each yield [`MANY_YIELDS`] times to the inline `Inc`
/// handler, each yield after the previous one completed.
fn many_yields<R: Peer>(peer: &R, handles: &mut Vec<R::Handle>) {
    run_counters::<R, Inc>(peer, handles, MANY_YIELDS_PROCESSES, MANY_YIELDS);
}

/// [`ASYNC_PROCESSES`] processes each yield [`ASYNC_YIELDS`] times, serially, to the async
/// `AsyncInc` handler (a tokio task per yield).
fn async_yields<R: Peer>(peer: &R, handles: &mut Vec<R::Handle>) {
    run_counters::<R, AsyncInc>(peer, handles, ASYNC_PROCESSES, ASYNC_YIELDS);
}

/// Spawns `processes` [`Counter`]s of `yields` yields of command `C` each, awaits them all and
/// checks every result.
fn run_counters<R: Peer, C: From<u64> + Send + 'static>(
    peer: &R,
    handles: &mut Vec<R::Handle>,
    processes: usize,
    yields: u64,
) {
    for _ in 0..processes {
        handles.push(peer.spawn(Counter::<C>::new(yields), Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert_eq!(result.downcast::<u64>().ok(), Some(yields));
        finished += 1;
    });
    assert_eq!(finished, processes);
}

/// Batches of [`SEND_BATCH`] sends from the bench thread to one process blocked on a yield
/// that never completes. Only the sends are timed; between batches the process reports how
/// many messages it has seen, which both checks delivery and lets each batch start against a
/// drained, blocked process.
fn send_to_blocked<R: Peer>(peer: &R, group: &mut BenchmarkGroup<'_, WallTime>) {
    let (ack, acks) = mpsc::channel();
    let process = Blocked {
        started: false,
        received: 0,
        ack,
    };
    let handle = peer.spawn(process, Payload::empty());
    let addr = R::addr(&handle);
    let mut sent = 0;
    group.bench_function(R::NAME, |b| {
        b.iter_custom(|batches| {
            let mut timed = Duration::ZERO;
            for _ in 0..batches {
                let start = Instant::now();
                for i in 0..SEND_BATCH {
                    peer.send(&addr, Message::new("m", Payload::new(i)));
                }
                timed += start.elapsed();
                sent += SEND_BATCH;
                peer.send(&addr, Message::new("flush", Payload::empty()));
                let seen = acks
                    .recv_timeout(STALL_TIMEOUT)
                    .expect("send_to_blocked: no flush acknowledgement");
                assert_eq!(seen, sent, "send_to_blocked: messages lost");
            }
            timed
        })
    });
    peer.send(&addr, Message::new("stop", Payload::empty()));
    assert_eq!(peer.join(handle).downcast::<u64>().ok(), Some(sent));
}

/// Spawn [`BURST_SPAWN`] processes, each yielding once to the async `AsyncInc` handler, as
/// fast as one thread can; wall time until all are done.
fn burst_spawn<R: Peer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..BURST_SPAWN {
        handles.push(peer.spawn(YieldOnce::new(AsyncInc(0)), Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert_eq!(result.downcast::<u64>().ok(), Some(1));
        finished += 1;
    });
    assert_eq!(finished, BURST_SPAWN);
}

/// `WORKERS` threads at once each spawn [`PARALLEL_PER_THREAD`] processes doing two inline
/// yields; then all are awaited.
fn parallel_spawn<R: Peer>(peer: &R, per_thread: &mut [Vec<R::Handle>]) {
    thread::scope(|scope| {
        for handles in per_thread.iter_mut() {
            scope.spawn(move || {
                for _ in 0..PARALLEL_PER_THREAD {
                    handles.push(peer.spawn(Counter::<Inc>::new(2), Payload::empty()));
                }
            });
        }
    });
    let mut finished = 0;
    for handles in per_thread {
        peer.join_all(handles, |result| {
            assert_eq!(result.downcast::<u64>().ok(), Some(2));
            finished += 1;
        });
    }
    assert_eq!(finished, *WORKERS * PARALLEL_PER_THREAD);
}

/// [`RING_SIZE`] processes in a ring pass a token [`RING_HOPS`] times; the last holder sends
/// `stop` round the ring. Timed from the first spawn to the last process's end.
fn ring<R: Peer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..RING_SIZE {
        handles.push(peer.spawn(Ring::<R::Net>::new(peer.preset()), Payload::empty()));
    }
    for (i, handle) in handles.iter().enumerate() {
        let next = R::addr(&handles[(i + 1) % RING_SIZE]);
        peer.send(&R::addr(handle), Message::new("link", Payload::new(next)));
    }
    peer.send(
        &R::addr(&handles[0]),
        Message::new("token", Payload::new(RING_HOPS)),
    );
    let mut handled = 0;
    peer.join_all(handles, |result| {
        handled += result
            .downcast::<u64>()
            .expect("a ring process returns its count");
    });
    // The token visits one process per hop, plus the first one, which gets it from the bench.
    assert_eq!(handled, RING_HOPS + 1);
}

/// `WORKERS` plain threads and [`FAN_IN_PROCESSES`] processes send to one counting process,
/// which finishes when it has them all.
fn fan_in<R: Peer>(peer: &R, handles: &mut Vec<R::Handle>) {
    let total = fan_in_total();
    let counter = peer.spawn(
        FanCounter {
            expected: 0,
            received: 0,
        },
        Payload::new(total),
    );
    let to = R::addr(&counter);
    thread::scope(|scope| {
        for _ in 0..*WORKERS {
            scope.spawn(|| {
                for _ in 0..FAN_IN_THREAD_MSGS {
                    peer.send(&to, Message::new("add", Payload::new(1u64)));
                }
            });
        }
        for _ in 0..FAN_IN_PROCESSES {
            let sender = FanSender::<R::Net> {
                net: peer.preset(),
                to: None,
            };
            handles.push(peer.spawn(sender, Payload::new(to.clone())));
        }
    });
    peer.join_all(handles, |result| assert!(result.is::<()>()));
    assert_eq!(peer.join(counter).downcast::<u64>().ok(), Some(total));
}

/// The skynet tree with `leaves` leaves; the root finishes with the sum of all leaf indices.
fn skynet<R: Peer>(peer: &R, leaves: u64) {
    let args = SkynetArgs::<<R::Net as Net>::Addr> {
        start: 0,
        size: leaves,
        parent: None,
    };
    let root = peer.spawn(Skynet::<R::Net>::new(peer.preset()), Payload::new(args));
    let sum = peer.join(root).downcast::<u64>().ok();
    assert_eq!(sum, Some(leaves * (leaves - 1) / 2));
}

// ---------------------------------------------------------------------------
// Peak RSS, measured in a child process
// ---------------------------------------------------------------------------

/// Set (to `<workload>/<peer>`) in the child process that measures RSS.
const RSS_ENV: &str = "PROCSCHED_BENCH_RSS";
/// Workloads whose memory is measured.
const RSS_WORKLOADS: [Workload; 2] = [Workload::BurstSpawn, Workload::Skynet];

/// One RSS measurement: the high-water mark before and after, and how many processes it was
/// spread over.
struct RssSample {
    before_kib: u64,
    after_kib: u64,
    processes: u64,
    /// Most processes alive at the same time.
    peak_live: u64,
}

impl RssSample {
    fn bytes_per_process(&self) -> f64 {
        self.after_kib.saturating_sub(self.before_kib) as f64 * 1024.0 / self.processes as f64
    }

    fn bytes_per_live_process(&self) -> f64 {
        self.after_kib.saturating_sub(self.before_kib) as f64 * 1024.0 / self.peak_live as f64
    }
}

fn vm_hwm_kib() -> u64 {
    common::proc_status_kib("VmHWM").expect("/proc/self/status has no VmHWM")
}

/// Runs `workload` once on a fresh peer and measures the growth of the RSS high-water mark.
///
/// `burst_spawn`'s handler is replaced by [`Gate`], which holds every process on its yield until
/// all [`BURST_SPAWN`] have arrived, so the peak has them all alive at once (each with its
/// pending handler task, on both peers). `skynet` runs as benchmarked; its processes overlap
/// only partly, so it reports both per spawned and per peak-live process.
fn measure_rss<R: Peer>(workload: Workload) -> RssSample {
    // No warm-up run: the allocator would keep the warm-up's freed memory resident and the
    // measured run would reuse it without raising the high-water mark. Structures that grow
    // with the number of processes (queues, tables) are part of the per-process cost.
    let peer = R::build();
    let sample = match workload {
        Workload::BurstSpawn => {
            let (all_in, arrived) = mpsc::sync_channel(1);
            let state = Arc::new(GateState {
                arrived: AtomicUsize::new(0),
                expected: BURST_SPAWN,
                all_in,
                open: tokio::sync::Semaphore::new(0),
            });
            let mut handles = Vec::with_capacity(BURST_SPAWN);
            let before_kib = vm_hwm_kib();
            for _ in 0..BURST_SPAWN {
                let process = YieldOnce::new(Gate(Arc::clone(&state)));
                handles.push(peer.spawn(process, Payload::empty()));
            }
            arrived
                .recv_timeout(STALL_TIMEOUT)
                .expect("burst_spawn RSS: not every process reached the gate");
            let after_kib = vm_hwm_kib();
            state.open.close();
            peer.join_all(&mut handles, |result| {
                assert_eq!(result.downcast::<u64>().ok(), Some(1));
            });
            RssSample {
                before_kib,
                after_kib,
                processes: BURST_SPAWN as u64,
                peak_live: BURST_SPAWN as u64,
            }
        }
        Workload::Skynet => {
            gauge::enable();
            let before_kib = vm_hwm_kib();
            skynet(&peer, SKYNET_LEAVES);
            RssSample {
                before_kib,
                after_kib: vm_hwm_kib(),
                processes: skynet_processes(),
                peak_live: gauge::peak() as u64,
            }
        }
        other => unreachable!("no RSS measurement for {other:?}"),
    };
    peer.shutdown();
    sample
}

/// The child side: measure what `spec` names and print it on one line for the parent.
fn rss_child(spec: &str) {
    let (workload, peer) = spec.split_once('/').expect("RSS spec is <workload>/<peer>");
    let workload = *RSS_WORKLOADS
        .iter()
        .find(|w| w.name() == workload)
        .expect("unknown RSS workload");
    let sample = match peer {
        Procsched::NAME => measure_rss::<Procsched>(workload),
        ActorSystem::NAME => measure_rss::<ActorSystem>(workload),
        other => panic!("unknown peer {other}"),
    };
    println!(
        "RSS {} {} {} {}",
        sample.before_kib, sample.after_kib, sample.processes, sample.peak_live
    );
}

/// The parent side: re-run this executable as an RSS child for `workload` on `peer`.
fn rss_of(workload: Workload, peer: &str) -> Option<RssSample> {
    let exe = std::env::current_exe().ok()?;
    let output = Command::new(exe)
        .env(RSS_ENV, format!("{}/{peer}", workload.name()))
        .stderr(std::process::Stdio::inherit())
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!(
            "warning: RSS run {}/{peer} failed: {}",
            workload.name(),
            output.status
        );
        return None;
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("RSS "))?;
    let fields: Vec<u64> = line.split(' ').filter_map(|f| f.parse().ok()).collect();
    match fields[..] {
        [before_kib, after_kib, processes, peak_live] => Some(RssSample {
            before_kib,
            after_kib,
            processes,
            peak_live,
        }),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// criterion wiring and the report
// ---------------------------------------------------------------------------

/// Runs every workload as a criterion group with one benchmark per peer. Peers are built one
/// at a time and stopped before the next, so idle threads of one never share the cores with
/// the other's measurement.
fn all_workloads(c: &mut Criterion) {
    for workload in Workload::ALL {
        let mut group = c.benchmark_group(workload.name());
        workload.configure(&mut group);
        workload.bench::<Procsched>(&mut group);
        workload.bench::<ActorSystem>(&mut group);
        group.finish();
    }
}

/// Defaults for the short workloads; see [`Workload::configure`] for the long ones. Set here
/// rather than per group where possible, so command-line flags still override them.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        // The Markdown table and the SVG are the report; criterion's plots would cost CPU.
        .without_plots()
}

/// `true` for `cargo bench -- --quick`.
fn quick_mode() -> bool {
    std::env::args().any(|arg| arg == "--quick")
}

/// Home of the `criterion_group!` expansion: an undocumented `pub fn` that the package-wide
/// `missing_docs` lint would otherwise flag.
mod harness {
    #![allow(missing_docs)]

    use super::{all_workloads, config};
    use criterion::criterion_group;

    criterion_group! {
        name = process_benches;
        config = config();
        targets = all_workloads
    }
}

/// The medians of one workload, procsched first.
struct Row {
    workload: Workload,
    procsched: Option<f64>,
    actors: Option<f64>,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        match (self.procsched, self.actors) {
            (Some(p), Some(a)) if a > 0.0 => Some(p / a),
            _ => None,
        }
    }
}

fn per_unit(workload: Workload, median_ns: Option<f64>) -> String {
    let Some(ns) = median_ns else {
        return "—".to_owned();
    };
    match workload.unit() {
        Unit::Per { count, what } => format!("{}/{what}", common::format_ns(ns / count)),
        Unit::Rate { count, what } => {
            format!("{} {what}", common::format_si(count / (ns * 1e-9)))
        }
    }
}

fn comparison_table(
    rows: &[Row],
    rss: &[(Workload, Option<RssSample>, Option<RssSample>)],
) -> String {
    let mut table = format!(
        "Median time per iteration, {} worker threads per peer; ratio = procsched / \
         tokio-actors (> 1.00: procsched is slower). procsched's async handlers run on its own \
         tokio runtime of the same size.\n\n",
        *WORKERS
    );
    table.push_str(
        "| workload | procsched | tokio-actors | ratio | procsched per unit | tokio-actors per unit |\n",
    );
    table.push_str("|---|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} |",
            row.workload.name(),
            common::format_cell(row.procsched),
            common::format_cell(row.actors),
            common::format_ratio(row.procsched, row.actors),
            per_unit(row.workload, row.procsched),
            per_unit(row.workload, row.actors),
        );
    }
    table.push_str(&format!(
        "\n`many_yields` per yield includes a 1/{} share of spawning and joining its process; \
         `skynet` counts all {} processes of the tree ({} leaves).\n",
        MANY_YIELDS,
        skynet_processes(),
        SKYNET_LEAVES
    ));
    if !rss.is_empty() {
        table.push_str(
            "\nPeak RSS growth (VmHWM, fresh child process per measurement), bytes per process:\n\n\
             | workload | procsched | tokio-actors | procsched per peak-live | tokio-actors per peak-live |\n\
             |---|---:|---:|---:|---:|\n",
        );
        let cell = |sample: &Option<RssSample>, live: bool| match sample {
            Some(s) if live => format!(
                "{:.0} B (peak live {})",
                s.bytes_per_live_process(),
                s.peak_live
            ),
            Some(s) => format!("{:.0} B", s.bytes_per_process()),
            None => "—".to_owned(),
        };
        for (workload, procsched, actors) in rss {
            let _ = writeln!(
                table,
                "| {} | {} | {} | {} | {} |",
                workload.name(),
                cell(procsched, false),
                cell(actors, false),
                cell(procsched, true),
                cell(actors, true),
            );
        }
        table.push_str(
            "\n`burst_spawn` holds all its processes on their async yield at the peak, so per \
             process = per live process (each includes its pending handler task). `skynet` \
             processes overlap only partly.\n",
        );
    }
    table
}

/// Draws the procsched/tokio-actors ratio of every measured workload as a horizontal bar, with
/// a line at 1.0 (parity), to `path`.
fn ratio_chart(rows: &[Row], path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;

    let bars: Vec<(&str, f64)> = rows
        .iter()
        .filter_map(|row| Some((row.workload.name(), row.ratio()?)))
        .collect();
    if bars.is_empty() {
        return Ok(());
    }
    let max = bars.iter().map(|&(_, r)| r).fold(1.0, f64::max) * 1.15;
    let height = 100 + 40 * bars.len() as u32;
    // A segmented range `0..top` has `top + 1` rows; one bar takes two (one stays empty)
    // because a single-point range cannot be drawn.
    let top = bars.len().saturating_sub(1).max(1);
    // Table order top-down: the i-th bar goes in row `top - i`.
    let row = |i: usize| top - i;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "procsched / tokio-actors time, {} workers (< 1: procsched faster)",
                *WORKERS
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(130)
        .build_cartesian_2d(0.0..max, (0..top).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(top + 1)
        .y_label_formatter(&|segment| match segment {
            SegmentValue::CenterOf(r) if *r <= top => {
                bars.get(top - *r).map_or("", |bar| bar.0).to_owned()
            }
            _ => String::new(),
        })
        .x_desc("ratio")
        .draw()?;
    chart.draw_series(bars.iter().enumerate().map(|(i, &(_, ratio))| {
        let colour = if ratio <= 1.0 { BLUE } else { RED };
        let mut bar = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(row(i))),
                (ratio, SegmentValue::Exact(row(i) + 1)),
            ],
            colour.mix(0.6).filled(),
        );
        bar.set_margin(6, 6, 0, 0);
        bar
    }))?;
    chart.draw_series(bars.iter().enumerate().map(|(i, &(_, ratio))| {
        Text::new(
            format!("{ratio:.2}"),
            (ratio + max * 0.01, SegmentValue::CenterOf(row(i))),
            ("sans-serif", 13),
        )
    }))?;
    // Parity.
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
        BLACK.stroke_width(2),
    )))?;
    root.present()?;
    Ok(())
}

fn main() {
    if let Ok(spec) = std::env::var(RSS_ENV) {
        rss_child(&spec);
        return;
    }
    // Anything criterion saved before this instant belongs to an older run.
    let started = SystemTime::now();

    harness::process_benches();
    Criterion::default().configure_from_args().final_summary();

    let rows: Vec<Row> = Workload::ALL
        .iter()
        .map(|&workload| Row {
            workload,
            procsched: common::median_ns(workload.name(), Procsched::NAME, started),
            actors: common::median_ns(workload.name(), ActorSystem::NAME, started),
        })
        .filter(|row| row.procsched.is_some() || row.actors.is_some())
        .collect();
    if rows.is_empty() {
        eprintln!("no benchmark was measured in this run; comparison table skipped");
        return;
    }
    // Memory only for the workloads this run measured (a filtered run stays quick).
    let rss: Vec<_> = RSS_WORKLOADS
        .into_iter()
        .filter(|w| rows.iter().any(|row| row.workload == *w))
        .map(|w| (w, rss_of(w, Procsched::NAME), rss_of(w, ActorSystem::NAME)))
        .collect();
    common::publish_report("bench-process.md", &comparison_table(&rows, &rss));
    let svg = common::target_dir().join("bench-process.svg");
    match ratio_chart(&rows, &svg) {
        Ok(()) => println!("(chart written to {})", svg.display()),
        Err(error) => eprintln!("warning: could not draw {}: {error}", svg.display()),
    }
}
