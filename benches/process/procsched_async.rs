//! procsched running the same workloads as *async-fn processes* (`Scheduler::spawn_fn`), for
//! the workloads that have a direct async-fn form: `single_step`, `one_yield`, `many_yields`,
//! `async_yields`, and the message workloads `send_to_blocked`, `ring` and `fan_in`. Same
//! scheduler settings and handlers as [`Procsched`]; each body does the logical work of the
//! state machine it mirrors (`Once`, `YieldOnce`, `Counter`, `Blocked`, `Ring`, `FanCounter` and
//! `FanSender`), reading replies and messages as the state machines do (a `Payload` downcast,
//! a match on the topic).

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use procsched::{BoxError, Message, Payload, Pid, ProcessCx, ProcessHandle};
use procsched_benches::WORKERS;
use std::sync::mpsc;

use crate::processes::{AsyncInc, Inc, Never};
use crate::procsched_peer::Procsched;
use crate::samples::{GrowthSample, LatencySample, RssSample};
use crate::workload::*;

/// The async-fn variant of the procsched peer.
pub(crate) struct ProcschedAsync(Procsched);

/// The workloads this peer runs (the others have no async-fn form of their own here).
pub(crate) const ASYNC_FN_WORKLOADS: [Workload; 7] = [
    Workload::SingleStep,
    Workload::OneYield,
    Workload::ManyYields,
    Workload::AsyncYields,
    Workload::SendToBlocked,
    Workload::Ring,
    Workload::FanIn,
];

impl Peer for ProcschedAsync {
    const NAME: &'static str = "procsched-async-fn";

    fn build() -> Self {
        ProcschedAsync(Procsched::build())
    }

    fn bench(&self, workload: Workload, group: &mut BenchmarkGroup<'_, WallTime>) {
        if workload == Workload::SendToBlocked {
            // Timed per batch of sends (`iter_custom`), not per iteration.
            return self.send_to_blocked(group);
        }
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
            Workload::Ring => {
                group.bench_function(Self::NAME, |b| b.iter(|| self.ring(&mut handles)))
            }
            Workload::FanIn => {
                group.bench_function(Self::NAME, |b| b.iter(|| self.fan_in(&mut handles)))
            }
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

/// Waits on a `Never` call and counts the messages it is sent, as `Blocked` does
/// (`send_to_blocked`): `flush` reports the count, `stop` finishes with it.
async fn blocked(cx: ProcessCx, ack: mpsc::Sender<u64>) -> Result<u64, BoxError> {
    // Dispatched by its first poll, then left outstanding: the process waits `Blocked`.
    let mut never = std::pin::pin!(cx.call(Never));
    let _ = futures::poll!(never.as_mut());
    let mut received = 0;
    loop {
        let message = cx.recv_message().await?;
        match &*message.topic {
            "flush" => ack.send(received)?,
            "stop" => return Ok(received),
            _ => received += 1,
        }
    }
}

/// A ring node, as `Ring`: learns its successor (`link`), passes the token on until it has
/// no hops left, then sends `stop` around; finishes with the tokens it handled.
async fn ring_node(cx: ProcessCx) -> Result<u64, BoxError> {
    let sched = cx.scheduler();
    let mut next: Option<Pid> = None;
    let mut handled = 0;
    loop {
        let message = cx.recv_message().await?;
        match &*message.topic {
            "link" => next = Some(message.payload.take::<Pid>()?),
            "token" => {
                let next = next.ok_or("token before link")?;
                handled += 1;
                match message.payload.take::<u64>()? {
                    0 => {
                        sched.send(next, Message::new("stop", Payload::empty()))?;
                        return Ok(handled);
                    }
                    hops => sched.send(next, Message::new("token", Payload::new(hops - 1)))?,
                }
            }
            "stop" => {
                if let Some(next) = next {
                    // The stop ends where it started, at a process that has finished.
                    let _ = sched.send(next, Message::new("stop", Payload::empty()));
                }
                return Ok(handled);
            }
            other => return Err(format!("unexpected topic {other}").into()),
        }
    }
}

/// Counts `add` messages until it has `expected` of them, as `FanCounter`.
async fn fan_counter(cx: ProcessCx, expected: u64) -> Result<u64, BoxError> {
    let mut received = 0;
    while received < expected {
        let message = cx.recv_message().await?;
        received += message.payload.take::<u64>()?;
    }
    Ok(received)
}

impl ProcschedAsync {
    /// `send_to_blocked` (`process_peer.rs`) with an async-fn receiver.
    fn send_to_blocked(&self, group: &mut BenchmarkGroup<'_, WallTime>) {
        let sched = self.0.scheduler();
        let (ack, acks) = mpsc::channel();
        let handle = sched
            .spawn_fn(move |cx| blocked(cx, ack))
            .expect("spawn failed");
        let pid = handle.pid();
        let send = |message| sched.send(pid, message).expect("send failed");
        let sent = time_send_batches(
            Self::NAME,
            group,
            &acks,
            |i| send(Message::new("m", Payload::new(i))),
            || send(Message::new("flush", Payload::empty())),
        );
        sched
            .send(pid, Message::new("stop", Payload::empty()))
            .expect("send failed");
        assert_eq!(self.0.join_typed(std::iter::once(handle)), [sent]);
    }

    /// `ring` (`process_peer.rs`) with async-fn nodes.
    fn ring(&self, handles: &mut Vec<ProcessHandle<u64>>) {
        let sched = self.0.scheduler();
        for _ in 0..RING_SIZE {
            handles.push(sched.spawn_fn(ring_node).expect("spawn failed"));
        }
        for (i, handle) in handles.iter().enumerate() {
            let next = handles[(i + 1) % RING_SIZE].pid();
            sched
                .send(handle.pid(), Message::new("link", Payload::new(next)))
                .expect("send failed");
        }
        sched
            .send(
                handles[0].pid(),
                Message::new("token", Payload::new(RING_HOPS)),
            )
            .expect("send failed");
        let handled: u64 = self.0.join_typed(handles.drain(..)).into_iter().sum();
        // The token visits one process per hop, plus the first one, which gets it from the bench.
        assert_eq!(handled, RING_HOPS + 1);
    }

    /// `fan_in` (`process_peer.rs`) with async-fn processes: the counter and the senders.
    fn fan_in(&self, handles: &mut Vec<ProcessHandle<u64>>) {
        let sched = self.0.scheduler();
        let total = fan_in_total();
        let counter = sched
            .spawn_fn(move |cx| fan_counter(cx, total))
            .expect("spawn failed");
        let to = counter.pid();
        std::thread::scope(|scope| {
            for _ in 0..*WORKERS {
                scope.spawn(|| {
                    for _ in 0..FAN_IN_THREAD_MSGS {
                        sched
                            .send(to, Message::new("add", Payload::new(1u64)))
                            .expect("send failed");
                    }
                });
            }
            for _ in 0..FAN_IN_PROCESSES {
                let sender = sched.spawn_fn(move |cx| async move {
                    let sched = cx.scheduler();
                    for _ in 0..FAN_IN_PROCESS_MSGS {
                        sched.send(to, Message::new("add", Payload::new(1u64)))?;
                    }
                    Ok::<u64, BoxError>(0)
                });
                handles.push(sender.expect("spawn failed"));
            }
        });
        assert!(self.0.join_typed(handles.drain(..)).iter().all(|&n| n == 0));
        assert_eq!(self.0.join_typed(std::iter::once(counter)), [total]);
    }

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
