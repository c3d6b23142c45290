//! procsched running the same workloads as *async-fn processes* (`Scheduler::spawn_fn`), for
//! the workloads that have a direct async-fn form: `single_step`, `one_yield`, `many_yields`
//! and `async_yields`. Same scheduler settings and handlers as [`Procsched`]; each body does
//! the logical work of the state machine it mirrors (`Once`, `YieldOnce`, `Counter`), reading
//! replies as the state machines do (a `Payload` downcast).

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use procsched::{BoxError, Payload, ProcessCx, ProcessHandle};

use crate::growth::GrowthSample;
use crate::latency::LatencySample;
use crate::processes::{AsyncInc, Inc};
use crate::procsched_peer::Procsched;
use crate::rss::RssSample;
use crate::workload::*;

/// The async-fn variant of the procsched peer.
pub(crate) struct ProcschedAsync(Procsched);

/// The workloads this peer runs (the others have no async-fn form of their own here).
pub(crate) const ASYNC_FN_WORKLOADS: [Workload; 4] = [
    Workload::SingleStep,
    Workload::OneYield,
    Workload::ManyYields,
    Workload::AsyncYields,
];

impl Peer for ProcschedAsync {
    const NAME: &'static str = "procsched-async-fn";

    fn build() -> Self {
        ProcschedAsync(Procsched::build())
    }

    fn bench(&self, workload: Workload, group: &mut BenchmarkGroup<'_, WallTime>) {
        let mut handles = Vec::new();
        match workload {
            Workload::SingleStep => group.bench_function(Self::NAME, |b| {
                b.iter(|| self.run(&mut handles, BURST, 0, |_| async { Ok(0) }))
            }),
            Workload::OneYield => group.bench_function(Self::NAME, |b| {
                b.iter(|| self.run(&mut handles, BURST, 1, |cx| count(cx, 1, Inc)))
            }),
            Workload::ManyYields => group.bench_function(Self::NAME, |b| {
                b.iter(|| {
                    self.run(&mut handles, MANY_YIELDS_PROCESSES, MANY_YIELDS, |cx| {
                        count(cx, MANY_YIELDS, Inc)
                    })
                })
            }),
            Workload::AsyncYields => group.bench_function(Self::NAME, |b| {
                b.iter(|| {
                    self.run(&mut handles, ASYNC_PROCESSES, ASYNC_YIELDS, |cx| {
                        count(cx, ASYNC_YIELDS, AsyncInc)
                    })
                })
            }),
            _ => return,
        };
    }

    fn rss(&self, workload: Workload) -> RssSample {
        self.0.rss(workload)
    }

    fn latency(&self) -> LatencySample {
        self.0.latency()
    }

    fn growth(&self, live: usize) -> GrowthSample {
        self.0.growth(live)
    }

    fn shutdown(self) {
        self.0.shutdown();
    }
}

/// A body that yields `yields` times to the command `C` (each `C(n)` replies `n + 1`), one after
/// the other, and finishes with the count — the work of a `Counter`.
async fn count<C: procsched::Command<Output = Payload>>(
    cx: ProcessCx,
    yields: u64,
    command: fn(u64) -> C,
) -> Result<u64, BoxError> {
    let mut n = 0;
    while n < yields {
        let reply = cx.call(command(n)).await?;
        n = reply.take::<u64>()?;
    }
    Ok(n)
}

impl ProcschedAsync {
    /// Spawns `processes` bodies made by `body`, awaits them all, checks each result is
    /// `expected`.
    fn run<F, Fut>(
        &self,
        handles: &mut Vec<ProcessHandle<u64>>,
        processes: usize,
        expected: u64,
        body: F,
    ) where
        F: Fn(ProcessCx) -> Fut + Copy + Send + 'static,
        Fut: std::future::Future<Output = Result<u64, BoxError>> + Send + 'static,
    {
        let sched = self.0.scheduler();
        for _ in 0..processes {
            handles.push(sched.spawn_fn(body).expect("spawn failed"));
        }
        let results = self.0.join_typed(handles.drain(..));
        assert_eq!(results.len(), processes);
        assert!(results.iter().all(|&n| n == expected));
    }
}
