//! The forced stop's closes (shutdown step 4): the process futures it cancels are dropped — each
//! process's `close` run — on *closer* threads, never on the thread that shuts down, so a `close`
//! that blocks cannot hang `shutdown` and cannot hold up the closes behind it for long.
//!
//! # Protocol
//! The forced stop takes every process task out of the cells (`tasks::take_all`) and hands the
//! list to [`close_all`]: a [`Closing`], whose queue (under one mutex) holds the tasks not taken
//! yet, `running` (closes in progress), `returned` (closes that returned, ever) and `closers`
//! (closer threads alive).
//! 1. A closer takes the next task and counts it `running`, in one critical section; drops its
//!    future outside the lock (`close` runs); then, in another, moves it from `running` to
//!    `returned` and signals `progress`. It leaves, uncounting itself, when it finds the queue
//!    empty.
//! 2. The waiter (the shutdown's thread) starts the first closer, then waits on `progress` until
//!    the queue is empty and nothing runs — every close returned, each process counted `forced` by
//!    its finish — or until its deadline.
//! 3. Hand-off: a `close` may block for good, and the ones queued behind it must not wait for it.
//!    When [`HANDOFF_AFTER`] passes with tasks queued, every closer inside a `close` and none
//!    returned meanwhile, the waiter starts a fresh closer on the rest of the queue (as the
//!    executor's monitor hands a stuck worker's queue to a spare), up to [`MAX_CLOSERS`] at once.
//! 4. At the deadline the waiter stops waiting: a process still queued or inside its `close` is
//!    counted `abandoned` by the seal (its cell is still occupied) and closed when its turn comes.
//!    If tasks are still queued, a watcher thread goes on with step 3, without a deadline, until
//!    the queue is empty: a process is closed once the closes ahead of it return or are handed off.
//!
//! **Why each task is closed once, and the waiter misses no end.** A task leaves the queue only
//! by a closer's take, under the lock: one closer drops it. Every counter changes under that
//! lock, and the change that may end the wait (a close returning) is followed by a notify; the
//! waiter tests its condition under the same lock before each wait, so it cannot sleep through
//! the last return. A closer leaves only when the queue is empty, so while tasks are queued at
//! least one closer is alive to take them, once the closes it is in return.
//!
//! Closer threads are marked as running the stop of their scheduler (`shutdown.rs`, `STOPPING`),
//! as the stopping thread is: a `shutdown` called from a forced `close` returns the report so
//! far at once instead of waiting for the stop it is part of.
//!
//! Checked by `loom_forced_closes_run_once_and_the_wait_ends` (`tests/loom_closers.rs`: two
//! closers — one started as a hand-off — racing on the queue against the waiter).

use super::shutdown::StoppingHere;
use crate::executor::TaskRef;
use crate::loom::{lock, thread, Arc, Condvar, Mutex, MutexGuard};
use crate::process::context::HostId;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long the forced stop's closes may go without one returning, with closes still queued,
/// before a fresh closer thread takes the rest of the queue (module docs, step 3).
pub(super) const HANDOFF_AFTER: Duration = Duration::from_millis(10);

/// At most this many closer threads at once: past it, the closes still queued wait for one of
/// the blocked ones to return.
pub(super) const MAX_CLOSERS: usize = 16;

/// What a closer does with a task: drop its future, which runs the process's `close`.
pub(super) trait Close: Send + 'static {
    /// Returns `true` if this call dropped the future (`false`: a worker still polls it, or it
    /// had finished).
    fn close(self) -> bool;
}

impl Close for TaskRef {
    fn close(self) -> bool {
        self.shutdown()
    }
}

/// What the forced stop's wait for the closes saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Closed {
    /// Futures the closers dropped by the end of the wait.
    pub(super) dropped: usize,
    /// Tasks still queued or inside their `close` at the end of the wait.
    pub(super) unfinished: usize,
}

/// Closes every task of `tasks` on closer threads marked as stopping `host`, inside `context`
/// (the tokio runtime the processes ran in, if any: a `close` or a body's drop guard may use
/// tokio as it could on a worker), waiting until `deadline` at most (module docs). Returns at
/// once for an empty list.
pub(super) fn close_all<T: Close>(
    host: HostId,
    context: Option<tokio::runtime::Handle>,
    tasks: Vec<T>,
    deadline: Instant,
) -> Closed {
    if tasks.is_empty() {
        return Closed::default();
    }
    let closing = Arc::new(Closing::new(host, context, tasks));
    let closed = Closing::wait(&closing, Some(deadline));
    if closed.unfinished > 0 {
        Closing::watch_in_background(&closing);
    }
    closed
}

/// The queue of one forced stop's closes, shared by its closers and its waiter.
pub(super) struct Closing<T> {
    queue: Mutex<Queue<T>>,
    /// Signalled when a close returns.
    progress: Condvar,
    host: HostId,
    /// The tokio runtime every closer enters (`close_all`).
    context: Option<tokio::runtime::Handle>,
}

struct Queue<T> {
    pending: VecDeque<T>,
    running: usize,
    returned: usize,
    dropped: usize,
    closers: usize,
}

impl<T: Close> Closing<T> {
    pub(super) fn new(
        host: HostId,
        context: Option<tokio::runtime::Handle>,
        tasks: Vec<T>,
    ) -> Closing<T> {
        Closing {
            queue: Mutex::new(Queue {
                pending: tasks.into(),
                running: 0,
                returned: 0,
                dropped: 0,
                closers: 0,
            }),
            progress: Condvar::new(),
            host,
            context,
        }
    }

    /// Steps 2–4 (module docs): starts closers as needed and waits until every task is closed
    /// or `deadline` passes. Without a deadline (the watcher), waits only until no task is
    /// queued: the closes in progress end when they return, whoever waits.
    pub(super) fn wait(closing: &Arc<Self>, deadline: Option<Instant>) -> Closed {
        let mut queue = lock(&closing.queue);
        let mut returned_before = queue.returned;
        let mut slice_end = Instant::now() + HANDOFF_AFTER;
        loop {
            if queue.pending.is_empty() && (queue.running == 0 || deadline.is_none()) {
                break;
            }
            let now = Instant::now();
            // Loom cannot model time (its `wait_timeout` never times out): wait for real there.
            if deadline.is_some_and(|deadline| now >= deadline) && !cfg!(loom) {
                break;
            }
            // Under loom the model starts its hand-off closer by hand: no branch on the clock.
            let slice_over = now >= slice_end && !cfg!(loom);
            let start = wants_closer(&queue, slice_over, returned_before);
            if slice_over {
                returned_before = queue.returned;
                slice_end = now + HANDOFF_AFTER;
            }
            if start {
                queue.closers += 1;
                drop(queue);
                Closing::start_closer(closing);
                queue = lock(&closing.queue);
                // It may have closed everything meanwhile, its notify unheard: test again first.
                continue;
            }
            queue = match deadline {
                // The watcher, with every closer it may start running: only a close returning
                // can change anything (and signals).
                None if queue.closers >= MAX_CLOSERS => wait(&closing.progress, queue),
                None => wait_timeout(
                    &closing.progress,
                    queue,
                    slice_end.saturating_duration_since(now),
                ),
                Some(deadline) => {
                    let until = deadline.min(slice_end);
                    wait_timeout(
                        &closing.progress,
                        queue,
                        until.saturating_duration_since(now),
                    )
                }
            };
        }
        Closed {
            dropped: queue.dropped,
            unfinished: queue.pending.len() + queue.running,
        }
    }

    /// Step 4's watcher: the hand-offs go on, on a thread of their own, until no task is queued.
    fn watch_in_background(closing: &Arc<Self>) {
        if lock(&closing.queue).pending.is_empty() {
            return; // only closes in progress: they end when they return, watched or not
        }
        let watcher = closing.clone();
        let started = thread::Builder::new()
            .name("procsched-closer-watch".to_owned())
            .spawn(move || {
                Closing::wait(&watcher, None);
            });
        if let Err(error) = started {
            tracing::warn!(%error, "could not start the forced stop's watcher; closes queued behind a blocked one wait for it");
        }
    }

    /// Starts a closer counted in `closers` already; if no thread can be started, uncounts it —
    /// and if it was to be the only one, runs the closes here, as a last resort.
    fn start_closer(closing: &Arc<Self>) {
        let closer = closing.clone();
        let started = thread::Builder::new()
            .name("procsched-closer".to_owned())
            .spawn(move || closer.run_closer());
        if let Err(error) = started {
            let alone = {
                let mut queue = lock(&closing.queue);
                queue.closers -= 1;
                queue.closers == 0
            };
            if alone {
                tracing::warn!(%error, "could not start a closer thread; closing the forced processes on this thread");
                lock(&closing.queue).closers += 1;
                closing.run_closer();
            } else {
                tracing::warn!(%error, "could not start a closer thread; the closes queued wait for the running ones");
            }
        }
    }

    /// Step 1, until the queue is empty (also run by the model, as a hand-off's closer).
    pub(super) fn run_closer(&self) {
        let _stopping = StoppingHere::mark(self.host);
        let _context = self.context.as_ref().map(tokio::runtime::Handle::enter);
        // Entered, not driven: blocking calls in a `close` wait as they did on the thread that
        // shut down, before the closes had threads of their own (`blocking.rs`).
        let _may_block = super::blocking::MayBlockHere::mark();
        loop {
            let task = {
                let mut queue = lock(&self.queue);
                let Some(task) = queue.pending.pop_front() else {
                    queue.closers -= 1;
                    return;
                };
                queue.running += 1;
                task
            };
            let mut returning = Returning {
                closing: self,
                dropped: false,
            };
            returning.dropped = task.close();
        }
    }

    /// Counts a closer the model starts by hand (step 3's hand-off, without the clock).
    #[cfg(all(test, loom))]
    pub(super) fn count_closer(&self) {
        lock(&self.queue).closers += 1;
    }
}

/// Whether the waiter starts a closer now (step 3): the first one, or a hand-off when the slice
/// is over with tasks queued, every closer inside a `close` and none returned during the slice.
/// (A closer started but not in a `close` yet — a thread slow to start — keeps this `false`.)
fn wants_closer<T>(queue: &Queue<T>, slice_over: bool, returned_before: usize) -> bool {
    if queue.pending.is_empty() {
        return false;
    }
    if queue.closers == 0 {
        return true;
    }
    slice_over
        && queue.returned == returned_before
        && queue.running == queue.closers
        && queue.closers < MAX_CLOSERS
}

/// A close in progress: dropped when it returns (or unwinds), it counts it returned and wakes
/// the waiter.
struct Returning<'a, T> {
    closing: &'a Closing<T>,
    dropped: bool,
}

impl<T> Drop for Returning<'_, T> {
    fn drop(&mut self) {
        {
            let mut queue = lock(&self.closing.queue);
            queue.running -= 1;
            queue.returned += 1;
            queue.dropped += usize::from(self.dropped);
        }
        self.closing.progress.notify_all();
    }
}

/// Waits on `condvar`, ignoring poisoning (as [`lock`] does).
fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match condvar.wait(guard) {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Waits on `condvar` for `timeout` at most, ignoring poisoning (as [`lock`] does).
fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> MutexGuard<'a, T> {
    match condvar.wait_timeout(guard, timeout) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
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

    #[test]
    fn closes_run_on_closer_threads_marked_as_stopping_the_scheduler() {
        let host = HostId::next();
        let (marked, closed) = mpsc::channel();
        let tasks = (0..3)
            .map(|_| StandIn {
                host,
                marked: marked.clone(),
                release: None,
            })
            .collect();
        let closed_all = close_all(host, None, tasks, Instant::now() + HANG_GUARD);
        assert_eq!(
            closed_all,
            Closed {
                dropped: 3,
                unfinished: 0
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
        let (release, blocked) = mpsc::channel();
        let mut tasks = vec![StandIn {
            host,
            marked: marked.clone(),
            release: Some(blocked),
        }];
        tasks.extend((0..3).map(|_| StandIn {
            host,
            marked: marked.clone(),
            release: None,
        }));
        let closed_all = close_all(host, None, tasks, Instant::now() + FORCED_STOP_WAIT);
        assert!(closed_all.unfinished >= 1, "{closed_all:?}");
        // The three behind the blocked one are closed (by a fresh closer) while it blocks.
        for _ in 0..4 {
            assert!(closed.recv_timeout(HANG_GUARD).unwrap());
        }
        release.send(()).unwrap();
    }

    fn queue(pending: usize, running: usize, returned: usize, closers: usize) -> Queue<()> {
        Queue {
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
}
