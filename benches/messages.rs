//! Messages between processes, side by side with tokio-native in one run: typed sends, ask
//! round trips and a ring, in the shapes a user's own harness takes (the typed-messages issue's
//! independent harnesses), each against what a competent tokio user writes instead.
//!
//! | group | one iteration | tokio-native |
//! |---|---|---|
//! | `send_to_waiting/<form>` | a receiver that started first; [`SENDS`] `u64` sends from the bench thread, timed until the receiver has consumed all | one task receiving from an unbounded `mpsc` |
//! | `ask_from_tokio` | [`ASKS`] asks from tokio code (the bench thread's `block_on`) to one process, each awaited before the next | a task receiving `(u64, oneshot::Sender)` |
//! | `ask_from_task` | [`ASKS`] asks from a task spawned on a multi-thread tokio runtime to one process, each awaited before the next: every ask crosses between the runtimes twice (a thread wake-up each way when the other side is parked) | `ask_between`'s: a task on the same runtime asking the native server (both ends on one worker, no wake-up crosses a thread) |
//! | `spawn_await_from_task` | [`SPAWNS`] short processes spawned and awaited one after the other from a task spawned on a multi-thread tokio runtime | the task `tokio::spawn`s and awaits a task each time |
//! | `ask_join_from_task` | the same 10 000 asks from one spawned task, all sent before any answer is awaited (`futures::future::join_all`) | the same join of `mpsc` + `oneshot` requests on its own runtime |
//! | `ask_between` | one process asks another [`ASKS`] times: an `async fn` body (`procsched`) awaiting `ask`, or a state machine (`sm`) yielding `ask_command` and reading each answer as its yield's completion | one task asking another through `mpsc` + `oneshot` |
//! | `ring_pids/<form>` | [`RING`] processes learn the ring's PIDs from a shared `OnceLock`; a `u64` token, forwarded with `SchedulerHandle::send` from each step, goes round until each has seen [`LAPS`]; timed from the first send until every handle is joined | tasks with `mpsc` senders in a shared `OnceLock` |
//! | `ring_addrs/<form>` | the same ring with typed addresses (`Addr<u64>`) | — (same as above) |
//! | `send_wait_<cap>/async` | [`WAITING_SENDERS`] tokio tasks each `send_wait` [`SENDS`] / [`WAITING_SENDERS`] `u64`s to an `async fn` body whose mailbox holds `<cap>`, timed until it has received all | the tasks `send(..).await` on a bounded `mpsc` of `<cap>` to a receiving task, in the same runtime |
//!
//! `<form>`: `sm` (a state machine: `out.wait()` / `out.idle()` between messages), `async` (an
//! `async fn` in `cx.recv()`). Every runtime gets [`WORKERS`] worker threads; the report is a
//! Markdown table of medians and procsched / tokio-native ratios (also written to
//! `target/bench-messages.md`).
//!
//! ```text
//! cargo bench -p procsched-benches --bench messages            # about 2 minutes
//! cargo bench -p procsched-benches --bench messages -- ring     # one group
//! ```

use criterion::Criterion;
use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, StepOutput};
use procsched_benches::ask::{spawn_native_server, spawn_server, StepAsker};
use procsched_benches::ring::{self, wait_until_waiting, Form};
use procsched_benches::{format_ns, format_ratio, median_ns, publish_report, WORKERS};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, oneshot};

/// Sends per `send_to_waiting` iteration.
const SENDS: u64 = 100_000;
/// Asks per `ask_*` iteration.
const ASKS: u64 = 10_000;
/// Processes spawned and awaited one after the other by `spawn_await_from_task`.
const SPAWNS: u64 = 10_000;
/// Tokio tasks sending in `send_wait_<cap>`.
const WAITING_SENDERS: u64 = 10;
/// Mailbox / channel capacities of the `send_wait_<cap>` groups.
const WAIT_CAPACITIES: [usize; 2] = [16, 256];
/// Processes in the ring.
const RING: usize = 1_000;
/// Tokens each ring member sees before it finishes.
const LAPS: u64 = 100;

const NATIVE: &str = "tokio-native";

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(*WORKERS)
        .build()
        .expect("scheduler")
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(*WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

// ---------------------------------------------------------------------------------------------
// send_to_waiting
// ---------------------------------------------------------------------------------------------

/// Counts `u64` messages until it has `expected`, waiting `Blocked` (`out.wait()`) in between.
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

fn send_to_waiting(c: &mut Criterion) {
    let mut group = c.benchmark_group("send_to_waiting");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    let sched = scheduler();
    group.bench_function("sm", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let sink = Sink {
                    expected: SENDS,
                    received: 0,
                };
                let handle = sched.spawn(sink, "run", Payload::empty()).expect("spawn");
                wait_until_waiting(&sched, handle.pid());
                let addr = sched.handle().addr::<u64>(handle.pid());
                let start = Instant::now();
                for _ in 0..SENDS {
                    addr.send(1).expect("send");
                }
                assert_eq!(sched.block_on(handle).expect("sink"), SENDS);
                total += start.elapsed();
            }
            total
        })
    });
    group.bench_function("async", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let handle = sched
                    .spawn_fn(|cx: ProcessCx<u64>| async move {
                        let mut received = 0;
                        while received < SENDS {
                            received += cx.recv().await?;
                        }
                        Ok::<_, BoxError>(received)
                    })
                    .expect("spawn");
                wait_until_waiting(&sched, handle.pid());
                let addr = handle.addr();
                let start = Instant::now();
                for _ in 0..SENDS {
                    addr.send(1).expect("send");
                }
                assert_eq!(sched.block_on(handle).expect("sink"), SENDS);
                total += start.elapsed();
            }
            total
        })
    });
    sched.shutdown(Duration::from_secs(1));
    let runtime = tokio_runtime();
    group.bench_function(NATIVE, |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
                let (started_tx, started_rx) = std::sync::mpsc::channel();
                let receiver = runtime.spawn(async move {
                    started_tx.send(()).expect("bench alive");
                    let mut received = 0;
                    while received < SENDS {
                        received += rx.recv().await.expect("sender alive");
                    }
                    received
                });
                started_rx.recv().expect("receiver started");
                let start = Instant::now();
                for _ in 0..SENDS {
                    tx.send(1).expect("send");
                }
                assert_eq!(runtime.block_on(receiver).expect("receiver"), SENDS);
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// ask_from_tokio, ask_between
// ---------------------------------------------------------------------------------------------

fn asks(c: &mut Criterion) {
    let mut group = c.benchmark_group("ask_from_tokio");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    let sched = scheduler();
    let server = spawn_server(&sched);
    // The caller is tokio code on the bench thread, in `block_on` of the same kind of runtime
    // as the tokio-native row's (multi-thread): the bench thread parks and is woken the same
    // way in both rows. (A current-thread runtime with its I/O driver parks in `epoll_wait`,
    // and its waker is an eventfd write: a heavier wake-up than the tokio-native row's.)
    let caller = tokio_runtime();
    group.bench_function("procsched", |b| {
        b.iter(|| {
            caller.block_on(async {
                for n in 0..ASKS {
                    let answer = server.ask(|reply| (n, reply)).await.expect("answer");
                    debug_assert_eq!(answer, n + 1);
                }
            })
        })
    });
    let runtime = tokio_runtime();
    let native = spawn_native_server(&runtime);
    group.bench_function(NATIVE, |b| {
        b.iter(|| {
            runtime.block_on(async {
                for n in 0..ASKS {
                    let (tx, rx) = oneshot::channel();
                    native.send((n, tx)).expect("server alive");
                    let answer = rx.await.expect("answer");
                    debug_assert_eq!(answer, n + 1);
                }
            })
        })
    });
    group.finish();

    // The same asks from a spawned task: the shape where tokio-native keeps both ends on one
    // worker, and procsched's caller and process are on different threads.
    let mut group = c.benchmark_group("ask_from_task");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("procsched", |b| {
        b.iter(|| {
            let server = server.clone();
            let asker = caller.spawn(async move {
                for n in 0..ASKS {
                    let answer = server.ask(|reply| (n, reply)).await.expect("answer");
                    debug_assert_eq!(answer, n + 1);
                }
            });
            caller.block_on(asker).expect("asker");
        })
    });
    // Its tokio-native peer is `ask_between`'s: a task asking the native server.
    group.finish();

    // A short process spawned and awaited, one after the other, from a spawned task: the
    // same crossing between the runtimes, with a spawn where the ask had a message.
    let mut group = c.benchmark_group("spawn_await_from_task");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("procsched", |b| {
        b.iter(|| {
            let spawner = sched.handle().clone();
            let task = caller.spawn(async move {
                for n in 0..SPAWNS {
                    let handle = spawner
                        .spawn_fn(move |_: ProcessCx| async move { Ok::<_, BoxError>(n + 1) })
                        .expect("spawn");
                    let output = handle.await.expect("output");
                    debug_assert_eq!(output, n + 1);
                }
            });
            caller.block_on(task).expect("spawner");
        })
    });
    group.bench_function(NATIVE, |b| {
        b.iter(|| {
            let task = runtime.spawn(async move {
                for n in 0..SPAWNS {
                    let output = tokio::spawn(async move { n + 1 }).await.expect("output");
                    debug_assert_eq!(output, n + 1);
                }
            });
            runtime.block_on(task).expect("spawner");
        })
    });
    group.finish();

    // The same asks joined from one spawned task (`join_all`): every request goes out before
    // the first answer is awaited.
    let mut group = c.benchmark_group("ask_join_from_task");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("procsched", |b| {
        b.iter(|| {
            let server = server.clone();
            let asker = caller.spawn(async move {
                let asks = (0..ASKS).map(|n| server.ask(move |reply| (n, reply)));
                for answer in futures::future::join_all(asks).await {
                    answer.expect("answer");
                }
            });
            caller.block_on(asker).expect("asker");
        })
    });
    group.bench_function(NATIVE, |b| {
        b.iter(|| {
            let native = native.clone();
            let asker = runtime.spawn(async move {
                let asks = (0..ASKS).map(|n| {
                    let (tx, rx) = oneshot::channel();
                    native.send((n, tx)).expect("server alive");
                    rx
                });
                for answer in futures::future::join_all(asks).await {
                    answer.expect("answer");
                }
            });
            runtime.block_on(asker).expect("asker");
        })
    });
    group.finish();

    let mut group = c.benchmark_group("ask_between");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("procsched", |b| {
        b.iter(|| {
            let server = server.clone();
            let asker = sched
                .spawn_fn(move |_: ProcessCx| async move {
                    for n in 0..ASKS {
                        let answer = server.ask(|reply| (n, reply)).await?;
                        debug_assert_eq!(answer, n + 1);
                    }
                    Ok::<_, BoxError>(())
                })
                .expect("spawn");
            sched.block_on(asker).expect("asker");
        })
    });
    // The same asks from a state machine: each yielded as a command, read back as its yield's
    // completion.
    group.bench_function("sm", |b| {
        b.iter(|| {
            let asker = StepAsker::new(server.clone(), ASKS);
            let asker = sched.spawn(asker, "run", Payload::empty()).expect("spawn");
            let answered = sched.block_on(asker).expect("asker");
            debug_assert_eq!(answered, ASKS);
        })
    });
    group.bench_function(NATIVE, |b| {
        b.iter(|| {
            let native = native.clone();
            let asker = runtime.spawn(async move {
                for n in 0..ASKS {
                    let (tx, rx) = oneshot::channel();
                    native.send((n, tx)).expect("server alive");
                    let answer = rx.await.expect("answer");
                    debug_assert_eq!(answer, n + 1);
                }
            });
            runtime.block_on(asker).expect("asker");
        })
    });
    group.finish();
    sched.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------------
// ring_pids, ring_addrs
// ---------------------------------------------------------------------------------------------

fn rings(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring_pids");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    let sched = scheduler();
    for (name, form) in [("sm", Form::StateMachine), ("async", Form::AsyncPids)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                (0..iterations)
                    .map(|_| ring::run(&sched, form, RING, LAPS))
                    .sum()
            })
        });
    }
    let runtime = tokio_runtime();
    group.bench_function(NATIVE, |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| procsched_benches::native_ring::run(&runtime, RING, LAPS))
                .sum()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("ring_addrs");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("async", |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| ring::run(&sched, Form::AsyncAddrs, RING, LAPS))
                .sum()
        })
    });
    group.finish();
    sched.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------------
// send_wait_<cap>
// ---------------------------------------------------------------------------------------------

/// Backpressure from tokio code: senders that wait for room in a bounded mailbox, against
/// tokio's bounded channel. The tokio peer's senders and receiver share one runtime, so room
/// made by its receiver wakes a sender on the same thread; here each round of room crosses
/// from the scheduler's worker to the tokio runtime's threads and back.
fn send_waits(c: &mut Criterion) {
    let runtime = tokio_runtime();
    let each = SENDS / WAITING_SENDERS;
    for capacity in WAIT_CAPACITIES {
        let mut group = c.benchmark_group(format!("send_wait_{capacity}"));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(3))
            .warm_up_time(Duration::from_millis(500));
        let sched = Scheduler::builder()
            .workers(*WORKERS)
            .mailbox_capacity(capacity)
            .build()
            .expect("scheduler");
        group.bench_function("async", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let sink = sched
                        .spawn_fn(|cx: ProcessCx<u64>| async move {
                            let mut sum = 0u64;
                            for _ in 0..SENDS {
                                sum += cx.recv().await?;
                            }
                            Ok::<_, BoxError>(sum)
                        })
                        .expect("spawn");
                    let addr = sink.addr();
                    let start = Instant::now();
                    runtime.block_on(async {
                        let senders: Vec<_> = (0..WAITING_SENDERS)
                            .map(|_| {
                                let addr = addr.clone();
                                tokio::spawn(async move {
                                    for n in 0..each {
                                        addr.send_wait(n).await.expect("sent");
                                    }
                                })
                            })
                            .collect();
                        for sender in senders {
                            sender.await.expect("sender");
                        }
                    });
                    sched.block_on(sink).expect("sink");
                    total += start.elapsed();
                }
                total
            })
        });
        group.bench_function(NATIVE, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    runtime.block_on(async {
                        let (tx, mut rx) = mpsc::channel::<u64>(capacity);
                        let receiver = tokio::spawn(async move {
                            let mut sum = 0u64;
                            for _ in 0..SENDS {
                                sum += rx.recv().await.expect("sent");
                            }
                            sum
                        });
                        let senders: Vec<_> = (0..WAITING_SENDERS)
                            .map(|_| {
                                let tx = tx.clone();
                                tokio::spawn(async move {
                                    for n in 0..each {
                                        tx.send(n).await.expect("sent");
                                    }
                                })
                            })
                            .collect();
                        for sender in senders {
                            sender.await.expect("sender");
                        }
                        receiver.await.expect("receiver");
                    });
                    total += start.elapsed();
                }
                total
            })
        });
        group.finish();
        sched.shutdown(Duration::from_secs(10));
    }
}

/// Home of the `criterion_group!` expansion: an undocumented `pub fn` that the package-wide
/// `missing_docs` lint would otherwise flag.
mod harness {
    #![allow(missing_docs)]

    use super::{asks, rings, send_to_waiting, send_waits};
    use criterion::{criterion_group, Criterion};
    use std::time::Duration;

    criterion_group! {
        name = messages;
        config = Criterion::default().without_plots().warm_up_time(Duration::from_secs(1));
        targets = send_to_waiting, asks, rings, send_waits
    }
}

/// The report: medians, per-unit cost, and the ratio to tokio-native of each row.
fn report(started: SystemTime) {
    let rows: [(&str, &[&str], f64, &str); 10] = [
        ("send_to_waiting", &["sm", "async"], SENDS as f64, "send"),
        ("ask_from_tokio", &["procsched"], ASKS as f64, "ask"),
        ("ask_from_task", &["procsched"], ASKS as f64, "ask"),
        ("ask_join_from_task", &["procsched"], ASKS as f64, "ask"),
        (
            "spawn_await_from_task",
            &["procsched"],
            SPAWNS as f64,
            "spawn",
        ),
        ("ask_between", &["procsched", "sm"], ASKS as f64, "ask"),
        (
            "ring_pids",
            &["sm", "async"],
            (RING as u64 * LAPS) as f64,
            "hop",
        ),
        ("ring_addrs", &["async"], (RING as u64 * LAPS) as f64, "hop"),
        ("send_wait_16", &["async"], SENDS as f64, "send"),
        ("send_wait_256", &["async"], SENDS as f64, "send"),
    ];
    let mut table = format!(
        "Median time per iteration, {} worker threads per runtime; ratio = procsched / tokio-native.\n\n\
         | row | procsched | per unit | tokio-native | per unit | ratio |\n|---|---:|---:|---:|---:|---:|\n",
        *WORKERS
    );
    for (group, forms, units, unit) in rows {
        // Rows sharing another group's peer: the same tokio-native work.
        let shared_peer = match group {
            "ring_addrs" => Some("ring_pids"),
            "ask_from_task" => Some("ask_between"),
            _ => None,
        };
        let native = median_ns(group, NATIVE, started)
            .or_else(|| shared_peer.and_then(|peer| median_ns(peer, NATIVE, started)));
        for form in forms {
            let Some(ours) = median_ns(group, form, started) else {
                continue;
            };
            let per = |ns: f64| format!("{} /{unit}", format_ns(ns / units));
            table.push_str(&format!(
                "| {group}/{form} | {} | {} | {} | {} | {} |\n",
                format_ns(ours),
                per(ours),
                native.map_or("–".to_owned(), format_ns),
                native.map_or("–".to_owned(), per),
                format_ratio(Some(ours), native),
            ));
        }
    }
    publish_report("bench-messages.md", &table);
}

fn main() {
    let started = SystemTime::now();
    harness::messages();
    Criterion::default().configure_from_args().final_summary();
    report(started);
}
