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
//! ```

use criterion::Criterion;
use hdrhistogram::Histogram;
use kameo::actor::{Actor, ActorRef, Spawn, WeakActorRef};
use kameo::error::{ActorStopReason, Infallible};
use kameo::message::{Context, Message};
use kameo::supervision::{RestartPolicy, SupervisionStrategy};
use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Supervisor};
use procsched_benches::{
    format_ns, format_ratio, median_ns, publish_report, CountDown, CountDownHandle, WORKERS,
};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime};

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

/// Latency samples in nanoseconds, by (row, peer).
type Samples = BTreeMap<(&'static str, &'static str), Histogram<u64>>;

static SAMPLES: LazyLock<Mutex<Samples>> = LazyLock::new(|| Mutex::new(BTreeMap::new()));

fn record(row: &'static str, peer: &'static str, samples: &[Duration]) {
    let mut all = SAMPLES.lock().unwrap();
    let histogram = all.entry((row, peer)).or_insert_with(|| {
        Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds")
    });
    for sample in samples {
        let ns = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX).max(1);
        histogram.saturating_record(ns);
    }
}

/// p50 and p99 of a row, in nanoseconds, and the number of samples.
fn percentiles(row: &'static str, peer: &'static str) -> Option<(f64, f64, u64)> {
    let all = SAMPLES.lock().unwrap();
    let histogram = all.get(&(row, peer)).filter(|h| !h.is_empty())?;
    Some((
        histogram.value_at_quantile(0.50) as f64,
        histogram.value_at_quantile(0.99) as f64,
        histogram.len(),
    ))
}

/// A replacement (or a first instance) has started: which child, and when its body or
/// `on_start` began.
struct Hello {
    index: usize,
    /// procsched: the new instance, the next crash's target.
    pid: Option<Pid>,
    at: Instant,
}

/// Told to a child: return `Err`.
#[derive(Debug)]
struct Crash;

/// Told to a `spawn_exit_*` child: end.
#[derive(Debug)]
struct Go;

/// Which watch the `spawn_exit_*` parent puts on each child.
#[derive(Debug, Clone, Copy)]
enum Watch {
    Unwatched,
    Linked,
    Monitored,
}

impl Watch {
    const ALL: [Watch; 3] = [Watch::Unwatched, Watch::Linked, Watch::Monitored];

    fn group(self) -> &'static str {
        match self {
            Watch::Unwatched => "spawn_exit_unwatched",
            Watch::Linked => "spawn_exit_linked",
            Watch::Monitored => "spawn_exit_monitored",
        }
    }
}

fn hello(rx: &mpsc::Receiver<Hello>) -> Hello {
    rx.recv_timeout(GUARD)
        .expect("hang guard: no replacement started")
}

// ---------------------------------------------------------------------------------------------
// procsched
// ---------------------------------------------------------------------------------------------

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(*WORKERS)
        .build()
        .expect("scheduler")
}

/// A supervised child: says hello when it starts, returns `Err` when told to crash.
fn procsched_child(index: usize, hellos: mpsc::Sender<Hello>) -> ChildSpec {
    ChildSpec::new(format!("child-{index}"), move |start| {
        let hellos = hellos.clone();
        start.spawn_fn(move |cx: ProcessCx<Crash>| async move {
            let _ = hellos.send(Hello {
                index,
                pid: Some(cx.pid()),
                at: Instant::now(),
            });
            cx.recv().await?;
            Err::<(), BoxError>("told to crash".into())
        })
    })
}

/// A supervisor with `children` children, started; their first hellos received. Returns the
/// scheduler, the hello channel and the children's PIDs by index.
fn procsched_tree(children: usize) -> (Scheduler, mpsc::Receiver<Hello>, Vec<Pid>) {
    let sched = scheduler();
    let (tx, rx) = mpsc::channel();
    let supervisor = (0..children).fold(
        Supervisor::one_for_one().max_restarts(u32::MAX, WITHIN),
        |supervisor, index| supervisor.child(procsched_child(index, tx.clone())),
    );
    sched
        .block_on(supervisor.start(sched.handle()))
        .expect("the supervisor started");
    let mut pids = vec![None; children];
    for _ in 0..children {
        let hello = hello(&rx);
        pids[hello.index] = hello.pid;
    }
    let pids = pids.into_iter().map(|pid| pid.expect("started")).collect();
    (sched, rx, pids)
}

/// Crashes every child in `pids` at once; waits for every replacement. Returns the time from
/// the first crash until the last replacement started, and each child's own latency.
fn procsched_storm(
    sched: &Scheduler,
    rx: &mpsc::Receiver<Hello>,
    pids: &mut [Pid],
) -> (Duration, Vec<Duration>) {
    let handle = sched.handle();
    let mut sent = Vec::with_capacity(pids.len());
    let first = Instant::now();
    for &pid in pids.iter() {
        sent.push(Instant::now());
        handle
            .addr::<Crash>(pid)
            .send(Crash)
            .expect("the child runs");
    }
    collect(rx, first, &sent, |hello| {
        pids[hello.index] = hello.pid.expect("procsched says its pid")
    })
}

/// Receives one hello per crashed child; latencies from each child's crash to its hello.
fn collect(
    rx: &mpsc::Receiver<Hello>,
    first: Instant,
    sent: &[Instant],
    mut on_hello: impl FnMut(&Hello),
) -> (Duration, Vec<Duration>) {
    let mut seen = vec![false; sent.len()];
    let mut latencies = Vec::with_capacity(sent.len());
    let mut last = first;
    for _ in 0..sent.len() {
        let hello = hello(rx);
        assert!(!seen[hello.index], "child {} restarted twice", hello.index);
        seen[hello.index] = true;
        latencies.push(hello.at.saturating_duration_since(sent[hello.index]));
        last = last.max(hello.at);
        on_hello(&hello);
    }
    (last - first, latencies)
}

fn procsched_restarts(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    row: &'static str,
    children: usize,
) {
    let (sched, rx, mut pids) = procsched_tree(children);
    group.bench_function(PROCSCHED, |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            let mut all = Vec::new();
            for _ in 0..iterations {
                let (elapsed, latencies) = procsched_storm(&sched, &rx, &mut pids);
                total += elapsed;
                all.extend(latencies);
            }
            record(row, PROCSCHED, &all);
            total
        })
    });
    sched.shutdown(Duration::from_secs(5));
}

/// One `spawn_exit_*` iteration on procsched.
fn procsched_spawn_exit(sched: &Scheduler, watch: Watch, done: &CountDown) {
    let leaf = |done: Option<CountDownHandle>| {
        move |cx: ProcessCx<Go>| async move {
            cx.recv().await?;
            if let Some(done) = done {
                done.count_down();
            }
            Ok::<(), BoxError>(())
        }
    };
    let parent = match watch {
        Watch::Unwatched => {
            let done = done.arm(LEAVES);
            sched.spawn_fn(move |cx: ProcessCx<()>| async move {
                for _ in 0..LEAVES {
                    let child = cx.spawn_fn(leaf(Some(done.clone())))?;
                    child.addr().send(Go)?;
                }
                Ok::<(), BoxError>(())
            })
        }
        Watch::Linked => {
            let done = done.arm(1);
            sched.spawn_fn(move |cx: ProcessCx<()>| async move {
                cx.trap_exit(true);
                let sched = cx.scheduler();
                for _ in 0..LEAVES {
                    let child = cx.spawn_link(leaf(None))?;
                    sched.addr::<Go>(child).send(Go)?;
                }
                for _ in 0..LEAVES {
                    cx.recv_exit().await?;
                }
                done.count_down();
                Ok::<(), BoxError>(())
            })
        }
        Watch::Monitored => {
            let done = done.arm(1);
            sched.spawn_fn(move |cx: ProcessCx<()>| async move {
                for _ in 0..LEAVES {
                    let child = cx.spawn_fn(leaf(None))?;
                    cx.monitor(child.pid());
                    child.addr().send(Go)?;
                }
                for _ in 0..LEAVES {
                    cx.recv_down().await?;
                }
                done.count_down();
                Ok::<(), BoxError>(())
            })
        }
    };
    // The parent is not joined: the counter says when the round is over.
    drop(parent.expect("spawn the parent"));
    done.wait();
}

// ---------------------------------------------------------------------------------------------
// kameo
// ---------------------------------------------------------------------------------------------

fn kameo_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(*WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The supervisor: kameo's supervision lives in any actor that supervises children.
struct KameoSupervisor;

impl Actor for KameoSupervisor {
    type Args = ();
    type Error = Infallible;

    fn supervision_strategy() -> SupervisionStrategy {
        SupervisionStrategy::OneForOne
    }

    async fn on_start(_: (), _: ActorRef<Self>) -> Result<Self, Infallible> {
        Ok(KameoSupervisor)
    }
}

#[derive(Clone)]
struct KameoChildArgs {
    index: usize,
    hellos: mpsc::Sender<Hello>,
}

/// A supervised child: says hello in `on_start`, fails on [`Crash`].
struct KameoChild;

impl Actor for KameoChild {
    type Args = KameoChildArgs;
    type Error = Infallible;

    async fn on_start(args: KameoChildArgs, _: ActorRef<Self>) -> Result<Self, Infallible> {
        let _ = args.hellos.send(Hello {
            index: args.index,
            pid: None,
            at: Instant::now(),
        });
        Ok(KameoChild)
    }
}

impl Message<Crash> for KameoChild {
    type Reply = Result<(), &'static str>;

    async fn handle(&mut self, _: Crash, _: &mut Context<Self, Self::Reply>) -> Self::Reply {
        Err("told to crash")
    }
}

fn kameo_restarts(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    row: &'static str,
    children: usize,
) {
    let runtime = kameo_runtime();
    let (tx, rx) = mpsc::channel();
    // The supervisor stops when its last reference is dropped: keep it.
    let (_supervisor, refs) = runtime.block_on(async {
        let supervisor = KameoSupervisor::spawn(());
        let mut refs = Vec::with_capacity(children);
        for index in 0..children {
            let args = KameoChildArgs {
                index,
                hellos: tx.clone(),
            };
            refs.push(
                KameoChild::supervise(&supervisor, args)
                    .restart_policy(RestartPolicy::Permanent)
                    .restart_limit(u32::MAX, WITHIN)
                    .spawn()
                    .await,
            );
        }
        (supervisor, refs)
    });
    for _ in 0..children {
        hello(&rx);
    }
    group.bench_function(KAMEO, |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            let mut all = Vec::new();
            for _ in 0..iterations {
                let mut sent = Vec::with_capacity(refs.len());
                let first = Instant::now();
                for child in &refs {
                    sent.push(Instant::now());
                    child.tell(Crash).try_send().expect("the child's mailbox");
                }
                let (elapsed, latencies) = collect(&rx, first, &sent, |_| {});
                total += elapsed;
                all.extend(latencies);
            }
            record(row, KAMEO, &all);
            total
        })
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
}

/// What the `spawn_exit_*` parent is told to do.
struct Run;

#[derive(Clone)]
struct KameoLeafArgs {
    done: Option<CountDownHandle>,
}

/// A `spawn_exit_*` child: stops on [`Go`].
struct KameoLeaf {
    done: Option<CountDownHandle>,
}

impl Actor for KameoLeaf {
    type Args = KameoLeafArgs;
    type Error = Infallible;

    async fn on_start(args: KameoLeafArgs, _: ActorRef<Self>) -> Result<Self, Infallible> {
        Ok(KameoLeaf { done: args.done })
    }
}

impl Message<Go> for KameoLeaf {
    type Reply = ();

    async fn handle(&mut self, _: Go, ctx: &mut Context<Self, ()>) {
        if let Some(done) = &self.done {
            done.count_down();
        }
        ctx.stop();
    }
}

/// The `spawn_exit_*` parent.
struct KameoParent {
    watch: Watch,
    done: CountDownHandle,
    /// Linked children still running.
    linked: usize,
}

impl Actor for KameoParent {
    type Args = (Watch, CountDownHandle);
    type Error = Infallible;

    async fn on_start(
        (watch, done): (Watch, CountDownHandle),
        _: ActorRef<Self>,
    ) -> Result<Self, Infallible> {
        Ok(KameoParent {
            watch,
            done,
            linked: LEAVES,
        })
    }

    async fn on_link_died(
        &mut self,
        _: WeakActorRef<Self>,
        _: kameo::actor::ActorId,
        _: ActorStopReason,
    ) -> Result<ControlFlow<ActorStopReason>, Infallible> {
        self.linked -= 1;
        if self.linked == 0 {
            self.done.count_down();
            return Ok(ControlFlow::Break(ActorStopReason::Normal));
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl Message<Run> for KameoParent {
    type Reply = ();

    async fn handle(&mut self, _: Run, ctx: &mut Context<Self, ()>) {
        match self.watch {
            Watch::Unwatched => {
                for _ in 0..LEAVES {
                    let args = KameoLeafArgs {
                        done: Some(self.done.clone()),
                    };
                    let child = KameoLeaf::spawn(args);
                    child.tell(Go).try_send().expect("a new mailbox");
                }
                ctx.stop();
            }
            Watch::Linked => {
                let me = ctx.actor_ref().clone();
                for _ in 0..LEAVES {
                    let child = KameoLeaf::spawn_link(&me, KameoLeafArgs { done: None }).await;
                    child.tell(Go).try_send().expect("a new mailbox");
                }
                // Stops after the last child's `on_link_died`.
            }
            Watch::Monitored => {
                let mut children = Vec::with_capacity(LEAVES);
                for _ in 0..LEAVES {
                    let child = KameoLeaf::spawn(KameoLeafArgs { done: None });
                    child.tell(Go).try_send().expect("a new mailbox");
                    children.push(child);
                }
                futures::future::join_all(children.iter().map(|child| child.wait_for_shutdown()))
                    .await;
                self.done.count_down();
                ctx.stop();
            }
        }
    }
}

/// One `spawn_exit_*` iteration on kameo.
fn kameo_spawn_exit(runtime: &tokio::runtime::Runtime, watch: Watch, done: &CountDown) {
    let handle = match watch {
        Watch::Unwatched => done.arm(LEAVES),
        Watch::Linked | Watch::Monitored => done.arm(1),
    };
    let _guard = runtime.enter();
    let parent = KameoParent::spawn((watch, handle));
    parent.tell(Run).try_send().expect("a new mailbox");
    done.wait();
}

// ---------------------------------------------------------------------------------------------
// groups
// ---------------------------------------------------------------------------------------------

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

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The report: restart latency percentiles and medians, per-process spawn/exit cost, ratios.
fn report(started: SystemTime) -> Option<String> {
    let mut sections = Vec::new();
    let mut latency = format!(
        "Restart latency (crash message sent → replacement started), {} worker threads per \
         runtime; p50/p99 over every iteration's samples, median = criterion's median time per \
         iteration; ratio = procsched / kameo.\n\n\
         | row | procsched p50 µs | p99 µs | median | kameo p50 µs | p99 µs | median | ratio p50 | ratio p99 | ratio median |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        *WORKERS
    );
    let mut any = false;
    for row in ["restart_one", "restart_storm"] {
        let ours = percentiles(row, PROCSCHED);
        let theirs = percentiles(row, KAMEO);
        let ours_median = median_ns(row, PROCSCHED, started);
        let theirs_median = median_ns(row, KAMEO, started);
        if ours.is_none() && theirs.is_none() {
            continue;
        }
        any = true;
        let cell = |p: Option<(f64, f64, u64)>, at: usize| {
            p.map_or("—".to_owned(), |p| us([p.0, p.1][at]))
        };
        let ratio =
            |at: usize| format_ratio(ours.map(|p| [p.0, p.1][at]), theirs.map(|p| [p.0, p.1][at]));
        latency.push_str(&format!(
            "| {row} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            cell(ours, 0),
            cell(ours, 1),
            ours_median.map_or("—".to_owned(), format_ns),
            cell(theirs, 0),
            cell(theirs, 1),
            theirs_median.map_or("—".to_owned(), format_ns),
            ratio(0),
            ratio(1),
            format_ratio(ours_median, theirs_median),
        ));
    }
    if any {
        let counts: Vec<String> = SAMPLES
            .lock()
            .unwrap()
            .iter()
            .map(|((row, peer), h)| format!("{row}/{peer} {}", h.len()))
            .collect();
        latency.push_str(&format!(
            "\nSamples: {}. restart_storm's median is the time until all {STORM} are back.\n",
            counts.join(", ")
        ));
        sections.push(latency);
    }

    let unwatched = [PROCSCHED, KAMEO].map(|peer| median_ns("spawn_exit_unwatched", peer, started));
    let mut cost = format!(
        "Spawn and exit of one child ({LEAVES} per iteration), median per child; the watch's \
         cost is the row minus `spawn_exit_unwatched`.\n\n\
         | row | procsched | kameo | ratio | procsched watch cost | kameo watch cost |\n\
         |---|---:|---:|---:|---:|---:|\n"
    );
    let mut any = false;
    for watch in Watch::ALL {
        let group = watch.group();
        let [ours, theirs] = [PROCSCHED, KAMEO]
            .map(|peer| median_ns(group, peer, started).map(|ns| ns / LEAVES as f64));
        if ours.is_none() && theirs.is_none() {
            continue;
        }
        any = true;
        let extra = |row: Option<f64>, base: Option<f64>| match (row, base) {
            (Some(row), Some(base)) if !matches!(watch, Watch::Unwatched) => {
                let base = base / LEAVES as f64;
                format!("{:+.0} ns", row - base)
            }
            _ => "—".to_owned(),
        };
        cost.push_str(&format!(
            "| {group} | {} | {} | {} | {} | {} |\n",
            ours.map_or("—".to_owned(), format_ns),
            theirs.map_or("—".to_owned(), format_ns),
            format_ratio(ours, theirs),
            extra(ours, unwatched[0]),
            extra(theirs, unwatched[1]),
        ));
    }
    if any {
        sections.push(cost);
    }
    (!sections.is_empty()).then(|| sections.join("\n"))
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
