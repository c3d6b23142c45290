//! Scheduler micro-benchmarks: procsched against tokio and async-executor.
//!
//! The five workloads follow tokio's own `benches/rt_multi_threaded.rs`
//! (spawning locally and remotely, yielding, ping-pong over oneshots and a
//! chain of spawns). Each runs on every runtime inside one criterion group,
//! `<workload>/<runtime>`, every runtime with the same number of worker
//! threads (`PROCSCHED_BENCH_WORKERS`, default 2).
//!
//! After criterion finishes, the medians it saved are collected into a
//! Markdown table, printed and written to `target/bench-executor.md`.
//!
//! ```text
//! cargo bench -p procsched-benches --bench executor                   # full run, about 1.5 min on 2 cores
//! cargo bench -p procsched-benches --bench executor -- --quick        # smoke run, a few seconds
//! cargo bench -p procsched-benches --bench executor -- chained_spawn  # one workload
//! ```
//!
//! `--quick` times only a few short batches right after each runtime starts;
//! its numbers swing by 2x or more between runs and include start-up
//! effects, so compare runtimes on full runs only.
//!
//! Like tokio's, these measure scheduler overheads with near-empty tasks:
//! good for regressions and for spotting pathologies, not as a prediction of
//! application performance.

use procsched_benches as common;

use std::time::{Duration, SystemTime};

use common::{CountDown, CountDownHandle, Rt, RtKind, Spawner, WORKERS};
use criterion::Criterion;
use tokio::sync::oneshot;

/// Tasks spawned per iteration by the `spawn_many_*` workloads.
const NUM_SPAWN: usize = 10_000;
/// Tasks in `yield_many`.
const YIELD_TASKS: usize = 200;
/// Yields per task in `yield_many`.
const YIELDS_PER_TASK: usize = 1_000;
/// Ping-pong pairs in `ping_pong`.
const NUM_PINGS: usize = 1_000;
/// Length of the spawn chain in `chained_spawn`.
const CHAIN_DEPTH: usize = 1_000;

/// One iteration of a workload: start it on `rt` and return once `done`
/// reports it finished.
type Workload = fn(&Rt, &CountDown);

/// Every workload, by criterion group name, in run and table order. The
/// report reads results back under the same names.
const WORKLOADS: [(&str, Workload); 5] = [
    ("spawn_many_local", spawn_many_local),
    ("spawn_many_remote", spawn_many_remote),
    ("yield_many", yield_many),
    ("ping_pong", ping_pong),
    ("chained_spawn", chained_spawn),
];

/// From inside a task, spawn [`NUM_SPAWN`] empty tasks; measures the
/// worker-local spawn path plus stealing of the resulting backlog.
///
/// (tokio's variant spawns from inside `block_on`, which on a multi-thread
/// runtime is not a worker thread; spawning from a task is what makes it local.)
fn spawn_many_local(rt: &Rt, done: &CountDown) {
    let finished = done.arm(NUM_SPAWN);
    let spawner = rt.spawner();
    rt.spawn(async move {
        for _ in 0..NUM_SPAWN {
            let finished = finished.clone();
            spawner.spawn(async move { finished.count_down() });
        }
    });
    done.wait();
}

/// Spawn [`NUM_SPAWN`] empty tasks from the bench thread, which is not part
/// of the runtime; measures the injection (remote) spawn path.
fn spawn_many_remote(rt: &Rt, done: &CountDown) {
    let finished = done.arm(NUM_SPAWN);
    for _ in 0..NUM_SPAWN {
        let finished = finished.clone();
        rt.spawn(async move { finished.count_down() });
    }
    done.wait();
}

/// [`YIELD_TASKS`] tasks each yield [`YIELDS_PER_TASK`] times with the
/// runtime's native `yield_now`; measures reschedule cost and run-queue
/// fairness under a constant supply of ready tasks.
///
/// Like tokio's version this waits for all tasks, but with one wake-up of
/// the bench thread at the end rather than one per task, so that on two
/// cores the bench thread competes less with the workers.
fn yield_many(rt: &Rt, done: &CountDown) {
    let finished = done.arm(YIELD_TASKS);
    let kind = rt.kind();
    for _ in 0..YIELD_TASKS {
        let finished = finished.clone();
        rt.spawn(async move {
            for _ in 0..YIELDS_PER_TASK {
                kind.yield_now().await;
            }
            finished.count_down();
        });
    }
    done.wait();
}

/// From inside a task, start [`NUM_PINGS`] pairs: task A spawns B, pings it
/// over a tokio oneshot and waits for B's pong on a second one; measures
/// spawn plus cross-task wake-ups (tokio's oneshot needs no tokio runtime).
fn ping_pong(rt: &Rt, done: &CountDown) {
    let finished = done.arm(NUM_PINGS);
    let spawner = rt.spawner();
    rt.spawn(async move {
        for _ in 0..NUM_PINGS {
            let finished = finished.clone();
            let pair_spawner = spawner.clone();
            spawner.spawn(async move {
                let (ping_tx, ping_rx) = oneshot::channel::<()>();
                let (pong_tx, pong_rx) = oneshot::channel::<()>();
                pair_spawner.spawn(async move {
                    ping_rx.await.expect("pinger dropped before pinging");
                    pong_tx.send(()).expect("pinger dropped before the pong");
                });
                ping_tx.send(()).expect("ponger dropped before the ping");
                pong_rx.await.expect("ponger dropped before ponging");
                finished.count_down();
            });
        }
    });
    done.wait();
}

/// A task spawns a task which spawns a task ... [`CHAIN_DEPTH`] deep, only
/// one alive at a time; measures spawn-to-first-poll latency with (mostly)
/// idle workers, i.e. wake-up and stealing latency.
fn chained_spawn(rt: &Rt, done: &CountDown) {
    fn link(spawner: Spawner, finished: CountDownHandle, remaining: usize) {
        if remaining == 0 {
            finished.count_down();
        } else {
            let next = spawner.clone();
            spawner.spawn(async move { link(next, finished, remaining - 1) });
        }
    }

    let finished = done.arm(1);
    let spawner = rt.spawner();
    rt.spawn(async move { link(spawner, finished, CHAIN_DEPTH) });
    done.wait();
}

/// Runs every workload as a criterion group with one benchmark per runtime.
///
/// Runtimes are built one at a time, outside the timed loop, and shut down
/// before the next is built, so idle workers of one runtime never share the
/// two cores with another runtime's measurement.
fn all_workloads(c: &mut Criterion) {
    for (group_name, workload) in WORKLOADS {
        let mut group = c.benchmark_group(group_name);
        for kind in RtKind::ALL {
            let rt = kind.build(*WORKERS);
            let done = CountDown::new(format!("{group_name}/{}", kind.name()));
            group.bench_function(kind.name(), |b| b.iter(|| workload(&rt, &done)));
            rt.shutdown();
        }
        group.finish();
    }
}

/// Defaults sized so the full run (15 benchmarks) stays well under four
/// minutes on a 2-core machine. Set here rather than per group so that
/// command-line flags (`--sample-size`, `--measurement-time`, `--quick`)
/// still override them.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        // The Markdown table is the report; plots would only cost CPU time.
        .without_plots()
}

/// Home of the `criterion_group!` expansion: an undocumented `pub fn` that
/// the package-wide `missing_docs` lint would otherwise flag.
mod harness {
    #![allow(missing_docs)]

    use super::{all_workloads, config};
    use criterion::criterion_group;

    criterion_group! {
        name = executor_benches;
        config = config();
        targets = all_workloads
    }
}

/// Builds the comparison table from the medians criterion saved during this
/// run. Workloads not measured in this run (filtered out) get no row; `None`
/// if nothing was measured at all (test or list mode, or everything filtered
/// out), since an empty table would only mislead.
fn comparison_table(since: SystemTime) -> Option<String> {
    let mut rows = Vec::with_capacity(WORKLOADS.len());
    for (workload, _) in WORKLOADS {
        let [procsched, tokio, async_executor] =
            RtKind::ALL.map(|kind| common::median_ns(workload, kind.name(), since));
        if procsched.is_none() && tokio.is_none() && async_executor.is_none() {
            continue;
        }
        rows.push(format!(
            "| {workload} | {} | {} | {} | {} | {} |",
            common::format_cell(procsched),
            common::format_cell(tokio),
            common::format_cell(async_executor),
            common::format_ratio(procsched, tokio),
            common::format_ratio(procsched, async_executor),
        ));
    }
    if rows.is_empty() {
        return None;
    }

    let mut table = format!(
        "Median time per iteration, {} worker threads per runtime; \
         ratio > 1.00 means procsched is slower.\n\n",
        *WORKERS
    );
    table.push_str(
        "| workload | procsched | tokio | async-executor | procsched/tokio | procsched/async-executor |\n",
    );
    table.push_str("|---|---:|---:|---:|---:|---:|\n");
    for row in rows {
        table.push_str(&row);
        table.push('\n');
    }
    Some(table)
}

fn main() {
    // Anything criterion saved before this instant belongs to an older run.
    let started = SystemTime::now();

    harness::executor_benches();
    Criterion::default().configure_from_args().final_summary();

    match comparison_table(started) {
        Some(table) => common::publish_report("bench-executor.md", &table),
        None => eprintln!("no benchmark was measured in this run; comparison table skipped"),
    }
}
