//! The per-process event queue, bound to a generation, and the process's shared cell.
//!
//! Producers — message senders and yield completers — push under a short mutex (never held
//! while user code runs; `deliver.rs`); the one consumer is the worker stepping the process,
//! which moves a bounded batch out per step (`drain.rs`). Messages to a mailbox with a backlog
//! skip the mutex: they go into a lock-free queue (`intake.rs`, protocol 7), which every
//! consumer empties behind the locked queue, under the mutex.
//!
//! # Cells are pooled; generations guard them
//! A [`ProcessCell`] is a slot of the scheduler's process table and hosts one process after
//! another. Each incarnation has a *generation* (1, 2, …; it is part of the process's [`Pid`](super::Pid)),
//! and the cell goes through three phases per incarnation, all under the mailbox lock
//! (`lifecycle.rs`):
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
mod deliver;
pub(crate) mod drain;
pub(crate) mod intake;
mod lifecycle;
mod lock;
mod observe;
mod room;
mod watch;

pub(crate) use lifecycle::UnreadMail;
pub(crate) use room::Ticket;
// What a delivery did is logged by the scheduler (`links.rs`) and checked by the loom models.
#[cfg(all(test, loom))]
pub(crate) use watch::ExitDelivery;
pub(crate) use watch::{Watch, Watcher};

use super::queue::Queue;
use super::state::StateWord;
use super::stats::CellStats;
use super::{Event, Events, MessageType};
use crate::executor::TaskRef;
use crate::loom::atomic::AtomicUsize;
use budget::TopicMap;
use intake::{Gate, Intake};
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
    /// A message over the mailbox capacity: not queued.
    Dropped,
    /// A message over its topic budget: not queued (the topic's overflow marker is, once).
    /// Apart from `Dropped` because room in the mailbox does not end it: only the process
    /// receiving the marker does, so a sender that waits for room must not wait for this.
    OverBudget,
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
    /// Most queued messages of the current incarnation (its `MailboxBound`: the scheduler's
    /// `mailbox_capacity` or its own); `usize::MAX` when unbounded. Set by `open_as` before the gate
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
    /// A `Cancel` was queued for the process (a `cancel`, its supervisor's exit, a shutdown):
    /// one that then finishes however it likes is counted cancelled (`FinishCounts`; a
    /// shutdown's report tallies its own), and one that ends well having read it ends
    /// `Shutdown` (`future.rs`, `finish`).
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
    /// What bounds its mailbox: the scheduler's `mailbox_capacity`, or its own (a spawn's
    /// `SpawnOptions` or a supervised child's `ChildOptions`; a supervisor's, which is unbounded
    /// whatever `mailbox_capacity` says).
    pub(crate) mailbox: MailboxBound,
}

/// What bounds one incarnation's mailbox, resolved to a capacity when its cell opens
/// (`Table::claim_as`): the send path reads only that capacity, never this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MailboxBound {
    /// The scheduler's `mailbox_capacity`.
    #[default]
    Scheduler,
    /// At most this many messages (0 refuses every one, as `mailbox_capacity(0)` does).
    Capacity(usize),
    /// No bound, whatever `mailbox_capacity` says.
    Unbounded,
}

impl MailboxBound {
    /// The capacity it gives a mailbox on a scheduler whose `mailbox_capacity` is
    /// `scheduler` (`usize::MAX`: unbounded, as the cell counts it).
    pub(crate) fn capacity(self, scheduler: usize) -> usize {
        match self {
            MailboxBound::Scheduler => scheduler,
            MailboxBound::Capacity(capacity) => capacity,
            MailboxBound::Unbounded => usize::MAX,
        }
    }
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
        self.mailbox.wake_room(to_wake);
    }

    /// `true` if the mailbox has a capacity (the scheduler's `mailbox_capacity` or its own).
    #[inline]
    pub(crate) fn is_bounded(&self) -> bool {
        self.mailbox.capacity() != usize::MAX
    }

    /// `true` if the mailbox refuses every message (a capacity of 0): waiting for room
    /// in it would be waiting for its process to end.
    #[inline]
    pub(crate) fn never_has_room(&self) -> bool {
        self.mailbox.capacity() == 0
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
    /// The mailbox's depth now (under the lock), recorded in its high-water mark: the
    /// lock-free intake's pushes do not update the mark (the drain does, when it empties the
    /// intake), so an observer that reads a depth makes it a peak at least that high, as the
    /// metrics promise (`mailbox_high_water`: at least any depth `process_info` has shown).
    #[inline]
    fn depth_seen(&self, inner: &mut Inner) -> usize {
        let depth = inner.events.len() + inner.behind.len() + self.intake.len();
        inner.max_depth = inner.max_depth.max(depth);
        depth
    }

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
