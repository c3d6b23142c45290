//! Loom models of the task state protocol, against the toy scheduler.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use crate::executor::task::tests::toy::{probe, spawn, take_waker, Toy};
use crate::executor::task::DeferredWake;
use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::model::model;
use crate::loom::{lock, thread, Arc};

/// How a model fires the task's waker: by value, by reference, or as a `DeferredWake`
/// (`task/deferred_wake.rs`: prepared as under a mailbox lock, the waker then dropped, as the
/// slot's may be, and fired after). Each consumes the waker.
type Fire = fn(std::task::Waker);

fn by_value(waker: std::task::Waker) {
    waker.wake();
}

fn by_ref(waker: std::task::Waker) {
    waker.wake_by_ref();
    drop(waker);
}

fn deferred(waker: std::task::Waker) {
    let wake = DeferredWake::prepare(&waker);
    drop(waker);
    wake.fire();
}

/// An event set, then the waker fired by `fire`, while a worker polls the task (queued again
/// just before): exactly one more poll sees the event — the wake is neither lost nor doubled,
/// and the task is never polled twice at once. (A lost wake leaves the join waiting: loom
/// reports the deadlock.)
fn wake_while_running_causes_exactly_one_more_poll(fire: Fire) {
    model(move || {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all(); // poll 1: Pending, waker stored
        let waker = take_waker(&probe);
        // Queue it again, so a worker polls it while the waker fires.
        waker.wake_by_ref();

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        probe.event.store(true, SeqCst);
        fire(waker);
        worker.join().unwrap();
        toy.run_all();

        // The event set before the wake was seen by a poll that started after it.
        let polls = loom::future::block_on(join).expect("completes");
        assert!(polls == 2 || polls == 3, "polls = {polls}");
        assert_eq!(probe.polls.load(SeqCst), polls, "no poll after completion");
        assert!(lock(&toy.queue).is_empty());
    });
}

/// The waker fired by `fire` while the final poll may be running or done: the task completes
/// once, its future is dropped once, and a late `Notified` (if any) is harmless.
fn wake_racing_with_completion(fire: Fire) {
    model(move || {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all();
        let waker = take_waker(&probe);
        probe.event.store(true, SeqCst);
        waker.wake_by_ref();

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        // Fires while the final poll runs, or after completion.
        fire(waker);
        worker.join().unwrap();
        toy.run_all();
        assert_eq!(loom::future::block_on(join).unwrap(), 2);
        assert_eq!(probe.drops.load(SeqCst), 1);
    });
}

#[test]
fn loom_wake_while_running_causes_exactly_one_more_poll() {
    wake_while_running_causes_exactly_one_more_poll(by_value);
}

/// `wake_by_ref` against a queued task must still write the word (`state.rs`, "Wake by
/// reference"), or the poll already under way could read the event unset while the wake saw
/// `SCHEDULED` and did nothing.
#[test]
fn loom_wake_by_ref_while_running_causes_exactly_one_more_poll() {
    wake_while_running_causes_exactly_one_more_poll(by_ref);
}

#[test]
fn loom_deferred_wake_while_running_causes_exactly_one_more_poll() {
    wake_while_running_causes_exactly_one_more_poll(deferred);
}

#[test]
fn loom_wake_racing_with_completion() {
    wake_racing_with_completion(by_value);
}

#[test]
fn loom_deferred_wake_racing_with_completion() {
    wake_racing_with_completion(deferred);
}

#[test]
fn loom_join_handle_drop_racing_with_completion() {
    model(|| {
        let toy = Arc::new(Toy::default());
        let output_drops = Arc::new(AtomicUsize::new(0));
        struct Output(Arc<AtomicUsize>);
        impl Drop for Output {
            fn drop(&mut self) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        let out = Output(output_drops.clone());
        let join = spawn(&toy, async move { out });

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        drop(join);
        worker.join().unwrap();
        assert_eq!(output_drops.load(SeqCst), 1, "output dropped exactly once");
    });
}

#[test]
fn loom_join_handle_waker_registration_racing_with_completion() {
    model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        probe.event.store(true, SeqCst);
        let mut join = spawn(&toy, future);

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        // Polls the handle (registering its waker) while the task completes; loom's block_on
        // parks until that waker fires, so a lost join wake-up is a deadlock loom reports.
        let out = loom::future::block_on(&mut join);
        worker.join().unwrap();
        assert_eq!(out.unwrap(), 1);
    });
}

#[test]
fn loom_abort_racing_with_a_poll() {
    model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all();
        take_waker(&probe).wake(); // queued again

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        join.abort();
        worker.join().unwrap();
        toy.run_all();

        let err = loom::future::block_on(join).unwrap_err();
        assert!(err.is_cancelled());
        assert_eq!(probe.drops.load(SeqCst), 1, "future dropped exactly once");
        assert!(probe.polls.load(SeqCst) <= 2);
        toy.shutdown();
    });
}

#[test]
fn loom_shutdown_racing_with_a_wake() {
    model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all();
        let waker = take_waker(&probe);

        let waking = thread::spawn(move || waker.wake());
        toy.shutdown();
        waking.join().unwrap();
        // Whatever the wake queued finds the task complete and just drops its reference.
        toy.run_all();
        assert!(loom::future::block_on(join).unwrap_err().is_cancelled());
        assert_eq!(probe.drops.load(SeqCst), 1);
    });
}
