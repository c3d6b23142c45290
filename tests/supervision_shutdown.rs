//! A child that crashes during a scheduler shutdown, before its supervisor's turn to stop: its
//! restart is refused (nothing spawns in a shutdown), and its supervisor keeps it as not
//! running and waits for its own turn — it neither ends at once nor stops its other children
//! early — then stops them in reverse start order by their policies, as OTP does. At the end
//! of the grace period such a supervisor is forced with the rest: it never holds up a shutdown.
//!
//! The tree is `root(s1(a1, a2), s2(b1))`: the shutdown stops `s2` first, and `b1` takes as
//! long as the test says (it ends when released). Children log `stop:<id>` when asked to
//! finish, `end:b1` when `b1` ends. Deadlines are hang guards only, and the grace period of the
//! forced shutdown.
//!
//! The graceful stop of a tree (the later tests): a scheduler shutdown cancels a root supervisor,
//! which stops its children in reverse start order, each by its policy, before it ends itself;
//! children that end on their cancel within the grace period — at once, waiting in
//! `cx.recv().await?`, or after a while (released by the test) — are counted graceful, exactly
//! as a plain process is, and every one of them, the supervisors included, ends `Shutdown`. A
//! shutdown that begins while a supervisor starts its children refuses the starts left: the
//! supervisor keeps those children as not running, as it does a refused restart, and ends
//! `Shutdown` too, not `Failed`.

mod supervision_common;

use procsched::metrics::ShutdownReport;
use procsched::prelude::*;
use procsched::supervision::{
    ChildOptions, ChildShutdown, ChildSpec, Strategy, Supervisor, SupervisorRef,
};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use supervision_common::*;
use tokio::sync::Notify;

/// A worker `id`: ends as a [`Cmd`] tells it; asked to finish, logs `stop:<id>` and ends as
/// cancelled.
fn worker(id: &'static str, log: &mpsc::Sender<String>) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move |start| {
        let log = log.clone();
        start.spawn_fn(move |cx: ProcessCx<Cmd>| async move {
            match cx.recv().await {
                Ok(Cmd::Finish) => Ok(()),
                Ok(Cmd::Fail(why)) => Err(why.into()),
                Ok(Cmd::Panic) => panic!("{PANIC}"),
                Err(cancelled) => {
                    let _ = log.send(format!("stop:{id}"));
                    Err::<(), BoxError>(cancelled.into())
                }
            }
        })
    })
}

/// `b1`: asked to finish, logs `stop:b1`, and ends (logging `end:b1`) only once `release` is
/// notified. Its supervisor waits for it as long as it takes.
fn slow_to_stop(log: &mpsc::Sender<String>, release: &Arc<Notify>) -> ChildSpec {
    let (log, release) = (log.clone(), release.clone());
    ChildSpec::new("b1", move |start| {
        let (log, release) = (log.clone(), release.clone());
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            let cancelled = loop {
                if let Err(error) = cx.recv().await {
                    break error;
                }
            };
            let _ = log.send("stop:b1".to_owned());
            release.notified().await;
            let _ = log.send("end:b1".to_owned());
            Err::<(), BoxError>(cancelled.into())
        })
    })
    .shutdown(ChildShutdown::Infinity)
}

/// Releases `b1` when dropped.
struct ReleaseOnDrop(Arc<Notify>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// The tree and the PIDs the tests need.
struct Tree {
    root: SupervisorRef,
    s1: SupervisorRef,
    a1: Pid,
}

/// Starts `root(s1(a1, a2), s2(b1))`, `s1` with `strategy`.
fn start_tree(
    sched: &Scheduler,
    strategy: Strategy,
    log: &mpsc::Sender<String>,
    release: &Arc<Notify>,
) -> Tree {
    let s1 = Supervisor::new(strategy)
        .child(worker("a1", log))
        .child(worker("a2", log))
        .into_child("s1");
    let s2 = Supervisor::one_for_one()
        .child(slow_to_stop(log, release))
        .into_child("s2");
    let root = run(Supervisor::one_for_one()
        .child(s1)
        .child(s2)
        .start(sched.handle()))
    .expect("the tree started");
    let pid = |sup: &SupervisorRef, id: &str| {
        run(sup.which_children())
            .unwrap()
            .iter()
            .find(|child| &*child.id == id)
            .and_then(|child| child.pid)
            .unwrap_or_else(|| panic!("{id} is not running"))
    };
    let s1 = SupervisorRef::from_pid(sched.handle(), pid(&root, "s1"));
    let a1 = pid(&s1, "a1");
    Tree { root, s1, a1 }
}

/// Crashes `a1` and waits until `s1` has handled its end (polling `which_children`: a
/// supervisor handles one child's end wholly before it answers the next request). `s1` still
/// runs then, with `a1` kept as not running and `a2` left alone.
fn crash_a1_and_check_s1_waits(sched: &Scheduler, tree: &Tree) {
    sched
        .handle()
        .addr::<Cmd>(tree.a1)
        .send(Cmd::Fail("crashed during the shutdown"))
        .unwrap();
    let children = run(async {
        loop {
            let children = tree
                .s1
                .which_children()
                .await
                .expect("s1 is still running after its child's crash, waiting for its turn");
            if children.iter().all(|child| child.pid != Some(tree.a1)) {
                return children;
            }
            tokio::task::yield_now().await;
        }
    });
    let running: Vec<(&str, bool)> = children
        .iter()
        .map(|child| (&*child.id, child.pid.is_some()))
        .collect();
    assert_eq!(
        running,
        [("a1", false), ("a2", true)],
        "a1 kept as not running, a2 left alone"
    );
}

fn a_crash_during_a_shutdown_leaves_the_siblings_to_their_turn(strategy: Strategy) {
    let sched = scheduler(2);
    let (log, heard) = mpsc::channel();
    let release = Arc::new(Notify::new());
    let tree = start_tree(&sched, strategy, &log, &release);
    let report = std::thread::scope(|scope| {
        let shutdown = scope.spawn(|| sched.shutdown(GUARD));
        // A failed assertion below must not leave the shutdown waiting for b1 until the guard.
        let _release = ReleaseOnDrop(release.clone());
        // The root stops s2 first, which stops b1: b1 now holds up the shutdown.
        assert_eq!(heard.recv_timeout(GUARD).unwrap(), "stop:b1");
        crash_a1_and_check_s1_waits(&sched, &tree);
        assert!(
            heard.try_recv().is_err(),
            "nothing else was stopped meanwhile"
        );
        drop(_release);
        shutdown.join().unwrap()
    });
    let rest: Vec<String> = heard.try_iter().collect();
    assert_eq!(
        rest,
        ["end:b1", "stop:a2"],
        "a2 stopped in its turn, after b1"
    );
    assert_eq!((report.forced, report.abandoned), (0, 0), "{report:?}");
    assert_eq!(sched.live_processes(), 0);
    drop(tree.root);
}

#[test]
fn one_for_one_a_crash_during_a_shutdown_leaves_the_siblings_to_their_turn() {
    a_crash_during_a_shutdown_leaves_the_siblings_to_their_turn(Strategy::OneForOne);
}

#[test]
fn one_for_all_a_crash_during_a_shutdown_leaves_the_siblings_to_their_turn() {
    a_crash_during_a_shutdown_leaves_the_siblings_to_their_turn(Strategy::OneForAll);
}

#[test]
fn rest_for_one_a_crash_during_a_shutdown_leaves_the_siblings_to_their_turn() {
    a_crash_during_a_shutdown_leaves_the_siblings_to_their_turn(Strategy::RestForOne);
}

#[test]
fn a_supervisor_waiting_with_a_crashed_child_is_forced_at_the_end_of_the_grace_period() {
    let sched = scheduler(2);
    let (log, heard) = mpsc::channel();
    // Never released: b1 holds up the shutdown until its grace period ends.
    let release = Arc::new(Notify::new());
    let tree = start_tree(&sched, Strategy::OneForOne, &log, &release);
    let s1_down = sched.monitor(tree.s1.pid());
    let a1_down = sched.monitor(tree.a1);
    let report = std::thread::scope(|scope| {
        let shutdown = scope.spawn(|| sched.shutdown(Duration::from_secs(1)));
        assert_eq!(heard.recv_timeout(GUARD).unwrap(), "stop:b1");
        sched
            .handle()
            .addr::<Cmd>(tree.a1)
            .send(Cmd::Fail("crashed during the shutdown"))
            .unwrap();
        // Crashed, or forced if the grace period ended first: either way s1 must not stop a2
        // before its turn, which never comes.
        run(a1_down);
        shutdown.join().unwrap()
    });
    assert!(report.forced >= 1, "b1 was forced: {report:?}");
    assert!(run(s1_down).reason.is_abnormal(), "s1 was forced too");
    let rest: Vec<String> = heard.try_iter().collect();
    assert!(
        rest.is_empty(),
        "a2 was forced without a cancel, not stopped out of turn: {rest:?}"
    );
    assert_eq!(sched.live_processes(), 0);
    drop(tree.root);
}

// ---------------------------------------------------------------------------------------------
// A supervisor's children that end at once on their cancel are counted graceful, as a plain
// process is: a scheduler shutdown cancels the supervisor, which stops its children (reverse
// start order, each by its `ChildShutdown`) before it ends itself, all within the grace period.

/// How a waiting child's receive ended: `(id, cancelled)` (`cancelled`: it reported the cancel).
type Ended = (String, bool);

/// Waits in `cx.recv().await?` for ever: its receive's cancel ends it at once (after it tells
/// `ended` how that receive ended, as `id`).
async fn wait_in_recv(
    cx: ProcessCx<()>,
    id: String,
    ended: mpsc::Sender<Ended>,
) -> Result<(), BoxError> {
    loop {
        let received = cx.recv().await;
        if let Err(error) = &received {
            let _ = ended.send((id.clone(), error.is_cancelled()));
        }
        received?;
    }
}

/// A child `id` waiting in `cx.recv().await?` ([`wait_in_recv`]).
fn waiting(id: String, ended: &mpsc::Sender<Ended>) -> ChildSpec {
    let ended = ended.clone();
    ChildSpec::new(id.clone(), move |start| {
        let (id, ended) = (id.clone(), ended.clone());
        start.spawn_fn(move |cx: ProcessCx<()>| wait_in_recv(cx, id, ended))
    })
}

/// `children` waiting children `c0`, `c1`, … under a supervisor of `strategy`.
fn waiting_supervisor(
    strategy: Strategy,
    children: usize,
    ended: &mpsc::Sender<Ended>,
) -> Supervisor {
    (0..children).fold(Supervisor::new(strategy), |supervisor, n| {
        supervisor.child(waiting(format!("c{n}"), ended))
    })
}

/// The running children's PIDs, in start order.
fn child_pids(supervisor: &SupervisorRef) -> Vec<Pid> {
    run(supervisor.which_children())
        .expect("the supervisor is running")
        .iter()
        .map(|child| child.pid.expect("every child is running"))
        .collect()
}

/// Shuts `sched` down with a generous grace period and checks that `supervisor` and its
/// `children` children all ended gracefully: counted graceful, their ends `Shutdown`, each child
/// stopped through its receive's cancel, in reverse start order.
fn assert_graceful_stop(
    sched: &Scheduler,
    supervisor: &SupervisorRef,
    children: usize,
    heard: &mpsc::Receiver<Ended>,
    shutdown: impl FnOnce(&Scheduler) -> ShutdownReport,
) {
    let pids = child_pids(supervisor);
    assert_eq!(pids.len(), children);
    let downs: Vec<_> = pids.iter().map(|&pid| sched.monitor(pid)).collect();
    let supervisor_down = sched.monitor(supervisor.pid());
    let report = shutdown(sched);
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (children + 1, 0, 0),
        "the supervisor and every child ended on their cancel, in the grace period: {report:?}"
    );
    assert_eq!(sched.live_processes(), 0);
    let finished = sched.metrics().finished;
    assert_eq!(
        (finished.cancelled, finished.forced, finished.terminated),
        (children as u64 + 1, 0, 0),
        "{finished:?}"
    );
    for (n, down) in downs.into_iter().enumerate() {
        let down = run(down);
        assert!(down.reason.is_shutdown(), "c{n} ended with {down:?}");
    }
    let down = run(supervisor_down);
    assert!(
        down.reason.is_shutdown(),
        "the supervisor ended with {down:?}"
    );
    let ended: Vec<Ended> = heard.try_iter().collect();
    let expected: Vec<Ended> = (0..children)
        .rev()
        .map(|n| (format!("c{n}"), true))
        .collect();
    assert_eq!(
        ended, expected,
        "each child stopped by its cancel, last started first"
    );
}

fn children_waiting_in_recv_end_gracefully(strategy: Strategy, children: usize) {
    let sched = scheduler(2);
    let (ended, heard) = mpsc::channel();
    let supervisor = run(waiting_supervisor(strategy, children, &ended).start(sched.handle()))
        .expect("the supervisor started");
    assert_graceful_stop(&sched, &supervisor, children, &heard, |sched| {
        sched.shutdown(Duration::from_secs(5))
    });
}

#[test]
fn one_for_one_children_waiting_in_recv_end_gracefully() {
    children_waiting_in_recv_end_gracefully(Strategy::OneForOne, 3);
    children_waiting_in_recv_end_gracefully(Strategy::OneForOne, 50);
}

#[test]
fn one_for_all_children_waiting_in_recv_end_gracefully() {
    children_waiting_in_recv_end_gracefully(Strategy::OneForAll, 3);
    children_waiting_in_recv_end_gracefully(Strategy::OneForAll, 50);
}

#[test]
fn rest_for_one_children_waiting_in_recv_end_gracefully() {
    children_waiting_in_recv_end_gracefully(Strategy::RestForOne, 3);
    children_waiting_in_recv_end_gracefully(Strategy::RestForOne, 50);
}

/// The baseline the supervised children are held to: a plain process doing the same.
#[test]
fn a_plain_process_waiting_in_recv_ends_gracefully() {
    let sched = scheduler(2);
    let (ended, heard) = mpsc::channel();
    let plain = sched
        .spawn_fn(|cx: ProcessCx<()>| wait_in_recv(cx, "plain".to_owned(), ended))
        .unwrap();
    let report = sched.shutdown(Duration::from_secs(5));
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (1, 0, 0)
    );
    assert!(run(plain).unwrap_err().is_cancelled());
    assert_eq!(
        heard.try_iter().collect::<Vec<_>>(),
        [("plain".to_owned(), true)]
    );
}

/// A child `id` that, asked to finish, tells `stopping` and ends (as cancelled) only once
/// `release` gives it a permit: it takes a while, but ends within the grace period.
fn slow_child(
    id: String,
    stopping: &mpsc::Sender<String>,
    release: &Arc<tokio::sync::Semaphore>,
) -> ChildSpec {
    let (stopping, release) = (stopping.clone(), release.clone());
    ChildSpec::new(id.clone(), move |start| {
        let (id, stopping, release) = (id.clone(), stopping.clone(), release.clone());
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            let cancelled = loop {
                if let Err(error) = cx.recv().await {
                    break error;
                }
            };
            let _ = stopping.send(id);
            release.acquire().await?.forget();
            Err::<(), BoxError>(cancelled.into())
        })
    })
}

/// Opens the semaphore wide when dropped: a failed assertion must not leave a child waiting
/// for its permit until the shutdown's grace period ends.
struct OpenOnDrop(Arc<tokio::sync::Semaphore>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }
}

fn children_slow_to_stop_end_gracefully(strategy: Strategy) {
    const CHILDREN: usize = 3;
    let sched = scheduler(2);
    let (stopping, heard) = mpsc::channel();
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let supervisor = (0..CHILDREN).fold(Supervisor::new(strategy), |supervisor, n| {
        supervisor.child(slow_child(format!("c{n}"), &stopping, &release))
    });
    let supervisor = run(supervisor.start(sched.handle())).expect("the supervisor started");
    let pids = child_pids(&supervisor);
    let downs: Vec<_> = pids.iter().map(|&pid| sched.monitor(pid)).collect();
    let supervisor_down = sched.monitor(supervisor.pid());
    let report = std::thread::scope(|scope| {
        let _open = OpenOnDrop(release.clone());
        let shutdown = scope.spawn(|| sched.shutdown(Duration::from_secs(5)));
        // One at a time, last started first: the next is asked only once this one has ended.
        for n in (0..CHILDREN).rev() {
            assert_eq!(heard.recv_timeout(GUARD).unwrap(), format!("c{n}"));
            assert!(heard.try_recv().is_err(), "c{n} is stopped alone");
            release.add_permits(1);
        }
        shutdown.join().unwrap()
    });
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (CHILDREN + 1, 0, 0),
        "{report:?}"
    );
    for (n, down) in downs.into_iter().enumerate() {
        let down = run(down);
        assert!(down.reason.is_shutdown(), "c{n} ended with {down:?}");
    }
    let down = run(supervisor_down);
    assert!(
        down.reason.is_shutdown(),
        "the supervisor ended with {down:?}"
    );
    assert_eq!(sched.live_processes(), 0);
}

#[test]
fn one_for_one_children_slow_to_stop_end_gracefully_within_the_grace_period() {
    children_slow_to_stop_end_gracefully(Strategy::OneForOne);
}

#[test]
fn one_for_all_children_slow_to_stop_end_gracefully_within_the_grace_period() {
    children_slow_to_stop_end_gracefully(Strategy::OneForAll);
}

#[test]
fn rest_for_one_children_slow_to_stop_end_gracefully_within_the_grace_period() {
    children_slow_to_stop_end_gracefully(Strategy::RestForOne);
}

#[test]
fn nested_supervisors_with_bounded_children_end_gracefully() {
    let sched = scheduler(2);
    let (ended, heard) = mpsc::channel();
    let bounded = |id: String| {
        let ended = ended.clone();
        ChildSpec::new(id.clone(), move |start| {
            let (id, ended) = (id.clone(), ended.clone());
            start.spawn_fn_with(
                ChildOptions::new().mailbox_capacity(2),
                move |cx: ProcessCx<()>| async move {
                    let received = cx.recv().await;
                    if let Err(error) = &received {
                        let _ = ended.send((id, error.is_cancelled()));
                    }
                    received?;
                    Ok::<(), BoxError>(())
                },
            )
        })
    };
    let inner = |name: &str| {
        (0..3)
            .fold(Supervisor::one_for_all(), |supervisor, n| {
                supervisor.child(bounded(format!("{name}.c{n}")))
            })
            .into_child(name.to_owned())
    };
    let root = run(Supervisor::rest_for_one()
        .child(inner("s1"))
        .child(inner("s2"))
        .start(sched.handle()))
    .expect("the tree started");
    let root_down = sched.monitor(root.pid());
    let report = run(sched.shutdown_async(Duration::from_secs(5)));
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (9, 0, 0),
        "root, s1, s2 and their six children: {report:?}"
    );
    assert!(run(root_down).reason.is_shutdown());
    let ended: Vec<Ended> = heard.try_iter().collect();
    let expected: Vec<Ended> = ["s2.c2", "s2.c1", "s2.c0", "s1.c2", "s1.c1", "s1.c0"]
        .into_iter()
        .map(|id| (id.to_owned(), true))
        .collect();
    assert_eq!(ended, expected, "the tree stopped in reverse start order");
}

/// Waits (spinning, hang-guarded) until `sched`'s shutdown has begun.
fn wait_until_shutting_down(sched: &Scheduler) {
    let deadline = std::time::Instant::now() + GUARD;
    while !sched.handle().is_shutting_down() {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: the shutdown never began"
        );
        std::thread::yield_now();
    }
}

/// A shutdown that begins while a supervisor starts its children: the starts it refuses (nothing
/// spawns in a shutdown) leave those children not running, as a restart refused then does; the
/// supervisor stops the ones it started and ends as stopped by the shutdown (`Shutdown`), not as
/// failed.
fn a_shutdown_during_the_first_starts_is_a_graceful_stop(strategy: Strategy) {
    let sched = scheduler(2);
    let (ended, heard) = mpsc::channel();
    let (in_factory, entered) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let gate = Arc::new(std::sync::Mutex::new(gate));
    // `c1`'s factory holds the supervisor's start until the test has begun the shutdown.
    let gated = ChildSpec::new("c1", move |start| {
        let _ = in_factory.send(());
        let _ = gate.lock().unwrap().recv_timeout(GUARD);
        start.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<(), BoxError>(cx.recv().await?) })
    });
    let supervisor = Supervisor::new(strategy)
        .child(waiting("c0".to_owned(), &ended))
        .child(gated)
        .child(waiting("c2".to_owned(), &ended))
        .spawn(sched.handle())
        .expect("the supervisor spawned");
    let supervisor_down = sched.monitor(supervisor.pid());
    entered.recv_timeout(GUARD).expect("c1's start began");
    let report = std::thread::scope(|scope| {
        let shutdown = scope.spawn(|| sched.shutdown(Duration::from_secs(5)));
        wait_until_shutting_down(&sched);
        open.send(()).unwrap();
        shutdown.join().unwrap()
    });
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (2, 0, 0),
        "the supervisor and c0, the one child it started: {report:?}"
    );
    let down = run(supervisor_down);
    assert!(
        down.reason.is_shutdown(),
        "the supervisor was stopped by the shutdown, it did not fail: {down:?}"
    );
    let ended: Vec<Ended> = heard.try_iter().collect();
    assert_eq!(ended, [("c0".to_owned(), true)], "c0 stopped by its cancel");
    assert_eq!(sched.live_processes(), 0);
}

#[test]
fn one_for_one_a_shutdown_during_the_first_starts_is_a_graceful_stop() {
    a_shutdown_during_the_first_starts_is_a_graceful_stop(Strategy::OneForOne);
}

#[test]
fn one_for_all_a_shutdown_during_the_first_starts_is_a_graceful_stop() {
    a_shutdown_during_the_first_starts_is_a_graceful_stop(Strategy::OneForAll);
}

#[test]
fn rest_for_one_a_shutdown_during_the_first_starts_is_a_graceful_stop() {
    a_shutdown_during_the_first_starts_is_a_graceful_stop(Strategy::RestForOne);
}
