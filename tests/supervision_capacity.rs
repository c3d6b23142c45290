//! Supervisors under a scheduler's `mailbox_capacity`: the capacity bounds the user's processes
//! — a supervisor's children among them — and never a supervisor, whose mailbox holds only its
//! API's requests (each awaited by its caller) and its own retries. Refused, those made a live
//! supervisor look ended: `start` waited for ever under capacity 0, a nested tree failed to
//! start, and concurrent requests failed with `Unreachable`.
//!
//! Children report their first poll on a channel; deadlines are hang guards only.

mod supervision_common;

use procsched::error::SendErrorKind;
use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Supervisor, SupervisorRef};
use std::future::Future;
use std::sync::{mpsc, Mutex};
use supervision_common::*;

fn scheduler_with_capacity(capacity: usize) -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .mailbox_capacity(capacity)
        .build()
        .unwrap()
}

/// A child `id` that reports `id` on `ran` when its body first runs, then waits for a
/// [`Cmd`] (a puppet).
fn reporting(id: &'static str, ran: &mpsc::Sender<&'static str>) -> ChildSpec {
    let ran = Mutex::new(ran.clone());
    ChildSpec::new(id, move |start| {
        let ran = ran.lock().unwrap().clone();
        start.spawn_fn(move |cx: ProcessCx<Cmd>| async move {
            let _ = ran.send(id);
            puppet(cx).await
        })
    })
}

/// The next `n` reports of `ran`, sorted.
fn reports(ran: &mpsc::Receiver<&'static str>, n: usize) -> Vec<&'static str> {
    let mut ids: Vec<_> = (0..n).map(|_| ran.recv_timeout(GUARD).unwrap()).collect();
    ids.sort_unstable();
    ids
}

/// A send to the user's process `pid` is refused by the capacity (`capacity` messages fill it).
#[track_caller]
fn assert_bounded(sched: &Scheduler, pid: Pid, capacity: usize) {
    let addr = sched.handle().addr::<Cmd>(pid);
    for _ in 0..capacity {
        addr.send(Cmd::Fail("filling the mailbox")).unwrap();
    }
    let refused = addr.send(Cmd::Finish).unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::MailboxFull);
}

#[test]
fn start_returns_and_children_run_and_are_restarted_under_capacity_0_and_1() {
    for capacity in [0, 1] {
        let sched = scheduler_with_capacity(capacity);
        let (ran_tx, ran) = mpsc::channel();
        let supervisor = Supervisor::one_for_one()
            .child(reporting("a", &ran_tx))
            .child(reporting("b", &ran_tx));
        let supervisor = run(supervisor.start(sched.handle()))
            .unwrap_or_else(|error| panic!("capacity {capacity}: {error}"));
        assert_eq!(reports(&ran, 2), ["a", "b"], "capacity {capacity}");
        // A child's end reaches the supervisor as an exit signal, which no capacity refuses.
        let a = run(supervisor.which_children()).unwrap()[0].pid.unwrap();
        sched.terminate(a).unwrap();
        assert_eq!(reports(&ran, 1), ["a"], "capacity {capacity}: restarted");
        assert_eq!(run(supervisor.restarts()).unwrap(), 1);
        sched.shutdown(GUARD);
    }
}

#[test]
fn a_nested_tree_starts_under_capacity_0_and_its_children_stay_bounded() {
    let sched = scheduler_with_capacity(0);
    let (ran_tx, ran) = mpsc::channel();
    let sub = Supervisor::one_for_all()
        .child(reporting("inner", &ran_tx))
        .into_child("sub");
    let root = Supervisor::one_for_one()
        .child(reporting("outer", &ran_tx))
        .child(sub);
    let root = run(root.start(sched.handle())).expect("the tree started");
    assert_eq!(reports(&ran, 2), ["inner", "outer"]);
    let sub = run(root.which_children()).unwrap()[1].pid.unwrap();
    let sub = SupervisorRef::from_pid(sched.handle(), sub);
    let inner = run(sub.which_children()).unwrap()[0].pid.unwrap();
    // The override is the supervisors' only: their children are the user's processes.
    assert_bounded(&sched, inner, 0);
    sched.shutdown(GUARD);
}

/// A request made `n` times at once, each sent before any is awaited.
async fn all_at_once<F: Future>(
    asks: impl Iterator<Item = F>,
    sent: mpsc::Sender<()>,
) -> Vec<F::Output> {
    let mut asks: Vec<_> = asks
        .map(|ask| Box::pin(futures::future::maybe_done(ask)))
        .collect();
    for ask in &mut asks {
        // The first poll sends the request (or is refused at once).
        let _ = futures::poll!(ask.as_mut());
    }
    sent.send(()).unwrap();
    let mut answers = Vec::new();
    for ask in &mut asks {
        ask.as_mut().await;
        answers.push(ask.as_mut().take_output().unwrap());
    }
    answers
}

#[test]
fn concurrent_requests_to_a_busy_supervisor_under_capacity_1_are_all_answered() {
    const REQUESTS: usize = 32;
    let sched = scheduler_with_capacity(1);
    // The supervisor's first step starts this child, whose factory holds it until the
    // requests wait in its mailbox.
    let (entered_tx, entered) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let (entered_tx, gate) = (Mutex::new(entered_tx), Mutex::new(gate));
    let held = ChildSpec::new("held", move |start| {
        entered_tx.lock().unwrap().send(()).unwrap();
        let _ = gate.lock().unwrap().recv_timeout(GUARD);
        start.spawn_fn(puppet)
    });
    let supervisor = Supervisor::one_for_one()
        .child(held)
        .spawn(sched.handle())
        .unwrap();
    entered.recv_timeout(GUARD).unwrap();
    let (sent_tx, sent) = mpsc::channel();
    let asker = {
        let supervisor = supervisor.clone();
        std::thread::spawn(move || {
            let asks = (0..REQUESTS).map(|i| {
                let supervisor = supervisor.clone();
                async move {
                    if i % 2 == 0 {
                        supervisor.restarts().await.map(drop)
                    } else {
                        supervisor.which_children().await.map(drop)
                    }
                }
            });
            run(all_at_once(asks, sent_tx))
        })
    };
    sent.recv_timeout(GUARD).unwrap();
    open.send(()).unwrap();
    let answers = asker.join().unwrap();
    assert_eq!(answers.len(), REQUESTS);
    for answer in answers {
        assert_eq!(answer, Ok(()), "a live supervisor answers every request");
    }
    let child = run(supervisor.which_children()).unwrap()[0].pid.unwrap();
    assert_bounded(&sched, child, 1);
    sched.shutdown(GUARD);
}
