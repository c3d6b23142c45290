//! A supervisor's start is synchronous, as OTP's `start_link` (which returns once `init/1`
//! has): it starts a child only once the one before it has *started* — for an `async fn`
//! child, once its body's first poll has returned. So what a child does before its first
//! await has happened before its younger sibling's body runs: at the initial start, at a
//! restart (one_for_all: start order), and for dynamic children. A body that fails or panics
//! in its first poll is a failed start (a state machine's failed `init`), and one that never
//! returns from it fails the start within the supervisor's patience instead of holding it.
//!
//! Each child logs `start:<id>` as its body's first statement, before any await. Deadlines are
//! hang guards only.

mod supervision_common;

use procsched::prelude::*;
use procsched::supervision::{ChildShutdown, ChildSpec, ExitReason, Supervisor, SupervisorError};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use supervision_common::*;

type Log = Arc<Mutex<Vec<String>>>;

/// Rounds of each race: without the synchronous start, the bodies' order is the workers'.
const ROUNDS: usize = 20;

/// A child `id` whose body logs `start:<id>` before its first await, then ends as a [`Cmd`]
/// tells it.
fn logging(id: &'static str, log: &Log) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move |start| {
        let log = log.clone();
        start.spawn_fn(move |cx: ProcessCx<Cmd>| async move {
            log.lock().unwrap().push(format!("start:{id}"));
            puppet(cx).await
        })
    })
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn in_order(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|id| format!("start:{id}")).collect()
}

#[test]
fn children_s_bodies_start_in_start_order() {
    for workers in [1, 2] {
        let sched = scheduler(workers);
        for round in 0..ROUNDS {
            let log = Log::default();
            let supervisor = Supervisor::one_for_one()
                .child(logging("a", &log))
                .child(logging("b", &log))
                .child(logging("c", &log));
            let supervisor = run(supervisor.start(sched.handle())).unwrap();
            // `start` returned: every child has started, in order.
            assert_eq!(
                take(&log),
                in_order(&["a", "b", "c"]),
                "{workers} workers, round {round}"
            );
            let down = sched.monitor(supervisor.pid());
            sched.handle().cancel(supervisor.pid()).unwrap();
            run(down);
        }
        sched.shutdown(GUARD);
    }
}

#[test]
fn one_for_all_restarts_children_s_bodies_in_start_order() {
    let sched = scheduler(2);
    let log = Log::default();
    let supervisor = Supervisor::one_for_all()
        .max_restarts(ROUNDS as u32, GUARD)
        .child(logging("a", &log))
        .child(logging("b", &log))
        .child(logging("c", &log));
    let supervisor = run(supervisor.start(sched.handle())).unwrap();
    take(&log);
    for round in 0..ROUNDS {
        let c = run(supervisor.which_children()).unwrap()[2].pid.unwrap();
        sched
            .handle()
            .addr::<Cmd>(c)
            .send(Cmd::Fail("restart all"))
            .unwrap();
        // Answered once the restart is over (a supervisor handles an end wholly first).
        while run(supervisor.restarts()).unwrap() <= round as u64 {
            std::thread::yield_now();
        }
        assert_eq!(take(&log), in_order(&["a", "b", "c"]), "round {round}");
    }
    sched.shutdown(GUARD);
}

#[test]
fn a_dynamic_child_has_started_when_start_child_returns() {
    let sched = scheduler(1);
    let log = Log::default();
    let supervisor = Supervisor::one_for_one().spawn(sched.handle()).unwrap();
    let ids = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let specs: Vec<ChildSpec> = ids.iter().map(|id| logging(id, &log)).collect();
    // The caller is a process on the same worker: without the synchronous start, its reply's
    // wake-up would run before the new child's first poll.
    let (seen_tx, seen) = mpsc::channel();
    let log_seen = log.clone();
    let caller = sched
        .spawn_fn(move |_: ProcessCx| async move {
            for spec in specs {
                let id = spec.id().to_owned();
                supervisor.start_child(spec).await?;
                let last = log_seen.lock().unwrap().last().cloned();
                seen_tx.send((id, last)).unwrap();
            }
            Ok::<(), BoxError>(())
        })
        .unwrap();
    run(caller).unwrap();
    for id in ids {
        let (started, last) = seen.recv_timeout(GUARD).unwrap();
        assert_eq!((started.as_str(), last), (id, Some(format!("start:{id}"))));
    }
    sched.shutdown(GUARD);
}

#[test]
fn a_child_that_fails_or_panics_in_its_first_poll_fails_its_start() {
    let sched = scheduler(2);
    let fails = ChildSpec::new("fails", |start| {
        start.spawn_fn(|_: ProcessCx<()>| async { Err::<(), BoxError>("no config".into()) })
    });
    let error = run(Supervisor::one_for_one().child(fails).start(sched.handle())).unwrap_err();
    assert!(
        matches!(&error, SupervisorError::Start(why) if why.contains("no config")),
        "{error:?}"
    );
    let supervisor = Supervisor::one_for_one().spawn(sched.handle()).unwrap();
    let panics = ChildSpec::new("panics", |start| {
        start.spawn_fn(|_: ProcessCx<()>| async {
            panic!("{PANIC}");
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
    });
    let error = run(supervisor.start_child(panics)).unwrap_err();
    assert!(
        matches!(&error, SupervisorError::Start(why) if why.contains(PANIC)),
        "{error:?}"
    );
    // As a state machine whose `init` failed: not a child, and the supervisor lives on.
    assert!(run(supervisor.which_children()).unwrap().is_empty());
    sched.shutdown(GUARD);
}

/// A supervisor started as a child whose own child fails to start fails its parent's start
/// with the whole chain — which supervisor, which child, and the child's error — as OTP's
/// nested `{shutdown, {failed_to_start_child, ..}}` keeps it, not only "could not start".
#[test]
fn a_nested_supervisors_failed_start_names_the_grandchild_and_its_error() {
    let sched = scheduler(2);
    let fails = ChildSpec::new("fails", |start| {
        start.spawn_fn(|_: ProcessCx<()>| async { Err::<(), BoxError>("no config".into()) })
    });
    let inner = Supervisor::one_for_one().child(fails).into_child("inner");
    let error = run(Supervisor::one_for_one().child(inner).start(sched.handle())).unwrap_err();
    let SupervisorError::Start(why) = &error else {
        panic!("{error:?}");
    };
    for part in ["`inner`", "`fails`", "no config"] {
        assert!(why.contains(part), "{part} in: {why}");
    }
    // Named once, not behind a preamble that says it again.
    assert_eq!(error.to_string(), *why);
    assert_eq!(why.matches("could not be started").count(), 2, "{why}");
    assert_eq!(sched.shutdown(GUARD).total(), 0, "nothing left running");
}

#[test]
fn a_child_that_never_returns_from_its_first_poll_fails_its_start_instead_of_holding_the_supervisor(
) {
    let sched = scheduler(2);
    let (release, blocked) = mpsc::channel::<()>();
    let blocked = Arc::new(Mutex::new(blocked));
    let blocking = ChildSpec::new("blocking", move |start| {
        let blocked = Arc::clone(&blocked);
        start.spawn_fn(move |_: ProcessCx<()>| async move {
            // Blocks its worker (the executor's monitor hands that worker's queue on) until
            // the test releases it, after the start has failed.
            let _ = blocked.lock().unwrap().recv();
            Ok::<(), BoxError>(())
        })
    })
    .shutdown(ChildShutdown::Timeout(Duration::from_millis(10)));
    let supervisor = Supervisor::one_for_one().spawn(sched.handle()).unwrap();
    let error = run(supervisor.start_child(blocking)).unwrap_err();
    assert!(
        matches!(&error, SupervisorError::Start(why) if why.contains("first poll did not return")),
        "{error:?}"
    );
    release.send(()).unwrap();
    assert!(run(supervisor.which_children()).unwrap().is_empty());
    sched.shutdown(GUARD);
}

#[test]
fn a_start_whose_children_all_started_succeeds_even_if_one_crashes_past_the_intensity_at_once() {
    // OTP's `start_link` returns `{ok, Pid}` once `init` has; a child crashing right after its
    // start is the running supervisor's business (here: past an intensity of 0, it ends).
    let sched = scheduler(2);
    for _ in 0..ROUNDS {
        let crashes = ChildSpec::new("crashes", |start| {
            start.spawn_fn(|cx: ProcessCx<()>| async move {
                cx.yield_now().await; // its first poll returned: started
                Err::<(), BoxError>("crashed right after its start".into())
            })
        });
        let waits = ChildSpec::new("waits", |start| {
            start.spawn_fn(|cx: ProcessCx<()>| async move {
                cx.recv().await?;
                Ok::<(), BoxError>(())
            })
        });
        let started = run(Supervisor::one_for_one()
            .max_restarts(0, Duration::from_secs(60))
            .child(crashes)
            .child(waits)
            .start(sched.handle()));
        let supervisor = started.expect("every child started");
        // Then the crash ends it (intensity 0), as OTP's supervisor exits `shutdown` (gone
        // already, or ending so).
        let down = run(sched.handle().monitor(supervisor.pid()));
        assert!(
            matches!(down.reason, ExitReason::Shutdown | ExitReason::NoProc),
            "{down:?}"
        );
    }
}

#[test]
fn two_children_of_one_id_are_refused_before_anything_starts() {
    // As OTP's `duplicate_child_name`: `start` refuses, and nothing was started.
    let sched = scheduler(2);
    let log = Log::default();
    let error = run(Supervisor::one_for_one()
        .child(logging("a", &log))
        .child(logging("b", &log))
        .child(logging("a", &log))
        .start(sched.handle()))
    .unwrap_err();
    assert_eq!(error, SupervisorError::DuplicateId("a".into()));
    assert!(take(&log).is_empty(), "nothing started");
    // As a subtree (or spawned without waiting), the supervisor ends failed, naming the id.
    let inner = Supervisor::one_for_one()
        .child(logging("a", &log))
        .child(logging("a", &log))
        .into_child("inner");
    let error = run(Supervisor::one_for_one().child(inner).start(sched.handle())).unwrap_err();
    assert!(
        matches!(&error, SupervisorError::Start(why) if why.contains("`inner`") && why.contains("two children have the id `a`")),
        "{error:?}"
    );
    assert!(take(&log).is_empty(), "nothing started");
    assert_eq!(sched.shutdown(GUARD).total(), 0, "nothing left running");
}
