//! The per-process event queue, bound to a generation, and the process's shared cell.
//!
//! Producers — message senders and yield completers — push under a short mutex (never held
//! while user code runs); the one consumer is the worker stepping the process, which moves a
//! bounded batch out per step (`drain.rs`). Messages to a mailbox with a backlog skip the
//! mutex: they go into a lock-free queue (`intake.rs`, protocol 7), which every consumer empties
//! behind the locked queue, under the mutex.
//!
//! # Cells are pooled; generations guard them
//! A [`ProcessCell`] is a slot of the scheduler's process table and hosts one process after
//! another. Each incarnation has a *generation* (1, 2, …; it is part of the process's [`Pid`](super::Pid)),
//! and the cell goes through three phases per incarnation, all under the mailbox lock:
//!
//! | phase | entered by | events |
//! |---|---|---|
//! | `Free` | a new cell; [`ProcessCell::release_asked`] | rejected: `Gone` |
//! | `Open` | [`ProcessCell::open_as`] (spawn), which bumps the generation | accepted (or dropped by a budget) |
//! | `Closing` | [`ProcessCell::close`] (the process finishes; `close` runs) | rejected: `Closed` |
//!
//! Every producer binds to a generation — a sender to the one in the PID it names, a completer
//! to the one its yield was dispatched in — and every locked push checks it in the same critical
//! section that queues the event; a lock-free push checks the gate, and its event carries the
//! generation, which the consumer checks again (`intake.rs`). So a late completion or a stale
//! PID can never reach a later process in the same cell.
//!
//! `close` takes the queued events and the topic budgets out with it (the next incarnation starts
//! with an empty, unallocated queue and map; an intake queue, once installed, stays with the cell:
//! `intake.rs`), and moves the state word to `Complete` (`state.rs`,
//! protocol 6). Checked (`process/tests/loom_mailbox.rs`) by
//! `loom_stale_completion_racing_with_the_cells_reuse` (a completion bound to the old generation
//! racing close → release → open) and `loom_close_racing_an_event` (a delivery racing `close`);
//! the process table's reuse of cells by its own models in `scheduler/tests/loom_table.rs`.

mod abandoned;
pub(crate) mod blocks;
mod budget;
mod drain;
pub(crate) mod intake;
mod lock;
mod observe;
mod room;
mod watch;

pub(crate) use room::Ticket;
// What a delivery did is logged by the scheduler (`links.rs`) and checked by the loom models.
#[cfg(all(test, loom))]
pub(crate) use watch::ExitDelivery;
pub(crate) use watch::{Watch, Watcher};

use super::exit::ExitReason;
use super::queue::Queue;
use super::state::{StateWord, TransitionOnEvent};
use super::stats::CellStats;
use super::{drop_contained, drop_each, Event, Events, Message, MessageType};
use crate::executor::{DeferredWake, TaskRef};
use crate::loom::atomic::{AtomicUsize, Ordering::Relaxed};
use budget::TopicMap;
use intake::{Gate, Intake, IntakeQueue, Stale, Stamped, INTAKE_INSTALL_DEPTH};
use lock::SpinLock;
use std::task::Waker;

/// The generation a producer is bound to.
pub(crate) type Generation = u64;

/// What [`Mailbox::drain_into`] left behind.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Drained {
    /// The mailbox is empty.
    All,
    /// More than a batch was waiting: the rest is for the next step.
    More,
    /// The drain stopped at a message slot a sender claimed and has not written yet
    /// (`intake.rs`): events may wait behind it. The poller must not park (that sender's tell
    /// may not wake it): it polls again later.
    Unwritten,
    /// Termination was requested (read under the same lock as the events: see `terminate`).
    Terminate,
}

/// What happened to a pushed event (or a terminate request).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Queued; the process will see it.
    Accepted,
    /// A message over the mailbox capacity or its topic budget: not queued.
    Dropped,
    /// The process of this generation is finishing: not queued.
    Closed,
    /// No process of this generation lives in the cell (finished, or never spawned): not queued.
    Gone,
}

/// The phase of the cell's current incarnation (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Free,
    Open,
    Closing,
}

pub(crate) struct Mailbox {
    /// The lock of everything in `Inner` (`lock.rs`, protocol 10).
    inner: SpinLock<Inner>,
    /// The generation and phase, written under the lock, readable without it (`intake.rs`).
    gate: Gate,
    /// The lock-free path's queue, once a backlog installed it (`intake.rs`).
    intake: Intake,
    /// Most queued messages of the current incarnation (a supervisor's is unbounded whatever
    /// `mailbox_capacity` says); `usize::MAX` when unbounded. Set by `open_as` before the gate
    /// opens; read under the lock, or after a gate load that saw this incarnation open, so a
    /// lock-free sender never applies the previous incarnation's.
    capacity: AtomicUsize,
}

struct Inner {
    /// One event inline, a buffer for a backlog (`queue.rs`).
    events: Queue,
    /// Events a locked push queued while a diversion is on: behind the intake queue, which
    /// has a slot a sender claimed and has not written (`intake.rs`, "Each sender's messages
    /// stay in order"). Empty otherwise.
    behind: Queue,
    /// Messages (not completions, cancels or overflow markers) in `events`.
    queued_messages: usize,
    /// Messages drained into the process that it has not handled yet
    /// ([`Process::unread_messages`](crate::process::Process::unread_messages): an `async fn`
    /// body's inbox), counted against a bounded mailbox's capacity with `queued_messages`; set
    /// by the poller at each drain and before it parks (`future.rs`). Zero otherwise. A `u32`
    /// (saturating: beyond it a capacity is unbounded in practice) that fits beside
    /// `terminate`, where a `usize` would grow every cell by a word.
    unread: u32,
    /// Set by `terminate`. Read by the poller in the same critical section that drains
    /// events, so — exactly like an event — a request that lands after a drain finds the
    /// process `Running` (and flags it) or parked (and wakes it).
    terminate: bool,
    /// Set by a `cancel` of this process (not by a shutdown's, which its report tallies): a
    /// process that then finishes however it likes is counted cancelled (`FinishCounts`).
    cancel_asked: bool,
    /// A shutdown's `Cancel` was claimed for the process (`watch.rs`: the first pass, a spawn
    /// during the shutdown, its supervisor's exit signal to it trapping exits): it gets one.
    shutdown_cancelled: bool,
    /// The process is still inside `init`: set by `open_as`, cleared by `set_task` (its task is
    /// about to be queued). Read only by the observers (`observe.rs`), which do not show it.
    starting: bool,
    /// Usage of the topics that carry a budget. An entry exists only while its topic has
    /// messages queued or its overflow marker waits: `release` removes it when the last one
    /// leaves, and `close` drops the whole map, so a topic used once costs nothing afterwards
    /// (one message on each of a million topics must not leave a million entries behind).
    /// Boxed, and `None` while empty: most processes never see a budget, and an empty map
    /// would cost every cell 48 bytes.
    topics: Option<Box<TopicMap>>,
    /// The process task's waker, registered by its poll.
    waker: Option<Waker>,
    /// The process task's reference, for a forced stop to cancel it (`scheduler/tasks.rs`): set
    /// at spawn, before the task is first queued; taken by `close` or by the forced stop.
    task: Option<TaskRef>,
    /// Statistics (`stats.rs`): the current (or last) process's type name and spawn time (coarse
    /// clock, nanoseconds), and the most events ever queued at once in this cell (all-time).
    kind: &'static str,
    spawned_at: u64,
    max_depth: usize,
    /// The message type the current process declared, if one (`Incarnation::takes`).
    takes: Option<MessageType>,
    /// Links, monitors and the trap flag of the current incarnation, once used (`watch.rs`).
    watch: Option<Box<watch::WatchState>>,
    /// Tags of asks the current process gave up on before their answer came: those answers
    /// are refused (`abandoned.rs`). `None` while empty: one word in every cell.
    abandoned: Option<Box<abandoned::Abandoned>>,
    /// Senders waiting for room in this bounded mailbox (`room.rs`).
    room_waiters: room::RoomWaiters,
}

/// What `open` records about the process a cell starts to host (for `process_info`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Incarnation {
    /// The process's type name.
    pub(crate) kind: &'static str,
    /// When it was spawned, in the scheduler's coarse clock (nanoseconds).
    pub(crate) spawned_at: u64,
    /// The message type its body declared, if one ([`MessageType::of`]).
    pub(crate) takes: Option<MessageType>,
    /// A library process (a supervisor) whose mailbox `mailbox_capacity` does not bound.
    pub(crate) unbounded_mailbox: bool,
}

/// Everything a process shares with the rest of the scheduler: its state word and mailbox. One
/// cell hosts one process after another (module docs).
pub(crate) struct ProcessCell {
    pub(crate) state: StateWord,
    pub(crate) mailbox: Mailbox,
    /// Relaxed statistics of the hosted process and of the cell (`stats.rs`).
    pub(crate) stats: CellStats,
}

impl ProcessCell {
    /// A `Free` cell whose mailbox will hold at most `capacity` messages (yield completions are
    /// never counted or dropped) until an [`open_as`](Self::open_as) sets another.
    pub(crate) fn new(capacity: usize) -> ProcessCell {
        ProcessCell {
            state: StateWord::new(),
            mailbox: Mailbox {
                inner: SpinLock::new(Inner {
                    events: Queue::default(),
                    behind: Queue::default(),
                    terminate: false,
                    cancel_asked: false,
                    shutdown_cancelled: false,
                    starting: false,
                    queued_messages: 0,
                    unread: 0,
                    topics: None,
                    waker: None,
                    task: None,
                    kind: "",
                    spawned_at: 0,
                    max_depth: 0,
                    takes: None,
                    watch: None,
                    abandoned: None,
                    room_waiters: None,
                }),
                gate: Gate::new(),
                intake: Intake::new(),
                capacity: AtomicUsize::new(capacity),
            },
            stats: CellStats::default(),
        }
    }

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
        self.open_starting(Incarnation::default(), self.mailbox.capacity(), false)
    }

    /// Starts the next incarnation: `Free` → `Open`, state `Ready`, a new generation, which it
    /// returns; its mailbox holds at most `capacity` messages. The caller owns the cell
    /// exclusively (it took it off the free list) and checked that the generation is not
    /// exhausted.
    pub(crate) fn open_as(&self, incarnation: Incarnation, capacity: usize) -> Generation {
        self.open_starting(incarnation, capacity, true)
    }

    /// [`open_as`](Self::open_as), the process inside `init` (`starting`) or not (tests).
    fn open_starting(
        &self,
        incarnation: Incarnation,
        capacity: usize,
        starting: bool,
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
        let generation = last + 1;
        self.mailbox.gate.store(generation, Phase::Open);
        generation
    }

    /// Delivers `event` to the process of `generation`, if it is open, waking it if it is
    /// blocked or idle (`state.rs`, protocol 2 step 2). Senders bind to the generation of the PID
    /// they name, completers to the one their yield was dispatched in.
    pub(crate) fn deliver(&self, generation: Generation, event: Event) -> Admission {
        self.push(Some(generation), event, false)
    }

    /// Delivers `event` like [`deliver`](Self::deliver), but hands it back when it is refused
    /// (an ask's answer, which goes back to whoever answered).
    #[allow(clippy::result_large_err)] // as `deliver_message`
    pub(crate) fn deliver_or_return(
        &self,
        generation: Generation,
        event: Event,
    ) -> Result<(), Event> {
        self.try_push(Some(generation), event, false)
            .map_err(|(_, event)| event)
    }

    /// Delivers the `YieldComplete` of an async or blocking yield dispatched in `generation`,
    /// as [`deliver`](Self::deliver); accepted, it no longer counts as outstanding.
    pub(crate) fn complete_yield(&self, generation: Generation, event: Event) -> Admission {
        self.push(Some(generation), event, true)
    }

    /// Delivers `event` to whichever process the cell hosts, if it is open (tests).
    #[cfg(test)]
    pub(crate) fn deliver_current(&self, event: Event) -> Admission {
        self.push(None, event, false)
    }

    /// Delivers a message like [`deliver`](Self::deliver), but hands it back when it is
    /// refused (with why), so that `send` can return it to its sender.
    // The refused message comes back by value: an error path, and boxing it would allocate.
    #[allow(clippy::result_large_err)]
    pub(crate) fn deliver_message(
        &self,
        generation: Generation,
        message: Message,
    ) -> Result<(), (Admission, Message)> {
        if let Some(intake) = self.lock_free_intake(generation, &message) {
            self.deliver_lock_free(intake, generation, message);
            return Ok(());
        }
        self.deliver_locked(generation, Event::Message(message))
    }

    /// Delivers the message `make` builds — one without a topic budget — like
    /// [`deliver_message`](Self::deliver_message); on the lock-free path it is built where it
    /// is stored, in its intake slot (`intake.rs`). A message built on the stack and copied in
    /// is read back with wider loads than it was written with, and each such copy waits for
    /// its stores to retire (a store-forwarding stall: most of a typed send's time before).
    /// `make` must not panic (a claimed slot must be written).
    #[inline(always)]
    #[allow(clippy::result_large_err)] // as `deliver_message`
    pub(crate) fn deliver_unbudgeted(
        &self,
        generation: Generation,
        make: impl FnOnce() -> Message,
    ) -> Result<(), (Admission, Message)> {
        let mailbox = &self.mailbox;
        if let Some(intake) = mailbox.intake.installed() {
            // The capacity after the gate: the one of the incarnation the gate showed open.
            if mailbox.gate.is_open(generation) && mailbox.capacity() == usize::MAX {
                intake.claim().write(Stamped::new(generation, make()));
                self.after_lock_free_push(generation);
                return Ok(());
            }
        }
        self.deliver_locked(generation, Event::Message(make()))
    }

    /// Protocol 7 of `intake.rs`, steps 2 and 3. Out of line: the path without an intake
    /// queue — most mailboxes — stays as short as before.
    #[inline(never)]
    fn deliver_lock_free(&self, intake: &IntakeQueue, generation: Generation, message: Message) {
        intake.push(Stamped::new(generation, message));
        self.after_lock_free_push(generation);
    }

    /// A message's locked push, handing it back if refused.
    #[inline]
    #[allow(clippy::result_large_err)] // as `deliver_message`
    fn deliver_locked(
        &self,
        generation: Generation,
        event: Event,
    ) -> Result<(), (Admission, Message)> {
        self.try_push(Some(generation), event, false)
            .map_err(|(admission, event)| match event {
                Event::Message(message) => (admission, message),
                _ => unreachable!("a refused message comes back as itself"),
            })
    }

    /// Protocol 7 of `intake.rs`, step 1: the intake queue `message` may take instead of the
    /// lock, if any. Checked before the message becomes an event, so that a mailbox without an
    /// intake queue — most of them — pays one load for the lock-free path and moves the message
    /// no more than before.
    #[inline]
    fn lock_free_intake(&self, generation: Generation, message: &Message) -> Option<&IntakeQueue> {
        let mailbox = &self.mailbox;
        if message.budget.is_some() {
            return None;
        }
        let intake = mailbox.intake.installed()?;
        // The capacity after the gate: the one of the incarnation the gate showed open.
        (mailbox.gate.is_open(generation) && mailbox.capacity() == usize::MAX).then_some(intake)
    }

    /// Protocol 7 of `intake.rs`, steps 3 and 5: after a lock-free push, the gate again; then
    /// protocol 2's step 2, or — the process closed meanwhile — dropping what was pushed late.
    #[inline(always)]
    pub(super) fn after_lock_free_push(&self, generation: Generation) {
        if self.mailbox.gate.is_current(generation) {
            self.wake_after_lock_free_push();
        } else {
            self.drop_late_pushes();
        }
    }

    /// Protocol 7 of `intake.rs`, step 5: the process a lock-free push was bound to closed after
    /// its sender read the gate, and `close` may have taken the intake queue's contents before
    /// the push: under the lock, the intake queue's stale events go (dropped after the unlock)
    /// and a later process's stay, in order.
    #[cold]
    #[inline(never)]
    fn drop_late_pushes(&self) {
        let mut stale = Stale::new(&self.stats);
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.load().1 == Phase::Open {
            // A later process's: its events move to the locked queue, ours are stale.
            let _ = self.mailbox.settle_intake(&mut inner, &mut stale);
        } else {
            self.mailbox.intake.set_aside_all(&mut stale);
        }
    }

    /// Protocol 2's step 2 after a lock-free push.
    #[inline]
    fn wake_after_lock_free_push(&self) {
        if self.state.transition_on_event() == TransitionOnEvent::Wake {
            // The one step that needs the lock: the waker lives under it. This sender alone
            // moved the process out of `Blocked`/`Idle`, so this sender alone wakes it.
            let wake = DeferredWake::prepare_opt(self.mailbox.inner.lock().waker.as_ref());
            wake.fire();
        }
    }

    fn push(&self, generation: Option<Generation>, event: Event, completion: bool) -> Admission {
        match self.try_push(generation, event, completion) {
            Ok(()) => Admission::Accepted,
            Err((refused, event)) => {
                self.stats.destructors_panicked(drop_contained(event));
                refused
            }
        }
    }

    /// Moves up to `max` queued events into `events` (`drain.rs`): the worker stepping the
    /// process, which also registers its task's waker here.
    #[inline]
    pub(crate) fn drain_into(
        &self,
        events: &mut Events,
        max: usize,
        waker: Option<&Waker>,
    ) -> Drained {
        self.mailbox
            .drain_into(events, max, waker, &self.stats, None)
    }

    /// [`drain_into`](Self::drain_into) for a process that may hold messages it has drained
    /// ([`Process::unread_messages`](crate::process::Process::unread_messages)), with a bounded
    /// mailbox: `unread` is what it holds now; the mailbox counts that and the messages this
    /// drain moves against its capacity, and `unread` becomes their sum.
    pub(crate) fn drain_counting_unread(
        &self,
        events: &mut Events,
        max: usize,
        waker: Option<&Waker>,
        unread: &mut usize,
    ) -> Drained {
        self.mailbox
            .drain_into(events, max, waker, &self.stats, Some(unread))
    }

    /// The process now holds `unread` drained messages it has not handled (see
    /// [`drain_counting_unread`](Self::drain_counting_unread)): before it parks, so that its
    /// senders are not refused for messages it has handled since.
    pub(crate) fn set_unread(&self, unread: usize) {
        let to_wake = {
            let mut inner = self.mailbox.inner.lock();
            let before = inner.used();
            inner.unread = saturate(unread);
            inner.room_made(before, self.mailbox.capacity())
        };
        to_wake.wake();
    }

    /// `true` if the mailbox has a capacity (`mailbox_capacity`).
    #[inline]
    pub(crate) fn is_bounded(&self) -> bool {
        self.mailbox.capacity() != usize::MAX
    }

    /// Queues `event`, or gives it back with the reason it was refused (`Dropped`, `Closed` or
    /// `Gone`; never `Accepted`). `completion`: the event completes an outstanding yield.
    #[allow(clippy::result_large_err)] // as `deliver_message`
    fn try_push(
        &self,
        generation: Option<Generation>,
        event: Event,
        completion: bool,
    ) -> Result<(), (Admission, Event)> {
        // Declared before the guard, so dropped after the unlock (`intake.rs`, protocol 7 step 4).
        let mut stale = Stale::new(&self.stats);
        let mut inner = self.mailbox.inner.lock();
        let refused = self.mailbox.gate.admission(generation);
        if refused != Admission::Accepted {
            return Err((refused, event));
        }
        if inner.refuses_answer(&event) {
            // The answer to an ask its process gave up on: back to the answerer.
            return Err((Admission::Closed, event));
        }
        // The intake queue's events were sent before this one (or concurrently): they go first.
        // Past a slot a sender has not written yet, this one goes behind it instead.
        let lane = if self.mailbox.settle_intake(&mut inner, &mut stale) {
            Lane::Queue
        } else {
            Lane::Behind
        };
        if completion {
            self.stats.yield_completed();
        }
        if let Event::Message(message) = &event {
            let (admitted, marker) = inner.admit(message, self.mailbox.capacity());
            if admitted != Admission::Accepted {
                // An overflowing budget's marker: the process must see it.
                let wake = marker.map_or(DeferredWake::NONE, |marker| {
                    let _ = self.mailbox.enqueue(&mut inner, lane, marker);
                    self.wake_if_waiting(&inner)
                });
                drop(inner);
                wake.fire();
                return Err((admitted, event));
            }
            inner.queued_messages += 1;
        }
        if matches!(event, Event::Woken) && matches!(inner.lane(lane).back(), Some(Event::Woken)) {
            // Coalesced: the queued one has already woken (or flagged) the process.
            return Ok(());
        }
        // A lasting backlog installs the lock-free path for the messages that can take it
        // (`intake.rs`, "The intake queue").
        let installs_intake = matches!(&event, Event::Message(m) if m.budget.is_none())
            && self.mailbox.capacity() == usize::MAX;
        let depth = self.mailbox.enqueue(&mut inner, lane, event);
        if depth >= INTAKE_INSTALL_DEPTH && installs_intake {
            self.mailbox.intake.install();
        }
        let wake = self.wake_if_waiting(&inner);
        drop(inner);
        wake.fire();
        Ok(())
    }

    /// Protocol 2 step 2 of `state.rs`, under the lock: if this event moved the process from
    /// `Blocked`/`Idle` to `Ready`, its task's wake, to fire after unlocking. Only the producer
    /// that made that transition wakes, and the task cannot run again before it does, so waking
    /// after the lock is released loses nothing; it keeps the scheduling work (a queue push,
    /// perhaps an unpark) out of the critical section the worker's drain contends on. The wake's
    /// state transition is made here, under the lock, because the slot's waker may be dropped as
    /// soon as the lock is released (shutdown closes the cell): for the task's own waker, that
    /// one compare-and-swap also takes the reference the queued task needs (`DeferredWake`).
    #[inline]
    fn wake_if_waiting(&self, inner: &Inner) -> DeferredWake {
        if self.state.transition_on_event() == TransitionOnEvent::Wake {
            DeferredWake::prepare_opt(inner.waker.as_ref())
        } else {
            DeferredWake::NONE
        }
    }

    /// Asks the process of `generation` to stop before its next step, waking it if it waits.
    /// `Accepted`, or why not (`Closed`: it is already finishing; `Gone`).
    pub(crate) fn request_terminate(&self, generation: Generation) -> Admission {
        let mut inner = self.mailbox.inner.lock();
        let admission = self.mailbox.gate.admission(Some(generation));
        if admission == Admission::Accepted {
            inner.terminate = true;
            // As for an event: a running process re-checks before parking, a waiting one is woken.
            let wake = self.wake_if_waiting(&inner);
            drop(inner);
            wake.fire();
        }
        admission
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
        self.state.transition_to_complete();
        let mut stale = Stale::new(&self.stats);
        let (events, behind, topics, waker, task, room_waiters, exit_reason) = {
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
            while !self.mailbox.settle_intake(&mut inner, &mut stale) {
                backoff.snooze();
            }
            // An idle cell keeps one block of its intake queue, not two (`intake.rs`).
            self.mailbox.intake.shrink();
            inner.queued_messages = 0;
            inner.unread = 0;
            inner.abandoned = None;
            (
                std::mem::take(&mut inner.events),
                std::mem::take(&mut inner.behind),
                std::mem::take(&mut inner.topics),
                inner.waker.take(),
                inner.task.take(),
                // They try again, and hear that the process is gone.
                inner.take_all_waiters(),
                inner.watch.as_mut().and_then(|state| state.take_exit()),
            )
        };
        room_waiters.wake();
        // Outside the lock: payload destructors are user code, and freeing a large map or queue
        // is not work a concurrent (refused) producer should wait behind.
        let mut panics = drop_each(events.into_events()) + drop_each(behind.into_events());
        drop(stale);
        drop(topics);
        panics += drop_contained(waker);
        drop(task);
        (panics, exit_reason)
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
    /// a `cancel` ([`ask_cancel`](Self::ask_cancel)).
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

    /// A `cancel` is about to ask the process of `generation` to finish: remembered for how
    /// its end is counted, whatever it then does.
    pub(crate) fn ask_cancel(&self, generation: Generation) {
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.admission(Some(generation)) == Admission::Accepted {
            inner.cancel_asked = true;
        }
    }

    /// [`release`](Self::release), for tests that look at the watches.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn release_watched(&self) -> (Generation, Vec<Watch>) {
        self.release()
    }

    /// A lock-free push by a sender that read an open gate for `generation` before its process
    /// closed, with the sender's check after it (protocol 7, steps 2, 3 and 5).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn push_late(&self, generation: Generation, message: Message) {
        self.mailbox
            .push_to_intake(generation, Event::Message(message))
            .expect("an intake queue is installed");
        self.after_lock_free_push(generation);
    }
}

/// A count of unread messages as the mailbox (`Inner::unread`) and the poller keep it:
/// saturating, since beyond `u32::MAX` a capacity is unbounded in practice.
pub(crate) fn saturate(unread: usize) -> u32 {
    u32::try_from(unread).unwrap_or(u32::MAX)
}

/// Which of the locked queues a locked push goes to (`Mailbox::settle_intake`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// The locked queue: nothing waits in the intake queue ahead of it.
    Queue,
    /// Behind the intake queue (a diversion: `intake.rs`).
    Behind,
}

impl Inner {
    fn lane(&self, lane: Lane) -> &Queue {
        match lane {
            Lane::Queue => &self.events,
            Lane::Behind => &self.behind,
        }
    }
}

impl Mailbox {
    /// Queues `event` in `lane` (under the lock); returns the mailbox's depth.
    fn enqueue(&self, inner: &mut Inner, lane: Lane, event: Event) -> usize {
        let depth = match lane {
            Lane::Queue => inner.events.push_back(event) + inner.behind.len(),
            Lane::Behind => inner.behind.push_back(event) + inner.events.len(),
        };
        inner.max_depth = inner.max_depth.max(depth);
        depth
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
