//! A session pool under supervision: workers crash at random and come back.
//!
//! A root supervisor (one_for_one) runs a `registry` worker (named, so it can be reached across
//! its restarts) and a pool supervisor with 200 session workers. A load generator sends each
//! session requests; one in 50 requests makes the session fail, one in 200 makes it panic, and
//! now and then the generator terminates a random session. The supervisors restart them; every
//! half second the example prints the tree's live counts and restarts.
//!
//! `cargo run --release --example supervision`

use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Restart, Supervisor, SupervisorRef};
use std::time::{Duration, Instant};

const SESSIONS: usize = 200;
const RUN_FOR: Duration = Duration::from_secs(3);

/// A session: answers requests; some requests crash it.
async fn session(cx: ProcessCx<u64>) -> Result<(), BoxError> {
    loop {
        let request = cx.recv().await?;
        if request % 200 == 7 {
            panic!("session {} hit a bug on request {request}", cx.pid());
        }
        if request % 50 == 3 {
            return Err(format!("request {request} was malformed").into());
        }
    }
}

/// The registry: counts sessions' check-ins, answers how many it saw.
async fn registry(cx: ProcessCx<Reply<u64>>) -> Result<(), BoxError> {
    let mut asked = 0;
    loop {
        let reply = cx.recv().await?;
        asked += 1;
        let _ = reply.send(asked);
    }
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // Contained panics are counted, not printed.
    std::panic::set_hook(Box::new(|_| {}));
    let sched = Scheduler::builder().build()?;
    let mut pool = Supervisor::one_for_one().max_restarts(100_000, Duration::from_secs(1));
    for n in 0..SESSIONS {
        pool = pool.child(
            ChildSpec::new(format!("session-{n}"), |start| start.spawn_fn(session))
                .restart(Restart::Permanent),
        );
    }
    let root = Supervisor::one_for_one()
        .child(ChildSpec::new("registry", |start| start.spawn_fn(registry)).register_as("registry"))
        .child(pool.into_child("pool"))
        .start(sched.handle())
        .await?;
    let pool = pool_ref(&sched, &root).await?;
    println!(
        "tree: root {} → registry + pool {} → {SESSIONS} sessions ({} processes live)",
        root.pid(),
        pool.pid(),
        sched.live_processes()
    );

    let started = Instant::now();
    let mut next_report = Duration::from_millis(500);
    let (mut request, mut rng) = (0u64, 0x2545_f491_4f6c_dd1d_u64);
    let (mut sent, mut terminated) = (0u64, 0u64);
    while started.elapsed() < RUN_FOR {
        for child in pool.which_children().await? {
            let Some(pid) = child.pid else { continue };
            request += 1;
            if sched.handle().addr::<u64>(pid).send(request).is_ok() {
                sent += 1;
            }
            if xorshift(&mut rng).is_multiple_of(1_000) && sched.terminate(pid).is_ok() {
                terminated += 1;
            }
        }
        if let Some(registry) = sched.handle().named::<Reply<u64>>("registry") {
            let _ = registry.ask(|reply| reply).await;
        }
        if started.elapsed() >= next_report {
            next_report += Duration::from_millis(500);
            let running = pool
                .which_children()
                .await?
                .iter()
                .filter(|c| c.pid.is_some())
                .count();
            println!(
                "{:>5.1}s  live processes {:>4}  sessions running {running:>3}/{SESSIONS}  restarts {:>5}  requests sent {sent:>7}  terminated {terminated:>3}",
                started.elapsed().as_secs_f64(),
                sched.live_processes(),
                pool.restarts().await?,
            );
        }
        // A round of requests every 2 ms.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let restarts = pool.restarts().await?;
    let running = pool
        .which_children()
        .await?
        .iter()
        .filter(|c| c.pid.is_some())
        .count();
    let report = sched.shutdown_async(Duration::from_secs(10)).await;
    println!(
        "done: {restarts} restarts, {running}/{SESSIONS} sessions running at the end; shutdown: {} graceful, {} forced",
        report.graceful, report.forced
    );
    let metrics = sched.metrics();
    println!(
        "ends by kind: {} failed · {} panicked · {} terminated · {} cancelled (the shutdown)",
        metrics.finished.failed,
        metrics.finished.panicked,
        metrics.finished.terminated,
        metrics.finished.cancelled
    );
    Ok(())
}

/// The pool supervisor's reference, from the root's children.
async fn pool_ref(sched: &Scheduler, root: &SupervisorRef) -> Result<SupervisorRef, BoxError> {
    let pool = root
        .which_children()
        .await?
        .into_iter()
        .find(|child| &*child.id == "pool")
        .and_then(|child| child.pid)
        .ok_or("the pool supervisor is not running")?;
    Ok(SupervisorRef::from_pid(sched.handle(), pool))
}
