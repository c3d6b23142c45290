//! Public-API tests of supervisors (Erlang/OTP's `supervisor`, `src/scheduler/supervisor/`):
//! restart types (permanent, transient, temporary), strategies (one_for_one, one_for_all,
//! rest_for_one and its order), restart intensity in a nested tree, new PIDs for restarted
//! children, dynamic children and their typed errors, shutdown policies (timeout, brutal kill,
//! a child that honours cancellation), and the scheduler's shutdown of a whole tree.
//!
//! Children record what happens to them in a shared log: `start:<id>` when their supervisor
//! starts them (in the child spec's factory, which the supervisor calls in order; the bodies'
//! first polls follow in that order too: `supervision_start_order.rs`), `stop:<id>` in their
//! cancellation path.
//! A supervisor handles one child's end wholly before it answers the next request, so polling
//! `which_children` observes each decision without sleeping. Deadlines are hang guards only,
//! and shutdown timeouts the policies under test.

mod supervision_common;
mod support;

use procsched::prelude::*;
use procsched::supervision::{
    ChildInfo, ChildShutdown, ChildSpec, ExitReason, Restart, Supervisor, SupervisorError,
    SupervisorRef,
};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervision_common::*;
use support::wait_until;

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::default()
}

fn write(log: &Log, entry: String) {
    log.lock().unwrap().push(entry);
}

/// The log's entries so far, leaving it empty.
fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// A worker child `id`: logs `start:<id>` when started; ends as a [`Cmd`] tells it; asked to
/// finish, logs `stop:<id>` and ends as cancelled (`Shutdown`).
fn worker(id: &'static str, log: &Log) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move |start| {
        write(&log, format!("start:{id}"));
        let log = log.clone();
        start.spawn_fn(move |cx: ProcessCx<Cmd>| async move {
            match cx.recv().await {
                Ok(Cmd::Finish) => Ok(()),
                Ok(Cmd::Fail(why)) => Err(why.into()),
                Ok(Cmd::Panic) => panic!("{PANIC}"),
                Err(cancelled) => {
                    write(&log, format!("stop:{id}"));
                    Err::<(), BoxError>(cancelled.into())
                }
            }
        })
    })
}

/// A child `id` that ignores being asked to finish (it logs `ignored:<id>` and receives on).
fn stubborn(id: &'static str, log: &Log) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move |start| {
        let log = log.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            loop {
                if cx.recv().await.is_err() {
                    write(&log, format!("ignored:{id}"));
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
    })
}

fn start(sched: &Scheduler, supervisor: Supervisor) -> SupervisorRef {
    run(supervisor.start(sched.handle())).expect("the supervisor started")
}

fn children(supervisor: &SupervisorRef) -> Vec<ChildInfo> {
    run(supervisor.which_children()).unwrap()
}

/// Polls `which_children` until `done` holds (hang-guarded); returns them then.
fn children_when(
    supervisor: &SupervisorRef,
    mut done: impl FnMut(&[ChildInfo]) -> bool,
) -> Vec<ChildInfo> {
    run(async {
        loop {
            let children = supervisor.which_children().await.unwrap();
            if done(&children) {
                return children;
            }
            tokio::task::yield_now().await;
        }
    })
}

fn pid_of(children: &[ChildInfo], id: &str) -> Option<Pid> {
    children.iter().find(|child| &*child.id == id)?.pid
}

fn running(children: &[ChildInfo], id: &str) -> Pid {
    pid_of(children, id).unwrap_or_else(|| panic!("{id} is not running: {children:?}"))
}

/// Polls until child `id` runs with a PID other than `old`; returns it.
fn restarted(supervisor: &SupervisorRef, id: &str, old: Pid) -> Pid {
    let children = children_when(supervisor, |children| {
        pid_of(children, id).is_some_and(|pid| pid != old)
    });
    running(&children, id)
}

fn tell(sched: &Scheduler, pid: Pid, cmd: Cmd) {
    sched.handle().addr::<Cmd>(pid).send(cmd).unwrap();
}

fn restarts(supervisor: &SupervisorRef) -> u64 {
    run(supervisor.restarts()).unwrap()
}

#[test]
fn a_permanent_child_is_restarted_after_a_normal_and_after_an_abnormal_end() {
    let sched = scheduler(2);
    let log = log();
    let sup = start(&sched, Supervisor::one_for_one().child(worker("p", &log)));
    let first = running(&children(&sup), "p");
    tell(&sched, first, Cmd::Finish);
    let second = restarted(&sup, "p", first);
    tell(&sched, second, Cmd::Fail("crashed"));
    let third = restarted(&sup, "p", second);
    assert_ne!(third, first);
    assert_eq!(restarts(&sup), 2);
    assert_eq!(take(&log), ["start:p", "start:p", "start:p"]);
}

#[test]
fn a_transient_child_is_restarted_only_after_an_abnormal_end_not_after_normal_or_shutdown() {
    let sched = scheduler(2);
    let log = log();
    let transient = |id| worker(id, &log).restart(Restart::Transient);
    let sup = start(
        &sched,
        Supervisor::one_for_one()
            .max_restarts(10, GUARD)
            .child(transient("normal"))
            .child(transient("shutdown")),
    );
    // Abnormal ends (failed, killed): restarted.
    let first = running(&children(&sup), "normal");
    tell(&sched, first, Cmd::Fail("crashed"));
    let second = restarted(&sup, "normal", first);
    sched.terminate(second).unwrap();
    let third = restarted(&sup, "normal", second);
    assert_eq!(restarts(&sup), 2);
    // A normal end: not restarted (the child stays listed, without an instance).
    tell(&sched, third, Cmd::Finish);
    let after = children_when(&sup, |children| pid_of(children, "normal").is_none());
    assert_eq!(
        after.len(),
        2,
        "a transient child keeps its spec: {after:?}"
    );
    // A shutdown (asked to finish, and it did): not restarted.
    let asked = running(&after, "shutdown");
    sched.handle().cancel(asked).unwrap();
    let after = children_when(&sup, |children| pid_of(children, "shutdown").is_none());
    assert_eq!(after.len(), 2);
    assert!(after
        .iter()
        .all(|child| child.restart == Restart::Transient));
    assert_eq!(restarts(&sup), 2, "neither clean end was restarted");
}

#[test]
fn a_temporary_child_is_never_restarted_and_is_removed_from_which_children() {
    let sched = scheduler(2);
    let log = log();
    let temporary = |id| worker(id, &log).restart(Restart::Temporary);
    let sup = start(
        &sched,
        Supervisor::one_for_one()
            .child(worker("kept", &log))
            .child(temporary("crashes"))
            .child(temporary("finishes")),
    );
    let before = children(&sup);
    assert_eq!(before.len(), 3);
    tell(&sched, running(&before, "crashes"), Cmd::Fail("crashed"));
    tell(&sched, running(&before, "finishes"), Cmd::Finish);
    let after = children_when(&sup, |children| children.len() == 1);
    assert_eq!(&*after[0].id, "kept");
    assert_eq!(after[0].pid, pid_of(&before, "kept"));
    assert_eq!(restarts(&sup), 0);
    assert_eq!(take(&log).len(), 3, "no start but the first three");
}

#[test]
fn one_for_one_restarts_only_the_crashed_child() {
    let sched = scheduler(2);
    let log = log();
    let sup = start(
        &sched,
        Supervisor::one_for_one()
            .child(worker("a", &log))
            .child(worker("b", &log))
            .child(worker("c", &log)),
    );
    let before = children(&sup);
    take(&log);
    let crashed = running(&before, "b");
    tell(&sched, crashed, Cmd::Fail("crashed"));
    restarted(&sup, "b", crashed);
    let after = children(&sup);
    assert_eq!(pid_of(&after, "a"), pid_of(&before, "a"));
    assert_eq!(pid_of(&after, "c"), pid_of(&before, "c"));
    assert_eq!(take(&log), ["start:b"]);
    assert_eq!(restarts(&sup), 1);
}

#[test]
fn one_for_all_stops_the_others_in_reverse_order_and_restarts_every_child_with_new_pids() {
    let sched = scheduler(2);
    let log = log();
    let sup = start(
        &sched,
        Supervisor::one_for_all()
            .child(worker("a", &log))
            .child(worker("b", &log))
            .child(worker("c", &log)),
    );
    let before = children(&sup);
    let old: BTreeSet<Pid> = before.iter().filter_map(|child| child.pid).collect();
    assert_eq!(old.len(), 3);
    take(&log);
    tell(&sched, running(&before, "b"), Cmd::Fail("crashed"));
    let after = children_when(&sup, |children| {
        children
            .iter()
            .all(|child| child.pid.is_some_and(|pid| !old.contains(&pid)))
    });
    assert_eq!(after.len(), 3);
    assert_eq!(
        take(&log),
        ["stop:c", "stop:a", "start:a", "start:b", "start:c"]
    );
    assert_eq!(restarts(&sup), 1);
}

#[test]
fn rest_for_one_stops_later_children_in_reverse_order_and_restarts_them_in_start_order() {
    let sched = scheduler(2);
    let log = log();
    let sup = start(
        &sched,
        Supervisor::rest_for_one()
            .child(worker("a", &log))
            .child(worker("b", &log))
            .child(worker("c", &log))
            .child(worker("d", &log)),
    );
    let before = children(&sup);
    assert_eq!(take(&log), ["start:a", "start:b", "start:c", "start:d"]);
    tell(&sched, running(&before, "b"), Cmd::Fail("crashed"));
    let after = children_when(&sup, |children| {
        ["b", "c", "d"]
            .iter()
            .all(|id| pid_of(children, id).is_some_and(|pid| Some(pid) != pid_of(&before, id)))
    });
    assert_eq!(pid_of(&after, "a"), pid_of(&before, "a"), "a is untouched");
    assert_eq!(
        take(&log),
        ["stop:d", "stop:c", "start:b", "start:c", "start:d"]
    );
    assert_eq!(restarts(&sup), 1);
}

#[test]
fn intensity_exceeded_stops_the_supervisor_with_shutdown_and_its_parent_sees_it() {
    let sched = scheduler(2);
    let log = log();
    let sub = Supervisor::one_for_one()
        .max_restarts(1, Duration::from_secs(60))
        .child(worker("w", &log).register_as("w"))
        .into_child("sub");
    let root = start(&sched, Supervisor::one_for_one().child(sub));
    let sub_first = running(&children(&root), "sub");
    let sub_down = sched.monitor(sub_first);
    let whereis_w_other_than = |old: &[Pid]| {
        run(async {
            loop {
                match sched.handle().whereis("w") {
                    Some(pid) if !old.contains(&pid) => return pid,
                    _ => tokio::task::yield_now().await,
                }
            }
        })
    };
    let w1 = whereis_w_other_than(&[]);
    tell(&sched, w1, Cmd::Fail("first crash"));
    let w2 = whereis_w_other_than(&[w1]); // restart 1 of 1: allowed
    tell(&sched, w2, Cmd::Fail("second crash")); // one too many
    let down = run(sub_down);
    assert_eq!(down.pid, sub_first);
    assert_eq!(
        down.reason,
        ExitReason::Shutdown,
        "a supervisor that gives up"
    );
    // The root (permanent child, default intensity) restarts the subtree.
    let sub_second = restarted(&root, "sub", sub_first);
    assert_ne!(sub_second, sub_first);
    assert_eq!(restarts(&root), 1);
    let w3 = whereis_w_other_than(&[w1, w2]);
    assert_eq!(sched.state(sub_first), None);
    assert_ne!(sched.state(w3), None, "the new subtree's worker runs");
}

#[test]
fn a_zero_restart_window_that_would_count_restarts_is_refused_as_otp_refuses_it() {
    let sched = scheduler(1);
    let log = log();
    // A zero window never holds two restarts: the supervisor would never give up.
    let zero = || Supervisor::one_for_one().child(worker("w", &log));
    let refused = run(zero().max_restarts(1, Duration::ZERO).start(sched.handle()));
    assert!(
        matches!(refused, Err(SupervisorError::ZeroRestartWindow)),
        "{refused:?}"
    );
    assert!(take(&log).is_empty(), "refused before any child starts");
    // Spawned rather than started, it ends failed, saying why.
    let spawned = zero()
        .max_restarts(3, Duration::ZERO)
        .spawn(sched.handle())
        .unwrap();
    let down = run(sched.monitor(spawned.pid()));
    assert!(
        down.reason.to_string().contains("restart window of zero"),
        "{}",
        down.reason
    );
    // With no restarts allowed the window means nothing: the first crash ends it.
    let never = start(&sched, zero().max_restarts(0, Duration::ZERO));
    let supervisor_down = sched.monitor(never.pid());
    tell(&sched, running(&children(&never), "w"), Cmd::Fail("crash"));
    assert_eq!(run(supervisor_down).reason, ExitReason::Shutdown);
}

#[test]
fn a_restarted_child_is_a_new_process_with_a_new_pid_and_the_old_one_is_gone() {
    let sched = scheduler(2);
    let log = log();
    let sup = start(&sched, Supervisor::one_for_one().child(worker("w", &log)));
    let old = running(&children(&sup), "w");
    let old_down = sched.monitor(old);
    sched.terminate(old).unwrap();
    assert!(run(old_down).reason.is_killed());
    let new = restarted(&sup, "w", old);
    assert_ne!(new, old);
    assert_eq!(sched.state(old), None);
    assert!(sched
        .handle()
        .addr::<Cmd>(old)
        .send(Cmd::Finish)
        .unwrap_err()
        .is_not_found());
    assert_ne!(sched.state(new), None);
    tell(&sched, new, Cmd::Fail("the new one answers"));
    restarted(&sup, "w", new);
}

#[test]
fn start_child_and_terminate_child_manage_dynamic_children_with_typed_errors() {
    let sched = scheduler(2);
    let log = log();
    let sup = start(&sched, Supervisor::one_for_one());
    assert!(children(&sup).is_empty());
    let pid = run(sup.start_child(worker("dyn", &log))).unwrap();
    assert_eq!(children(&sup).len(), 1);
    assert_eq!(running(&children(&sup), "dyn"), pid);
    assert_eq!(
        run(sup.start_child(worker("dyn", &log))),
        Err(SupervisorError::DuplicateId("dyn".into()))
    );
    // A dynamic child is supervised like the others.
    tell(&sched, pid, Cmd::Fail("crashed"));
    let pid = restarted(&sup, "dyn", pid);
    let ended = sched.monitor(pid);
    assert_eq!(run(sup.terminate_child("dyn")), Ok(()));
    assert!(run(ended).reason.is_shutdown(), "stopped by its policy");
    assert!(children(&sup).is_empty(), "its spec is forgotten");
    assert_eq!(
        run(sup.terminate_child("dyn")),
        Err(SupervisorError::NoChild("dyn".into()))
    );
    assert_eq!(
        run(sup.terminate_child("nope")),
        Err(SupervisorError::NoChild("nope".into()))
    );
    assert_eq!(take(&log), ["start:dyn", "start:dyn", "stop:dyn"]);
}

#[test]
fn a_factory_returning_a_pid_it_did_not_spawn_through_its_start_fails_to_start() {
    let sched = scheduler(2);
    let log = log();
    let sup = start(&sched, Supervisor::one_for_one());
    let bystander = spawn_puppet(sched.handle());
    let bystander_pid = bystander.pid();
    let never = Pid::from_raw(1 << 26).unwrap();
    // Another process's PID (with a spawn of its own, stopped), and a PID nobody has.
    let (spawned_tx, spawned_rx) = std::sync::mpsc::channel();
    let adopts = ChildSpec::new("adopts", move |start| {
        let own = start.spawn_fn(|cx: ProcessCx<Cmd>| async move {
            let _ = cx.recv().await?;
            Ok::<(), BoxError>(())
        })?;
        spawned_tx.send(own).unwrap();
        Ok(bystander_pid)
    });
    let invents = ChildSpec::new("invents", move |_| Ok(never));
    for spec in [adopts, invents] {
        match run(sup.start_child(spec)) {
            Err(SupervisorError::Start(why)) => assert!(why.contains("neither spawned"), "{why}"),
            other => panic!("expected a failed start, got {other:?}"),
        }
    }
    assert!(children(&sup).is_empty(), "neither is a child");
    // What the factory did spawn is terminated (else this would wait for ever: hang-guarded).
    let _ = run(sched.monitor(spawned_rx.recv().unwrap()));
    // The bystander was not touched: it ends when told.
    tell(&sched, bystander_pid, Cmd::Finish);
    support::join_typed(bystander).expect("the bystander lived on");
    assert!(take(&log).is_empty());
}

#[test]
fn shutdown_timeout_kills_a_child_that_ignores_cancellation_after_the_timeout() {
    let sched = scheduler(2);
    let log = log();
    let child =
        stubborn("stubborn", &log).shutdown(ChildShutdown::Timeout(Duration::from_millis(100)));
    let sup = start(&sched, Supervisor::one_for_one().child(child));
    let pid = running(&children(&sup), "stubborn");
    let ended = sched.monitor(pid);
    assert_eq!(run(sup.terminate_child("stubborn")), Ok(()));
    let down = run(ended);
    assert!(down.reason.is_killed(), "{down:?}");
    assert_eq!(take(&log), ["ignored:stubborn"], "it was asked first");
}

#[test]
fn brutal_kill_ends_a_child_killed_without_asking_it_to_finish() {
    let sched = scheduler(2);
    let log = log();
    let child = worker("w", &log).shutdown(ChildShutdown::BrutalKill);
    let sup = start(&sched, Supervisor::one_for_one().child(child));
    let pid = running(&children(&sup), "w");
    let ended = sched.monitor(pid);
    assert_eq!(run(sup.terminate_child("w")), Ok(()));
    let down = run(ended);
    assert!(down.reason.is_killed(), "{down:?}");
    assert_eq!(take(&log), ["start:w"], "its cancellation path never ran");
}

#[test]
fn a_child_that_honours_cancellation_ends_with_shutdown() {
    let sched = scheduler(2);
    let log = log();
    let child = worker("w", &log).shutdown(ChildShutdown::Timeout(GUARD));
    let sup = start(&sched, Supervisor::one_for_one().child(child));
    let pid = running(&children(&sup), "w");
    let ended = sched.monitor(pid);
    assert_eq!(run(sup.terminate_child("w")), Ok(()));
    let down = run(ended);
    assert!(down.reason.is_shutdown(), "{down:?}");
    assert_eq!(take(&log), ["start:w", "stop:w"]);
}

/// Starts the tree `root(w1, w2, sub(s1, s2), w3)` of workers that honour cancellation, and
/// waits until all seven processes run; the log is left empty.
fn start_tree(sched: &Scheduler, log: &Log) -> SupervisorRef {
    let sub = Supervisor::one_for_one()
        .child(worker("s1", log))
        .child(worker("s2", log))
        .into_child("sub");
    let root = start(
        sched,
        Supervisor::one_for_one()
            .child(worker("w1", log))
            .child(worker("w2", log))
            .child(sub)
            .child(worker("w3", log)),
    );
    // The root, its three workers, the sub-supervisor and its two workers.
    wait_until("the whole tree has started", || sched.live_processes() == 7);
    assert_eq!(
        take(log),
        ["start:w1", "start:w2", "start:s1", "start:s2", "start:w3"]
    );
    root
}

#[test]
fn shutdown_of_a_tree_counts_every_process_exactly_once_in_the_report() {
    let sched = scheduler(2);
    let log = log();
    let _root = start_tree(&sched, &log);
    let live = sched.live_processes();
    let report = sched.shutdown(Duration::from_secs(10));
    assert_eq!(report.total(), live, "{report:?}");
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (live, 0, 0),
        "every process honoured its stop within the timeout"
    );
    assert_eq!(sched.live_processes(), 0);
    let mut stopped = take(&log);
    stopped.sort();
    assert_eq!(
        stopped,
        ["stop:s1", "stop:s2", "stop:w1", "stop:w2", "stop:w3"],
        "each worker stopped once"
    );
}

#[test]
fn shutdown_of_a_tree_stops_children_in_reverse_start_order() {
    let sched = scheduler(2);
    let log = log();
    let _root = start_tree(&sched, &log);
    let report = sched.shutdown(Duration::from_secs(10));
    assert_eq!(report.total(), 7, "{report:?}");
    assert_eq!(
        take(&log),
        ["stop:w3", "stop:s2", "stop:s1", "stop:w2", "stop:w1"]
    );
}
