//! Unit tests of the forced stop's closes: the closer threads, the hand-off, the walk in pieces.

use super::*;
use crate::scheduler::shutdown::{stopping_here, FORCED_STOP_WAIT};
use std::sync::mpsc;

/// A stand-in task: tells whether its closer is marked as stopping `host`, then blocks
/// until `release` says so (or its sender is gone).
struct StandIn {
    host: HostId,
    marked: mpsc::Sender<bool>,
    release: Option<mpsc::Receiver<()>>,
}

impl Close for StandIn {
    fn close(self) -> bool {
        let _ = self.marked.send(stopping_here(self.host));
        if let Some(release) = self.release {
            let _ = release.recv();
        }
        true
    }
}

const HANG_GUARD: Duration = Duration::from_secs(60);

/// `n` stand-ins for `host` that report on `marked` and return at once.
fn stand_ins(host: HostId, marked: &mpsc::Sender<bool>, n: usize) -> Vec<StandIn> {
    (0..n)
        .map(|_| StandIn {
            host,
            marked: marked.clone(),
            release: None,
        })
        .collect()
}

/// A stand-in for `host` whose close blocks until the returned sender says so, followed by `n`
/// that return at once; all report on `marked`.
fn blocked_then(
    host: HostId,
    marked: &mpsc::Sender<bool>,
    n: usize,
) -> (Vec<StandIn>, mpsc::Sender<()>) {
    let (release, blocked) = mpsc::channel();
    let mut tasks = vec![StandIn {
        host,
        marked: marked.clone(),
        release: Some(blocked),
    }];
    tasks.extend(stand_ins(host, marked, n));
    (tasks, release)
}

#[test]
fn closes_run_on_closer_threads_marked_as_stopping_the_scheduler() {
    let host = HostId::next();
    let (marked, closed) = mpsc::channel();
    let tasks = stand_ins(host, &marked, 3);
    let closed_all = close_all(host, None, tasks, None, Instant::now() + HANG_GUARD);
    assert_eq!(
        closed_all,
        Closed {
            dropped: 3,
            unfinished: 0,
            unwalked: false,
        }
    );
    let marks: Vec<bool> = closed.try_iter().collect();
    assert_eq!(marks, [true; 3], "a shutdown from a close returns at once");
    assert!(
        !stopping_here(host),
        "the waiter's own thread is not marked"
    );
}

#[test]
fn a_blocked_close_is_left_at_the_deadline_and_the_ones_behind_it_are_handed_off() {
    let host = HostId::next();
    let (marked, closed) = mpsc::channel();
    let (tasks, release) = blocked_then(host, &marked, 3);
    let closed_all = close_all(host, None, tasks, None, Instant::now() + FORCED_STOP_WAIT);
    assert!(closed_all.unfinished >= 1, "{closed_all:?}");
    // The three behind the blocked one are closed (by a fresh closer) while it blocks.
    for _ in 0..4 {
        assert!(closed.recv_timeout(HANG_GUARD).unwrap());
    }
    release.send(()).unwrap();
}

/// A walk that yields `tasks` `per_piece` at a time, counting its pieces.
fn walk_of<T: Send + 'static>(
    tasks: Vec<T>,
    per_piece: usize,
    pieces: Arc<std::sync::atomic::AtomicUsize>,
) -> Walk<T> {
    let mut tasks = tasks.into_iter();
    Box::new(move |queue| {
        pieces.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let before = queue.len();
        queue.extend(tasks.by_ref().take(per_piece));
        queue.len() > before
    })
}

#[test]
fn an_empty_walk_starts_no_closer() {
    let host = HostId::next();
    let pieces = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let walk = walk_of(Vec::<StandIn>::new(), 4, pieces.clone());
    let closed = close_all(
        host,
        None,
        Vec::new(),
        Some(walk),
        Instant::now() + HANG_GUARD,
    );
    assert_eq!(closed, Closed::default());
    assert_eq!(pieces.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn the_tasks_of_a_walk_in_pieces_are_each_closed_once() {
    let host = HostId::next();
    let (marked, closed) = mpsc::channel();
    let tasks = stand_ins(host, &marked, 10);
    let pieces = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let walk = walk_of(tasks, 3, pieces.clone());
    let closed_all = close_all(
        host,
        None,
        Vec::new(),
        Some(walk),
        Instant::now() + HANG_GUARD,
    );
    assert_eq!(
        closed_all,
        Closed {
            dropped: 10,
            unfinished: 0,
            unwalked: false,
        }
    );
    assert_eq!(closed.try_iter().count(), 10);
    // Four pieces with tasks and the one that found none.
    assert_eq!(pieces.load(std::sync::atomic::Ordering::SeqCst), 5);
}

#[test]
fn a_walk_not_done_at_the_deadline_is_finished_in_the_background() {
    let host = HostId::next();
    let (marked, closed) = mpsc::channel();
    // The first task blocks until released: the deadline passes with the walk unfinished.
    let (tasks, release) = blocked_then(host, &marked, 20);
    let pieces = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let walk = walk_of(tasks, 1, pieces);
    let closed_all = close_all(host, None, Vec::new(), Some(walk), Instant::now());
    assert!(
        closed_all.unfinished + usize::from(closed_all.unwalked) > 0,
        "{closed_all:?}"
    );
    // Every task is closed after the wait: the blocked one once released, the rest by the
    // closers and the watcher's hand-offs meanwhile.
    for _ in 0..20 {
        assert!(closed.recv_timeout(HANG_GUARD).unwrap());
    }
    release.send(()).unwrap();
    assert!(closed.recv_timeout(HANG_GUARD).unwrap());
}

fn queue(pending: usize, running: usize, returned: usize, closers: usize) -> Queue<()> {
    Queue {
        walk: None,
        walking: false,
        pending: (0..pending).map(|_| ()).collect(),
        running,
        returned,
        dropped: 0,
        closers,
    }
}

#[test]
fn the_first_closer_starts_at_once_and_none_for_an_empty_queue() {
    assert!(wants_closer(&queue(3, 0, 0, 0), false, 0));
    assert!(!wants_closer(&queue(0, 0, 0, 0), true, 0));
}

#[test]
fn a_hand_off_only_when_every_closer_is_inside_a_close_that_did_not_return() {
    // Every closer blocked for the slice: hand the rest off.
    assert!(wants_closer(&queue(3, 2, 1, 2), true, 1));
    // Not before the slice is over.
    assert!(!wants_closer(&queue(3, 2, 1, 2), false, 1));
    // A close returned during the slice: the closers make progress.
    assert!(!wants_closer(&queue(3, 2, 2, 2), true, 1));
    // A closer not inside a close (just started, or between two): it takes the next one.
    assert!(!wants_closer(&queue(3, 1, 1, 2), true, 1));
    // Never past the cap.
    assert!(!wants_closer(
        &queue(3, MAX_CLOSERS, 0, MAX_CLOSERS),
        true,
        0
    ));
}
