//! Helpers shared by the supervision tests (`tests/supervision_*.rs`): a hang-guarded way to
//! drive async test code, a *puppet* process told how to end, and a *probe* process that links,
//! monitors and traps on order and reports everything it hears, in order, on a channel.
//!
//! Deadlines here are hang guards only: a test that would hang fails with a message instead.
#![allow(dead_code)]

use procsched::prelude::*;
use procsched::supervision::{Incoming, MonitorRef, Signal};
use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

/// Generous bound for "this should happen": only a hang guard, never a timing assertion.
pub(crate) const GUARD: Duration = Duration::from_secs(30);

/// The message every panic a test provokes on purpose starts with (the support module's quiet
/// hook does not print them).
pub(crate) const PANIC: &str = "expected panic: a puppet was told to panic";

/// A scheduler of `workers` workers, built outside any tokio runtime (it builds its own for its
/// processes: the supervisors' timers never depend on the test's runtime).
pub(crate) fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder().workers(workers).build().unwrap()
}

/// Runs `future` to completion on a fresh current-thread tokio runtime; fails the test if it
/// takes longer than [`GUARD`] (a hang guard).
#[track_caller]
pub(crate) fn run<F: Future>(future: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(GUARD, future)
            .await
            .expect("hang guard: the test's future never completed")
    })
}

/// What a puppet is told to do: end in one of the ways a process ends by itself.
#[derive(Debug)]
pub(crate) enum Cmd {
    /// Finish (`Normal`).
    Finish,
    /// Fail with this error (`Failed`).
    Fail(&'static str),
    /// Panic (`Panicked`).
    Panic,
}

/// A process that waits for one [`Cmd`] and ends as told; asked to finish (a cancel, a
/// shutdown), it ends as cancelled (`Shutdown`).
pub(crate) async fn puppet(cx: ProcessCx<Cmd>) -> Result<(), BoxError> {
    match cx.recv().await? {
        Cmd::Finish => Ok(()),
        Cmd::Fail(why) => Err(why.into()),
        Cmd::Panic => panic!("{PANIC}"),
    }
}

pub(crate) fn spawn_puppet(sched: &SchedulerHandle) -> ProcessHandle<(), Cmd> {
    sched.spawn_fn(puppet).unwrap()
}

/// What a probe is told to do.
#[derive(Debug)]
pub(crate) enum Order {
    Link(Pid),
    Unlink(Pid),
    /// Acknowledged with [`Heard::Monitoring`].
    Monitor(Pid),
    /// Acknowledged with [`Heard::Demonitored`].
    Demonitor(MonitorRef),
    TrapExit(bool),
    /// Reported back as [`Heard::Ping`], in order with the signals.
    Ping(u32),
    Finish,
}

/// What a probe reports, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    /// An order other than `Monitor`, `Demonitor` and `Ping` was carried out.
    Done,
    Monitoring(MonitorRef),
    Demonitored(bool),
    Ping(u32),
    Signal(Signal),
}

/// A probe's body: carries out [`Order`]s and reports every order and signal on `heard`, in
/// the order it received them (`recv_any`: in arrival order). `Finish` ends it normally.
pub(crate) async fn probe(
    cx: ProcessCx<Order>,
    heard: mpsc::Sender<Heard>,
) -> Result<(), BoxError> {
    loop {
        let report = match cx.recv_any().await? {
            Incoming::Signal(signal) => Heard::Signal(signal),
            Incoming::Message(order) => match order {
                Order::Link(pid) => {
                    cx.link(pid);
                    Heard::Done
                }
                Order::Unlink(pid) => {
                    cx.unlink(pid);
                    Heard::Done
                }
                Order::Monitor(pid) => Heard::Monitoring(cx.monitor(pid)),
                Order::Demonitor(monitor) => Heard::Demonitored(cx.demonitor(monitor)),
                Order::TrapExit(trap) => {
                    cx.trap_exit(trap);
                    Heard::Done
                }
                Order::Ping(n) => Heard::Ping(n),
                Order::Finish => return Ok(()),
            },
            other => return Err(format!("unexpected {other:?}").into()),
        };
        let _ = heard.send(report);
    }
}

/// A running probe and what it hears.
pub(crate) struct Probe {
    pub(crate) handle: ProcessHandle<(), Order>,
    pub(crate) heard: mpsc::Receiver<Heard>,
}

impl Probe {
    pub(crate) fn spawn(sched: &SchedulerHandle) -> Probe {
        let (tx, heard) = mpsc::channel();
        let handle = sched.spawn_fn(move |cx| probe(cx, tx)).unwrap();
        Probe { handle, heard }
    }

    pub(crate) fn pid(&self) -> Pid {
        self.handle.pid()
    }

    /// Sends `order` (the probe must be running).
    pub(crate) fn tell(&self, order: Order) {
        self.handle
            .addr()
            .send(order)
            .expect("the probe is running");
    }

    /// The next thing the probe heard (hang-guarded).
    #[track_caller]
    pub(crate) fn next(&self) -> Heard {
        self.heard
            .recv_timeout(GUARD)
            .expect("hang guard: the probe reported nothing")
    }

    /// Carries out `order` and waits for its acknowledgement.
    #[track_caller]
    pub(crate) fn order(&self, order: Order) -> Heard {
        self.tell(order);
        self.next()
    }

    /// Monitors `pid`; the monitor's reference.
    #[track_caller]
    pub(crate) fn monitor(&self, pid: Pid) -> MonitorRef {
        match self.order(Order::Monitor(pid)) {
            Heard::Monitoring(monitor) => monitor,
            other => panic!("expected the monitor's reference, heard {other:?}"),
        }
    }

    /// Pings the probe and asserts that the next thing it hears is that ping: nothing else
    /// (no stray signal) was queued before it.
    #[track_caller]
    pub(crate) fn assert_hears_nothing_else(&self, n: u32) {
        self.tell(Order::Ping(n));
        assert_eq!(
            self.next(),
            Heard::Ping(n),
            "a stray report before the ping"
        );
    }
}
