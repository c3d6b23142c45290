//! A supervisor drops user values of its own — its children's specs (their factories'
//! captures) and the exit reasons it hears (a child's error) — and a destructor that panics
//! there is contained and counted, as the scheduler contains it everywhere else: the
//! supervisor, and every child it supervises, live on, and it ends as it would have.
//!
//! Deadlines are hang guards only; the values count their drops.

mod supervision_common;
mod support;

use procsched::error::InitError;
use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Restart, Supervisor, SupervisorError, SupervisorRef};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;
use supervision_common::*;
use support::{quiet_panics, wait_until, EXPECTED_PANIC};

/// Counts its drops, then panics.
#[derive(Debug)]
struct Grenade(Arc<AtomicUsize>);

impl Drop for Grenade {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{EXPECTED_PANIC}: a destructor the supervisor runs");
    }
}

/// A child's error holding a [`Grenade`].
#[derive(Debug)]
struct GrenadeError(#[allow(dead_code)] Grenade);

impl std::fmt::Display for GrenadeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a failure holding a grenade")
    }
}

impl std::error::Error for GrenadeError {}

/// A child that waits for one `()` and then fails with a [`GrenadeError`]; asked to finish,
/// it ends as cancelled.
fn failing_child(id: &'static str, drops: &Arc<AtomicUsize>) -> ChildSpec {
    let drops = drops.clone();
    ChildSpec::new(id, move |start| {
        let drops = drops.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.recv().await?;
            Err::<(), BoxError>(Box::new(GrenadeError(Grenade(drops))))
        })
    })
}

/// A child whose factory holds a [`Grenade`]; it runs a puppet (`Cmd`).
fn armed_child(id: &'static str, drops: &Arc<AtomicUsize>) -> ChildSpec {
    let grenade = Grenade(drops.clone());
    ChildSpec::new(id, move |start| {
        let _armed = &grenade;
        start.spawn_fn(puppet)
    })
}

fn setup(supervisor: Supervisor) -> (Scheduler, SupervisorRef, Pid) {
    quiet_panics();
    let sched = scheduler(2);
    let sup = run(supervisor
        .child(ChildSpec::new("bystander", |start| start.spawn_fn(puppet)))
        .start(sched.handle()))
    .expect("the supervisor started");
    let bystander = bystander(&sup);
    (sched, sup, bystander)
}

fn bystander(sup: &SupervisorRef) -> Pid {
    run(sup.which_children())
        .unwrap()
        .iter()
        .find(|child| &*child.id == "bystander")
        .and_then(|child| child.pid)
        .expect("the bystander runs")
}

/// The supervisor still answers, its bystander child is the same instance, and the one
/// destructor panic is counted.
fn assert_lives_on(sched: &Scheduler, sup: &SupervisorRef, before: Pid, drops: &AtomicUsize) {
    wait_until("the grenade's drop", || drops.load(SeqCst) == 1);
    assert_eq!(bystander(sup), before, "the bystander was not touched");
    assert!(sched.state(sup.pid()).is_some(), "the supervisor lives on");
    wait_until("the destructor panic counted", || {
        sched.metrics().destructor_panics == 1
    });
    assert_eq!(drops.load(SeqCst), 1, "dropped once");
}

#[test]
fn a_childs_error_whose_destructor_panics_is_contained_and_the_child_restarted() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (sched, sup, before) = setup(Supervisor::one_for_one().child(failing_child("f", &drops)));
    let failing = run(sup.which_children()).unwrap()[0].pid.unwrap();
    sched.handle().addr::<()>(failing).send(()).unwrap();
    assert_lives_on(&sched, &sup, before, &drops);
    wait_until("the restart", || run(sup.restarts()).unwrap() == 1);
}

#[test]
fn a_terminated_childs_factory_whose_destructor_panics_is_contained() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (sched, sup, before) = setup(Supervisor::one_for_one());
    run(sup.start_child(armed_child("x", &drops))).unwrap();
    run(sup.terminate_child("x")).expect("terminated, and answered");
    assert_lives_on(&sched, &sup, before, &drops);
}

#[test]
fn a_temporary_childs_factory_whose_destructor_panics_is_contained_at_its_end() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (sched, sup, before) = setup(Supervisor::one_for_one());
    let pid = run(sup.start_child(armed_child("t", &drops).restart(Restart::Temporary))).unwrap();
    sched.handle().addr::<Cmd>(pid).send(Cmd::Finish).unwrap();
    assert_lives_on(&sched, &sup, before, &drops);
}

#[test]
fn a_refused_start_childs_spec_whose_destructor_panics_is_contained() {
    // Refused as a duplicate, and failed in its factory: both specs are dropped by the
    // supervisor, and both callers get their typed error.
    let drops = Arc::new(AtomicUsize::new(0));
    let (sched, sup, before) = setup(Supervisor::one_for_one());
    let duplicate = run(sup.start_child(armed_child("bystander", &drops)));
    assert!(
        matches!(duplicate, Err(SupervisorError::DuplicateId(_))),
        "{duplicate:?}"
    );
    assert_lives_on(&sched, &sup, before, &drops);

    let again = Arc::new(AtomicUsize::new(0));
    let grenade = Grenade(again.clone());
    let failing = ChildSpec::new("refused", move |_start| {
        let _armed = &grenade;
        Err(SpawnError::Init(InitError::failed("no resource")))
    });
    let failed = run(sup.start_child(failing));
    assert!(
        matches!(failed, Err(SupervisorError::Start(_))),
        "{failed:?}"
    );
    wait_until("the second grenade's drop", || again.load(SeqCst) == 1);
    assert_eq!(bystander(&sup), before, "the bystander was not touched");
    wait_until("both counted", || sched.metrics().destructor_panics == 2);
}

#[test]
fn a_supervisor_that_gives_up_ends_as_it_would_without_the_panicking_destructor() {
    // Its state — the children's specs — is dropped as it ends: contained, so it ends
    // `Shutdown` (OTP's `shutdown` for a supervisor that reached its intensity), not
    // `Panicked`, which its own parent would read differently.
    let drops = Arc::new(AtomicUsize::new(0));
    quiet_panics();
    let sched = scheduler(2);
    let sup = run(Supervisor::one_for_one()
        .max_restarts(0, Duration::from_secs(60))
        .child(armed_child("a", &drops))
        .start(sched.handle()))
    .unwrap();
    let down = sched.monitor(sup.pid());
    let child = run(sup.which_children()).unwrap()[0].pid.unwrap();
    sched
        .handle()
        .addr::<Cmd>(child)
        .send(Cmd::Fail("once"))
        .unwrap();
    let down = run(down);
    assert!(down.reason.is_shutdown(), "it gave up: {}", down.reason);
    assert_eq!(drops.load(SeqCst), 1, "its spec dropped once");
    wait_until("counted", || sched.metrics().destructor_panics == 1);
}

#[test]
fn a_start_childs_init_error_whose_destructor_panics_is_contained() {
    // The factory's `Err` — a failed `init`, its error a user value — is reported to the
    // caller as text, and dropped by the supervisor, contained.
    let drops = Arc::new(AtomicUsize::new(0));
    let (sched, sup, before) = setup(Supervisor::one_for_one());
    let error_drops = drops.clone();
    let failing = ChildSpec::new("refused", move |_start| {
        let grenade = Grenade(error_drops.clone());
        Err(SpawnError::Init(InitError::Failed(Box::new(GrenadeError(
            grenade,
        )))))
    });
    let failed = run(sup.start_child(failing));
    assert!(
        matches!(&failed, Err(SupervisorError::Start(why)) if why.contains("a failure holding a grenade")),
        "{failed:?}"
    );
    assert_lives_on(&sched, &sup, before, &drops);
}

#[test]
fn a_failed_start_disposes_of_the_specs_it_did_not_reach() {
    // Child `a` cannot start: the supervisor ends saying so, and the specs after it — never
    // started, dropped by the supervisor — cannot turn that into a panic.
    let drops = Arc::new(AtomicUsize::new(0));
    quiet_panics();
    let sched = scheduler(2);
    let failing = ChildSpec::new("a", |_start| {
        Err(SpawnError::Init(InitError::failed("no resource")))
    });
    let started = run(Supervisor::one_for_one()
        .child(failing)
        .child(armed_child("b", &drops))
        .start(sched.handle()));
    let refused = started.expect_err("child `a` cannot start");
    assert!(
        matches!(&refused, SupervisorError::Start(why) if why.contains("`a` could not be started")),
        "{refused:?}"
    );
    assert_eq!(drops.load(SeqCst), 1, "b's spec dropped once");
    wait_until("counted", || sched.metrics().destructor_panics == 1);
}
