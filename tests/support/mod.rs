//! Shared helpers of the process-layer tests: hang guards, counters, a seeded PRNG, a quiet panic
//! hook for expected panics, and a closure-driven test process. Fixtures shared by a few test
//! files only live in submodules, imported by name: the `Counter` process ([`inc_counter`]), one
//! command per handler kind ([`handler_kinds`]), the churning commands ([`churn`]), a future
//! polled by hand with a counting waker ([`polled`]) and a state machine that asks
//! ([`step_asker`]).
//!
//! Deadlines here are hang guards only: a test that would hang fails with a message instead.
#![allow(dead_code)]

use procsched::{
    error::{InitError, ProcessError, SpawnError},
    metrics::ProcessState,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Payload, Pid, ProcessHandle, Scheduler, SchedulerHandle,
};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Once};
use std::thread;
use std::time::{Duration, Instant};

pub(crate) mod churn;
pub(crate) mod handler_kinds;
pub(crate) mod inc_counter;
pub(crate) mod polled;
pub(crate) mod step_asker;

/// Generous bound for "this should happen": only a hang guard, never a timing assertion.
pub(crate) const HANG_GUARD: Duration = Duration::from_secs(60);

/// Every panic a test provokes on purpose carries this marker; the hook installed by
/// [`quiet_panics`] does not print them.
pub(crate) const EXPECTED_PANIC: &str = "expected panic";

/// Counts its `init`s and `close`s; parks `Idle`, and on `Cancel` finishes if
/// `finish_on_cancel` (else only a forced stop ends it).
pub(crate) struct Counted {
    pub(crate) inits: Counter,
    pub(crate) closes: Counter,
    pub(crate) finish_on_cancel: bool,
}

impl Process for Counted {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        self.inits.fetch_add(1, SeqCst);
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        // Unread events are dropped by the scheduler after the step.
        let cancelled = events.drain().any(|e| matches!(e, Event::Cancel { .. }));
        if cancelled && self.finish_on_cancel {
            out.done(Payload::empty());
        } else {
            out.idle();
        }
        Ok(())
    }
    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

/// `threads` threads that wait at `start`, then spawn processes made by `make` until `spawn` is
/// refused with `ShuttingDown` (any other error fails the test); each thread returns the handles
/// of the processes it got in.
pub(crate) fn spawn_until_refused<P>(
    sched: &Arc<Scheduler>,
    threads: usize,
    start: &Arc<Barrier>,
    make: impl Fn() -> P + Clone + Send + 'static,
) -> Vec<thread::JoinHandle<Vec<ProcessHandle<P::Output>>>>
where
    P: Process,
{
    (0..threads)
        .map(|_| {
            let (sched, start, make) = (sched.clone(), start.clone(), make.clone());
            thread::spawn(move || {
                start.wait();
                let mut accepted = Vec::new();
                loop {
                    match sched.spawn(make(), "run", Payload::empty()) {
                        Ok(handle) => accepted.push(handle),
                        Err(SpawnError::ShuttingDown) => return accepted,
                        Err(other) => panic!("unexpected {other}"),
                    }
                }
            })
        })
        .collect()
}

pub(crate) fn scaled(n: usize) -> usize {
    if cfg!(miri) {
        n.min(200)
    } else {
        n
    }
}

/// A shared counter.
pub(crate) type Counter = Arc<AtomicUsize>;

pub(crate) fn counter() -> Counter {
    Arc::new(AtomicUsize::new(0))
}

pub(crate) fn count(counter: &Counter) -> usize {
    counter.load(SeqCst)
}

/// Counts its own drops.
#[derive(Debug)]
pub(crate) struct DropCounter(pub(crate) Counter);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A value that counts its creations and its drops: for payloads that must never leak nor be
/// dropped twice.
#[derive(Debug)]
pub(crate) struct Tracked {
    pub(crate) value: u64,
    dropped: Counter,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Tracker {
    pub(crate) created: Counter,
    pub(crate) dropped: Counter,
}

impl Tracker {
    pub(crate) fn new() -> Tracker {
        Tracker::default()
    }

    pub(crate) fn track(&self, value: u64) -> Tracked {
        self.created.fetch_add(1, SeqCst);
        Tracked {
            value,
            dropped: self.dropped.clone(),
        }
    }

    /// Waits (hang-guarded) until every tracked value has been dropped; panics on a leak.
    pub(crate) fn wait_all_dropped(&self, what: &str) {
        wait_until(what, || count(&self.created) == count(&self.dropped));
        assert_eq!(count(&self.created), count(&self.dropped), "{what}");
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// Installs (once per test binary) a panic hook that silences the panics tests provoke on purpose
/// (their message starts with [`EXPECTED_PANIC`]) and forwards every other panic to the default hook.
pub(crate) fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if !message.is_some_and(|m| m.starts_with(EXPECTED_PANIC)) {
                default(info);
            }
        }));
    });
}

/// A handler runtime of one worker thread, with timers and I/O: what the tests that give a
/// scheduler its own runtime (to shut it down, or to watch its tasks) build.
pub(crate) fn handler_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Spins (with `thread::yield_now`) until `condition` holds; fails after [`HANG_GUARD`].
pub(crate) fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(Instant::now() < deadline, "hang guard: never saw {what}");
        thread::yield_now();
    }
}

/// Waits (hang-guarded) until `pid` is observed in `state`.
pub(crate) fn wait_for_state(sched: &SchedulerHandle, pid: Pid, state: ProcessState) {
    wait_until(&format!("{pid} in state {state:?}"), || {
        sched.state(pid) == Some(state)
    });
}

/// Receives with a hang guard.
pub(crate) fn recv<T>(rx: &mpsc::Receiver<T>) -> T {
    rx.recv_timeout(HANG_GUARD)
        .expect("hang guard: nothing received")
}

/// Awaits every handle (on a helper thread, so the wait is hang-guarded), in order.
pub(crate) fn join_all(handles: Vec<ProcessHandle>) -> Vec<Result<Payload, ProcessError>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let results = futures::executor::block_on(futures::future::join_all(handles));
        let _ = tx.send(results);
    });
    rx.recv_timeout(HANG_GUARD)
        .expect("hang guard: a process handle never resolved")
}

/// Awaits one handle, hang-guarded.
pub(crate) fn join(handle: ProcessHandle) -> Result<Payload, ProcessError> {
    join_typed(handle)
}

/// A small seeded PRNG (splitmix64): reproducible randomness without a dependency.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `true` with probability `1 / n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

type StepFn = Box<dyn FnMut(&mut Events, &mut StepOutput) -> Result<(), BoxError> + Send>;
type CloseFn = Box<dyn FnMut() + Send>;

/// A process driven by a closure: `init` accepts the method `"run"` only, `step` calls the
/// closure, `close` bumps the `closes` counter and then runs the optional close hook.
pub(crate) struct FnProcess {
    step: StepFn,
    closes: Counter,
    on_close: Option<CloseFn>,
}

impl FnProcess {
    pub(crate) fn new(
        closes: &Counter,
        step: impl FnMut(&mut Events, &mut StepOutput) -> Result<(), BoxError> + Send + 'static,
    ) -> FnProcess {
        FnProcess {
            step: Box::new(step),
            closes: closes.clone(),
            on_close: None,
        }
    }

    pub(crate) fn on_close(mut self, f: impl FnMut() + Send + 'static) -> FnProcess {
        self.on_close = Some(Box::new(f));
        self
    }
}

impl Process for FnProcess {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        match method {
            "run" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        (self.step)(events, out)
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
        if let Some(f) = &mut self.on_close {
            f();
        }
    }
}

/// A step closure that parks the process `Idle` until it receives a message, then finishes with
/// the message's payload. Any other event fails the process.
pub(crate) fn echo_step() -> impl FnMut(&mut Events, &mut StepOutput) -> Result<(), BoxError> + Send
{
    |events, out| {
        match events.pop() {
            Some(procsched::state_machine::Event::Message(m)) => out.done(m.payload),
            Some(other) => return Err(format!("unexpected {other:?}").into()),
            None => out.idle(),
        }
        Ok(())
    }
}

/// Blocks a step until the test releases it: `entered` is signalled when the step is inside.
pub(crate) struct StepGate {
    pub(crate) entered: mpsc::Receiver<()>,
    pub(crate) release: mpsc::Sender<()>,
}

/// The process side of a [`StepGate`]: call `wait()` inside a step.
pub(crate) struct StepGateInside {
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
}

impl StepGateInside {
    pub(crate) fn wait(&self) {
        self.entered.send(()).expect("test alive");
        self.release
            .recv_timeout(HANG_GUARD)
            .expect("hang guard: the test never released the step");
    }
}

pub(crate) fn step_gate() -> (StepGate, StepGateInside) {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    (
        StepGate {
            entered: entered_rx,
            release: release_tx,
        },
        StepGateInside {
            entered: entered_tx,
            release: release_rx,
        },
    )
}

/// Occupies the only worker of a one-worker scheduler with a step that waits until the gate's
/// `release` is sent; returns once that step has begun.
pub(crate) fn block_the_worker(
    sched: &Scheduler,
    closes: &Counter,
) -> (StepGate, procsched::ProcessHandle) {
    let (gate, inside) = step_gate();
    let blocker = sched
        .spawn(
            FnProcess::new(closes, move |_, out| {
                inside.wait();
                out.done(Payload::empty());
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    recv(&gate.entered);
    (gate, blocker)
}

/// Awaits one typed handle, hang-guarded.
pub(crate) fn join_typed<T: Send + 'static, M: 'static>(
    handle: procsched::ProcessHandle<T, M>,
) -> Result<T, ProcessError> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(futures::executor::block_on(handle));
    });
    rx.recv_timeout(HANG_GUARD)
        .expect("hang guard: a process handle never resolved")
}

/// A send or terminate outcome without the handed-back message, for comparisons.
pub(crate) fn refusal(
    result: Result<(), procsched::error::SendError>,
) -> Result<(), (procsched::error::SendErrorKind, Pid)> {
    result.map_err(|e| (e.kind(), e.pid()))
}
