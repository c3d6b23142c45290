//! Process-level benchmarks: procsched's `Scheduler` against two tokio baselines.
//!
//! - **tokio-native** (`native.rs`): what a tokio user would write instead — every process an
//!   idiomatic tokio task with typed messages in an mpsc channel, inline work as a function call,
//!   async work as `tokio::spawn`, no procsched types.
//! - **tokio-actors** (`actors.rs`): the very same type-erased [`Process`] state machines as
//!   procsched runs, each driven by one tokio task with an mpsc mailbox.
//!
//! Every workload is a criterion group with one benchmark per peer, `<workload>/procsched`,
//! `<workload>/tokio-native` and `<workload>/tokio-actors`. Every peer gets the same number of
//! worker threads (`PROCSCHED_BENCH_WORKERS`, default 2): procsched runs its processes on that
//! many workers and its async handlers on a tokio runtime of that many threads (the
//! `tokio_handle` it is given); the tokio peers run everything on one tokio runtime of that many
//! threads. Inline workloads leave procsched's tokio runtime parked. Peers are built one at a
//! time, outside the timed loop.
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
//! (`native.rs` says how each is written natively.) `single_step`, `one_yield`, `many_yields`
//! and `async_yields` also run as procsched *async-fn* processes (`procsched_async.rs`), reported
//! in a table of their own against the state machines and both tokio peers.
//!
//! After criterion finishes, one command's report is assembled (`report.rs`), printed and
//! written to `target/bench-process.md`, with the chart of procsched / best peer in
//! `target/bench-process.svg`:
//! - the medians, a per-unit column, and procsched's ratio to each peer and to the better of
//!   the two for that workload ("best peer");
//! - peak RSS per process of `burst_spawn` and `skynet`, each in a fresh child process per peer
//!   (the bench re-runs itself, `rss.rs`);
//! - message round-trip latency p50/p99/p99.9 on a busy peer (`latency.rs`);
//! - spawn and send cost and memory per process at 10 k, 100 k and 1 M live processes, in a
//!   child process each (`growth.rs`; `--quick` stops at 100 k).
//!
//! ```text
//! cargo bench -p procsched-benches --bench process               # full run, about 6 minutes on 2 cores
//! cargo bench -p procsched-benches --bench process -- --quick    # smoke run, about 1 minute
//! cargo bench -p procsched-benches --bench process -- ring       # one workload (no latency, growth)
//! cargo bench -p procsched-benches --bench process -- latency    # only the latency table
//! cargo bench -p procsched-benches --bench process -- growth     # only the growth table
//! ```
//!
//! Every iteration checks its results (counts, sums) with cheap asserts, and every wait has a
//! watchdog, so a lost wake-up fails loudly instead of hanging.
//!
//! `--quick` times a few iterations right after each peer starts; its numbers can swing by 2x
//! between runs (more on a shared machine), so compare peers on full runs. All peers use the
//! system allocator, whose behaviour (glibc returning freed heap to the OS between bursts) is a
//! visible part of the spawn-heavy workloads.
//!
//! Bench code reaches procsched's API only through `procsched_peer.rs` (the scheduler) and the
//! [`Process`] implementations, so an API change is absorbed there.

mod actors;
mod args;
mod growth;
mod latency;
mod lineup;
mod native;
mod net;
mod process_peer;
mod processes;
mod procsched_async;
mod procsched_peer;
mod report;
mod rss;
mod samples;
mod workload;

use procsched_benches as common;

use std::time::{Duration, SystemTime};

use actors::ActorSystem;
use args::{extra_selected, quick_mode};
use criterion::Criterion;
use lineup::PEERS;
use native::Native;
use procsched_async::{ProcschedAsync, ASYNC_FN_WORKLOADS};
use procsched_peer::Procsched;
use report::Row;
use workload::{Peer, Workload, RSS_WORKLOADS};

/// Runs every workload as a criterion group with one benchmark per peer. Peers are built one
/// at a time and stopped before the next, so idle threads of one never share the cores with
/// another's measurement.
fn all_workloads(c: &mut Criterion) {
    for workload in Workload::ALL {
        let mut group = c.benchmark_group(workload.name());
        workload.configure(&mut group);
        bench::<Procsched>(workload, &mut group);
        if ASYNC_FN_WORKLOADS.contains(&workload) {
            bench::<ProcschedAsync>(workload, &mut group);
        }
        bench::<Native>(workload, &mut group);
        bench::<ActorSystem>(workload, &mut group);
        group.finish();
    }
}

fn bench<P: Peer>(
    workload: Workload,
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
) {
    let peer = P::build();
    peer.bench(workload, group);
    peer.shutdown();
}

/// Defaults for the short workloads; see [`Workload::configure`] for the long ones. Set here
/// rather than per group where possible, so command-line flags still override them.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        // The Markdown tables and the SVG are the report; criterion's plots would cost CPU.
        .without_plots()
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

fn main() {
    if let Ok(spec) = std::env::var(rss::CHILD_ENV) {
        lineup::child(&spec);
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
            medians: PEERS.map(|peer| common::median_ns(workload.name(), peer, started)),
        })
        .filter(|row| row.medians.iter().any(Option::is_some))
        .collect();
    let mut sections = Vec::new();
    if !rows.is_empty() {
        sections.push(report::comparison_table(&rows));
        let async_rows: Vec<(Row, Option<f64>)> = rows
            .iter()
            .filter(|row| ASYNC_FN_WORKLOADS.contains(&row.workload))
            .map(|row| {
                let async_fn =
                    common::median_ns(row.workload.name(), ProcschedAsync::NAME, started);
                (row.clone(), async_fn)
            })
            .filter(|(_, async_fn)| async_fn.is_some())
            .collect();
        if !async_rows.is_empty() {
            sections.push(report::async_fn_table(&async_rows));
        }
        // Memory only for the workloads this run measured (a filtered run stays quick).
        let rss: Vec<_> = RSS_WORKLOADS
            .into_iter()
            .filter(|w| rows.iter().any(|row| row.workload == *w))
            .map(|w| (w, PEERS.map(|peer| rss::rss_of(w, peer))))
            .collect();
        if !rss.is_empty() {
            sections.push(report::rss_table(&rss));
        }
    }
    if extra_selected("latency") {
        eprintln!("measuring round-trip latency on a busy peer ...");
        sections.push(report::latency_table(&lineup::latencies()));
    }
    if extra_selected("growth") {
        let sizes: &[usize] = if quick_mode() {
            &growth::QUICK_SIZES
        } else {
            &growth::SIZES
        };
        let mut samples = Vec::new();
        for &live in sizes {
            for peer in PEERS {
                eprintln!("measuring growth: {live} live processes on {peer} ...");
                if let Some(sample) = rss::growth_of(live, peer) {
                    samples.push((peer, sample));
                }
            }
        }
        sections.push(report::growth_table(&samples));
    }
    if sections.is_empty() {
        eprintln!("nothing was measured in this run; report skipped");
        return;
    }
    common::publish_report("bench-process.md", &sections.join("\n"));
    if !rows.is_empty() {
        let svg = common::target_dir().join("bench-process.svg");
        match report::ratio_chart(&rows, &svg) {
            Ok(()) => println!("(chart written to {})", svg.display()),
            Err(error) => eprintln!("warning: could not draw {}: {error}", svg.display()),
        }
    }
}
