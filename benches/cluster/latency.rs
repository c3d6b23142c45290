//! `latency/<size>/<in flight>`: request/reply latency, recorded in an `hdrhistogram`.

use crate::processes::Echo;
use crate::setup::{payload, size_name, traffic, Bench};
use crate::{IN_FLIGHT, LATENCY_SAMPLES, LATENCY_WARMUP, SIZES};
use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use hdrhistogram::Histogram;
use procsched_benches::format_ns;
use std::future::Future;
use std::time::{Duration, Instant};

/// Runs `count` requests made by `request`, `in_flight` at a time, recording each one's latency
/// (ns) in `histogram` if given; returns the wall time of the whole run.
pub(crate) async fn run_requests<F, Fut>(
    count: usize,
    in_flight: usize,
    request: F,
    mut histogram: Option<&mut Histogram<u64>>,
) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let timed = || {
        let request = request();
        async move {
            let start = Instant::now();
            request.await;
            start.elapsed()
        }
    };
    let started = Instant::now();
    let mut running = FuturesUnordered::new();
    let mut issued = 0;
    while issued < count.min(in_flight) {
        running.push(timed());
        issued += 1;
    }
    while let Some(took) = running.next().await {
        if let Some(histogram) = histogram.as_deref_mut() {
            histogram.saturating_record(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
        }
        if issued < count {
            running.push(timed());
            issued += 1;
        }
    }
    started.elapsed()
}

/// One latency cell's results for one peer.
pub(crate) struct Latency {
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    pub(crate) per_second: f64,
}

pub(crate) struct LatencyRow {
    pub(crate) size: usize,
    pub(crate) in_flight: usize,
    pub(crate) raw: Latency,
    pub(crate) ours: Latency,
    /// Bytes published by both nodes per ask (message, ack and reply), and frames per ask.
    /// CPU time per request (µs): this process (both peers' clients, the nodes, the
    /// schedulers) and the server.
    pub(crate) raw_cpu: (f64, f64),
    pub(crate) ours_cpu: (f64, f64),
    pub(crate) bytes_per_ask: f64,
    pub(crate) frames_per_ask: f64,
}

/// CPU time consumed so far, in clock ticks (`/proc/<pid>/stat` utime + stime), by this
/// process and by the server.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Cpu {
    pub(crate) bench: u64,
    pub(crate) server: u64,
}

impl std::ops::Add for Cpu {
    type Output = Cpu;
    fn add(self, other: Cpu) -> Cpu {
        Cpu {
            bench: self.bench + other.bench,
            server: self.server + other.server,
        }
    }
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, other: Cpu) -> Cpu {
        Cpu {
            bench: self.bench.saturating_sub(other.bench),
            server: self.server.saturating_sub(other.server),
        }
    }
}

impl Cpu {
    /// µs per request of (this process, the server), at 100 ticks per second (Linux's
    /// `USER_HZ`).
    pub(crate) fn per(self, requests: usize) -> (f64, f64) {
        let us = |ticks: u64| ticks as f64 * 10_000.0 / requests as f64;
        (us(self.bench), us(self.server))
    }
}

/// utime + stime of process `pid` (`self` for this one), in clock ticks; 0 if unreadable.
pub(crate) fn cpu_ticks(pid: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // After the command name, which may hold spaces: field 3 (state) onwards.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

pub(crate) fn latency(bench: &Bench) -> Vec<LatencyRow> {
    let addr = bench.echo_on_b();
    let mut rows = Vec::new();
    for size in SIZES {
        let bytes = Bytes::from(payload(size));
        for in_flight in IN_FLIGHT {
            let raw_request = || {
                let bytes = bytes.clone();
                async move {
                    let answer = bench
                        .raw_a
                        .request("raw.echo", bytes)
                        .await
                        .expect("raw request");
                    assert_eq!(answer.payload.len(), size);
                }
            };
            let ask = || {
                let addr = &addr;
                let bytes = &bytes;
                async move {
                    let answer = addr
                        .ask(|reply| Echo::Ask(bytes.to_vec(), reply))
                        .await
                        .expect("ask");
                    assert_eq!(answer.len(), size);
                }
            };
            let histogram = || Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
            let (mut raw, mut ours) = (histogram(), histogram());
            let (mut raw_wall, mut ours_wall) = (Duration::ZERO, Duration::ZERO);
            let mut wire = (0, 0);
            let (mut raw_cpu, mut ours_cpu) = (Cpu::default(), Cpu::default());
            bench.rt.block_on(async {
                run_requests(LATENCY_WARMUP, in_flight, raw_request, None).await;
                run_requests(LATENCY_WARMUP, in_flight, ask, None).await;
                for _ in 0..2 {
                    let half = LATENCY_SAMPLES / 2;
                    let cpu = bench.cpu();
                    raw_wall += run_requests(half, in_flight, raw_request, Some(&mut raw)).await;
                    raw_cpu = raw_cpu + (bench.cpu() - cpu);
                    let (a, b) = (bench.a.stats(), bench.b.stats());
                    let cpu = bench.cpu();
                    ours_wall += run_requests(half, in_flight, ask, Some(&mut ours)).await;
                    ours_cpu = ours_cpu + (bench.cpu() - cpu);
                    let (a, b) = (traffic(a, bench.a.stats()), traffic(b, bench.b.stats()));
                    wire = (wire.0 + a.0 + b.0, wire.1 + a.1 + b.1);
                }
            });
            let summary = |histogram: &Histogram<u64>, wall: Duration| Latency {
                p50: histogram.value_at_quantile(0.50) as f64,
                p99: histogram.value_at_quantile(0.99) as f64,
                per_second: histogram.len() as f64 / wall.as_secs_f64(),
            };
            let row = LatencyRow {
                size,
                in_flight,
                raw: summary(&raw, raw_wall),
                ours: summary(&ours, ours_wall),
                raw_cpu: raw_cpu.per(LATENCY_SAMPLES),
                ours_cpu: ours_cpu.per(LATENCY_SAMPLES),
                bytes_per_ask: wire.0 as f64 / LATENCY_SAMPLES as f64,
                frames_per_ask: wire.1 as f64 / LATENCY_SAMPLES as f64,
            };
            eprintln!(
                "latency/{}/{in_flight}: raw p50 {} p99 {}, procsched p50 {} p99 {}",
                size_name(size),
                format_ns(row.raw.p50),
                format_ns(row.raw.p99),
                format_ns(row.ours.p50),
                format_ns(row.ours.p99),
            );
            rows.push(row);
        }
    }
    rows
}
