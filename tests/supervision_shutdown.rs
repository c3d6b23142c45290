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

mod supervision_common;

use procsched::prelude::*;
use procsched::supervision::{ChildShutdown, ChildSpec, Strategy, Supervisor, SupervisorRef};
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
