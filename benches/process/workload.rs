//! What is measured: the sizes, the workloads, their units and criterion settings, and the
//! [`Peer`] interface every side of the comparison implements.

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, SamplingMode};

use procsched_benches::WORKERS;

use crate::args::quick_mode;
use crate::samples::{GrowthSample, LatencySample, RssSample};

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

/// Processes per iteration of `single_step` and `one_yield`.
pub(crate) const BURST: usize = 10_000;
/// Inline yields of each process of `many_yields`.
pub(crate) const MANY_YIELDS: u64 = 100;
/// Processes of `many_yields`, run at once: enough that the yields, not the one wake of the
/// joining thread, dominate an iteration (with a single process, both peers measure mostly
/// cross-thread wake latency).
pub(crate) const MANY_YIELDS_PROCESSES: usize = 100;
/// Processes of `async_yields`.
pub(crate) const ASYNC_PROCESSES: usize = 1_000;
/// Async yields per process of `async_yields`.
pub(crate) const ASYNC_YIELDS: u64 = 10;
/// Sends per iteration of `send_to_blocked`.
pub(crate) const SEND_BATCH: u64 = 10_000;
/// Processes per iteration of `burst_spawn`.
pub(crate) const BURST_SPAWN: usize = 100_000;
/// Processes spawned by each spawning thread in `parallel_spawn`.
pub(crate) const PARALLEL_PER_THREAD: usize = 10_000;
/// Processes in the `ring`.
pub(crate) const RING_SIZE: usize = 1_000;
/// Hops of the `ring` token.
pub(crate) const RING_HOPS: u64 = 100_000;
/// Messages each of the `WORKERS` plain threads sends in `fan_in`.
pub(crate) const FAN_IN_THREAD_MSGS: u64 = 5_000;
/// Sending processes in `fan_in`.
pub(crate) const FAN_IN_PROCESSES: usize = 1_000;
/// Messages each sending process sends in `fan_in`.
pub(crate) const FAN_IN_PROCESS_MSGS: u64 = 5;
/// Plain threads sending in `fan_in_16`: more than the machine's cores, so senders are
/// preempted mid-send (the mailbox drain's worst case: `src/process/mailbox/intake.rs`).
pub(crate) const FAN_IN_16_THREADS: usize = 16;
/// Messages each thread sends in `fan_in_16`.
pub(crate) const FAN_IN_16_MSGS: u64 = 5_000;
/// Leaves of the `skynet` tree (a power of ten).
pub(crate) const SKYNET_LEAVES: u64 = 1_000_000;

/// How long any wait of the bench thread may take before the workload is declared stuck. A
/// watchdog, not synchronisation: it turns a lost wake-up into a panic with a message.
pub(crate) const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long stopping a peer may take.
pub(crate) const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

pub(crate) fn fan_in_total() -> u64 {
    *WORKERS as u64 * FAN_IN_THREAD_MSGS + FAN_IN_PROCESSES as u64 * FAN_IN_PROCESS_MSGS
}

pub(crate) fn fan_in_16_total() -> u64 {
    FAN_IN_16_THREADS as u64 * FAN_IN_16_MSGS
}

/// Processes in the `skynet` tree: every level of the 10-ary tree down to the leaves.
pub(crate) fn skynet_processes() -> u64 {
    let mut total = 0;
    let mut level = SKYNET_LEAVES;
    while level >= 1 {
        total += level;
        level /= 10;
    }
    total
}

// ---------------------------------------------------------------------------
// The workloads
// ---------------------------------------------------------------------------

/// Every workload, in run and table order; the criterion group is its `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    SingleStep,
    OneYield,
    ManyYields,
    AsyncYields,
    SendToBlocked,
    BurstSpawn,
    ParallelSpawn,
    Ring,
    FanIn,
    FanIn16,
    Skynet,
}

/// How a workload's iteration time is turned into the table's per-unit column.
pub(crate) enum Unit {
    /// Iteration time divided by `count`, e.g. `ns/process`.
    Per { count: f64, what: &'static str },
    /// `count` items per iteration, shown as a rate.
    Rate { count: f64, what: &'static str },
}

impl Workload {
    pub(crate) const ALL: [Workload; 11] = [
        Workload::SingleStep,
        Workload::OneYield,
        Workload::ManyYields,
        Workload::AsyncYields,
        Workload::SendToBlocked,
        Workload::BurstSpawn,
        Workload::ParallelSpawn,
        Workload::Ring,
        Workload::FanIn,
        Workload::FanIn16,
        Workload::Skynet,
    ];

    pub(crate) fn name(self) -> &'static str {
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
            Workload::FanIn16 => "fan_in_16",
            Workload::Skynet => "skynet",
        }
    }

    pub(crate) fn unit(self) -> Unit {
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
            Workload::FanIn16 => Unit::Rate {
                count: fan_in_16_total() as f64,
                what: "msgs/s",
            },
            Workload::Skynet => per(skynet_processes() as f64, "process"),
        }
    }

    /// Per-group criterion settings, chosen so the whole run fits the time budget (module
    /// docs). Long iterations get `Flat` sampling: `Linear` would run 1 + 2 + … + n
    /// iterations, 55 for ten samples.
    pub(crate) fn configure(self, group: &mut BenchmarkGroup<'_, WallTime>) {
        match self {
            Workload::BurstSpawn | Workload::Skynet => {
                // `--quick` doubles the iteration count until the estimate settles or the
                // measurement time is spent, so with iterations of seconds a long measurement
                // time would let a single quick benchmark run for half a minute.
                let measurement = if quick_mode() { 2 } else { 10 };
                group
                    .sample_size(10)
                    .sampling_mode(SamplingMode::Flat)
                    .warm_up_time(Duration::from_millis(500))
                    .measurement_time(Duration::from_secs(measurement));
            }
            Workload::Ring | Workload::ParallelSpawn | Workload::FanIn | Workload::FanIn16 => {
                group
                    .sample_size(10)
                    .sampling_mode(SamplingMode::Flat)
                    .measurement_time(Duration::from_secs(3));
            }
            _ => {}
        }
    }
}

/// Workloads whose memory is measured (peak RSS, each in a fresh child process: `rss.rs`).
pub(crate) const RSS_WORKLOADS: [Workload; 2] = [Workload::BurstSpawn, Workload::Skynet];

/// One side of the comparison, as the bench thread sees it: builds itself with [`WORKERS`]
/// threads and runs every measurement its own way (a peer is free to express a workload the
/// way its users would).
pub(crate) trait Peer: Sized {
    /// criterion function id and table column.
    const NAME: &'static str;

    /// Starts the peer (outside any timed region).
    fn build() -> Self;

    /// Registers this peer's benchmark of `workload` in `group` (named [`Self::NAME`]).
    fn bench(&self, workload: Workload, group: &mut BenchmarkGroup<'_, WallTime>);

    /// Runs `workload` once ([`RSS_WORKLOADS`] only) and measures
    /// the growth of the RSS high-water mark. Called on a fresh peer in a fresh process.
    fn rss(&self, workload: Workload) -> RssSample;

    /// Message round trips on a busy peer (see `latency.rs`).
    fn latency(&self) -> LatencySample;

    /// Spawn and send costs with `live` processes alive (see `growth.rs`). Called on a
    /// fresh peer in a fresh process.
    fn growth(&self, live: usize) -> GrowthSample;

    /// Stops the peer and its threads.
    fn shutdown(self);
}

/// The timed part of `send_to_blocked`, the same for every peer: batches of [`SEND_BATCH`]
/// sends from the bench thread (`send(i)`), only the sends timed; between batches `flush` asks
/// the receiver for the count it has seen, which arrives on `acks` and must equal everything
/// sent so far (delivery checked, and each batch starts against a drained, waiting receiver).
/// Returns the total sent.
pub(crate) fn time_send_batches(
    name: &str,
    group: &mut BenchmarkGroup<'_, WallTime>,
    acks: &std::sync::mpsc::Receiver<u64>,
    mut send: impl FnMut(u64),
    mut flush: impl FnMut(),
) -> u64 {
    let mut sent = 0;
    group.bench_function(name, |b| {
        b.iter_custom(|batches| {
            let mut timed = Duration::ZERO;
            for _ in 0..batches {
                let start = std::time::Instant::now();
                for i in 0..SEND_BATCH {
                    send(i);
                }
                timed += start.elapsed();
                sent += SEND_BATCH;
                flush();
                let seen = acks
                    .recv_timeout(STALL_TIMEOUT)
                    .expect("send_to_blocked: no flush acknowledgement");
                assert_eq!(seen, sent, "send_to_blocked: messages lost");
            }
            timed
        })
    });
    sent
}
