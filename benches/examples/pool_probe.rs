//! A supervisor as a pool of sessions, at growing sizes: `pool_probe [sizes…]` starts `n`
//! dynamic `Temporary` children one after the other (`start_child`), then ends them all (each
//! finishes on a message) and waits until the pool is empty, and prints both times per child.
//! A supervisor whose per-child work grows with its child count shows here as a per-child time
//! that grows with `n`.

use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Restart, Supervisor};
use std::time::{Duration, Instant};

fn main() -> Result<(), BoxError> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|n| n.parse().expect("a size"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000, 40_000]
    } else {
        sizes
    };
    let sched = Scheduler::builder().workers(2).build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for n in sizes {
        runtime.block_on(async {
            let pool = Supervisor::one_for_one()
                .max_restarts(u32::MAX, Duration::from_secs(1))
                .spawn(sched.handle())?;
            let start = Instant::now();
            let mut pids = Vec::with_capacity(n);
            for i in 0..n {
                let spec = ChildSpec::new(format!("session-{i}"), |start| {
                    start.spawn_fn(|cx: ProcessCx<()>| async move {
                        Ok::<_, BoxError>(cx.recv().await?)
                    })
                })
                .restart(Restart::Temporary);
                pids.push(pool.start_child(spec).await?);
            }
            let started = start.elapsed();
            let start = Instant::now();
            for pid in pids.iter().rev() {
                sched.addr::<()>(*pid).send(())?;
            }
            while !pool.which_children().await?.is_empty() {
                tokio::task::yield_now().await;
            }
            let ended = start.elapsed();
            println!(
                "{n:>7} children: start_child {:>8.2} µs each, ending {:>8.2} µs each",
                started.as_secs_f64() * 1e6 / n as f64,
                ended.as_secs_f64() * 1e6 / n as f64
            );
            Ok::<_, BoxError>(())
        })?;
    }
    sched.shutdown(Duration::from_secs(5));
    Ok(())
}
