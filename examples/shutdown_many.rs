//! How long `shutdown` takes with many live processes that ignore their `Cancel`, against its
//! documented bound (`timeout + 2 × FORCED_STOP_WAIT`), and whether the report and the handles
//! count every process.
//!
//! `cargo run --release --example shutdown_many -- [processes] [grace_ms] [fn|sm|both] [runs]`
//! (defaults: 1 000 000, 100, both, 5). Each run prints the time `shutdown` took, the bound, the
//! report, and how long the closes left in the background took to end; the program exits 1 if a
//! count is wrong (a timing past the bound is printed, `OVER`, not an error: the machine may be
//! shared).

use procsched::error::InitError;
use procsched::prelude::*;
use procsched::state_machine::{Events, Process, ProcessContext, StepOutput};
use std::time::{Duration, Instant};

/// A state machine that ignores everything, its `Cancel` included: forced at the deadline.
struct Stubborn;

impl Process for Stubborn {
    type Output = Payload;

    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        out.idle();
        Ok(())
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("processes"));
    let grace: u64 = args.next().map_or(100, |a| a.parse().expect("grace_ms"));
    let kind = args.next().unwrap_or_else(|| "both".to_owned());
    let runs: usize = args.next().map_or(5, |a| a.parse().expect("runs"));
    let (bodies, machines) = match kind.as_str() {
        "fn" => (n, 0),
        "sm" => (0, n),
        _ => (n / 2, n - n / 2),
    };
    let bound = Duration::from_millis(grace) + 2 * procsched::config::FORCED_STOP_WAIT;
    let mut wrong = false;
    for run in 0..runs {
        let sched = Scheduler::builder().workers(2).build().expect("scheduler");
        let mut handles = Vec::with_capacity(bodies);
        let mut machine_handles = Vec::with_capacity(machines);
        for _ in 0..bodies {
            // Ends on its `Cancel` only once it has read a message, which never comes: a body
            // that is busy elsewhere when the shutdown starts.
            handles.push(
                sched
                    .spawn_fn(|cx: ProcessCx<u8>| async move {
                        std::future::pending::<()>().await;
                        Ok::<_, BoxError>(cx.recv().await?)
                    })
                    .expect("spawn_fn"),
            );
        }
        for _ in 0..machines {
            machine_handles.push(
                sched
                    .spawn(Stubborn, "run", Payload::empty())
                    .expect("spawn"),
            );
        }
        let settle = Instant::now();
        // Every process polled once and waiting: none is still queued when the shutdown starts.
        while {
            let processes = sched.metrics().processes;
            processes.idle + processes.blocked < n
        } && settle.elapsed() < Duration::from_secs(60)
        {
            std::thread::park_timeout(Duration::from_millis(5));
        }
        let started = Instant::now();
        let report = sched.shutdown(Duration::from_millis(grace));
        let took = started.elapsed();
        let closing = Instant::now();
        let all_closed = sched.wait_for_abandoned(Duration::from_secs(120));
        let closed_after = closing.elapsed();
        let mut not_cancelled = 0;
        for handle in handles {
            not_cancelled += usize::from(!sched.block_on(handle).unwrap_err().is_cancelled());
        }
        for handle in machine_handles {
            not_cancelled += usize::from(!sched.block_on(handle).unwrap_err().is_cancelled());
        }
        let counts_right = report.total() == n && all_closed && not_cancelled == 0;
        wrong |= !counts_right;
        println!(
            "run {run}: {kind} n={n} grace={grace}ms shutdown took {took:?} (bound {bound:?}{}) \
             report {report:?} total {} | rest closed in {closed_after:?} ({all_closed}), \
             handles not cancelled {not_cancelled}{}",
            if took > bound { ", OVER" } else { "" },
            report.total(),
            if counts_right { "" } else { "  WRONG COUNTS" },
        );
    }
    if wrong {
        std::process::exit(1);
    }
}
