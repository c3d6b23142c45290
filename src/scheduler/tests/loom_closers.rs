//! Loom model of the forced stop's closes (`closers.rs`): closers racing on the queue against
//! the waiter.

use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::context::HostId;
use crate::scheduler::closers::{Close, Closed, Closing};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Counts its close.
struct StandIn(Arc<AtomicUsize>);

impl Close for StandIn {
    fn close(self) -> bool {
        self.0.fetch_add(1, SeqCst);
        true
    }
}

/// The walk the closers are given: fills their queue with the next piece; `false` once done.
type Walk = Box<dyn FnMut(&mut VecDeque<StandIn>) -> bool + Send>;

/// Runs a hand-off's closer (started by hand: loom has no clock) beside the waiter's first
/// closer on `closing`, which holds two tasks counted in `closes`, and checks the end: the wait
/// ends once every close returned, having seen both tasks each closed exactly once, and both
/// closers leave. `closes` is read before the hand-off is joined, so only the wait orders the
/// closes before it.
fn both_closers_close_each_task_once(closing: Arc<Closing<StandIn>>, closes: &AtomicUsize) {
    let hand_off = {
        let closing = closing.clone();
        thread::spawn(move || {
            closing.count_closer();
            closing.run_closer();
        })
    };
    // Loom's `wait_timeout` never times out: the deadline is never reached here.
    let closed = Closing::wait(&closing, Some(Instant::now() + Duration::from_secs(60)));
    assert_eq!(
        closed,
        Closed {
            dropped: 2,
            unfinished: 0,
            unwalked: false,
        }
    );
    assert_eq!(closes.load(SeqCst), 2, "each task closed once");
    hand_off.join().unwrap();
}

/// Steps 1–3: the waiter's first closer and a hand-off's closer (started by hand: loom has no
/// clock) take the tasks, each exactly once; the wait ends once every close returned, having
/// seen them all, and both closers leave.
#[test]
fn loom_forced_closes_run_once_and_the_wait_ends() {
    model(|| {
        let closes = Arc::new(AtomicUsize::new(0));
        let tasks = vec![StandIn(closes.clone()), StandIn(closes.clone())];
        let closing = Arc::new(Closing::new(HostId::next(), None, tasks));
        both_closers_close_each_task_once(closing, &closes);
    });
}

/// Steps 1–3 with the tasks coming from a walk in pieces (`close_all`'s, over the process
/// table): the waiter's first closer and a hand-off's closer race to walk the pieces and take
/// the tasks; each task is closed exactly once, the wait ends once the walk is exhausted and
/// every close returned, and both closers leave.
#[test]
fn loom_forced_closes_walked_in_pieces_run_once_and_the_wait_ends() {
    model(|| {
        let closes = Arc::new(AtomicUsize::new(0));
        let mut pieces =
            vec![vec![StandIn(closes.clone())], vec![StandIn(closes.clone())]].into_iter();
        let walk: Walk = Box::new(move |queue| match pieces.next() {
            Some(piece) => {
                queue.extend(piece);
                true
            }
            None => false,
        });
        let closing = Arc::new(Closing::new(HostId::next(), None, Vec::new()).walking(Some(walk)));
        both_closers_close_each_task_once(closing, &closes);
    });
}
