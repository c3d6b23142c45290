//! The two peers that run [`Process`] state machines (procsched and tokio-actors) seen through
//! one interface, [`ProcessPeer`], and the workloads written once against it.

use std::sync::{mpsc, Arc};
use std::thread;

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use procsched::{state_machine::Process, Message, Payload};

use procsched_benches::WORKERS;

use crate::net::Net;
use crate::processes::*;
use crate::samples::{vm_hwm_kib, RssSample};
use crate::workload::*;

/// A peer that runs [`Process`] state machines, as the workloads below see it: it spawns, sends
/// and joins from outside, with the handlers of [`crate::processes`] registered.
pub(crate) trait ProcessPeer: Peer + Sync {
    /// What its processes use to reach others.
    type Net: Net;
    /// What `spawn` returns.
    type Handle: Send;

    /// The preset for processes spawned from the bench thread.
    fn preset(&self) -> Option<Self::Net>;

    /// Spawns; panics if `init` fails (the processes here never refuse).
    fn spawn<P: Process<Output = Payload>>(&self, process: P, input: Payload) -> Self::Handle;

    /// The address of a spawned process.
    fn addr(handle: &Self::Handle) -> <Self::Net as Net>::Addr;

    /// Sends from outside; panics if the process is gone.
    fn send(&self, to: &<Self::Net as Net>::Addr, message: Message);

    /// Awaits `handles` in order, passing each result to `check`; panics on a process error or
    /// after [`STALL_TIMEOUT`].
    fn join_each(&self, handles: impl Iterator<Item = Self::Handle>, check: impl FnMut(Payload));

    /// [`join_each`](Self::join_each) over `handles`, leaving it empty (capacity kept).
    fn join_all(&self, handles: &mut Vec<Self::Handle>, check: impl FnMut(Payload)) {
        self.join_each(handles.drain(..), check);
    }

    /// Awaits one process's result.
    fn join(&self, handle: Self::Handle) -> Payload {
        let mut result = None;
        self.join_each(std::iter::once(handle), |payload| result = Some(payload));
        result.expect("join_each passed the result on")
    }
}

/// [`Peer::bench`] of a process peer: `workload` as written below.
pub(crate) fn bench<R: ProcessPeer>(
    peer: &R,
    workload: Workload,
    group: &mut BenchmarkGroup<'_, WallTime>,
) {
    match workload {
        Workload::SingleStep => {
            let mut handles = Vec::with_capacity(BURST);
            group.bench_function(R::NAME, |b| b.iter(|| single_step(peer, &mut handles)));
        }
        Workload::OneYield => {
            let mut handles = Vec::with_capacity(BURST);
            group.bench_function(R::NAME, |b| b.iter(|| one_yield(peer, &mut handles)));
        }
        Workload::ManyYields => {
            let mut handles = Vec::with_capacity(MANY_YIELDS_PROCESSES);
            group.bench_function(R::NAME, |b| b.iter(|| many_yields(peer, &mut handles)));
        }
        Workload::AsyncYields => {
            let mut handles = Vec::with_capacity(ASYNC_PROCESSES);
            group.bench_function(R::NAME, |b| b.iter(|| async_yields(peer, &mut handles)));
        }
        Workload::SendToBlocked => send_to_blocked(peer, group),
        Workload::BurstSpawn => {
            let mut handles = Vec::with_capacity(BURST_SPAWN);
            group.bench_function(R::NAME, |b| b.iter(|| burst_spawn(peer, &mut handles)));
        }
        Workload::ParallelSpawn => {
            let mut per_thread: Vec<Vec<R::Handle>> = (0..*WORKERS)
                .map(|_| Vec::with_capacity(PARALLEL_PER_THREAD))
                .collect();
            group.bench_function(R::NAME, |b| {
                b.iter(|| parallel_spawn(peer, &mut per_thread))
            });
        }
        Workload::Ring => {
            let mut handles = Vec::with_capacity(RING_SIZE);
            group.bench_function(R::NAME, |b| b.iter(|| ring(peer, &mut handles)));
        }
        Workload::FanIn => {
            let mut handles = Vec::with_capacity(FAN_IN_PROCESSES);
            group.bench_function(R::NAME, |b| b.iter(|| fan_in(peer, &mut handles)));
        }
        Workload::FanIn16 => {
            group.bench_function(R::NAME, |b| b.iter(|| fan_in_16(peer)));
        }
        Workload::Skynet => {
            group.bench_function(R::NAME, |b| b.iter(|| skynet(peer, SKYNET_LEAVES)));
        }
    }
}

/// Spawn [`BURST`] processes that finish on their first step; await all.
fn single_step<R: ProcessPeer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..BURST {
        handles.push(peer.spawn(Once, Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert!(result.is::<()>());
        finished += 1;
    });
    assert_eq!(finished, BURST);
}

/// Spawn [`BURST`] processes that yield once to the inline `Inc` handler; await all.
fn one_yield<R: ProcessPeer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..BURST {
        handles.push(peer.spawn(YieldOnce::new(Inc(0)), Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert_eq!(result.downcast::<u64>().ok(), Some(1));
        finished += 1;
    });
    assert_eq!(finished, BURST);
}

/// [`MANY_YIELDS_PROCESSES`] processes each yield [`MANY_YIELDS`] times to the inline `Inc`
/// handler, each yield after the previous one completed.
fn many_yields<R: ProcessPeer>(peer: &R, handles: &mut Vec<R::Handle>) {
    run_counters::<R, Inc>(peer, handles, MANY_YIELDS_PROCESSES, MANY_YIELDS);
}

/// [`ASYNC_PROCESSES`] processes each yield [`ASYNC_YIELDS`] times, serially, to the async
/// `AsyncInc` handler (a tokio task per yield).
fn async_yields<R: ProcessPeer>(peer: &R, handles: &mut Vec<R::Handle>) {
    run_counters::<R, AsyncInc>(peer, handles, ASYNC_PROCESSES, ASYNC_YIELDS);
}

/// Spawns `processes` [`Counter`]s of `yields` yields of command `C` each, awaits them all and
/// checks every result.
fn run_counters<R: ProcessPeer, C: From<u64> + Send + 'static>(
    peer: &R,
    handles: &mut Vec<R::Handle>,
    processes: usize,
    yields: u64,
) {
    for _ in 0..processes {
        handles.push(peer.spawn(Counter::<C>::new(yields), Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert_eq!(result.downcast::<u64>().ok(), Some(yields));
        finished += 1;
    });
    assert_eq!(finished, processes);
}

/// Batches of [`SEND_BATCH`] sends from the bench thread to one process blocked on a yield
/// that never completes. Only the sends are timed; between batches the process reports how
/// many messages it has seen, which both checks delivery and lets each batch start against a
/// drained, blocked process.
fn send_to_blocked<R: ProcessPeer>(peer: &R, group: &mut BenchmarkGroup<'_, WallTime>) {
    let (ack, acks) = mpsc::channel();
    let handle = peer.spawn(Blocked::new(ack), Payload::empty());
    let addr = R::addr(&handle);
    let sent = time_send_batches(
        R::NAME,
        group,
        &acks,
        |i| peer.send(&addr, Message::new("m", Payload::new(i))),
        || peer.send(&addr, Message::new("flush", Payload::empty())),
    );
    peer.send(&addr, Message::new("stop", Payload::empty()));
    assert_eq!(peer.join(handle).downcast::<u64>().ok(), Some(sent));
}

/// Spawn [`BURST_SPAWN`] processes, each yielding once to the async `AsyncInc` handler, as
/// fast as one thread can; wall time until all are done.
fn burst_spawn<R: ProcessPeer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..BURST_SPAWN {
        handles.push(peer.spawn(YieldOnce::new(AsyncInc(0)), Payload::empty()));
    }
    let mut finished = 0;
    peer.join_all(handles, |result| {
        assert_eq!(result.downcast::<u64>().ok(), Some(1));
        finished += 1;
    });
    assert_eq!(finished, BURST_SPAWN);
}

/// `WORKERS` threads at once each spawn [`PARALLEL_PER_THREAD`] processes doing two inline
/// yields; then all are awaited.
fn parallel_spawn<R: ProcessPeer>(peer: &R, per_thread: &mut [Vec<R::Handle>]) {
    thread::scope(|scope| {
        for handles in per_thread.iter_mut() {
            scope.spawn(move || {
                for _ in 0..PARALLEL_PER_THREAD {
                    handles.push(peer.spawn(Counter::<Inc>::new(2), Payload::empty()));
                }
            });
        }
    });
    let mut finished = 0;
    for handles in per_thread {
        peer.join_all(handles, |result| {
            assert_eq!(result.downcast::<u64>().ok(), Some(2));
            finished += 1;
        });
    }
    assert_eq!(finished, *WORKERS * PARALLEL_PER_THREAD);
}

/// [`RING_SIZE`] processes in a ring pass a token [`RING_HOPS`] times; the last holder sends
/// `stop` round the ring. Timed from the first spawn to the last process's end.
fn ring<R: ProcessPeer>(peer: &R, handles: &mut Vec<R::Handle>) {
    for _ in 0..RING_SIZE {
        handles.push(peer.spawn(Ring::<R::Net>::new(peer.preset()), Payload::empty()));
    }
    for (i, handle) in handles.iter().enumerate() {
        let next = R::addr(&handles[(i + 1) % RING_SIZE]);
        peer.send(&R::addr(handle), Message::new("link", Payload::new(next)));
    }
    peer.send(
        &R::addr(&handles[0]),
        Message::new("token", Payload::new(RING_HOPS)),
    );
    let mut handled = 0;
    peer.join_all(handles, |result| {
        handled += result
            .downcast::<u64>()
            .expect("a ring process returns its count");
    });
    // The token visits one process per hop, plus the first one, which gets it from the bench.
    assert_eq!(handled, RING_HOPS + 1);
}

/// `WORKERS` plain threads and [`FAN_IN_PROCESSES`] processes send to one counting process,
/// which finishes when it has them all.
fn fan_in<R: ProcessPeer>(peer: &R, handles: &mut Vec<R::Handle>) {
    let total = fan_in_total();
    let counter = peer.spawn(
        FanCounter {
            expected: 0,
            received: 0,
        },
        Payload::new(total),
    );
    let to = R::addr(&counter);
    thread::scope(|scope| {
        for _ in 0..*WORKERS {
            scope.spawn(|| {
                for _ in 0..FAN_IN_THREAD_MSGS {
                    peer.send(&to, Message::new("add", Payload::new(1u64)));
                }
            });
        }
        for _ in 0..FAN_IN_PROCESSES {
            let sender = FanSender::<R::Net> {
                net: peer.preset(),
                to: None,
            };
            handles.push(peer.spawn(sender, Payload::new(to.clone())));
        }
    });
    peer.join_all(handles, |result| assert!(result.is::<()>()));
    assert_eq!(peer.join(counter).downcast::<u64>().ok(), Some(total));
}

/// [`FAN_IN_16_THREADS`] plain threads send to one counting process, which finishes when it
/// has them all: more senders than cores.
fn fan_in_16<R: ProcessPeer>(peer: &R) {
    let total = fan_in_16_total();
    let counter = peer.spawn(
        FanCounter {
            expected: 0,
            received: 0,
        },
        Payload::new(total),
    );
    let to = R::addr(&counter);
    thread::scope(|scope| {
        for _ in 0..FAN_IN_16_THREADS {
            scope.spawn(|| {
                for _ in 0..FAN_IN_16_MSGS {
                    peer.send(&to, Message::new("add", Payload::new(1u64)));
                }
            });
        }
    });
    assert_eq!(peer.join(counter).downcast::<u64>().ok(), Some(total));
}

/// The skynet tree with `leaves` leaves; the root finishes with the sum of all leaf indices.
fn skynet<R: ProcessPeer>(peer: &R, leaves: u64) {
    let args = SkynetArgs::<<R::Net as Net>::Addr> {
        start: 0,
        size: leaves,
        parent: None,
    };
    let root = peer.spawn(Skynet::<R::Net>::new(peer.preset()), Payload::new(args));
    let sum = peer.join(root).downcast::<u64>().ok();
    assert_eq!(sum, Some(leaves * (leaves - 1) / 2));
}

/// [`Peer::rss`] of a process peer: runs `workload` once on a fresh peer and measures the growth of the RSS high-water mark.
///
/// `burst_spawn`'s handler is replaced by [`Gate`], which holds every process on its yield until
/// all [`BURST_SPAWN`] have arrived, so the peak has them all alive at once (each with its
/// pending handler task, on both peers). `skynet` runs as benchmarked; its processes overlap
/// only partly, so it reports both per spawned and per peak-live process.
pub(crate) fn rss<R: ProcessPeer>(peer: &R, workload: Workload) -> RssSample {
    // No warm-up run: the allocator would keep the warm-up's freed memory resident and the
    // measured run would reuse it without raising the high-water mark. Structures that grow
    // with the number of processes (queues, tables) are part of the per-process cost.
    match workload {
        Workload::BurstSpawn => {
            let (state, arrived) = GateState::new(BURST_SPAWN);
            let mut handles = Vec::with_capacity(BURST_SPAWN);
            let before_kib = vm_hwm_kib();
            for _ in 0..BURST_SPAWN {
                let process = YieldOnce::new(Gate(Arc::clone(&state)));
                handles.push(peer.spawn(process, Payload::empty()));
            }
            arrived
                .recv_timeout(STALL_TIMEOUT)
                .expect("burst_spawn RSS: not every process reached the gate");
            let after_kib = vm_hwm_kib();
            state.open.close();
            peer.join_all(&mut handles, |result| {
                assert_eq!(result.downcast::<u64>().ok(), Some(1));
            });
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
            skynet(peer, SKYNET_LEAVES);
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
