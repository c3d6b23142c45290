//! procsched's side: the adapter from [`ProcessPeer`] to procsched's public API. Everything the
//! benches ask of procsched's `Scheduler` goes through the few functions here, so a change of
//! that API is absorbed in this file.

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use procsched::{
    state_machine::{Process, ProcessContext},
    BoxError, Message, Payload, Pid, ProcessHandle, Scheduler, SchedulerHandle,
};

use procsched_benches::WORKERS;

use crate::net::Net;
use crate::process_peer::{self, ProcessPeer};
use crate::processes::{async_inc, gate, inc, never};
use crate::samples::{GrowthSample, LatencySample, RssSample};
use crate::workload::{Peer, Workload, SHUTDOWN_TIMEOUT, STALL_TIMEOUT};
use crate::{growth, latency};

/// procsched: a [`Scheduler`] with `WORKERS` workers, its async handlers on a tokio runtime
/// with `WORKERS` threads (the `tokio_handle` it is given). Inline workloads leave that runtime
/// parked.
pub(crate) struct Procsched {
    scheduler: Scheduler,
    io: tokio::runtime::Runtime,
}

impl Peer for Procsched {
    const NAME: &'static str = "procsched";

    fn build() -> Self {
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(*WORKERS)
            .thread_name("bench-procsched-io")
            .enable_all()
            .build()
            .expect("failed to build the tokio runtime");
        let scheduler = Scheduler::builder()
            .workers(*WORKERS)
            // `PROCSCHED_BENCH_MONITOR=0` turns the monitor off, to measure what it costs.
            .monitor(std::env::var("PROCSCHED_BENCH_MONITOR").map_or(true, |v| v != "0"))
            .thread_name("bench-procsched")
            .tokio_handle(io.handle().clone())
            .inline_handler(inc)
            .async_handler(async_inc)
            .async_handler(never)
            .async_handler(gate)
            .build()
            .expect("failed to build the scheduler");
        Procsched { scheduler, io }
    }

    fn bench(&self, workload: Workload, group: &mut BenchmarkGroup<'_, WallTime>) {
        process_peer::bench(self, workload, group);
    }

    fn rss(&self, workload: Workload) -> RssSample {
        process_peer::rss(self, workload)
    }

    fn latency(&self) -> LatencySample {
        latency::processes(self)
    }

    fn growth(&self, live: usize) -> GrowthSample {
        growth::processes(self, live)
    }

    fn shutdown(self) {
        let report = self.scheduler.shutdown(SHUTDOWN_TIMEOUT);
        if report.forced > 0 {
            eprintln!("warning: procsched had to force {report:?} at shutdown");
        }
        drop(self.scheduler);
        self.io.shutdown_timeout(SHUTDOWN_TIMEOUT);
    }
}

impl Procsched {
    /// The scheduler, for the async-fn variant (`procsched_async.rs`).
    pub(crate) fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Awaits typed handles in order, under the same watchdog as `join_each`.
    pub(crate) fn join_typed<T>(&self, handles: impl Iterator<Item = ProcessHandle<T>>) -> Vec<T> {
        let all = async {
            let mut results = Vec::new();
            for handle in handles {
                match handle.await {
                    Ok(result) => results.push(result),
                    Err(error) => panic!("process failed: {error}"),
                }
            }
            results
        };
        let watched = {
            let _runtime = self.io.enter();
            tokio::time::timeout(STALL_TIMEOUT, all)
        };
        match self.scheduler.block_on(watched) {
            Ok(results) => results,
            Err(_) => panic!("procsched: processes still running after {STALL_TIMEOUT:?}"),
        }
    }
}

impl ProcessPeer for Procsched {
    type Net = SchedulerHandle;
    type Handle = ProcessHandle;

    fn preset(&self) -> Option<SchedulerHandle> {
        None
    }

    fn spawn<P: Process<Output = Payload>>(&self, process: P, input: Payload) -> ProcessHandle {
        match self.scheduler.spawn(process, "run", input) {
            Ok(handle) => handle,
            Err(error) => panic!("spawn failed: {error}"),
        }
    }

    fn addr(handle: &ProcessHandle) -> Pid {
        handle.pid()
    }

    fn send(&self, to: &Pid, message: Message) {
        if let Err(error) = self.scheduler.send(*to, message) {
            panic!("send failed: {error}");
        }
    }

    fn join_each(
        &self,
        handles: impl Iterator<Item = ProcessHandle>,
        mut check: impl FnMut(Payload),
    ) {
        let all = async {
            for handle in handles {
                match handle.await {
                    Ok(payload) => check(payload),
                    Err(error) => panic!("process failed: {error}"),
                }
            }
        };
        // The watchdog's timer lives on the tokio runtime; `enter` lets it register there
        // while procsched's `block_on` polls.
        let watched = {
            let _runtime = self.io.enter();
            tokio::time::timeout(STALL_TIMEOUT, all)
        };
        if self.scheduler.block_on(watched).is_err() {
            panic!("procsched: processes still running after {STALL_TIMEOUT:?}");
        }
    }
}

impl Net for SchedulerHandle {
    type Addr = Pid;

    fn preset(&self) -> Option<Self> {
        None
    }

    fn complete(_: Option<Self>, ctx: &ProcessContext<'_>) -> Self {
        ctx.scheduler().clone()
    }

    fn own_addr(ctx: &ProcessContext<'_>) -> Pid {
        ctx.pid()
    }

    fn send_to(&self, to: &Pid, message: Message) -> Result<(), BoxError> {
        self.send(*to, message).map_err(Into::into)
    }

    fn spawn_detached<P: Process<Output = Payload>>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<(), BoxError> {
        // Dropping a `ProcessHandle` detaches the process.
        self.spawn(process, method, input)
            .map(drop)
            .map_err(Into::into)
    }
}
