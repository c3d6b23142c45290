//! The round trip of a yield whose async handler is pending at its first poll: the handler's
//! later polls, its completion and the process's next step (`docs/bench-process-history.md`,
//! "Waiting handlers on the scheduler's workers").
//!
//! ```text
//! cargo run --release -p procsched-benches --example pending -- [PROCESSES] [CALLS]
//! ```
//!
//! PROCESSES (default 1 000) async-fn processes each make CALLS (default 200) calls, one after
//! the other, to an async handler that yields to tokio once (`tokio::task::yield_now`) before
//! it replies: every call is pending at its first poll and completes on a later one. Prints the
//! wall time per call over five rounds (the best and the median), 2 workers and a one-thread
//! handler runtime. The same workload on tokio alone (one task per process, each call a
//! `tokio::spawn` of the handler, awaited) runs next to it, on a two-thread runtime.

use procsched::prelude::*;
use std::time::{Duration, Instant};

struct Bump(u64);
procsched::command!(Bump => u64);

async fn bump(Bump(n): Bump) -> Result<u64, BoxError> {
    tokio::task::yield_now().await;
    Ok(n + 1)
}

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map(|a| a.parse().expect("a number"))
        .unwrap_or(default)
}

fn report(name: &str, mut per_call: Vec<f64>) {
    per_call.sort_by(f64::total_cmp);
    println!(
        "{name}: best {:.0} ns/call, median {:.0} ns/call",
        per_call[0],
        per_call[per_call.len() / 2]
    );
}

fn main() {
    let (processes, calls) = (arg(1, 1_000), arg(2, 200));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sched = Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .async_handler(bump)
        .build()
        .unwrap();
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let handles: Vec<_> = (0..processes)
            .map(|_| {
                sched
                    .spawn_fn(move |cx: ProcessCx| async move {
                        let mut n = 0;
                        for _ in 0..calls {
                            n = cx.call(Bump(n)).await?;
                        }
                        Ok::<_, BoxError>(n)
                    })
                    .unwrap()
            })
            .collect();
        for handle in handles {
            assert_eq!(runtime.block_on(handle).unwrap(), calls);
        }
        rounds.push(start.elapsed().as_nanos() as f64 / (processes * calls) as f64);
    }
    report("procsched", rounds);
    sched.shutdown(Duration::from_secs(5));
    drop(runtime);

    let native = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        native.block_on(async {
            let tasks: Vec<_> = (0..processes)
                .map(|_| {
                    tokio::spawn(async move {
                        let mut n = 0;
                        for _ in 0..calls {
                            n = tokio::spawn(bump(Bump(n))).await.unwrap().unwrap();
                        }
                        n
                    })
                })
                .collect();
            for task in tasks {
                assert_eq!(task.await.unwrap(), calls);
            }
        });
        rounds.push(start.elapsed().as_nanos() as f64 / (processes * calls) as f64);
    }
    report("tokio-native", rounds);
}
