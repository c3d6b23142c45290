//! The process state machines run by both process peers (procsched and tokio-actors), and the
//! commands they yield and the handlers that serve them.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use procsched::{
    error::{CommandError, InitError},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload,
};

use crate::net::Net;
use crate::workload::FAN_IN_PROCESS_MSGS;

// ---------------------------------------------------------------------------
// Commands and handlers (the same on both peers)
// ---------------------------------------------------------------------------

/// Inline: `n + 1`.
pub(crate) struct Inc(pub(crate) u64);
/// Async, completed from a tokio task: `n + 1`.
pub(crate) struct AsyncInc(pub(crate) u64);
/// Async, completes when the gate opens (RSS runs only: keeps every process alive at once).
pub(crate) struct Gate(pub(crate) Arc<GateState>);
procsched::command!(Inc => Payload, AsyncInc => Payload, Gate => Payload);

/// `send_to_blocked`'s receiver and the never-completing command it blocks on (shared with
/// `examples/send_size.rs`).
pub(crate) use procsched_benches::blocked::{never, Blocked, Never};

pub(crate) fn inc(Inc(n): Inc) -> Result<Payload, CommandError> {
    Ok(Payload::new(n + 1))
}

pub(crate) async fn async_inc(AsyncInc(n): AsyncInc) -> Result<Payload, CommandError> {
    Ok(Payload::new(n + 1))
}

pub(crate) async fn gate(Gate(state): Gate) -> Result<Payload, CommandError> {
    state.pass().await;
    Ok(Payload::new(1u64))
}

/// The gate of [`Gate`]: counts arrivals, tells the bench thread when all are in, then holds
/// them until it is closed.
pub(crate) struct GateState {
    pub(crate) arrived: AtomicUsize,
    pub(crate) expected: usize,
    pub(crate) all_in: mpsc::SyncSender<()>,
    pub(crate) open: tokio::sync::Semaphore,
}

impl GateState {
    /// A closed gate expecting `expected` arrivals, and where the bench thread hears that they
    /// are all in.
    pub(crate) fn new(expected: usize) -> (Arc<GateState>, mpsc::Receiver<()>) {
        let (all_in, arrived) = mpsc::sync_channel(1);
        let state = Arc::new(GateState {
            arrived: AtomicUsize::new(0),
            expected,
            all_in,
            open: tokio::sync::Semaphore::new(0),
        });
        (state, arrived)
    }

    /// Arrives at the gate and waits until it opens.
    pub(crate) async fn pass(&self) {
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.expected {
            // The receiver only goes away if the measurement already failed.
            let _ = self.all_in.send(());
        }
        // `Err` means the semaphore was closed, which is how the gate opens.
        let _ = self.open.acquire().await;
    }
}

// ---------------------------------------------------------------------------
// The processes
// ---------------------------------------------------------------------------

pub(crate) fn expect_run(method: &str) -> Result<(), InitError> {
    match method {
        "run" => Ok(()),
        other => Err(InitError::unknown_method(other)),
    }
}

pub(crate) fn downcast_u64(payload: Payload) -> Result<u64, BoxError> {
    payload
        .downcast::<u64>()
        .map_err(|other| format!("expected a u64, got {other:?}").into())
}

/// Done on its first step (`single_step`).
pub(crate) struct Once;

impl Process for Once {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        out.done(Payload::empty());
        Ok(())
    }
}

/// Yields one command, finishes with its result (`one_yield`, `burst_spawn`, RSS runs).
pub(crate) struct YieldOnce<C> {
    command: Option<C>,
}

impl<C: Send + 'static> YieldOnce<C> {
    pub(crate) fn new(command: C) -> Self {
        YieldOnce {
            command: Some(command),
        }
    }
}

impl<C: Send + 'static> Process for YieldOnce<C> {
    type Output = Payload;
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
pub(crate) struct Counter<C> {
    remaining: u64,
    value: u64,
    waiting: bool,
    command: PhantomData<fn() -> C>,
}

impl<C> Counter<C> {
    pub(crate) fn new(yields: u64) -> Self {
        Counter {
            remaining: yields,
            value: 0,
            waiting: false,
            command: PhantomData,
        }
    }
}

impl<C: From<u64> + Send + 'static> Process for Counter<C> {
    type Output = Payload;
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

/// One process of the `ring`: learns its successor from a `link` message, forwards the
/// `token` (hops left) to it, and on the last hop sends `stop` round the ring. Finishes with
/// the number of tokens it handled.
pub(crate) struct Ring<N: Net> {
    net: Option<N>,
    next: Option<N::Addr>,
    handled: u64,
}

impl<N: Net> Ring<N> {
    pub(crate) fn new(preset: Option<N>) -> Self {
        Ring {
            net: preset,
            next: None,
            handled: 0,
        }
    }
}

impl<N: Net> Process for Ring<N> {
    type Output = Payload;
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
pub(crate) struct FanSender<N: Net> {
    pub(crate) net: Option<N>,
    pub(crate) to: Option<N::Addr>,
}

impl<N: Net> Process for FanSender<N> {
    type Output = Payload;
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
pub(crate) struct FanCounter {
    pub(crate) expected: u64,
    pub(crate) received: u64,
}

impl Process for FanCounter {
    type Output = Payload;
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
pub(crate) struct SkynetArgs<A> {
    /// Index of its first leaf.
    pub(crate) start: u64,
    /// Leaves under it (a power of ten).
    pub(crate) size: u64,
    /// Where to send its sum; `None` for the root, which finishes with it instead.
    pub(crate) parent: Option<A>,
}

/// A `skynet` node: a leaf reports its index, a parent spawns ten children from its first
/// step, sums what they send and reports the sum to its own parent.
pub(crate) struct Skynet<N: Net> {
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
    pub(crate) fn new(preset: Option<N>) -> Self {
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
pub(crate) fn report<N: Net>(
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
    type Output = Payload;
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
pub(crate) mod gauge {
    use super::*;

    static ON: AtomicBool = AtomicBool::new(false);
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    pub(crate) fn enable() {
        ON.store(true, Ordering::Relaxed);
    }

    pub(crate) fn spawned() {
        if ON.load(Ordering::Relaxed) {
            let live = LIVE.fetch_add(1, Ordering::Relaxed) + 1;
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
    }

    pub(crate) fn closed() {
        if ON.load(Ordering::Relaxed) {
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn peak() -> usize {
        PEAK.load(Ordering::Relaxed)
    }
}
