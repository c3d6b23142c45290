//! Message round-trip latency on a busy peer.
//!
//! [`BACKGROUND`] processes keep every worker busy: each step does a microsecond or two of
//! arithmetic ([`busy_work`]) and asks to run again (`Continue` on the process peers,
//! `yield_now` natively). Meanwhile the bench thread, which is not a worker, sends a request to
//! an echo process and blocks until the echo's reply arrives over a `std::sync::mpsc` channel
//! (the same reply path on every peer): send → schedule → step → reply. [`WARM_UP`] round trips
//! are thrown away, then [`SAMPLES`] are recorded in an HDR histogram, one at a time. The
//! background processes count their steps, so the report can show that no peer buys its latency
//! by starving them.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use hdrhistogram::Histogram;
use procsched::{
    error::InitError,
    state_machine::{Event, Events, ProcessContext, StepOutput},
    BoxError, Message, Payload,
};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::process_peer::ProcessPeer;
use crate::processes::{downcast_u64, expect_run};
use crate::samples::LatencySample;
use crate::workload::STALL_TIMEOUT;

/// Background processes stepping all the time.
pub(crate) const BACKGROUND: usize = 100;
/// Round trips recorded.
pub(crate) const SAMPLES: u64 = 10_000;
/// Round trips run before recording.
const WARM_UP: u64 = 1_000;
/// Iterations of [`busy_work`]'s loop: a microsecond or two on the 2-core CI machines (the
/// report shows the background steps per second actually achieved).
const BUSY_ITERATIONS: u32 = 600;

/// One background step's work: a microsecond or two of arithmetic the optimiser cannot remove.
pub(crate) fn busy_work(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..BUSY_ITERATIONS {
        x = black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
    }
    x
}

/// Runs `round_trip(i)` [`WARM_UP`] + [`SAMPLES`] times and records the timed ones.
fn record(mut round_trip: impl FnMut(u64)) -> Histogram<u64> {
    for i in 0..WARM_UP {
        round_trip(i);
    }
    // Three significant digits from 1 ns to a minute.
    let mut histogram =
        Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds");
    for i in WARM_UP..WARM_UP + SAMPLES {
        let sent = Instant::now();
        round_trip(i);
        let nanos = sent.elapsed().as_nanos() as u64;
        histogram.saturating_record(nanos.max(1));
    }
    histogram
}

/// Waits for the echo of request `i`.
fn expect_reply(replies: &mpsc::Receiver<u64>, i: u64) {
    let reply = replies
        .recv_timeout(STALL_TIMEOUT)
        .expect("latency: no reply from the echo process");
    assert_eq!(reply, i, "latency: reply to the wrong request");
}

// ---------------------------------------------------------------------------
// The process peers
// ---------------------------------------------------------------------------

/// Steps until `stop` is set, each step [`busy_work`] then `Continue`; finishes with its step
/// count.
struct Spinner {
    stop: Arc<AtomicBool>,
    steps: u64,
    acc: u64,
}

impl procsched::state_machine::Process for Spinner {
    type Output = procsched::Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if self.stop.load(Ordering::Relaxed) {
            out.done(Payload::new(self.steps));
        } else {
            self.acc = busy_work(self.acc);
            self.steps += 1;
            out.continue_();
        }
        Ok(())
    }
}

/// Replies to every message with its `u64` payload; finishes on `stop`.
struct Echo {
    reply: mpsc::Sender<u64>,
}

impl procsched::state_machine::Process for Echo {
    type Output = procsched::Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            if &*message.topic == "stop" {
                out.done(Payload::empty());
                return Ok(());
            }
            self.reply.send(downcast_u64(message.payload)?)?;
        }
        out.idle();
        Ok(())
    }
}

/// [`Peer::latency`](crate::workload::Peer::latency) of a process peer.
pub(crate) fn processes<R: ProcessPeer>(peer: &R) -> LatencySample {
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let background: Vec<R::Handle> = (0..BACKGROUND)
        .map(|_| {
            let spinner = Spinner {
                stop: Arc::clone(&stop),
                steps: 0,
                acc: 0,
            };
            peer.spawn(spinner, Payload::empty())
        })
        .collect();
    let (reply, replies) = mpsc::channel();
    let echo = peer.spawn(Echo { reply }, Payload::empty());
    let addr = R::addr(&echo);
    let round_trips = record(|i| {
        peer.send(&addr, Message::new("ping", Payload::new(i)));
        expect_reply(&replies, i);
    });
    let busy = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    peer.send(&addr, Message::new("stop", Payload::empty()));
    peer.join(echo);
    let mut steps = 0;
    peer.join_each(background.into_iter(), |result| {
        steps += downcast_u64(result).expect("a spinner returns its step count");
    });
    LatencySample {
        round_trips,
        // Steps after `busy` are few (one per spinner) next to those before.
        background_steps_per_sec: steps as f64 / busy.as_secs_f64(),
    }
}

// ---------------------------------------------------------------------------
// tokio-native
// ---------------------------------------------------------------------------

/// [`Peer::latency`](crate::workload::Peer::latency) of the tokio-native peer: spinner tasks
/// that `yield_now` after each step, an echo task with a typed mailbox.
pub(crate) fn native(runtime: &Runtime) -> LatencySample {
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let background: Vec<JoinHandle<u64>> = (0..BACKGROUND)
        .map(|_| {
            let stop = Arc::clone(&stop);
            runtime.spawn(async move {
                let (mut steps, mut acc) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    acc = busy_work(acc);
                    steps += 1;
                    tokio::task::yield_now().await;
                }
                black_box(acc);
                steps
            })
        })
        .collect();
    let (to_echo, mut mailbox) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let (reply, replies) = mpsc::channel();
    let echo = runtime.spawn(async move {
        while let Some(request) = mailbox.recv().await {
            // An error means the bench thread is gone: nobody wants the reply.
            let _ = reply.send(request);
        }
    });
    let round_trips = record(|i| {
        to_echo.send(i).expect("the echo task has finished");
        expect_reply(&replies, i);
    });
    let busy = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    drop(to_echo);
    let steps = runtime.block_on(async {
        let all = async {
            echo.await.expect("the echo task panicked");
            let mut steps = 0;
            for spinner in background {
                steps += spinner.await.expect("a spinner panicked");
            }
            steps
        };
        tokio::time::timeout(STALL_TIMEOUT, all)
            .await
            .expect("latency: tasks still running")
    });
    LatencySample {
        round_trips,
        // Steps after `busy` are few (one per spinner) next to those before.
        background_steps_per_sec: steps as f64 / busy.as_secs_f64(),
    }
}
