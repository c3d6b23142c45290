//! procsched: a one_for_one supervisor's restarts, and a parent spawning linked, monitored or
//! unwatched children.

use crate::messages::{hello, Crash, Go, Hello, Watch};
use crate::samples::record;
use crate::{LEAVES, PROCSCHED, WITHIN};
use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Supervisor};
use procsched_benches::{CountDown, CountDownHandle, WORKERS};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(*WORKERS)
        .build()
        .expect("scheduler")
}

/// A supervised child: says hello when it starts, returns `Err` when told to crash.
pub(crate) fn procsched_child(index: usize, hellos: mpsc::Sender<Hello>) -> ChildSpec {
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
pub(crate) fn procsched_tree(children: usize) -> (Scheduler, mpsc::Receiver<Hello>, Vec<Pid>) {
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
pub(crate) fn procsched_storm(
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
pub(crate) fn collect(
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

pub(crate) fn procsched_restarts(
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
pub(crate) fn procsched_spawn_exit(sched: &Scheduler, watch: Watch, done: &CountDown) {
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
