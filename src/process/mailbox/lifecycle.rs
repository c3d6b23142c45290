//! A cell's incarnations: `open_as` (spawn), `close` (the process finishes), `release` (the
//! cell is free again), and what lives with an incarnation between them (its task's reference,
//! a `cancel`'s mark). The phases and generations are described in the module above.

use super::intake::Stale;
use super::room::ToWake;
use super::{blocks, Generation, Incarnation, Phase, ProcessCell, Watch};
use crate::executor::TaskRef;
use crate::loom::atomic::Ordering::Relaxed;
use crate::process::exit::ExitReason;
use crate::process::queue::Queue;
use crate::process::{drop_contained, drop_each, Event};

/// The events a closed mailbox still held ([`ProcessCell::close_keeping_unread`]): user values,
/// for the caller to drop when it chooses.
pub(crate) struct UnreadMail {
    events: Queue,
    behind: Queue,
}

impl UnreadMail {
    /// Takes the queues, unless both are inline and empty: most processes finish having read
    /// all their mail, and then nothing is taken, boxed or moved (the two queues are two events
    /// wide). A buffer is taken even empty, to be freed outside the lock ([`Self::keep_unread`]),
    /// so a flood never stays allocated in the pooled cell.
    fn take(events: &mut Queue, behind: &mut Queue) -> Option<Box<UnreadMail>> {
        if events.is_inline_empty() && behind.is_inline_empty() {
            return None;
        }
        Some(Box::new(UnreadMail {
            events: std::mem::take(events),
            behind: std::mem::take(behind),
        }))
    }

    /// What [`take`](Self::take) took, if it holds events; an empty one is dropped here (its
    /// buffers freed: outside the mailbox's lock).
    fn keep_unread(taken: Option<Box<UnreadMail>>) -> Option<Box<UnreadMail>> {
        taken.filter(|mail| !(mail.events.is_empty() && mail.behind.is_empty()))
    }

    /// Whether a `Cancel` is among the events: the process was never given it.
    pub(crate) fn holds_cancel(&self) -> bool {
        self.events
            .iter()
            .chain(self.behind.iter())
            .any(|event| matches!(event, Event::Cancel { .. }))
    }

    /// Drops every event, each contained (`contain.rs`); returns the destructor panics.
    pub(crate) fn drop_contained(self) -> u64 {
        drop_each(self.events.into_events()) + drop_each(self.behind.into_events())
    }
}

impl ProcessCell {
    /// An open cell with an unbounded mailbox, for tests of the process layer.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn new_open() -> (ProcessCell, Generation) {
        let cell = ProcessCell::new(usize::MAX);
        let generation = cell.open();
        (cell, generation)
    }

    /// [`open_as`](Self::open_as) an anonymous process, with the capacity the cell has
    /// (tests of the process layer).
    #[cfg(test)]
    pub(crate) fn open(&self) -> Generation {
        // Past `init`, as a spawned process is once its task is kept (`set_task`).
        self.open_starting(Incarnation::default(), self.mailbox.capacity(), false, 0)
    }

    /// Starts the next incarnation: `Free` → `Open`, state `Ready`, a new generation, which it
    /// returns; its mailbox holds at most `capacity` messages. The caller owns the cell
    /// exclusively (it took it off the free list) and checked that the generation is not
    /// exhausted. The generation is `at_least` if that is past the next one (0 for a spawn): a
    /// test harness's process, whose PID no other harness's shares (`scheduler/stepped.rs`);
    /// the caller checked that a PID can hold it.
    pub(crate) fn open_as(
        &self,
        incarnation: Incarnation,
        capacity: usize,
        at_least: Generation,
    ) -> Generation {
        self.open_starting(incarnation, capacity, true, at_least)
    }

    /// [`open_as`](Self::open_as), the process inside `init` (`starting`) or not (tests), in
    /// the next generation or `at_least`, whichever is later.
    fn open_starting(
        &self,
        incarnation: Incarnation,
        capacity: usize,
        starting: bool,
        at_least: Generation,
    ) -> Generation {
        let mut inner = self.mailbox.inner.lock();
        let (last, phase) = self.mailbox.gate.load();
        debug_assert_eq!(phase, Phase::Free);
        // `close` left the queues and the budget map empty and unallocated.
        debug_assert!(inner.events.is_empty() && inner.behind.is_empty());
        debug_assert!(inner.waker.is_none() && inner.task.is_none());
        debug_assert!(inner.topics.is_none() && inner.abandoned.is_none());
        debug_assert!(
            inner.watch.is_none(),
            "`release` took the last incarnation's watches"
        );
        inner.terminate = false;
        inner.cancel_asked = false;
        inner.shutdown_cancelled = false;
        inner.starting = starting;
        inner.queued_messages = 0;
        inner.unread = 0;
        inner.kind = incarnation.kind;
        inner.spawned_at = incarnation.spawned_at;
        inner.takes = incarnation.takes;
        // Before the gate opens (its `Release` store publishes it to lock-free senders).
        self.mailbox.capacity.store(capacity, Relaxed);
        self.stats.reset();
        // Under the lock, and before the gate opens: whoever sees `Open` and this generation —
        // under the lock or through the gate's `Acquire` — sees a fresh state word (`state.rs`,
        // protocol 1; `intake.rs`, "The gate").
        self.state.transition_to_ready();
        let generation = (last + 1).max(at_least);
        self.mailbox.gate.store(generation, Phase::Open);
        generation
    }

    /// Jumps the generation (tests of what happens when a slot's generations run out).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn set_generation(&self, generation: Generation) {
        let _inner = self.mailbox.inner.lock();
        let (_, phase) = self.mailbox.gate.load();
        self.mailbox.gate.store(generation, phase);
    }

    /// `true` while the cell hosts a process (open or closing).
    pub(crate) fn is_occupied(&self) -> bool {
        self.mailbox.gate.load().1 != Phase::Free
    }

    /// Keeps `task`, the reference of the process task of `generation` (`scheduler/tasks.rs`),
    /// unless that process is no longer open: then it is handed back (to drop after the lock).
    pub(crate) fn set_task(&self, generation: Generation, task: TaskRef) -> Option<TaskRef> {
        let mut inner = self.mailbox.inner.lock();
        if !self.mailbox.gate.is_open(generation) {
            return Some(task);
        }
        debug_assert!(inner.task.is_none());
        inner.task = Some(task);
        // `init` succeeded and the task is about to be queued: observers show the process now.
        inner.starting = false;
        None
    }

    /// Takes the process task's reference of `generation` (`None`: whichever process is open),
    /// if the cell still holds it.
    pub(crate) fn take_task(&self, generation: Option<Generation>) -> Option<TaskRef> {
        let mut inner = self.mailbox.inner.lock();
        if generation.is_some_and(|g| g != self.mailbox.gate.load().0) {
            return None;
        }
        inner.task.take()
    }

    /// The process finishes: state `Complete`, `Open` → `Closing`. Later pushes are refused
    /// (`Closed`); queued events, the topic budgets, the waker and the task's reference are
    /// dropped.
    ///
    /// The queue and the map are replaced by unallocated ones rather than cleared: the cell is
    /// pooled, and a flood the finished process received (a million queued events, or topics)
    /// must not stay allocated in the cell for its next process.
    ///
    /// Returns how many destructors of the dropped events panicked (each contained).
    pub(crate) fn close(&self) -> u64 {
        self.close_taking_exit_reason().0
    }

    /// [`close`](Self::close), also taking why a linked process's exit asked the process to
    /// end, if one did and no one took it yet (`watch.rs`, protocol 9): a process stopped by
    /// its supervisor's end ends with its supervisor's reason however its body returned, as an
    /// OTP behaviour exits with its parent's `Reason` after `terminate/2`. Taken in `close`'s
    /// critical section: no lock more per finished process.
    pub(crate) fn close_taking_exit_reason(&self) -> (u64, Option<ExitReason>) {
        let (unread, panics, exit_reason, _) = self.close_keeping_unread();
        (
            panics + unread.map_or(0, |unread| unread.drop_contained()),
            exit_reason,
        )
    }

    /// [`close_taking_exit_reason`](Self::close_taking_exit_reason), but the events still
    /// queued — the messages and completions the process never read — are handed back, not
    /// dropped: the process future drops them once its outcome is published
    /// (`process/future.rs`, "Finish"), so that their destructors, user code that may block,
    /// cannot hold up its handle or how it is counted. Also whether the process was given a
    /// `Cancel` (a cancel, its supervisor, a shutdown): read in the critical section that
    /// closes the mailbox, after which none is queued.
    pub(crate) fn close_keeping_unread(
        &self,
    ) -> (Option<Box<UnreadMail>>, u64, Option<ExitReason>, bool) {
        self.state.transition_to_complete();
        let mut stale = Stale::new(&self.stats);
        let (unread, topics, waker, task, room_waiters, exit_reason, cancel_asked) = {
            let mut inner = self.mailbox.inner.lock();
            let (generation, phase) = self.mailbox.gate.load();
            debug_assert_eq!(phase, Phase::Open);
            // First, and also ends a diversion: a sender whose claim comes after the emptiness
            // check below sees it, and drops its late push itself (`intake.rs`, protocol 7
            // step 5).
            self.mailbox.gate.store(generation, Phase::Closing);
            // The intake queue's events go with the locked queue's, all of them: a slot claimed
            // and not yet written is waited for (its sender writes next; the one wait on the
            // intake queue, once per process), else what it holds would outlive the process.
            let mut backoff = blocks::Backoff::default();
            while !self
                .mailbox
                .settle_intake(&mut inner, &mut stale, usize::MAX)
            {
                backoff.snooze();
            }
            // An idle cell keeps one block of its intake queue, not two (`intake.rs`).
            self.mailbox.intake.shrink();
            inner.queued_messages = 0;
            inner.unread = 0;
            inner.abandoned = None;
            let inner = &mut *inner;
            (
                UnreadMail::take(&mut inner.events, &mut inner.behind),
                std::mem::take(&mut inner.topics),
                inner.waker.take(),
                inner.task.take(),
                // They try again, and hear that the process is gone.
                inner.room_waiters.take(),
                inner.watch.as_mut().and_then(|state| state.take_exit()),
                inner.cancel_asked,
            )
        };
        // Every waiter: the process is gone, there is no room to pass on.
        if let Some(line) = room_waiters {
            let _ = ToWake::All(*line).wake();
        }
        // Outside the lock: payload destructors are user code, and freeing a large map or queue
        // is not work a concurrent (refused) producer should wait behind.
        drop(stale);
        drop(topics);
        // Usually none: the process was running, not waiting.
        let panics = waker.map_or(0, drop_contained);
        drop(task);
        (
            UnreadMail::keep_unread(unread),
            panics,
            exit_reason,
            cancel_asked,
        )
    }

    /// [`release_asked`](Self::release_asked) without the cancel (tests).
    #[cfg(test)]
    pub(crate) fn release(&self) -> (Generation, Vec<Watch>) {
        let (generation, watches, _) = self.release_asked();
        (generation, watches)
    }

    /// The process is gone: `Closing` → `Free`. Returns the generation that ended, the
    /// watches registered on it, taken in the same critical section (`watch.rs`, protocol 8
    /// step 2): the caller signals each — and whether the process had been asked to finish by
    /// a queued `Cancel` (`deliver.rs`, `try_push`).
    pub(crate) fn release_asked(&self) -> (Generation, Vec<Watch>, bool) {
        let mut inner = self.mailbox.inner.lock();
        let (generation, phase) = self.mailbox.gate.load();
        debug_assert_eq!(phase, Phase::Closing);
        self.mailbox.gate.store(generation, Phase::Free);
        (
            generation,
            ProcessCell::take_watches(&mut inner),
            inner.cancel_asked,
        )
    }

    /// [`release`](Self::release), for tests that look at the watches.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn release_watched(&self) -> (Generation, Vec<Watch>) {
        self.release()
    }
}
