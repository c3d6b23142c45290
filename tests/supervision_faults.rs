//! Supervisors facing children and factories that misbehave (Erlang/OTP's `supervisor`
//! semantics): a factory that panics or keeps failing, a child that unlinks itself from its
//! supervisor, a child whose registered name someone else holds, and a start that fails
//! saying why.
//!
//! Deadlines are hang guards only; children record what happens to them in counters and
//! channels, and the tests poll `which_children` (a supervisor handles one event wholly before
//! it answers the next request).

mod supervision_common;
mod support;

use procsched::prelude::*;
use procsched::supervision::{
    ChildInfo, ChildShutdown, ChildSpec, ExitReason, Supervisor, SupervisorError, SupervisorRef,
};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use supervision_common::*;
use support::wait_until;

fn start(sched: &Scheduler, supervisor: Supervisor) -> SupervisorRef {
    run(supervisor.start(sched.handle())).expect("the supervisor started")
}

fn children(supervisor: &SupervisorRef) -> Vec<ChildInfo> {
    run(supervisor.which_children()).unwrap()
}

fn running(children: &[ChildInfo], id: &str) -> Pid {
    children
        .iter()
        .find(|child| &*child.id == id)
        .and_then(|child| child.pid)
        .unwrap_or_else(|| panic!("{id} is not running: {children:?}"))
}

fn tell(sched: &Scheduler, pid: Pid, cmd: Cmd) {
    sched.handle().addr::<Cmd>(pid).send(cmd).unwrap();
}

/// A worker that ends as a [`Cmd`] tells it, or cancelled when asked to finish.
fn worker(id: &'static str) -> ChildSpec {
    ChildSpec::new(id, |start| start.spawn_fn(puppet))
}

#[test]
fn a_child_factory_that_panics_is_a_failed_start_and_the_supervisor_lives_on() {
    // The factory is user code: its panic is a start that failed, as an `Err` from it is —
    // reported to `start_child`'s caller, spent from the intensity on a restart — never the
    // supervisor's own end, which would take its healthy children with it.
    let sched = scheduler(2);
    let sup = start(
        &sched,
        Supervisor::one_for_one()
            .max_restarts(2, Duration::from_secs(60))
            .child(worker("healthy")),
    );
    let healthy = running(&children(&sup), "healthy");
    let healthy_down = sched.monitor(healthy);
    let panicking = ChildSpec::new("panics", |_start| -> Result<Pid, SpawnError> {
        panic!("{PANIC}: in a child's factory")
    });
    match run(sup.start_child(panicking)) {
        Err(SupervisorError::Start(why)) => assert!(why.contains("panicked"), "{why}"),
        other => panic!("a typed start error, not {other:?}"),
    }
    assert_eq!(children(&sup).len(), 1, "the failed child is not kept");
    assert_eq!(running(&children(&sup), "healthy"), healthy);

    // A factory that panics on a restart: each restart fails and spends the intensity, then
    // the supervisor gives up as it does for any child that cannot start (`Shutdown`), and
    // stops its other children by their policy.
    let calls = Arc::new(Mutex::new(0));
    let counted = calls.clone();
    let once = ChildSpec::new("once", move |start| {
        *counted.lock().unwrap() += 1;
        if *counted.lock().unwrap() > 1 {
            panic!("{PANIC}: in a restart's factory");
        }
        start.spawn_fn(puppet)
    });
    let once = run(sup.start_child(once)).unwrap();
    let sup_down = sched.monitor(sup.pid());
    tell(&sched, once, Cmd::Fail("crashed"));
    let down = run(sup_down);
    assert_eq!(
        down.reason,
        ExitReason::Shutdown,
        "a supervisor that gives up"
    );
    assert_eq!(
        *calls.lock().unwrap(),
        3,
        "the first start and two failed restarts"
    );
    assert!(
        run(healthy_down).reason.is_shutdown(),
        "stopped, not killed"
    );
}

#[test]
fn a_restart_that_keeps_failing_is_retried_while_the_supervisor_answers_and_can_be_shut_down() {
    // OTP's `try_again_restart`: however high the intensity, a child that cannot start never
    // pins its supervisor in one poll — it answers requests between attempts, and comes back
    // once its factory works again.
    let sched = scheduler(2);
    let calls = Arc::new(AtomicU32::new(0));
    let broken = Arc::new(AtomicBool::new(false));
    let spec = {
        let (calls, broken) = (calls.clone(), broken.clone());
        ChildSpec::new("flaky", move |start| {
            calls.fetch_add(1, Ordering::SeqCst);
            if broken.load(Ordering::SeqCst) {
                return Err(SpawnError::ShuttingDown); // say, a resource that is gone
            }
            start.spawn_fn(puppet)
        })
    };
    let sup = start(
        &sched,
        Supervisor::one_for_one()
            .max_restarts(u32::MAX, Duration::from_secs(3600))
            .child(spec),
    );
    let first = running(&children(&sup), "flaky");
    broken.store(true, Ordering::SeqCst);
    tell(&sched, first, Cmd::Fail("crashed"));
    wait_until("restarts being retried", || {
        calls.load(Ordering::SeqCst) >= 4
    });
    let during = children(&sup); // answered between two attempts
    assert_eq!(during.len(), 1);
    broken.store(false, Ordering::SeqCst);
    let again = run(async {
        loop {
            let children = sup.which_children().await.unwrap();
            if let Some(pid) = children[0].pid {
                return pid;
            }
            tokio::task::yield_now().await;
        }
    });
    assert_ne!(again, first, "a new instance");
    assert!(run(sup.restarts()).unwrap() >= 3);

    // While restarts fail, a shutdown still stops the supervisor (nothing abandoned).
    broken.store(true, Ordering::SeqCst);
    tell(&sched, again, Cmd::Fail("crashed again"));
    let before = calls.load(Ordering::SeqCst);
    wait_until("restarts failing again", || {
        calls.load(Ordering::SeqCst) >= before + 3
    });
    let report = sched.shutdown(GUARD);
    assert_eq!(report.forced + report.abandoned, 0, "{report:?}");
}

#[test]
fn a_child_that_unlinked_itself_is_still_stopped_by_its_policy() {
    // OTP monitors a child while it shuts it down: an unlinked child's end still ends the wait.
    for policy in [
        ChildShutdown::BrutalKill,
        ChildShutdown::Timeout(Duration::from_secs(60)),
    ] {
        let sched = scheduler(2);
        let sup = start(&sched, Supervisor::one_for_one());
        let (unlinked_tx, unlinked) = mpsc::channel();
        let unlinked_tx = Mutex::new(unlinked_tx);
        let spec = ChildSpec::new("detached", move |start| {
            let supervisor = start.supervisor();
            let unlinked = unlinked_tx.lock().unwrap().clone();
            start.spawn_fn(move |cx: ProcessCx<()>| async move {
                cx.unlink(supervisor);
                unlinked.send(()).unwrap();
                cx.recv().await?;
                Ok::<(), BoxError>(())
            })
        })
        .shutdown(policy);
        let child = run(sup.start_child(spec)).unwrap();
        unlinked.recv_timeout(GUARD).expect("hang guard: unlinked");
        let down = sched.monitor(child);
        assert_eq!(run(sup.terminate_child("detached")), Ok(()));
        let reason = run(down).reason;
        match policy {
            ChildShutdown::BrutalKill => assert!(reason.is_killed(), "{reason:?}"),
            _ => assert!(reason.is_shutdown(), "{reason:?}"),
        }
        assert!(children(&sup).is_empty(), "the supervisor answers on");
        sched.shutdown(GUARD);
    }
}

#[test]
fn a_child_whose_name_is_taken_fails_its_start_and_does_not_run_nameless() {
    // OTP's `already_started`: a start that failed, typed; the name's holder is untouched.
    let sched = scheduler(2);
    let holder = sched.spawn_fn(puppet).unwrap();
    sched.handle().register("db", holder.pid()).unwrap();
    let started = run(Supervisor::one_for_one()
        .child(worker("db").register_as("db"))
        .start(sched.handle()));
    match started {
        Err(SupervisorError::Start(why)) => {
            assert!(why.contains("`db`") && why.contains("taken"), "{why}")
        }
        other => panic!("a typed start error, not {other:?}"),
    }
    assert_eq!(sched.handle().whereis("db"), Some(holder.pid()));
    // The instance that could not take its name was stopped, and so was its supervisor.
    wait_until("only the holder left", || sched.live_processes() == 1);

    // A dynamic child: the same typed error; the supervisor lives on.
    let sup = start(&sched, Supervisor::one_for_one());
    let dynamic = run(sup.start_child(worker("db").register_as("db")));
    assert!(
        matches!(dynamic, Err(SupervisorError::Start(_))),
        "{dynamic:?}"
    );
    assert!(children(&sup).is_empty());
    tell(&sched, holder.pid(), Cmd::Finish);
}

#[test]
fn a_start_that_fails_says_which_child_and_why() {
    let sched = scheduler(2);
    let failing = ChildSpec::new("db", |_start| -> Result<Pid, SpawnError> {
        Err(SpawnError::ShuttingDown)
    });
    let started = run(Supervisor::one_for_one()
        .child(worker("cache"))
        .child(failing)
        .start(sched.handle()));
    match started {
        Err(SupervisorError::Start(why)) => {
            assert!(why.contains("`db`"), "names the child: {why}");
            assert!(
                why.contains(&SpawnError::ShuttingDown.to_string()),
                "says why: {why}"
            );
        }
        other => panic!("a typed start error, not {other:?}"),
    }
    // `cache`, started first, was stopped.
    wait_until("no process left", || sched.live_processes() == 0);
}

#[test]
fn requests_to_a_pid_that_is_not_a_supervisor_fail_at_once() {
    // An untyped body that keeps every message would never answer: refused before sending.
    let sched = scheduler(2);
    let hoarder = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let mut kept = Vec::new();
            loop {
                kept.push(cx.recv_message().await?);
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap();
    let typed = sched.spawn_fn(puppet).unwrap();
    for pid in [hoarder.pid(), typed.pid()] {
        let not_one = SupervisorRef::from_pid(sched.handle(), pid);
        match run(not_one.restarts()) {
            Err(SupervisorError::Unreachable(why)) => {
                assert!(why.contains("not a supervisor"), "{why}")
            }
            other => panic!("Unreachable, not {other:?}"),
        }
    }
    // A real one answers; once it has ended, it is unreachable too.
    let sup = start(&sched, Supervisor::one_for_one());
    let again = SupervisorRef::from_pid(sched.handle(), sup.pid());
    assert_eq!(run(again.restarts()), Ok(0));
    let ended = sched.monitor(sup.pid());
    sched.handle().cancel(sup.pid()).unwrap();
    run(ended);
    assert!(matches!(
        run(again.restarts()),
        Err(SupervisorError::Unreachable(_))
    ));
}
