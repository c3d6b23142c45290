//! Spawns many tasks on a procsched executor and prints what happened.
//!
//! Run with `cargo run --release --example spawn_many`.

use procsched::executor::{yield_now, Executor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() -> std::io::Result<()> {
    let executor = Executor::builder().thread_name("demo").build()?;
    let workers = executor.handle().num_workers();
    let tasks = 100_000;
    let completed = Arc::new(AtomicUsize::new(0));

    let started = Instant::now();
    // Half are spawned from this thread (global queue), half from inside a task (local deques,
    // spread over the workers by stealing).
    let mut handles = Vec::with_capacity(tasks / 2 + 1);
    for i in 0..tasks / 2 {
        let completed = completed.clone();
        handles.push(executor.spawn(async move {
            if i % 10 == 0 {
                yield_now().await;
            }
            completed.fetch_add(1, Ordering::Relaxed);
        }));
    }
    let spawner = {
        let completed = completed.clone();
        let handle = executor.handle().clone();
        executor.spawn(async move {
            let inner: Vec<_> = (0..tasks / 2)
                .map(|_| {
                    let completed = completed.clone();
                    handle.spawn(async move {
                        completed.fetch_add(1, Ordering::Relaxed);
                    })
                })
                .collect();
            for h in inner {
                h.await.expect("inner task failed");
            }
        })
    };
    executor.block_on(async {
        for h in handles {
            h.await.expect("task failed");
        }
        spawner.await.expect("spawner failed");
    });
    let elapsed = started.elapsed();

    let metrics = executor.metrics();
    println!(
        "{} tasks completed on {workers} workers in {elapsed:.2?} ({:.0} ns/task)",
        completed.load(Ordering::Relaxed),
        elapsed.as_nanos() as f64 / tasks as f64
    );
    println!("| worker | polls | stolen | steal ops | global pops | parks |");
    println!("|---|---|---|---|---|---|");
    for (i, w) in metrics.workers().iter().enumerate() {
        println!(
            "| {i} | {} | {} | {} | {} | {} |",
            w.polls, w.stolen, w.steal_ops, w.global_pops, w.parks
        );
    }
    let never = executor.spawn(std::future::pending::<()>());
    let report = executor.shutdown(Duration::from_secs(1));
    println!(
        "shutdown: {} unfinished task(s) cancelled; a pending task's handle says: {}",
        report.cancelled,
        executor.block_on(never).unwrap_err()
    );
    Ok(())
}
