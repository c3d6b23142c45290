//! kameo: the same workloads with its own supervision (`Actor::supervise`, `spawn_link`,
//! `on_link_died`).

use crate::messages::{hello, Crash, Go, Hello, Watch};
use crate::procsched_peer::collect;
use crate::samples::record;
use crate::{KAMEO, LEAVES, WITHIN};
use kameo::actor::{Actor, ActorRef, Spawn, WeakActorRef};
use kameo::error::{ActorStopReason, Infallible};
use kameo::message::{Context, Message};
use kameo::supervision::{RestartPolicy, SupervisionStrategy};
use procsched_benches::{CountDown, CountDownHandle, WORKERS};
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) fn kameo_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(*WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The supervisor: kameo's supervision lives in any actor that supervises children.
pub(crate) struct KameoSupervisor;

impl Actor for KameoSupervisor {
    type Args = ();
    type Error = Infallible;

    fn supervision_strategy() -> SupervisionStrategy {
        SupervisionStrategy::OneForOne
    }

    async fn on_start(_: (), _: ActorRef<Self>) -> Result<Self, Infallible> {
        Ok(KameoSupervisor)
    }
}

#[derive(Clone)]
pub(crate) struct KameoChildArgs {
    pub(crate) index: usize,
    pub(crate) hellos: mpsc::Sender<Hello>,
}

/// A supervised child: says hello in `on_start`, fails on [`Crash`].
pub(crate) struct KameoChild;

impl Actor for KameoChild {
    type Args = KameoChildArgs;
    type Error = Infallible;

    async fn on_start(args: KameoChildArgs, _: ActorRef<Self>) -> Result<Self, Infallible> {
        let _ = args.hellos.send(Hello {
            index: args.index,
            pid: None,
            at: Instant::now(),
        });
        Ok(KameoChild)
    }
}

impl Message<Crash> for KameoChild {
    type Reply = Result<(), &'static str>;

    async fn handle(&mut self, _: Crash, _: &mut Context<Self, Self::Reply>) -> Self::Reply {
        Err("told to crash")
    }
}

pub(crate) fn kameo_restarts(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    row: &'static str,
    children: usize,
) {
    let runtime = kameo_runtime();
    let (tx, rx) = mpsc::channel();
    // The supervisor stops when its last reference is dropped: keep it.
    let (_supervisor, refs) = runtime.block_on(async {
        let supervisor = KameoSupervisor::spawn(());
        let mut refs = Vec::with_capacity(children);
        for index in 0..children {
            let args = KameoChildArgs {
                index,
                hellos: tx.clone(),
            };
            refs.push(
                KameoChild::supervise(&supervisor, args)
                    .restart_policy(RestartPolicy::Permanent)
                    .restart_limit(u32::MAX, WITHIN)
                    .spawn()
                    .await,
            );
        }
        (supervisor, refs)
    });
    for _ in 0..children {
        hello(&rx);
    }
    group.bench_function(KAMEO, |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            let mut all = Vec::new();
            for _ in 0..iterations {
                let mut sent = Vec::with_capacity(refs.len());
                let first = Instant::now();
                for child in &refs {
                    sent.push(Instant::now());
                    child.tell(Crash).try_send().expect("the child's mailbox");
                }
                let (elapsed, latencies) = collect(&rx, first, &sent, |_| {});
                total += elapsed;
                all.extend(latencies);
            }
            record(row, KAMEO, &all);
            total
        })
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
}

/// What the `spawn_exit_*` parent is told to do.
pub(crate) struct Run;

#[derive(Clone)]
pub(crate) struct KameoLeafArgs {
    pub(crate) done: Option<CountDownHandle>,
}

/// A `spawn_exit_*` child: stops on [`Go`].
pub(crate) struct KameoLeaf {
    pub(crate) done: Option<CountDownHandle>,
}

impl Actor for KameoLeaf {
    type Args = KameoLeafArgs;
    type Error = Infallible;

    async fn on_start(args: KameoLeafArgs, _: ActorRef<Self>) -> Result<Self, Infallible> {
        Ok(KameoLeaf { done: args.done })
    }
}

impl Message<Go> for KameoLeaf {
    type Reply = ();

    async fn handle(&mut self, _: Go, ctx: &mut Context<Self, ()>) {
        if let Some(done) = &self.done {
            done.count_down();
        }
        ctx.stop();
    }
}

/// The `spawn_exit_*` parent.
pub(crate) struct KameoParent {
    pub(crate) watch: Watch,
    pub(crate) done: CountDownHandle,
    /// Linked children still running.
    pub(crate) linked: usize,
}

impl Actor for KameoParent {
    type Args = (Watch, CountDownHandle);
    type Error = Infallible;

    async fn on_start(
        (watch, done): (Watch, CountDownHandle),
        _: ActorRef<Self>,
    ) -> Result<Self, Infallible> {
        Ok(KameoParent {
            watch,
            done,
            linked: LEAVES,
        })
    }

    async fn on_link_died(
        &mut self,
        _: WeakActorRef<Self>,
        _: kameo::actor::ActorId,
        _: ActorStopReason,
    ) -> Result<ControlFlow<ActorStopReason>, Infallible> {
        self.linked -= 1;
        if self.linked == 0 {
            self.done.count_down();
            return Ok(ControlFlow::Break(ActorStopReason::Normal));
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl Message<Run> for KameoParent {
    type Reply = ();

    async fn handle(&mut self, _: Run, ctx: &mut Context<Self, ()>) {
        match self.watch {
            Watch::Unwatched => {
                for _ in 0..LEAVES {
                    let args = KameoLeafArgs {
                        done: Some(self.done.clone()),
                    };
                    let child = KameoLeaf::spawn(args);
                    child.tell(Go).try_send().expect("a new mailbox");
                }
                ctx.stop();
            }
            Watch::Linked => {
                let me = ctx.actor_ref().clone();
                for _ in 0..LEAVES {
                    let child = KameoLeaf::spawn_link(&me, KameoLeafArgs { done: None }).await;
                    child.tell(Go).try_send().expect("a new mailbox");
                }
                // Stops after the last child's `on_link_died`.
            }
            Watch::Monitored => {
                let mut children = Vec::with_capacity(LEAVES);
                for _ in 0..LEAVES {
                    let child = KameoLeaf::spawn(KameoLeafArgs { done: None });
                    child.tell(Go).try_send().expect("a new mailbox");
                    children.push(child);
                }
                futures::future::join_all(children.iter().map(|child| child.wait_for_shutdown()))
                    .await;
                self.done.count_down();
                ctx.stop();
            }
        }
    }
}

/// One `spawn_exit_*` iteration on kameo.
pub(crate) fn kameo_spawn_exit(runtime: &tokio::runtime::Runtime, watch: Watch, done: &CountDown) {
    let handle = match watch {
        Watch::Unwatched => done.arm(LEAVES),
        Watch::Linked | Watch::Monitored => done.arm(1),
    };
    let _guard = runtime.enter();
    let parent = KameoParent::spawn((watch, handle));
    parent.tell(Run).try_send().expect("a new mailbox");
    done.wait();
}
