//! The phase only procsched can show: a few processes whose steps block their worker (a
//! synchronous call, `std::thread::sleep`, that says nothing about blocking: no
//! `block_in_place`, no `spawn_blocking`) beside thousands of short processes that are pinged
//! with timestamps and record how long each ping took to reach them.
//!
//! The same workload runs twice, with the same number of worker threads, the same pinger (the
//! calling thread, at the same rate, round-robin over the short ones) and the same measure
//! (from just before the send to the receipt, taken by the receiver):
//! - on procsched: the monitor sees a step run past its long-poll threshold and hands the
//!   stuck worker's queue to a spare thread, so the short processes keep running;
//! - on a plain tokio multi-thread runtime: tasks that call `std::thread::sleep` between
//!   `yield_now`s, and tasks receiving the pings over `mpsc`. A blocked tokio worker keeps its
//!   queue until the call returns.

use crate::Args;
use procsched::executor::MonitorMetrics;
use procsched::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The phase's sizes, from the command line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    pub(crate) workers: usize,
    pub(crate) blockers: usize,
    pub(crate) block: Duration,
    pub(crate) short: usize,
    pub(crate) duration: Duration,
    pub(crate) ping_rate: u64,
    /// procsched's `max_spare_workers`: spare threads the monitor may run at once.
    pub(crate) max_spares: usize,
}

impl Sizes {
    pub(crate) fn from_args(args: &Args) -> Sizes {
        Sizes {
            workers: args.workers,
            blockers: args.blockers,
            block: Duration::from_millis(args.block_ms),
            short: args.short_processes,
            duration: Duration::from_millis(args.phase_ms),
            ping_rate: args.ping_rate,
            // Default: one per blocker (at least the library's default, one per worker), so
            // that every worker stuck in a blocking step can be replaced.
            max_spares: args.max_spares.unwrap_or(args.blockers.max(args.workers)),
        }
    }
}

/// One runtime's run.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Send-to-receive latency of every ping the short ones received, sorted.
    pub(crate) latencies: Vec<Duration>,
    /// Pings sent during the phase.
    pub(crate) sent: u64,
    /// Blocking steps the blockers completed.
    pub(crate) blocking_steps: u64,
}

impl Run {
    /// The `p`-th percentile (nearest rank), `None` without samples.
    pub(crate) fn percentile(&self, p: f64) -> Option<Duration> {
        let n = self.latencies.len();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        Some(self.latencies[rank.clamp(1, n) - 1])
    }

    pub(crate) fn max(&self) -> Option<Duration> {
        self.latencies.last().copied()
    }
}

/// A ping to a short process: the instant it was sent, or the end of the phase.
enum Ping {
    At(Instant),
    Stop,
}

/// The blocking code: a synchronous report generator that holds its thread for `block` (a
/// stand-in for a synchronous database driver, a compression call, a DNS lookup, ...).
fn generate_report(block: Duration) {
    std::thread::sleep(block);
}

/// Sends pings at `rate` per second, round-robin over `short` receivers, until `until`.
/// `send(i, at)` sends the ping stamped `at` to receiver `i`. Returns the number sent.
fn drive(short: usize, rate: u64, until: Instant, mut send: impl FnMut(usize, Instant)) -> u64 {
    let started = Instant::now();
    let mut sent = 0u64;
    let mut next = 0usize;
    loop {
        let now = Instant::now();
        if now >= until {
            return sent;
        }
        let due = (now.duration_since(started).as_secs_f64() * rate as f64) as u64;
        while sent < due {
            send(next, Instant::now());
            next = (next + 1) % short;
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Waits until `count` reaches `target` (every short receiver is waiting), at most 10 s.
fn wait_ready(count: &AtomicUsize, target: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while count.load(Ordering::Acquire) < target && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The workload on procsched. Returns the run and what the monitor did.
pub(crate) fn run_procsched(sizes: Sizes) -> Result<(Run, MonitorMetrics), BoxError> {
    let sched = Scheduler::builder()
        .workers(sizes.workers)
        .max_spare_workers(sizes.max_spares)
        .build()?;
    let ready = Arc::new(AtomicUsize::new(0));
    let mut short = Vec::with_capacity(sizes.short);
    for _ in 0..sizes.short {
        let ready = ready.clone();
        short.push(sched.spawn_fn(move |cx: ProcessCx<Ping>| async move {
            ready.fetch_add(1, Ordering::Release);
            let mut latencies = Vec::new();
            loop {
                match cx.recv().await? {
                    Ping::At(sent) => latencies.push(sent.elapsed()),
                    Ping::Stop => return Ok::<_, BoxError>(latencies),
                }
            }
        })?);
    }
    let addrs: Vec<Addr<Ping>> = short.iter().map(|handle| handle.addr()).collect();
    wait_ready(&ready, sizes.short);

    let until = Instant::now() + sizes.duration;
    let mut blockers = Vec::with_capacity(sizes.blockers);
    for _ in 0..sizes.blockers {
        blockers.push(sched.spawn_fn(move |cx: ProcessCx<()>| async move {
            let mut steps = 0u64;
            while Instant::now() < until {
                generate_report(sizes.block); // blocks this step's worker
                steps += 1;
                cx.yield_now().await; // the next step
            }
            Ok::<_, BoxError>(steps)
        })?);
    }
    let mut undelivered = 0u64;
    let sent = drive(sizes.short, sizes.ping_rate, until, |i, at| {
        if addrs[i].send(Ping::At(at)).is_err() {
            undelivered += 1;
        }
    });
    for addr in &addrs {
        if addr.send(Ping::Stop).is_err() {
            return Err(format!("short process {} is gone", addr.pid()).into());
        }
    }
    let mut run = Run {
        sent: sent - undelivered,
        ..Run::default()
    };
    sched.block_on(async {
        for handle in short {
            run.latencies.extend(handle.await?);
        }
        for handle in blockers {
            run.blocking_steps += handle.await?;
        }
        Ok::<_, BoxError>(())
    })?;
    run.latencies.sort_unstable();
    let monitor = sched.metrics().executor.monitor();
    sched.shutdown(Duration::from_secs(1));
    Ok((run, monitor))
}

/// The same workload on a plain tokio multi-thread runtime with as many worker threads.
pub(crate) fn run_tokio(sizes: Sizes) -> Result<Run, BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(sizes.workers)
        .enable_all()
        .build()?;
    let ready = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::with_capacity(sizes.short);
    let mut short = Vec::with_capacity(sizes.short);
    for _ in 0..sizes.short {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let ready = ready.clone();
        senders.push(tx);
        short.push(rt.spawn(async move {
            ready.fetch_add(1, Ordering::Release);
            let mut latencies = Vec::new();
            while let Some(sent) = rx.recv().await {
                latencies.push(sent.elapsed());
            }
            latencies
        }));
    }
    wait_ready(&ready, sizes.short);

    let until = Instant::now() + sizes.duration;
    let mut blockers = Vec::with_capacity(sizes.blockers);
    for _ in 0..sizes.blockers {
        blockers.push(rt.spawn(async move {
            let mut steps = 0u64;
            while Instant::now() < until {
                generate_report(sizes.block); // blocks this task's worker
                steps += 1;
                tokio::task::yield_now().await;
            }
            steps
        }));
    }
    let mut undelivered = 0u64;
    let sent = drive(sizes.short, sizes.ping_rate, until, |i, at| {
        if senders[i].send(at).is_err() {
            undelivered += 1;
        }
    });
    drop(senders); // the end of the phase: each receiver's `recv` returns `None`
    let mut run = Run {
        sent: sent - undelivered,
        ..Run::default()
    };
    rt.block_on(async {
        for handle in short {
            run.latencies.extend(handle.await?);
        }
        for handle in blockers {
            run.blocking_steps += handle.await?;
        }
        Ok::<_, BoxError>(())
    })?;
    run.latencies.sort_unstable();
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(run)
}
