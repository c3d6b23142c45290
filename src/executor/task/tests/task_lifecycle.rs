//! Every path through the task's unsafe code (allocation, vtable, wakers, join handle, dealloc),
//! small enough for Miri: `cargo +nightly miri test --lib executor::task`.

use super::toy::{probe, spawn, take_waker, Toy};
use crate::executor::task::JoinError;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

#[test]
fn output_is_read_through_the_join_handle() {
    let toy = Arc::new(Toy::default());
    let mut join = spawn(&toy, async { String::from("out") });
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    assert!(poll_once(&mut join, &waker).is_pending());
    toy.run_all();
    match poll_once(&mut join, &waker) {
        Poll::Ready(Ok(s)) => assert_eq!(s, "out"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn waker_clones_wake_by_value_and_by_reference() {
    let toy = Arc::new(Toy::default());
    let (future, probe) = probe();
    let join = spawn(&toy, future);
    toy.run_all();
    let waker = take_waker(&probe);
    let clones: Vec<Waker> = (0..4).map(|_| waker.clone()).collect();
    waker.wake_by_ref();
    for clone in clones {
        clone.wake(); // already scheduled: drops its reference
    }
    toy.run_all();
    assert_eq!(probe.polls.load(SeqCst), 2, "many wakes, one poll");
    probe.event.store(true, SeqCst);
    waker.wake();
    toy.run_all();
    assert_eq!(futures::executor::block_on(join).unwrap(), 3);
}

#[test]
fn detached_output_is_dropped_by_the_completer() {
    let toy = Arc::new(Toy::default());
    let drops = Arc::new(AtomicUsize::new(0));
    let out = Counted(drops.clone());
    drop(spawn(&toy, async move { out }));
    toy.run_all();
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn output_is_dropped_with_a_handle_dropped_after_completion() {
    let toy = Arc::new(Toy::default());
    let drops = Arc::new(AtomicUsize::new(0));
    let out = Counted(drops.clone());
    let join = spawn(&toy, async move { out });
    toy.run_all();
    assert_eq!(drops.load(SeqCst), 0, "the handle owns it");
    drop(join);
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn the_latest_join_waker_is_woken() {
    let toy = Arc::new(Toy::default());
    let (future, probe) = probe();
    let mut join = spawn(&toy, future);
    let first = Arc::new(CountingWaker::default());
    let second = Arc::new(CountingWaker::default());
    assert!(poll_once(&mut join, &Waker::from(first.clone())).is_pending());
    assert!(poll_once(&mut join, &Waker::from(second.clone())).is_pending());
    // Same waker again: no re-registration.
    assert!(poll_once(&mut join, &Waker::from(second.clone())).is_pending());
    probe.event.store(true, SeqCst);
    toy.run_all();
    assert_eq!(first.0.load(SeqCst), 0);
    assert_eq!(second.0.load(SeqCst), 1);
    assert!(poll_once(&mut join, &Waker::from(second)).is_ready());
}

#[test]
fn join_handle_dropped_with_a_registered_waker() {
    let toy = Arc::new(Toy::default());
    let (future, probe) = probe();
    let mut join = spawn(&toy, future);
    let waker = Arc::new(CountingWaker::default());
    assert!(poll_once(&mut join, &Waker::from(waker.clone())).is_pending());
    drop(join);
    probe.event.store(true, SeqCst);
    toy.run_all();
    assert_eq!(waker.0.load(SeqCst), 0, "nobody to wake");
    assert_eq!(
        Arc::strong_count(&waker),
        1,
        "the registered waker was dropped"
    );
}

#[test]
fn abort_when_idle_queued_and_complete() {
    let toy = Arc::new(Toy::default());
    // Idle.
    let (future, probe_idle) = probe();
    let join = spawn(&toy, future);
    toy.run_all();
    join.abort();
    toy.run_all();
    assert!(futures::executor::block_on(join)
        .unwrap_err()
        .is_cancelled());
    assert_eq!(probe_idle.drops.load(SeqCst), 1);
    // Queued, never polled.
    let (future, probe_queued) = probe();
    let join = spawn(&toy, future);
    join.abort();
    toy.run_all();
    assert!(futures::executor::block_on(join)
        .unwrap_err()
        .is_cancelled());
    assert_eq!(probe_queued.polls.load(SeqCst), 0);
    // Complete: the output wins.
    let join = spawn(&toy, async { 5 });
    toy.run_all();
    join.abort();
    assert_eq!(futures::executor::block_on(join).unwrap(), 5);
}

#[test]
fn panics_in_poll_and_in_destructors_are_caught() {
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("output drop");
        }
    }
    let toy = Arc::new(Toy::default());
    let join = spawn(&toy, async { panic!("in poll") });
    toy.run_all();
    let err: JoinError = futures::executor::block_on(join).unwrap_err();
    assert_eq!(err.panic_message(), Some("in poll"));

    // A detached output whose destructor panics: swallowed by the completer.
    drop(spawn(&toy, async { PanicOnDrop }));
    toy.run_all();
    // ... and by a handle dropped after completion.
    let join = spawn(&toy, async { PanicOnDrop });
    toy.run_all();
    drop(join);
}

#[test]
fn shutdown_cancels_idle_tasks_and_stale_notifieds_are_dropped() {
    let toy = Arc::new(Toy::default());
    let (future, probe) = probe();
    let join = spawn(&toy, future);
    toy.run_all();
    let waker = take_waker(&probe);
    waker.wake_by_ref(); // a Notified waits in the queue
    let queued = toy.queue.lock().unwrap().pop_front().expect("queued");
    toy.shutdown();
    queued.run(); // finds the task complete: drops its reference only
    assert_eq!(probe.polls.load(SeqCst), 1);
    assert!(futures::executor::block_on(join)
        .unwrap_err()
        .is_cancelled());
    // The last reference is a waker: it deallocates the task.
    drop(waker);
}

#[test]
fn wakes_from_another_thread_while_running() {
    let toy = Arc::new(Toy::default());
    let (future, probe) = probe();
    let join = spawn(&toy, future);
    toy.run_all();
    let waker = Arc::new(Mutex::new(Some(take_waker(&probe))));
    let remote = {
        let waker = waker.clone();
        let probe = probe.clone();
        std::thread::spawn(move || {
            probe.event.store(true, SeqCst);
            if let Some(w) = waker.lock().unwrap().take() {
                w.wake();
            }
        })
    };
    while !join.is_finished() {
        toy.run_all();
        std::thread::yield_now();
    }
    remote.join().unwrap();
    assert!(futures::executor::block_on(join).is_ok());
}

/// The broadcast wake (`state.rs`, "Wake by reference"): an idle task is queued (a reference taken
/// for its `Notified`), a queued one stays queued once, a completed one is left alone.
#[test]
fn broadcast_wake_queues_idle_tasks_once_and_skips_completed_ones() {
    let toy = Arc::new(Toy::default());
    let (future, probe) = probe();
    let join = spawn(&toy, future);
    let done = spawn(&toy, async { 5 });
    toy.run_all(); // the probe idles (waker stored), `done` completes
    toy.wake_all();
    toy.wake_all(); // already queued: no second `Notified`
    assert_eq!(lock_len(&toy), 1, "only the idle task was queued, once");
    probe.event.store(true, SeqCst);
    toy.run_all();
    drop(take_waker(&probe));
    assert!(matches!(
        poll_once(&mut Box::pin(join), Waker::noop()),
        Poll::Ready(Ok(2))
    ));
    assert!(matches!(
        poll_once(&mut Box::pin(done), Waker::noop()),
        Poll::Ready(Ok(5))
    ));
    toy.wake_all();
    assert_eq!(lock_len(&toy), 0);
    toy.shutdown();
}

fn lock_len(toy: &Toy) -> usize {
    crate::loom::lock(&toy.queue).len()
}
