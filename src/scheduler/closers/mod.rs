//! The forced stop's closes (shutdown step 4): the process futures it cancels are dropped — each
//! process's `close` run — on *closer* threads, never on the thread that shuts down, so a `close`
//! that blocks cannot hang `shutdown` and cannot hold up the closes behind it for long.
//!
//! # Protocol
//! The forced stop hands [`close_all`] a *walk*: a source that takes the process tasks out of the
//! process table's cells a piece at a time (`tasks.rs`, step 4), so that no one walks the whole
//! table in one go — a million cells take longer than the forced stop may. A [`Closing`]'s queue
//! (under one mutex) holds the walk (until it is exhausted), the tasks taken and not closed yet,
//! `running` (closes in progress), `returned` (closes that returned, ever) and `closers` (closer
//! threads alive). There is *work* while a task is queued, or the walk is not exhausted (or is
//! being walked).
//! 1. A closer takes the next task and counts it `running`, in one critical section. If none is
//!    queued it walks one piece instead: it takes the walk out of the queue (`walking`: one
//!    walker at a time), walks the piece outside the lock, and in another critical section
//!    queues the tasks found and puts the walk back, unless exhausted; then it tries again. It
//!    drops a task's future outside the lock (`close` runs); then, in another, moves it from
//!    `running` to `returned` and signals `progress`. It leaves, uncounting itself, when it finds
//!    no task queued and no walk to take (none left, or another closer walks it: that closer
//!    closes what it finds), and signals `progress`.
//! 2. The waiter (the shutdown's thread) first walks pieces itself until a task is queued (none
//!    found: no closer, no thread), then starts the first closer and waits on `progress` until
//!    there is no work and nothing runs — every close returned, each process counted `forced` by
//!    its finish — or until its deadline.
//! 3. Hand-off: a `close` may block for good, and the work behind it must not wait for it. When
//!    [`HANDOFF_AFTER`] passes with work left, every closer inside a `close` and none returned
//!    meanwhile, the waiter starts a fresh closer on the rest (as the executor's monitor hands a
//!    stuck worker's queue to a spare), up to [`MAX_CLOSERS`] at once.
//! 4. At the deadline the waiter stops waiting: a process still queued, not reached by the walk,
//!    or inside its `close` is counted `abandoned` by the seal (its cell is still occupied) and
//!    closed when its turn comes. If work is left, a watcher thread goes on with step 3, without
//!    a deadline, until there is none: a process is closed once the closes ahead of it return
//!    or are handed off.
//!
//! **Why each task is closed once, and the waiter misses no end.** A task enters the queue only
//! by a walk (whose cell the walk took it from, once) and leaves it only by a closer's take,
//! both under the lock: one closer drops it. Every counter changes under that lock, and every
//! change that may end the wait (a close returning, a walk exhausted, a closer leaving) is
//! followed by a notify; the waiter tests its condition under the same lock before each wait,
//! so it cannot sleep through the last one. A closer leaves only when no task is queued and the
//! walk is exhausted or in another closer's hands — which closes what it finds before it looks
//! again — so while there is work at least one closer is alive to do it, once the closes it is
//! in return. No lock is held across a piece of the walk: the waiter is never kept from its
//! deadline by a walker the OS has stopped running.
//!
//! Closer threads are marked as running the stop of their scheduler (`shutdown.rs`, `STOPPING`),
//! as the stopping thread is: a `shutdown` called from a forced `close` returns the report so
//! far at once instead of waiting for the stop it is part of.
//!
//! Checked by `loom_forced_closes_run_once_and_the_wait_ends` (`tests/loom_closers.rs`: two
//! closers — one started as a hand-off — racing on the queue against the waiter) and
//! `loom_forced_closes_walked_in_pieces_run_once_and_the_wait_ends` (the same, the tasks
//! coming from a walk in pieces).

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
    /// The walk was not exhausted at the end of the wait: tasks it has not reached are
    /// unfinished too, uncounted here.
    pub(super) unwalked: bool,
}

/// A walk that yields tasks a piece at a time (module docs): called with the queue, it adds the
/// tasks of its next piece (perhaps none) and returns `true`, or returns `false` once exhausted.
pub(super) type Walk<T> = Box<dyn FnMut(&mut VecDeque<T>) -> bool + Send>;

/// Closes every task of `tasks` and of `walk` on closer threads marked as stopping `host`,
/// inside `context` (the tokio runtime the processes ran in, if any: a `close` or a body's drop
/// guard may use tokio as it could on a worker), waiting until `deadline` at most (module docs).
/// Starts no thread if there is no task at all.
pub(super) fn close_all<T: Close>(
    host: HostId,
    context: Option<tokio::runtime::Handle>,
    tasks: Vec<T>,
    walk: Option<Walk<T>>,
    deadline: Instant,
) -> Closed {
    let closing = Arc::new(Closing::new(host, context, tasks).walking(walk));
    // Step 2: the first pieces on this thread, until a task turns up — none at all (every
    // process finished in the grace period): no thread to start.
    while lock(&closing.queue).pending.is_empty()
        && Instant::now() < deadline
        && closing.walk_piece()
    {}
    if !lock(&closing.queue).has_work() {
        return Closed::default();
    }
    let closed = Closing::wait(&closing, Some(deadline));
    if closed.unfinished > 0 || closed.unwalked {
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
    /// `None` once exhausted, and while a closer walks a piece of it.
    walk: Option<Walk<T>>,
    /// A closer is walking a piece (outside the lock).
    walking: bool,
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
                walk: None,
                walking: false,
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

    /// The tasks of `walk` are closed too, after those given to [`new`](Self::new).
    pub(super) fn walking(self, walk: Option<Walk<T>>) -> Closing<T> {
        lock(&self.queue).walk = walk;
        self
    }

    /// Steps 2–4 (module docs): starts closers as needed and waits until every task is closed
    /// or `deadline` passes. Without a deadline (the watcher), waits only until there is no work
    /// left: the closes in progress end when they return, whoever waits.
    pub(super) fn wait(closing: &Arc<Self>, deadline: Option<Instant>) -> Closed {
        let mut queue = lock(&closing.queue);
        let mut returned_before = queue.returned;
        let mut slice_end = Instant::now() + HANDOFF_AFTER;
        loop {
            if !queue.has_work() && (queue.running == 0 || deadline.is_none()) {
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
            unwalked: queue.walk.is_some() || queue.walking,
        }
    }

    /// Step 4's watcher: the hand-offs go on, on a thread of their own, until no task is queued.
    fn watch_in_background(closing: &Arc<Self>) {
        if !lock(&closing.queue).has_work() {
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
        let _may_block = super::blocking::ThreadMark::may_block();
        loop {
            let task = {
                let mut queue = lock(&self.queue);
                match queue.pending.pop_front() {
                    Some(task) => {
                        queue.running += 1;
                        Some(task)
                    }
                    None if queue.walk.is_some() => None,
                    None => {
                        queue.closers -= 1;
                        drop(queue);
                        // No work left for us: if nothing runs either, this may be what the
                        // waiter waits for.
                        self.progress.notify_all();
                        return;
                    }
                }
            };
            let Some(task) = task else {
                // Another closer may have taken the walk meanwhile: then we look again.
                self.walk_piece();
                continue;
            };
            let mut returning = Returning {
                closing: self,
                dropped: false,
            };
            returning.dropped = task.close();
        }
    }

    /// Walks the next piece of the walk into the queue, outside the lock (step 1). `false` if
    /// there was no walk to take: exhausted, or another thread walks it.
    fn walk_piece(&self) -> bool {
        let mut walk = {
            let mut queue = lock(&self.queue);
            let Some(walk) = queue.walk.take() else {
                return false;
            };
            queue.walking = true;
            walk
        };
        let mut found = VecDeque::new();
        let more = walk(&mut found);
        let spent = {
            let mut queue = lock(&self.queue);
            queue.pending.extend(found);
            queue.walking = false;
            if more {
                queue.walk = Some(walk);
                None
            } else {
                Some(walk)
            }
        };
        if spent.is_some() {
            // Dropped outside the lock (it holds the scheduler's state); it may have been the
            // last work: the waiter looks again.
            drop(spent);
            self.progress.notify_all();
        }
        true
    }

    /// Counts a closer the model starts by hand (step 3's hand-off, without the clock).
    #[cfg(all(test, loom))]
    pub(super) fn count_closer(&self) {
        lock(&self.queue).closers += 1;
    }
}

impl<T> Queue<T> {
    /// A task queued, or a walk not exhausted.
    fn has_work(&self) -> bool {
        !self.pending.is_empty() || self.walk.is_some() || self.walking
    }
}

/// Whether the waiter starts a closer now (step 3): the first one, or a hand-off when the slice
/// is over with work left, every closer inside a `close` and none returned during the slice.
/// (A closer started but not in a `close` yet — a thread slow to start — keeps this `false`.)
fn wants_closer<T>(queue: &Queue<T>, slice_over: bool, returned_before: usize) -> bool {
    if !queue.has_work() {
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
mod tests;
