//! A fixed amount of one workload, for instruction counts under callgrind (which, unlike wall
//! time, does not move with the machine's load): compare two builds (say, with and without
//! `--features tracing-off`) or two variants of one workload by their totals.
//!
//! ```text
//! cargo build --release -p procsched-benches --example probe
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/probe single_step 20000
//! callgrind_annotate /tmp/cg.out | head -40
//! ```
//!
//! Arguments: WORKLOAD [ROUNDS [ITERATIONS]]; the workload runs ITERATIONS times (default 1) in
//! one scheduler, so that `(count(3) - count(1)) / 2` is the steady state, without the first
//! iteration's growth of the process table.
//!
//! Workloads: `single_step`, `one_yield`, `many_yields` (ROUNDS processes × 100 inline yields),
//! `async_fn_single_step`, `async_fn_one_yield`, `async_fn_many_yields`, `send_to_blocked`
//! (ROUNDS messages to one process, sent while it is idle), `send_from_thread`,
//! `send_one_from_thread`, `ring` (100 processes pass a token ROUNDS hops),
//! `spawn_from_thread`, `spawn_fn_from_thread`, `many_yields_from_thread` and `ring_from_thread`
//! (see there). One
//! worker (`PROBE_WORKERS=n` for more; `PROBE_MONITOR=1` turns the monitor on, `PROBE_TOKIO=1`
//! gives the scheduler a tokio runtime of its own, as the process bench does), and the workload runs
//! inside a driver process (`drive`): the count is the same from run to run, and moves between
//! builds only with their code. Every result is checked.

use procsched::prelude::*;
use procsched::{
    error::CommandError,
    state_machine::{Event, Events, Process, StepOutput},
};

struct Inc(u64);
procsched::command!(Inc => u64);

/// Finishes on its first step.
struct Once;
impl Process for Once {
    type Output = u64;
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        out.done(0);
        Ok(())
    }
}

/// Yields `Inc` `remaining` times, one after the other, feeding each reply into the next.
struct Counter {
    remaining: u64,
    value: u64,
}
impl Process for Counter {
    type Output = u64;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        if let Some(Event::YieldComplete { result, .. }) = events.pop() {
            self.value = result?.take::<u64>()?;
        }
        if self.remaining == 0 {
            out.done(self.value);
        } else {
            self.remaining -= 1;
            out.yield_command(0, Inc(self.value));
            out.wait();
        }
        Ok(())
    }
}

/// Counts the messages it receives; finishes after `expected`.
struct Sink {
    expected: u64,
    seen: u64,
}
impl Process for Sink {
    type Output = u64;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        self.seen += events.drain().count() as u64;
        if self.seen == self.expected {
            out.done(self.seen);
        } else {
            out.idle();
        }
        Ok(())
    }
}

/// One process of a ring: forwards the token (hops left) to `next`; the process that gets it
/// at 0 hops sends `stop` round the ring, which every process forwards once and finishes on.
struct RingNode {
    sched: SchedulerHandle,
    next: Option<Pid>,
    hops: u64,
}
impl Process for RingNode {
    type Output = u64;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            match &*message.topic {
                "link" => self.next = Some(message.payload.take::<Pid>()?),
                "token" => {
                    self.hops += 1;
                    let left = message.payload.take::<u64>()?;
                    let next = self.next.ok_or("token before link")?;
                    if left == 0 {
                        self.sched
                            .send(next, Message::new("stop", Payload::empty()))?;
                    } else {
                        self.sched
                            .send(next, Message::new("token", Payload::new(left - 1)))?;
                    }
                }
                _ => {
                    // `stop`: pass it on (the last one finds its successor finished).
                    let _ = self
                        .sched
                        .send(self.next.ok_or("stop before link")?, message);
                    out.done(self.hops);
                    return Ok(());
                }
            }
        }
        out.idle();
        Ok(())
    }
}

/// Spawns `size` [`RingNode`]s into `handles`, links each to the next, and sends the first the
/// token for `hops` hops.
fn start_ring(
    sched: &SchedulerHandle,
    size: usize,
    hops: u64,
    handles: &mut Vec<ProcessHandle<u64>>,
) -> Result<(), BoxError> {
    for _ in 0..size {
        let node = RingNode {
            sched: sched.clone(),
            next: None,
            hops: 0,
        };
        handles.push(sched.spawn(node, "run", Payload::empty())?);
    }
    for (i, handle) in handles.iter().enumerate() {
        let next = handles[(i + 1) % size].pid();
        sched.send(handle.pid(), Message::new("link", Payload::new(next)))?;
    }
    sched.send(
        handles[0].pid(),
        Message::new("token", Payload::new(hops - 1)),
    )?;
    Ok(())
}

async fn count(cx: ProcessCx, yields: u64) -> Result<u64, BoxError> {
    let mut value = 0;
    for _ in 0..yields {
        value = cx.call(Inc(value)).await?;
    }
    Ok(value)
}

/// Runs `workload` from inside a process, so that every instruction of it runs on the one
/// worker thread: no interleaving with a spawning thread, whose timing (how many processes are
/// live at once, how often a thread parks) would change the count from one build to the next.
async fn drive(
    cx: ProcessCx,
    workload: String,
    rounds: u64,
    iterations: u64,
) -> Result<(), BoxError> {
    for _ in 0..iterations {
        drive_once(&cx, &workload, rounds).await?;
    }
    Ok(())
}

async fn drive_once(cx: &ProcessCx, workload: &str, rounds: u64) -> Result<(), BoxError> {
    let sched = cx.scheduler();
    let mut handles = Vec::with_capacity(rounds as usize);
    let mut expected = 0;
    match workload {
        "single_step" => {
            for _ in 0..rounds {
                handles.push(sched.spawn(Once, "run", Payload::empty())?);
            }
        }
        "one_yield" | "many_yields" => {
            expected = if workload == "one_yield" { 1 } else { 100 };
            for _ in 0..rounds {
                let counter = Counter {
                    remaining: expected,
                    value: 0,
                };
                handles.push(sched.spawn(counter, "run", Payload::empty())?);
            }
        }
        "async_fn_single_step" => {
            for _ in 0..rounds {
                handles.push(sched.spawn_fn(|_| async { Ok::<_, BoxError>(0) })?);
            }
        }
        "async_fn_one_yield" | "async_fn_many_yields" => {
            expected = if workload == "async_fn_one_yield" {
                1
            } else {
                100
            };
            for _ in 0..rounds {
                handles.push(sched.spawn_fn(move |cx| count(cx, expected))?);
            }
        }
        "send_to_blocked" => {
            let sink = Sink {
                expected: rounds,
                seen: 0,
            };
            let sink = sched.spawn(sink, "run", Payload::empty())?;
            for _ in 0..rounds {
                sched.send(sink.pid(), Message::new("n", Payload::new(0u8)))?;
            }
            expected = rounds;
            handles.push(sink);
        }
        "ring" => {
            // 100 processes, ROUNDS hops: mostly the send-from-a-step path.
            start_ring(&sched, 100, rounds, &mut handles)?;
            let mut hops = 0;
            for handle in handles.drain(..) {
                hops += handle.await?;
            }
            assert_eq!(hops, rounds);
        }
        other => return Err(format!("unknown workload {other}").into()),
    }
    for handle in handles {
        assert_eq!(handle.await?, expected);
    }
    Ok(())
}

/// ROUNDS idle processes, then one message to each from this (non-worker) thread, ITERATIONS
/// times (at least once): the path of a service's request thread handing work to its sessions.
/// Prints the sending thread's time per send of each round (for `perf`; under callgrind the
/// interleaving is not repeatable); the first round is each mailbox's first message. Not a
/// driver-process workload: a send from outside the workers is the point.
fn send_from_thread(
    sched: &Scheduler,
    rounds: u64,
    iterations: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let iterations = iterations.max(1);
    let sinks = (0..rounds)
        .map(|_| {
            let sink = Sink {
                expected: iterations,
                seen: 0,
            };
            sched.spawn(sink, "run", Payload::empty())
        })
        .collect::<Result<Vec<_>, _>>()?;
    for round in 0..iterations {
        let start = std::time::Instant::now();
        for sink in &sinks {
            sched.send(sink.pid(), Message::new("n", Payload::new(0u8)))?;
        }
        let elapsed = start.elapsed();
        eprintln!(
            "round {round}: {:.0} ns/send",
            elapsed.as_nanos() as f64 / rounds as f64
        );
    }
    for sink in sinks {
        assert_eq!(sched.block_on(sink)?, iterations);
    }
    Ok(())
}

/// One process, sent ROUNDS messages from this (non-worker) thread while it runs on a worker,
/// ITERATIONS times: the process bench's `send_to_blocked`, sender's side. Prints the median
/// time per send (for wall-time A/B runs and `perf`).
fn send_one_from_thread(
    sched: &Scheduler,
    rounds: u64,
    iterations: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let sink = Sink {
        expected: rounds * iterations,
        seen: 0,
    };
    let sink = sched.spawn(sink, "run", Payload::empty())?;
    let mut per_send = Vec::new();
    let before = sched.metrics().executor.total();
    for _ in 0..iterations {
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            sched.send(sink.pid(), Message::new("n", Payload::new(0u8)))?;
        }
        per_send.push(start.elapsed().as_nanos() as f64 / rounds as f64);
    }
    let after = sched.metrics().executor.total();
    let sends = (rounds * iterations) as f64;
    eprintln!(
        "per send: polls {:.3}, parks {:.3}, unparks {:.3}",
        (after.polls - before.polls) as f64 / sends,
        (after.parks - before.parks) as f64 / sends,
        (after.unparks - before.unparks) as f64 / sends,
    );
    assert_eq!(sched.block_on(sink)?, rounds * iterations);
    per_send.sort_by(f64::total_cmp);
    eprintln!(
        "{:.1} ns/send (median of {iterations})",
        per_send[per_send.len() / 2]
    );
    Ok(())
}

/// ROUNDS `Once` processes (or, `spawn_fn_from_thread`, async-fn processes that return at once)
/// spawned from this (non-worker) thread, then awaited, ITERATIONS times:
/// spawns on one thread, finishes on the workers, as in a service. Prints the median time per
/// process over the iterations (for wall-time A/B runs; not for callgrind).
fn spawn_from_thread(
    sched: &Scheduler,
    rounds: u64,
    iterations: u64,
    async_fn: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut per_process = Vec::new();
    let mut handles = Vec::with_capacity(rounds as usize);
    for _ in 0..iterations {
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            handles.push(if async_fn {
                sched.spawn_fn(|_| async { Ok::<_, BoxError>(0) })?
            } else {
                sched.spawn(Once, "run", Payload::empty())?
            });
        }
        for handle in handles.drain(..) {
            assert_eq!(sched.block_on(handle)?, 0);
        }
        per_process.push(start.elapsed().as_nanos() as f64 / rounds as f64);
    }
    per_process.sort_by(f64::total_cmp);
    eprintln!(
        "{:.0} ns/process (median of {iterations})",
        per_process[per_process.len() / 2]
    );
    Ok(())
}

/// The process bench's `ring` as its bench thread drives it: 1 000 processes spawned from this
/// (non-worker) thread pass a token ROUNDS hops, ITERATIONS times. Prints each iteration's time
/// per hop with what the workers did meanwhile (polls, tasks stolen, parks, unparks, summed over
/// the workers): a hop that leaves its worker shows up as a steal or an unpark.
fn ring_from_thread(
    sched: &Scheduler,
    rounds: u64,
    iterations: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    const SIZE: usize = 1_000;
    let mut handles = Vec::with_capacity(SIZE);
    for _ in 0..iterations {
        let before = sched.metrics().executor.total();
        let start = std::time::Instant::now();
        start_ring(sched.handle(), SIZE, rounds, &mut handles)
            .map_err(|e| e as Box<dyn std::error::Error>)?;
        let mut hops = 0;
        for handle in handles.drain(..) {
            hops += sched.block_on(handle)?;
        }
        assert_eq!(hops, rounds);
        let elapsed = start.elapsed();
        let after = sched.metrics().executor.total();
        eprintln!(
            "{:.0} ns/hop; per hop: polls {:.2}, stolen {:.3}, parks {:.3}, unparks {:.3}",
            elapsed.as_nanos() as f64 / rounds as f64,
            (after.polls - before.polls) as f64 / rounds as f64,
            (after.stolen - before.stolen) as f64 / rounds as f64,
            (after.parks - before.parks) as f64 / rounds as f64,
            (after.unparks - before.unparks) as f64 / rounds as f64,
        );
    }
    Ok(())
}

/// ROUNDS `Counter`s of 100 inline yields (`PROBE_YIELDS` to change it) spawned from this
/// (non-worker) thread, then awaited in order in one `block_on`, ITERATIONS times: the process
/// bench's `many_yields` as the bench thread drives it. Prints the median time per iteration
/// and per yield, and the median number of times the joining thread found a handle not ready
/// (each one a park and a wake of this thread).
fn many_yields_from_thread(
    sched: &Scheduler,
    io: Option<&tokio::runtime::Runtime>,
    rounds: u64,
    iterations: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    // `PROBE_YIELDS` per process (default 100, the bench's): more of them amortise the spawn
    // and the join (and the joiner's wakes) over more yields.
    let yields: u64 = std::env::var("PROBE_YIELDS").map_or(Ok(100), |y| y.parse())?;
    let mut per_iteration = Vec::new();
    let mut pendings = Vec::new();
    let mut handles = Vec::with_capacity(rounds as usize);
    for _ in 0..iterations {
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            let counter = Counter {
                remaining: yields,
                value: 0,
            };
            handles.push(sched.spawn(counter, "run", Payload::empty())?);
        }
        let mut pending = 0u64;
        let mut all = std::pin::pin!(async {
            for handle in handles.drain(..) {
                assert_eq!(handle.await?, yields);
            }
            Ok::<_, ProcessError>(())
        });
        let counted = std::future::poll_fn(|cx| {
            let polled = std::future::Future::poll(all.as_mut(), cx);
            pending += u64::from(polled.is_pending());
            polled
        });
        if let Some(io) = io {
            let watched = {
                let _runtime = io.enter();
                tokio::time::timeout(std::time::Duration::from_secs(60), counted)
            };
            sched.block_on(watched)??;
        } else {
            sched.block_on(counted)?;
        }
        per_iteration.push(start.elapsed().as_nanos() as f64 / 1000.0);
        pendings.push(pending);
    }
    let mean = per_iteration.iter().sum::<f64>() / per_iteration.len() as f64;
    per_iteration.sort_by(f64::total_cmp);
    pendings.sort_unstable();
    let median = per_iteration[per_iteration.len() / 2];
    eprintln!(
        "{median:.1} µs/iteration (mean {mean:.1}, p90 {:.1}), {:.1} ns/yield, {} waits/iteration \
         (medians of {iterations})",
        per_iteration[per_iteration.len() * 9 / 10],
        median * 1000.0 / (rounds * yields) as f64,
        pendings[pendings.len() / 2]
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| "single_step".into());
    let rounds: u64 = args.next().map_or(Ok(10_000), |n| n.parse())?;
    let iterations: u64 = args.next().map_or(Ok(1), |n| n.parse())?;
    let io = std::env::var("PROBE_TOKIO")
        .is_ok_and(|v| v == "1")
        .then(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime")
        });
    let mut builder = Scheduler::builder();
    if let Some(io) = &io {
        builder.tokio_handle(io.handle().clone());
    }
    let sched = builder
        .workers(std::env::var("PROBE_WORKERS").map_or(Ok(1), |w| w.parse())?)
        .monitor(std::env::var("PROBE_MONITOR").is_ok_and(|v| v == "1"))
        .inline_handler(|Inc(n): Inc| Ok::<_, CommandError>(n + 1))
        .build()?;
    if workload == "send_from_thread" {
        return send_from_thread(&sched, rounds, iterations);
    }
    if workload == "send_one_from_thread" {
        return send_one_from_thread(&sched, rounds, iterations);
    }
    if workload == "many_yields_from_thread" {
        return many_yields_from_thread(&sched, io.as_ref(), rounds, iterations);
    }
    if workload == "ring_from_thread" {
        return ring_from_thread(&sched, rounds, iterations);
    }
    if workload == "spawn_from_thread" || workload == "spawn_fn_from_thread" {
        return spawn_from_thread(
            &sched,
            rounds,
            iterations,
            workload == "spawn_fn_from_thread",
        );
    }
    let driver = sched.spawn_fn(move |cx| drive(cx, workload, rounds, iterations))?;
    sched.block_on(driver)?;
    sched.shutdown(std::time::Duration::from_secs(10));
    Ok(())
}
