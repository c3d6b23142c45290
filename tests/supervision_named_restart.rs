//! A restarted named child never runs beside its previous instance (issue 33: not kameo's
//! overlapping restarts, its issues #387 and #392). The shape: a root supervisor, a middle
//! supervisor `mid`, and its child `c`, registered as "c", which traps exits and cleans up on its
//! supervisor's cancel. Killing `mid` leaves the old `c` cleaning up, still holding its name,
//! while the root restarts `mid`, which starts a new `c`: the new instance is made only once the
//! old one has ended — also when the old one outlasts the start's patience (that start fails,
//! having made nothing).
//!
//! Instances are counted from their factory call (an instance exists from its spawn: a state
//! machine's `init` runs inside it) to the drop of their body (before their name is released).
//! The old instance's cleanup waits for the test's go, given once the new `mid` is waiting:
//! without the fix its factory has run by then, every time. Deadlines are hang guards only.

mod supervision_common;
mod support;

use procsched::metrics::ProcessState;
use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Supervisor, SupervisorRef};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervision_common::*;
use support::wait_until;
use tokio::sync::oneshot;

/// How many instances of `c` are alive, the most ever alive at once, and how many were made.
#[derive(Default)]
struct Instances {
    live: AtomicUsize,
    most: AtomicUsize,
    made: AtomicUsize,
}

/// Alive while an instance is: made in the factory, dropped with the instance's body.
struct Alive(Arc<Instances>);

impl Alive {
    fn new(instances: &Arc<Instances>) -> Alive {
        let live = instances.live.fetch_add(1, SeqCst) + 1;
        instances.most.fetch_max(live, SeqCst);
        instances.made.fetch_add(1, SeqCst);
        Alive(Arc::clone(instances))
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, SeqCst);
    }
}

/// What the next cancelled instance's cleanup waits for (nothing if empty).
type Gate = Arc<Mutex<Option<oneshot::Receiver<()>>>>;

/// The child `c`, registered as "c": traps exits, and on its supervisor's cancel cleans up —
/// waits for the gate's go, if one is set — then ends.
fn child(instances: &Arc<Instances>, gate: &Gate) -> ChildSpec {
    let (instances, gate) = (Arc::clone(instances), Arc::clone(gate));
    ChildSpec::new("c", move |start| {
        let alive = Alive::new(&instances);
        let gate = Arc::clone(&gate);
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            let _alive = alive;
            cx.trap_exit(true);
            let cancelled = loop {
                if let Err(cancelled) = cx.recv_any().await {
                    break cancelled;
                }
            };
            let go = gate.lock().unwrap().take();
            if let Some(go) = go {
                let _ = go.await;
            }
            Err::<(), BoxError>(cancelled.into())
        })
    })
    .register_as("c")
}

/// The root, with `mid` (registered as "mid", so the test sees each new one) and its `c`.
fn tree(sched: &Scheduler, instances: &Arc<Instances>, gate: &Gate) -> SupervisorRef {
    let mid = Supervisor::one_for_one()
        .child(child(instances, gate))
        .into_child("mid")
        .register_as("mid");
    let root = Supervisor::one_for_one().max_restarts(1_000, Duration::from_secs(3600));
    run(root.child(mid).start(sched.handle())).unwrap()
}

/// Sets the gate the next cancelled instance waits on; its go.
fn close_gate(gate: &Gate) -> oneshot::Sender<()> {
    let (go, wait) = oneshot::channel();
    *gate.lock().unwrap() = Some(wait);
    go
}

/// Waits until a `mid` other than `old` is registered and has returned from its first poll
/// (idle: inside its start of `c`, waiting); its PID.
fn new_mid_waiting(sched: &Scheduler, old: Pid) -> Pid {
    let mut new = None;
    wait_until("the new mid waiting in its start", || {
        new = sched.handle().whereis("mid").filter(|&mid| {
            mid != old
                && sched
                    .process_info(mid)
                    .is_some_and(|info| info.steps >= 1 && info.state == ProcessState::Idle)
        });
        new.is_some()
    });
    new.unwrap()
}

/// Waits until "c" names an instance other than `old`; its PID.
fn new_c(sched: &Scheduler, old: Pid) -> Pid {
    let mut new = None;
    wait_until("the new c registered", || {
        new = sched.handle().whereis("c").filter(|&c| c != old);
        new.is_some()
    });
    new.unwrap()
}

#[test]
fn a_restarted_named_child_is_made_only_once_its_previous_instance_has_ended() {
    const ROUNDS: u64 = 200;
    let sched = scheduler(2);
    let (instances, gate) = (Arc::new(Instances::default()), Gate::default());
    let root = tree(&sched, &instances, &gate);
    for round in 1..=ROUNDS {
        let (old_mid, old_c) = (
            sched.handle().whereis("mid").unwrap(),
            sched.handle().whereis("c").unwrap(),
        );
        // Every other round the old `c` cleans up until the new `mid` waits in its start; the
        // others race its end against the restart.
        let go = (round % 2 == 1).then(|| close_gate(&gate));
        let old_c_down = sched.monitor(old_c);
        sched.terminate(old_mid).unwrap();
        if let Some(go) = go {
            new_mid_waiting(&sched, old_mid);
            assert_eq!(
                instances.made.load(SeqCst) as u64,
                round,
                "round {round}: a new c was made while the old one cleaned up"
            );
            go.send(()).unwrap();
        }
        assert!(run(old_c_down).reason.is_killed(), "round {round}");
        new_c(&sched, old_c);
        assert_eq!(
            instances.most.load(SeqCst),
            1,
            "round {round}: two instances of c alive at once"
        );
        // The root answers once its restart is over: the new `c` has started (trapping).
        assert_eq!(run(root.restarts()).unwrap(), round, "one restart per kill");
    }
    assert_eq!(instances.made.load(SeqCst) as u64, ROUNDS + 1);
    sched.shutdown(GUARD);
}

#[test]
fn a_holder_past_the_patience_fails_the_start_without_making_an_instance() {
    let sched = scheduler(2);
    let (instances, gate) = (Arc::new(Instances::default()), Gate::default());
    let root = tree(&sched, &instances, &gate);
    let (old_mid, old_c) = (
        sched.handle().whereis("mid").unwrap(),
        sched.handle().whereis("c").unwrap(),
    );
    // The old `c` cleans up until the test's go: past the new `mid`'s patience for "c" (5 s,
    // `c`'s default `Timeout(5 s)`).
    let go = close_gate(&gate);
    sched.terminate(old_mid).unwrap();
    let new_mid = new_mid_waiting(&sched, old_mid);
    let reason = run(sched.monitor(new_mid)).reason;
    assert!(reason.is_failed(), "{reason:?}");
    assert!(
        reason.to_string().contains("did not end within"),
        "{reason}"
    );
    assert_eq!(
        (instances.made.load(SeqCst), instances.live.load(SeqCst)),
        (1, 1),
        "the failed start made no instance: only the old c lives"
    );
    go.send(()).unwrap();
    new_c(&sched, old_c);
    assert_eq!(instances.most.load(SeqCst), 1, "never two instances of c");
    let children = run(root.which_children()).unwrap();
    let mid = SupervisorRef::from_pid(sched.handle(), children[0].pid.unwrap());
    let c = run(mid.which_children()).unwrap()[0].pid;
    assert_eq!(c, sched.handle().whereis("c"));
    assert_eq!(
        (instances.live.load(SeqCst), sched.live_processes()),
        (1, 3),
        "the root, its mid, and one c: nothing left over"
    );
    sched.shutdown(GUARD);
}

#[test]
fn a_name_held_by_a_process_that_hears_its_cancel_and_runs_on_is_taken() {
    // A plain `cancel` does not make a process on its way out: one that hears it and runs on
    // holds its name as any live process does, and a start wanting it fails at once (OTP's
    // `already_started`). With `Infinity` as the child's patience, a start that waited for
    // this holder would wait for good.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (heard, hears) = std::sync::mpsc::channel::<()>();
    let holder = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            let _ = cx.cancelled().await;
            let _ = heard.send(());
            std::future::pending::<()>().await;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    sched.register("svc", holder.pid()).unwrap();
    sched.cancel(holder.pid()).unwrap();
    hears
        .recv_timeout(support::HANG_GUARD)
        .expect("hang guard: the cancel heard");
    let supervisor = run(Supervisor::one_for_one().start(sched.handle())).unwrap();
    let spec = ChildSpec::new("svc", |start| {
        start.spawn_fn(|cx: ProcessCx<()>| async move {
            let _ = cx.cancelled().await;
            Ok::<_, BoxError>(())
        })
    })
    .register_as("svc")
    .shutdown(procsched::supervision::ChildShutdown::Infinity);
    let refused = run(supervisor.start_child(spec)).unwrap_err();
    assert!(refused.to_string().contains("taken"), "{refused}");
    assert_eq!(sched.handle().whereis("svc"), Some(holder.pid()));
    sched.shutdown(Duration::from_millis(100));
}
