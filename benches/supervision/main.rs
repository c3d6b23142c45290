//! Supervision, side by side with kameo's supervised actors in one run: restart latency for
//! one child and under a 1 000-child crash storm, and what a link or a monitor adds to a
//! process's spawn and exit.
//!
//! | group | one iteration | kameo peer |
//! |---|---|---|
//! | `restart_one` | a one_for_one supervisor with one permanent child: the bench thread sends the child a message that makes it return `Err`; timed until the replacement's body has started (it stamps `Instant::now()` into a hello on a channel) | a `OneForOne` supervisor actor with one child from `Actor::supervise(..).restart_policy(Permanent)`; the message's handler returns `Err` (kameo's `on_panic` then stops it); the replacement's `on_start` stamps the hello |
//! | `restart_storm` | the same with [`STORM`] children: all are told to crash at once; timed from the first send until the last replacement has started; each child's own crash → replacement latency is recorded too | the same, [`STORM`] supervised actors |
//! | `spawn_exit_unwatched` | a parent process spawns [`LEAVES`] children that each wait for one message and end; the parent sends each its message; the children count down a shared counter | a parent actor spawning [`LEAVES`] actors (`Actor::spawn`) that stop (`ctx.stop()`) on their one message |
//! | `spawn_exit_linked` | the same, children spawned linked (`cx.spawn_link`); the parent traps exits and receives all [`LEAVES`] exit signals | `Actor::spawn_link` to the parent, which counts `on_link_died` |
//! | `spawn_exit_monitored` | the same, the parent monitors each child (`cx.monitor`) and receives all [`LEAVES`] `Down`s | kameo has no monitors: the parent awaits every child's `wait_for_shutdown()` (`join_all`) |
//!
//! The restart rows also record every iteration's latency in a histogram (criterion gives no
//! percentiles); the report after criterion's run has p50/p99 of those (warm-up included) next
//! to criterion's median, and the per-process cost of the spawn/exit rows, with procsched / kameo
//! ratios. Both runtimes get [`WORKERS`] worker threads (procsched's scheduler; kameo's tokio
//! multi-thread runtime) and are built one at a time, outside the timed loop. The report is
//! printed and written to `target/bench-supervision.md`.
//!
//! ```text
//! cargo bench -p procsched-benches --bench supervision              # about 1 minute
//! cargo bench -p procsched-benches --bench supervision -- restart   # the restart rows only

mod kameo_peer;
mod messages;
mod procsched_peer;
mod report;
mod samples;

use criterion::Criterion;
use kameo_peer::{kameo_restarts, kameo_runtime, kameo_spawn_exit};
use messages::Watch;
use procsched_benches::{publish_report, CountDown};
use procsched_peer::{procsched_restarts, procsched_spawn_exit, scheduler};
use report::report;
use std::time::{Duration, SystemTime};

/// Children under the supervisor in `restart_storm`.
const STORM: usize = 1_000;
/// Children per `spawn_exit_*` iteration.
const LEAVES: usize = 2_000;
/// Restart intensity for both peers: never reached.
const WITHIN: Duration = Duration::from_secs(1);
/// Hang guard for every wait of the bench thread.
const GUARD: Duration = Duration::from_secs(30);

const PROCSCHED: &str = "procsched";
const KAMEO: &str = "kameo";

fn restart_one(c: &mut Criterion) {
    let mut group = c.benchmark_group("restart_one");
    group.sample_size(20);
    procsched_restarts(&mut group, "restart_one", 1);
    kameo_restarts(&mut group, "restart_one", 1);
    group.finish();
}

fn restart_storm(c: &mut Criterion) {
    let mut group = c.benchmark_group("restart_storm");
    group.sample_size(10);
    procsched_restarts(&mut group, "restart_storm", STORM);
    kameo_restarts(&mut group, "restart_storm", STORM);
    group.finish();
}

fn spawn_exit(c: &mut Criterion) {
    for watch in Watch::ALL {
        let mut group = c.benchmark_group(watch.group());
        group.sample_size(10);
        let done = CountDown::new(watch.group());

        let sched = scheduler();
        group.bench_function(PROCSCHED, |b| {
            b.iter(|| procsched_spawn_exit(&sched, watch, &done))
        });
        sched.shutdown(Duration::from_secs(5));

        let runtime = kameo_runtime();
        group.bench_function(KAMEO, |b| {
            b.iter(|| kameo_spawn_exit(&runtime, watch, &done))
        });
        runtime.shutdown_timeout(Duration::from_secs(5));
        group.finish();
    }
}

/// Home of the `criterion_group!` expansion: an undocumented `pub fn` that the package-wide
/// `missing_docs` lint would otherwise flag.
mod harness {
    #![allow(missing_docs)]

    use super::{restart_one, restart_storm, spawn_exit};
    use criterion::{criterion_group, Criterion};
    use std::time::Duration;

    criterion_group! {
        name = supervision;
        config = Criterion::default()
            .without_plots()
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        targets = restart_one, restart_storm, spawn_exit
    }
}

fn main() {
    let started = SystemTime::now();
    harness::supervision();
    Criterion::default().configure_from_args().final_summary();
    // Criterion's test and list modes measure nothing worth a table.
    if std::env::args().any(|arg| arg == "--test" || arg == "--list") {
        return;
    }
    match report(started) {
        Some(report) => publish_report("bench-supervision.md", &report),
        None => eprintln!("nothing was measured in this run; report skipped"),
    }
}
