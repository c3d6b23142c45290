//! The "tokio-native" peer: every workload written the way a tokio user would write it, with no
//! procsched types at all.
//!
//! Each process is a plain tokio task on a multi-thread runtime with `WORKERS` threads. Where a
//! process receives messages it owns the receiver of a typed `tokio::sync::mpsc` unbounded
//! channel (an enum of its messages, no payload boxing, no topics); its address is the sender.
//! Inline work is a function call. Async work is `tokio::spawn` of the handler's future,
//! awaited through its `JoinHandle` (tokio's own oneshot: a separate oneshot channel would add an
//! allocation and buy nothing here). Results come back through the process's `JoinHandle`,
//! which the bench thread awaits; spawns from inside a task use `tokio::spawn` (the worker's
//! local queue), spawns from the bench thread `Runtime::spawn` (injection), as on the other
//! peers.
//!
//! | workload | one iteration, natively |
//! |---|---|
//! | `single_step` | spawn [`BURST`] tasks that return at once, await their handles |
//! | `one_yield` | [`BURST`] tasks, each calls [`add_one`] once and returns the result |
//! | `many_yields` | [`MANY_YIELDS_PROCESSES`] tasks, each calls [`add_one`] [`MANY_YIELDS`] times, feeding each result into the next call |
//! | `async_yields` | [`ASYNC_PROCESSES`] tasks, each `tokio::spawn`s [`add_one_async`] and awaits it [`ASYNC_YIELDS`] times, one after the other |
//! | `send_to_blocked` | [`SEND_BATCH`] sends to a task that `select!`s between its mailbox and a never-completing spawned call |
//! | `burst_spawn` | [`BURST_SPAWN`] tasks, each spawning and awaiting one [`add_one_async`] |
//! | `parallel_spawn` | each of `WORKERS` threads spawns [`PARALLEL_PER_THREAD`] tasks calling [`add_one`] twice |
//! | `ring` | [`RING_SIZE`] tasks, each with its own mailbox and its successor's sender (made before the tasks, so no `link` message), pass a token [`RING_HOPS`] hops, then `Stop` goes round |
//! | `fan_in` | `WORKERS` threads and [`FAN_IN_PROCESSES`] tasks send `u64`s into one counting task's mailbox |
//! | `skynet` | a tree of tasks: a parent spawns ten children and sums their `JoinHandle`s |
//!
//! The inline calls go through [`std::hint::black_box`], so the optimiser cannot fold a loop of
//! them into a constant: the work is done, once per call, as on the process peers.

use std::hint::black_box;
use std::sync::{mpsc, Arc};
use std::thread;

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use tokio::runtime::Runtime;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use procsched_benches::blocked::{spawn_native_receiver, BlockedMsg};
use procsched_benches::WORKERS;

use crate::processes::{gauge, GateState};
use crate::samples::{vm_hwm_kib, GrowthSample, LatencySample, RssSample};
use crate::workload::*;
use crate::{growth, latency};

/// tokio-native: one multi-thread tokio runtime with `WORKERS` worker threads.
pub(crate) struct Native {
    runtime: Runtime,
}

impl Peer for Native {
    const NAME: &'static str = "tokio-native";

    fn build() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(*WORKERS)
            .thread_name("bench-native")
            .enable_all()
            .build()
            .expect("failed to build the tokio runtime");
        Native { runtime }
    }

    fn bench(&self, workload: Workload, group: &mut BenchmarkGroup<'_, WallTime>) {
        match workload {
            Workload::SingleStep => {
                let mut handles = Vec::with_capacity(BURST);
                group.bench_function(Self::NAME, |b| b.iter(|| self.single_step(&mut handles)));
            }
            Workload::OneYield => {
                let mut handles = Vec::with_capacity(BURST);
                group.bench_function(Self::NAME, |b| b.iter(|| self.one_yield(&mut handles)));
            }
            Workload::ManyYields => {
                let mut handles = Vec::with_capacity(MANY_YIELDS_PROCESSES);
                group.bench_function(Self::NAME, |b| b.iter(|| self.many_yields(&mut handles)));
            }
            Workload::AsyncYields => {
                let mut handles = Vec::with_capacity(ASYNC_PROCESSES);
                group.bench_function(Self::NAME, |b| b.iter(|| self.async_yields(&mut handles)));
            }
            Workload::SendToBlocked => self.send_to_blocked(group),
            Workload::BurstSpawn => {
                let mut handles = Vec::with_capacity(BURST_SPAWN);
                group.bench_function(Self::NAME, |b| b.iter(|| self.burst_spawn(&mut handles)));
            }
            Workload::ParallelSpawn => {
                let mut per_thread: Vec<Vec<JoinHandle<u64>>> = (0..*WORKERS)
                    .map(|_| Vec::with_capacity(PARALLEL_PER_THREAD))
                    .collect();
                group.bench_function(Self::NAME, |b| {
                    b.iter(|| self.parallel_spawn(&mut per_thread))
                });
            }
            Workload::Ring => {
                let mut handles = Vec::with_capacity(RING_SIZE);
                group.bench_function(Self::NAME, |b| b.iter(|| self.ring(&mut handles)));
            }
            Workload::FanIn => {
                let mut handles = Vec::with_capacity(FAN_IN_PROCESSES);
                group.bench_function(Self::NAME, |b| b.iter(|| self.fan_in(&mut handles)));
            }
            Workload::FanIn16 => {
                group.bench_function(Self::NAME, |b| b.iter(|| self.fan_in_16()));
            }
            Workload::Skynet => {
                group.bench_function(Self::NAME, |b| b.iter(|| self.skynet(SKYNET_LEAVES)));
            }
        }
    }

    fn rss(&self, workload: Workload) -> RssSample {
        match workload {
            Workload::BurstSpawn => {
                let (state, arrived) = GateState::new(BURST_SPAWN);
                let mut handles = Vec::with_capacity(BURST_SPAWN);
                let before_kib = vm_hwm_kib();
                for _ in 0..BURST_SPAWN {
                    let state = Arc::clone(&state);
                    handles.push(self.runtime.spawn(async move {
                        let call = tokio::spawn(async move { state.pass().await });
                        call.await.expect("the gate task panicked");
                        1
                    }));
                }
                arrived
                    .recv_timeout(STALL_TIMEOUT)
                    .expect("burst_spawn RSS: not every task reached the gate");
                let after_kib = vm_hwm_kib();
                state.open.close();
                self.join_all(&mut handles, |one| assert_eq!(one, 1));
                RssSample {
                    before_kib,
                    after_kib,
                    processes: BURST_SPAWN as u64,
                    peak_live: BURST_SPAWN as u64,
                }
            }
            Workload::Skynet => {
                gauge::enable();
                let before_kib = vm_hwm_kib();
                self.skynet(SKYNET_LEAVES);
                RssSample {
                    before_kib,
                    after_kib: vm_hwm_kib(),
                    processes: skynet_processes(),
                    peak_live: gauge::peak() as u64,
                }
            }
            other => unreachable!("no RSS measurement for {other:?}"),
        }
    }

    fn latency(&self) -> LatencySample {
        latency::native(&self.runtime)
    }

    fn growth(&self, live: usize) -> GrowthSample {
        growth::native(&self.runtime, live)
    }

    fn shutdown(self) {
        self.runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    }
}

/// The inline work of every workload: what the `Inc` handler computes.
pub(crate) fn add_one(n: u64) -> u64 {
    black_box(black_box(n) + 1)
}

/// The async work of every workload: what the `AsyncInc` handler computes.
pub(crate) async fn add_one_async(n: u64) -> u64 {
    n + 1
}

/// The message of a `ring` task.
enum RingMsg {
    /// The token, with the hops it has left.
    Token(u64),
    Stop,
}

impl Native {
    /// Awaits `handles` in order from the bench thread, passing each output to `check`;
    /// panics if a task panicked or after [`STALL_TIMEOUT`]. Leaves `handles` empty.
    fn join_all<T>(&self, handles: &mut Vec<JoinHandle<T>>, mut check: impl FnMut(T)) {
        let all = async {
            for handle in handles.drain(..) {
                check(handle.await.expect("a task panicked"));
            }
        };
        let watched = self
            .runtime
            .block_on(async { tokio::time::timeout(STALL_TIMEOUT, all).await });
        if watched.is_err() {
            panic!("tokio-native: tasks still running after {STALL_TIMEOUT:?}");
        }
    }

    /// Awaits one task's output.
    fn join<T>(&self, handle: JoinHandle<T>) -> T {
        let mut handles = vec![handle];
        let mut output = None;
        self.join_all(&mut handles, |out| output = Some(out));
        output.expect("join_all passed the output on")
    }

    fn single_step(&self, handles: &mut Vec<JoinHandle<()>>) {
        for _ in 0..BURST {
            handles.push(self.runtime.spawn(async {}));
        }
        let mut finished = 0;
        self.join_all(handles, |()| finished += 1);
        assert_eq!(finished, BURST);
    }

    fn one_yield(&self, handles: &mut Vec<JoinHandle<u64>>) {
        for _ in 0..BURST {
            handles.push(self.runtime.spawn(async { add_one(0) }));
        }
        let mut finished = 0;
        self.join_all(handles, |value| {
            assert_eq!(value, 1);
            finished += 1;
        });
        assert_eq!(finished, BURST);
    }

    fn many_yields(&self, handles: &mut Vec<JoinHandle<u64>>) {
        for _ in 0..MANY_YIELDS_PROCESSES {
            handles.push(self.runtime.spawn(async {
                let mut value = 0;
                for _ in 0..MANY_YIELDS {
                    value = add_one(value);
                }
                value
            }));
        }
        let mut finished = 0;
        self.join_all(handles, |value| {
            assert_eq!(value, MANY_YIELDS);
            finished += 1;
        });
        assert_eq!(finished, MANY_YIELDS_PROCESSES);
    }

    fn async_yields(&self, handles: &mut Vec<JoinHandle<u64>>) {
        for _ in 0..ASYNC_PROCESSES {
            handles.push(self.runtime.spawn(async {
                let mut value = 0;
                for _ in 0..ASYNC_YIELDS {
                    let call = tokio::spawn(add_one_async(value));
                    value = call.await.expect("add_one_async panicked");
                }
                value
            }));
        }
        let mut finished = 0;
        self.join_all(handles, |value| {
            assert_eq!(value, ASYNC_YIELDS);
            finished += 1;
        });
        assert_eq!(finished, ASYNC_PROCESSES);
    }

    /// As on the process peers: only the sends are timed; between batches the task reports its
    /// count, which checks delivery and drains it.
    fn send_to_blocked(&self, group: &mut BenchmarkGroup<'_, WallTime>) {
        let (ack, acks) = mpsc::channel();
        // Carrying a `u64`, like the process peers' messages.
        let (to, task) = spawn_native_receiver::<u64>(self.runtime.handle(), ack);
        let sent = time_send_batches(
            Self::NAME,
            group,
            &acks,
            |i| {
                if to.send(BlockedMsg::Count(i)).is_err() {
                    panic!("send failed: the task has finished");
                }
            },
            || {
                let _ = to.send(BlockedMsg::Flush);
            },
        );
        let _ = to.send(BlockedMsg::Stop);
        assert_eq!(self.join(task), sent);
    }

    fn burst_spawn(&self, handles: &mut Vec<JoinHandle<u64>>) {
        for _ in 0..BURST_SPAWN {
            handles.push(self.runtime.spawn(async {
                let call = tokio::spawn(add_one_async(0));
                call.await.expect("add_one_async panicked")
            }));
        }
        let mut finished = 0;
        self.join_all(handles, |value| {
            assert_eq!(value, 1);
            finished += 1;
        });
        assert_eq!(finished, BURST_SPAWN);
    }

    fn parallel_spawn(&self, per_thread: &mut [Vec<JoinHandle<u64>>]) {
        let runtime = self.runtime.handle();
        thread::scope(|scope| {
            for handles in per_thread.iter_mut() {
                scope.spawn(move || {
                    for _ in 0..PARALLEL_PER_THREAD {
                        handles.push(runtime.spawn(async { add_one(add_one(0)) }));
                    }
                });
            }
        });
        let mut finished = 0;
        for handles in per_thread {
            self.join_all(handles, |value| {
                assert_eq!(value, 2);
                finished += 1;
            });
        }
        assert_eq!(finished, *WORKERS * PARALLEL_PER_THREAD);
    }

    fn ring(&self, handles: &mut Vec<JoinHandle<u64>>) {
        let (senders, mailboxes): (Vec<_>, Vec<_>) =
            (0..RING_SIZE).map(|_| unbounded_channel()).unzip();
        for (i, mailbox) in mailboxes.into_iter().enumerate() {
            let next = senders[(i + 1) % RING_SIZE].clone();
            handles.push(self.runtime.spawn(ring_node(mailbox, next)));
        }
        let first = &senders[0];
        if first.send(RingMsg::Token(RING_HOPS)).is_err() {
            panic!("ring: the first task has finished");
        }
        // The tasks hold the only senders left, so a lost token would hang (and trip the
        // watchdog) rather than end the ring quietly.
        drop(senders);
        let mut handled = 0;
        self.join_all(handles, |count| handled += count);
        assert_eq!(handled, RING_HOPS + 1);
    }

    /// [`FAN_IN_16_THREADS`] threads send `u64`s into one counting task's mailbox.
    fn fan_in_16(&self) {
        let total = fan_in_16_total();
        let (to, mut mailbox) = unbounded_channel::<u64>();
        let counter = self.runtime.spawn(async move {
            let mut received = 0;
            while received < total {
                match mailbox.recv().await {
                    Some(n) => received += n,
                    None => break,
                }
            }
            received
        });
        thread::scope(|scope| {
            for _ in 0..FAN_IN_16_THREADS {
                let to = to.clone();
                scope.spawn(move || {
                    for _ in 0..FAN_IN_16_MSGS {
                        to.send(1).expect("the counter has finished");
                    }
                });
            }
        });
        drop(to);
        assert_eq!(self.join(counter), total);
    }

    fn fan_in(&self, handles: &mut Vec<JoinHandle<()>>) {
        let total = fan_in_total();
        let (to, mut mailbox) = unbounded_channel::<u64>();
        let counter = self.runtime.spawn(async move {
            let mut received = 0;
            while received < total {
                match mailbox.recv().await {
                    Some(n) => received += n,
                    None => break,
                }
            }
            received
        });
        thread::scope(|scope| {
            for _ in 0..*WORKERS {
                let to = to.clone();
                scope.spawn(move || {
                    for _ in 0..FAN_IN_THREAD_MSGS {
                        to.send(1).expect("the counter has finished");
                    }
                });
            }
            for _ in 0..FAN_IN_PROCESSES {
                let to = to.clone();
                handles.push(self.runtime.spawn(async move {
                    for _ in 0..FAN_IN_PROCESS_MSGS {
                        to.send(1).expect("the counter has finished");
                    }
                }));
            }
        });
        drop(to);
        self.join_all(handles, |()| {});
        assert_eq!(self.join(counter), total);
    }

    fn skynet(&self, leaves: u64) {
        let root = {
            let _runtime = self.runtime.enter();
            skynet_node(0, leaves)
        };
        assert_eq!(self.join(root), leaves * (leaves - 1) / 2);
    }
}

/// One task of the `ring`: forwards the token to `next`; on the last hop, and on `Stop`, sends
/// `Stop` on and finishes with the number of tokens it handled.
async fn ring_node(mut mailbox: UnboundedReceiver<RingMsg>, next: UnboundedSender<RingMsg>) -> u64 {
    let mut handled = 0;
    while let Some(message) = mailbox.recv().await {
        match message {
            RingMsg::Token(0) => {
                handled += 1;
                break;
            }
            RingMsg::Token(hops) => {
                handled += 1;
                next.send(RingMsg::Token(hops - 1))
                    .expect("ring: the next task has finished");
            }
            RingMsg::Stop => break,
        }
    }
    // The stop ends where it started, at a task that has finished.
    let _ = next.send(RingMsg::Stop);
    handled
}

/// A `skynet` node: a leaf returns its index, a parent spawns ten children and returns the sum
/// of their results. Must be called inside the runtime.
fn skynet_node(start: u64, size: u64) -> JoinHandle<u64> {
    tokio::spawn(async move {
        gauge::spawned();
        let sum = if size == 1 {
            start
        } else {
            let child = size / 10;
            let children: [JoinHandle<u64>; 10] =
                std::array::from_fn(|i| skynet_node(start + i as u64 * child, child));
            let mut sum = 0;
            for child in children {
                sum += child.await.expect("a skynet task panicked");
            }
            sum
        };
        gauge::closed();
        sum
    })
}
