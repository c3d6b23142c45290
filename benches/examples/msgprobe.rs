//! One message workload of `benches/messages.rs`, run a fixed number of times, for `perf` and
//! A/B runs: `msgprobe <sm|async|native|ring_sm|ring_async|ring_addrs|ring_native|ask_between|
//! ask_sm|ask_task|ask_native|ask_tasks64|ask_native64|ask_join|ask_join_native> [iterations]`. Prints the median per-unit time.
//!
//! `ask_task` / `ask_native`: one tokio task asks 10 000 times, one ask after the other;
//! `ask_tasks64` / `ask_native64`: 64 tasks ask at once (156 asks each). The pair shows the
//! trade any asker-side spin would make: a spin on the asker's thread turns the first from a
//! thread wake-up per ask into a cache-line exchange, and the second, where the askers' spins
//! take the cores the answering worker needs, into a timeout per ask. `ask_join` /
//! `ask_join_native`: one task joins 10 000 asks (`join_all`), the shape a spin must stay out
//! of (`spin_wait.rs`, "Joined waits").

use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, StepOutput};
use procsched_benches::ask::{spawn_native_server, spawn_server, StepAsker};
use procsched_benches::ring::{self, wait_until_waiting, Form};
use std::time::{Duration, Instant};

const SENDS: u64 = 100_000;

struct Sink {
    expected: u64,
    received: u64,
}

impl Process for Sink {
    type Output = u64;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        for event in events.drain() {
            if let Event::Message(message) = event {
                self.received += message.payload.take::<u64>()?;
            }
        }
        if self.received >= self.expected {
            out.done(self.received);
        } else {
            out.wait();
        }
        Ok(())
    }
}

/// Processes in the ring; each sees `LAPS` tokens (`RING * LAPS` = `SENDS` hops).
const RING: usize = 1_000;
const LAPS: u64 = 100;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "sm".to_owned());
    let iterations: usize = args.next().map_or(50, |n| n.parse().expect("a count"));
    // `MSGPROBE_SPIN=0`: waits from outside never spin (`Builder::spin_waits(false)`).
    let spin = std::env::var("MSGPROBE_SPIN").map_or(true, |spin| spin != "0");
    let sched = Scheduler::builder()
        .workers(2)
        .spin_waits(spin)
        .build()
        .expect("scheduler");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let mut times = Vec::new();
    for _ in 0..iterations {
        let elapsed = match mode.as_str() {
            "sm" => {
                let handle = sched
                    .spawn(
                        Sink {
                            expected: SENDS,
                            received: 0,
                        },
                        "run",
                        Payload::empty(),
                    )
                    .unwrap();
                wait_until_waiting(&sched, handle.pid());
                let addr = sched.handle().addr::<u64>(handle.pid());
                let start = Instant::now();
                for _ in 0..SENDS {
                    addr.send(1).unwrap();
                }
                sched.block_on(handle).unwrap();
                start.elapsed()
            }
            "async" => {
                let handle = sched
                    .spawn_fn(|cx: ProcessCx<u64>| async move {
                        let mut received = 0;
                        while received < SENDS {
                            received += cx.recv().await?;
                        }
                        Ok::<_, BoxError>(received)
                    })
                    .unwrap();
                wait_until_waiting(&sched, handle.pid());
                let addr = handle.addr();
                let start = Instant::now();
                for _ in 0..SENDS {
                    addr.send(1).unwrap();
                }
                sched.block_on(handle).unwrap();
                start.elapsed()
            }
            "native" => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
                let (started_tx, started_rx) = std::sync::mpsc::channel();
                let receiver = runtime.spawn(async move {
                    started_tx.send(()).unwrap();
                    let mut received = 0;
                    while received < SENDS {
                        received += rx.recv().await.unwrap();
                    }
                    received
                });
                started_rx.recv().unwrap();
                let start = Instant::now();
                for _ in 0..SENDS {
                    tx.send(1).unwrap();
                }
                runtime.block_on(receiver).unwrap();
                start.elapsed()
            }
            "ask_between" => {
                let addr = spawn_server(&sched);
                let server = addr.pid();
                let start = Instant::now();
                let asker = sched
                    .spawn_fn(move |_: ProcessCx| async move {
                        for n in 0..10_000u64 {
                            addr.ask(|reply| (n, reply)).await?;
                        }
                        Ok::<_, BoxError>(())
                    })
                    .unwrap();
                sched.block_on(asker).unwrap();
                let elapsed = start.elapsed() * 10; // per 100 000 units, as the sends
                sched.terminate(server).unwrap();
                elapsed
            }
            "ask_sm" => {
                let addr = spawn_server(&sched);
                let server = addr.pid();
                let start = Instant::now();
                let asker = sched
                    .spawn(StepAsker::new(addr, 10_000), "run", Payload::empty())
                    .unwrap();
                sched.block_on(asker).unwrap();
                let elapsed = start.elapsed() * 10; // per 100 000 units, as the sends
                sched.terminate(server).unwrap();
                elapsed
            }
            "ask_task" => {
                let addr = spawn_server(&sched);
                let server = addr.pid();
                let start = Instant::now();
                let asker = runtime.spawn(async move {
                    for n in 0..10_000u64 {
                        addr.ask(|reply| (n, reply)).await.unwrap();
                    }
                });
                runtime.block_on(asker).unwrap();
                let elapsed = start.elapsed() * 10; // per 100 000 units, as the sends
                sched.terminate(server).unwrap();
                elapsed
            }
            "ask_tasks64" => {
                let addr = spawn_server(&sched);
                let server = addr.pid();
                let start = Instant::now();
                let askers: Vec<_> = (0..64)
                    .map(|_| {
                        let addr = addr.clone();
                        runtime.spawn(async move {
                            for n in 0..10_000u64 / 64 {
                                addr.ask(|reply| (n, reply)).await.unwrap();
                            }
                        })
                    })
                    .collect();
                for asker in askers {
                    runtime.block_on(asker).unwrap();
                }
                let elapsed = start.elapsed() * 10;
                sched.terminate(server).unwrap();
                elapsed
            }
            "ask_native64" => {
                let tx = spawn_native_server(&runtime);
                let start = Instant::now();
                let askers: Vec<_> = (0..64)
                    .map(|_| {
                        let tx = tx.clone();
                        runtime.spawn(async move {
                            for n in 0..10_000u64 / 64 {
                                let (reply, answer) = tokio::sync::oneshot::channel();
                                tx.send((n, reply)).unwrap();
                                answer.await.unwrap();
                            }
                        })
                    })
                    .collect();
                for asker in askers {
                    runtime.block_on(asker).unwrap();
                }
                start.elapsed() * 10
            }
            "ring_sm" => ring::run(&sched, Form::StateMachine, RING, LAPS),
            "ring_async" => ring::run(&sched, Form::AsyncPids, RING, LAPS),
            "ring_addrs" => ring::run(&sched, Form::AsyncAddrs, RING, LAPS),
            "ask_native" => {
                let tx = spawn_native_server(&runtime);
                let start = Instant::now();
                let asker = runtime.spawn(async move {
                    for n in 0..10_000u64 {
                        let (reply, answer) = tokio::sync::oneshot::channel();
                        tx.send((n, reply)).unwrap();
                        answer.await.unwrap();
                    }
                });
                runtime.block_on(asker).unwrap();
                start.elapsed() * 10 // per 100 000 units, as the sends
            }
            "ask_join" => {
                let addr = spawn_server(&sched);
                let server = addr.pid();
                let start = Instant::now();
                let asker = runtime.spawn(async move {
                    let asks = (0..10_000u64).map(|n| addr.ask(move |reply| (n, reply)));
                    for answer in futures::future::join_all(asks).await {
                        answer.unwrap();
                    }
                });
                runtime.block_on(asker).unwrap();
                let elapsed = start.elapsed() * 10; // per 100 000 units, as the sends
                sched.terminate(server).unwrap();
                elapsed
            }
            "ask_join_native" => {
                let tx = spawn_native_server(&runtime);
                let start = Instant::now();
                let asker = runtime.spawn(async move {
                    let asks = (0..10_000u64).map(|n| {
                        let (reply, answer) = tokio::sync::oneshot::channel();
                        tx.send((n, reply)).unwrap();
                        answer
                    });
                    for answer in futures::future::join_all(asks).await {
                        answer.unwrap();
                    }
                });
                runtime.block_on(asker).unwrap();
                start.elapsed() * 10 // per 100 000 units, as the sends
            }
            "ring_native" => procsched_benches::native_ring::run(&runtime, RING, LAPS),
            other => panic!("unknown mode {other}"),
        };
        times.push(elapsed);
    }
    let metrics = sched.metrics();
    eprintln!(
        "steps {} polls {} parks {} (per message: steps {:.3}, polls {:.3})",
        metrics.steps,
        metrics.executor.total().polls,
        metrics.executor.total().parks,
        metrics.steps as f64 / (iterations as f64 * SENDS as f64),
        metrics.executor.total().polls as f64 / (iterations as f64 * SENDS as f64),
    );
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "{mode}: median {:.1} ns/unit over {iterations} iterations",
        median.as_nanos() as f64 / SENDS as f64
    );
    sched.shutdown(Duration::from_secs(1));
}
