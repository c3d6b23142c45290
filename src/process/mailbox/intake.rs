//! The mailbox's lock-free path for messages: the *gate* (which incarnation the cell hosts,
//! readable without the lock) and the *intake queue* (an unbounded lock-free queue that
//! senders push into, `blocks.rs`).
//!
//! # Why
//! Sending to a process that is busy draining its mailbox is the mailbox's hardest case: the
//! sender and the worker meet on the same lock for every message. `probe send_one_from_thread`
//! (one thread sending 10 000 messages to one process, 2 workers) measured 138 ns/send with every
//! send under the lock: a quarter of the samples in the push (the lock's CAS, the state word's
//! CAS, the unlock's `xchg`, each a cache miss against the drainer), another fifth in
//! `lock_contended` on both sides, futex sleeps included. Tokio's mpsc, which a native actor
//! uses, has no lock there.
//!
//! # The gate
//! One `AtomicU64`, `generation << 3 | DIVERTED | phase` (module docs of `mailbox`: `Free`,
//! `Open`, `Closing`; `DIVERTED`: below, "Each sender's messages stay in order"). It is the one copy of the cell's generation and phase: written only under the
//! mailbox lock (by `open_as`, `close`, `release`), so it always agrees with what the lock
//! protects, and read with `Acquire` by a sender that does not take the lock. `open_as` moves the
//! state word to `Ready` before it opens the gate, so a sender that sees its generation open also
//! sees that process's state word (`state.rs`, protocol 1).
//!
//! # The intake queue
//! An unbounded multi-producer queue of `(generation, event)` ([`BlockQueue`], `blocks.rs`:
//! blocks of 31 slots that the consumer recycles, so a sender the worker keeps up with never
//! allocates; why no crate's queue does the job is in its docs). Only messages take it, and
//! only to an unbounded mailbox and without a topic budget: capacity and budgets are counted
//! under the lock. Everything else — completions, budgeted messages, terminate, `Woken` — takes
//! the locked path, as do messages while no intake queue is installed.
//!
//! One is installed the first time a message finds [`INTAKE_INSTALL_DEPTH`] events queued
//! ahead of it in an unbounded mailbox (a backlog that lasts), so a process that gets one
//! message at a time (a request, a ring token), or two that happen to meet, never pays for one:
//! it costs the drain a look at its head slot, a cold line in a workload of many small
//! mailboxes (the process bench's `ring`, 1 000 processes passing a token, went from 10.4 to
//! 17.3 ms per iteration when its link-and-token pairs installed one at depth 2; 12.8 ms at
//! this depth, the rest being the path's own instructions). It then
//! stays with the *cell*, for the processes it hosts later too: a sender that read the pointer may
//! still be pushing into it after the process finished, and freeing it safely would need a
//! reclamation scheme (epochs, or a count of senders inside) that costs every send. The cost is
//! bounded: the queue's two halves and its current block, 3.2 KB on x86_64, once its process has
//! ended (`close` frees the spare block), and one block more while a process lives (the spare:
//! [`INTAKE_BYTES`], checked at compile time) — where tokio's mpsc allocates a 32-slot block for
//! every channel up front. A flood allocates blocks as it needs them; the drain frees all but
//! the spare as it goes.
//!
//! # Protocol 7: a lock-free send
//! 1. The sender loads the gate (`Acquire`). It continues only if the gate is `Open` with the
//!    generation of the PID it names and no diversion is on (below), the message qualifies
//!    (above) and an intake queue is installed; otherwise it takes the locked path, which also
//!    decides every refusal (`Closed`, `Gone`, `Dropped`), so refusals mean the same on both
//!    paths.
//! 2. It pushes `(generation, event)` into the intake queue (`blocks.rs`, protocol 8: a claim by
//!    CAS on the queue's tail, then the write), as a [`Stamped`].
//! 3. It loads the gate again. Still `Open` with its generation (a diversion or not): it calls
//!    [`StateWord::transition_on_event`](crate::process::state::StateWord) (protocol 2, step 2)
//!    without the lock. On `Wake` it takes the lock only to clone the registered waker, then
//!    wakes after unlocking. Otherwise, step 5.
//! 4. Every *consumer* of the intake queue holds the mailbox lock, so it has one consumer at a
//!    time: the drain (the locked queue first, then the intake queue, then the diverted events),
//!    a locked push (moves the intake queue's events into the locked queue before queueing its
//!    own), `close` (drops them with the queue). The drain and a locked push never wait for a
//!    slot that a sender has claimed and not written yet (`blocks.rs`, pop step 1): the drain
//!    stops there, and a locked push that meets one starts a diversion (below). `close` waits
//!    for it — once per process, for a sender between two adjacent writes — so that nothing
//!    sent to the process outlives it behind such a slot. An event whose generation is not the
//!    gate's is *stale* and is dropped, after the lock is released (its payload's destructor is
//!    user code, which may send to this very process).
//! 5. A sender whose step 3 found the process closing or gone (its `close` stores `Closing`
//!    before it empties the queue) takes the lock and drops what the queue holds for no open
//!    process, leaving a next process's events, in order, in the locked queue. Its send still
//!    returns `Ok`: accepted, then dropped unread with its process, as a message queued just
//!    before the end is.
//!
//! **Nothing sent outlives its process.** A message accepted by a lock-free send is dropped by
//! `close`, by its own sender before its send returns, or (stale) by whichever consumer meets
//! it first — never left for a next process that may never come (a `Reply` inside it would
//! leave its asker waiting for ever). Either the sender's claim comes before `close`'s last
//! emptiness check (a CAS of the tail, pop step 1) in the tail's modification order, and `close`
//! sees the claim and waits for the write; or after it, and then the claim reads from that CAS,
//! which `close` made after storing `Closing`: step 3 sees the gate closed (or later values).
//!
//! **No wake is lost.** Step 3 may find a poll already due or flagged and write nothing: a
//! store-then-load pattern against the worker, which clears the flag (an RMW of the state word)
//! and then looks at the queue. What closes it is that the worker, finding the head slot empty,
//! checks for a claim with a CAS of the queue's tail (protocol 8, pop step 1), not a load:
//! either that CAS comes after the sender's claim in the tail's modification order (the worker
//! sees the claim, leaves the slot and everything behind it for later, and does not park: the
//! process polls again after the other ready work, `future.rs` step 5 — it cannot count on a
//! wake from that sender, whose step 3 may find the poll flagged by someone else and write
//! nothing) or before it (then the claim reads the CAS's value, the worker's clearing of the
//! flag happens before the sender's step 3, which sees it cleared and sets it, or wakes).
//! Either way protocol 2's argument carries over. A load there would not do: the C++ model,
//! which Rust's atomics follow, lets both sides read the old values.
//!
//! **Nothing reaches a later process.** A stale event carries its generation, and every consumer
//! compares it with the gate. The sender's step 3 may still touch the next process's state word:
//! at worst one spurious poll, which finds nothing (a step may always see an empty batch).
//!
//! **Each sender's messages stay in order** across the two paths, and more: an event whose push
//! finished before another's began is stepped first, whichever paths the two took. Every drain
//! takes the locked queue, then the intake queue, then the diverted events (`Inner::behind`),
//! and a locked push first moves the intake queue into the locked one. That move stops at a
//! slot claimed and not yet written (the sender preempted between its claim and its write: 16
//! senders on 2 cores), or after `SETTLE_AT_MOST` events (`drain.rs`: a push must not pay for
//! a backlog of millions under the lock), and then — rather than wait for that sender, or move
//! the rest, under the lock — the push starts a *diversion*:
//! - it sets the gate's `DIVERTED` bit (under the lock) and queues its event in `behind`;
//! - while the bit is set, every sender that reads it takes the locked path, whose events join
//!   `behind` too (a sender that read the gate before the bit was set is concurrent with the
//!   diverted events: either order is right for it);
//! - a drain takes `behind` only once the intake queue is empty (nothing claimed), and ends
//!   the diversion when it has taken all of it; a locked push that finds the intake queue
//!   empty moves `behind` into the locked queue and ends it as well; `close` ends it.
//!
//! Why that keeps the order, for an event `a` pushed before `b`: if `b` is locked and `a` is in
//! the intake queue, `b` lands in the locked queue only after `a` was moved there, and otherwise
//! in `behind`, which no drain reaches before the intake queue is empty. If `a` is in `behind`
//! (a diversion was on when it was queued, under the lock), `b`'s sender reads the gate after
//! that store, so it sees the bit — and joins `behind` after `a` — unless the diversion ended,
//! which happens only once `a` has left `behind`. Locked queue before intake queue, and a
//! lock-free `b` never entering the locked queue, cover the remaining cases.
//!
//! Checked by `loom_lock_free_send_racing_a_park`, `loom_lock_free_send_racing_close_and_reuse`
//! (the send's payload dropped by the time the send and `close` are done),
//! `loom_one_senders_messages_keep_their_order_across_both_paths` and
//! `loom_a_locked_push_behind_an_unwritten_slot_never_waits_and_keeps_the_order`
//! (`process/tests/loom_intake.rs`), on the real queue (at two slots per block under loom); the
//! queue's own protocol by `process/tests/loom_blocks.rs`.

use super::blocks::{BlockQueue, Pop};
use super::{Admission, Generation, Phase};
use crate::loom::atomic::{AtomicPtr, AtomicU64, Ordering};
use crate::process::stats::CellStats;
use crate::process::{drop_contained, drop_each, Event, Message};
use std::mem::ManuallyDrop;

/// The locked queue's depth at which a message installs the intake queue: a backlog that
/// lasts, not two messages that happened to meet (a link and a token sent to a process not yet
/// polled).
pub(crate) const INTAKE_INSTALL_DEPTH: usize = 8;

/// A message in the intake queue and the generation it was sent to.
///
/// Kept whole: a layout of 56 bytes (a typed send's message as its payload alone, any other
/// message's sender and topic boxed, slots aligned to one cache line) was tried against the
/// 96-byte slot and measured no faster on a 2-core VM (`msgprobe sm`/`async`, alternated),
/// while it put an allocation on an untyped send to a backlogged process.
pub(crate) struct Stamped {
    generation: Generation,
    message: Message,
}

impl Stamped {
    /// Stamps `message`, one without a topic budget (those take the locked path, protocol 7).
    /// Never panics: it runs between a slot's claim and its write, and a claim never written
    /// would stop every consumer — and the process's `close`, which waits for it — for good.
    #[inline(always)]
    pub(crate) fn new(generation: Generation, message: Message) -> Stamped {
        Stamped {
            generation,
            message,
        }
    }

    /// The generation it was sent to and its event.
    #[inline(always)]
    fn into_parts(self) -> (Generation, Event) {
        (self.generation, Event::Message(self.message))
    }
}

/// The queue a cell's lock-free senders push into.
pub(super) type IntakeQueue = BlockQueue<Stamped>;

/// What an installed intake queue keeps while its process lives, at most: the queue, its
/// current block and the spare (module docs, "The intake queue").
#[cfg(not(loom))]
const INTAKE_BYTES: usize =
    std::mem::size_of::<IntakeQueue>() + 2 * BlockQueue::<Stamped>::BLOCK_BYTES;

// What a cell keeps once it had a backlog: a few kilobytes, whatever the flood. An `Event` that
// grows must not silently make every backlogged cell pay for it.
#[cfg(not(loom))]
const _: () = assert!(INTAKE_BYTES <= 7 * 1024);

/// The cell's generation and phase, readable without the lock (module docs, "The gate").
pub(super) struct Gate(AtomicU64);

impl Gate {
    /// `Free`, generation 0: a new cell.
    pub(super) fn new() -> Gate {
        Gate(AtomicU64::new(encode(0, Phase::Free, false)))
    }

    /// The generation and phase. Under the mailbox lock this is the current value (the lock
    /// orders every write); without it, the value of some recent moment (protocol 7, step 1).
    #[inline]
    pub(super) fn load(&self) -> (Generation, Phase) {
        decode(self.0.load(Ordering::Acquire))
    }

    /// Sets both (and ends a diversion). Only under the mailbox lock.
    #[inline]
    pub(super) fn store(&self, generation: Generation, phase: Phase) {
        self.0
            .store(encode(generation, phase, false), Ordering::Release);
    }

    /// `true` while messages are diverted to the locked path (module docs, "Each sender's
    /// messages stay in order"). Only under the mailbox lock.
    #[inline]
    pub(super) fn is_diverted(&self) -> bool {
        self.0.load(Ordering::Relaxed) & DIVERTED != 0
    }

    /// Starts or ends a diversion. Only under the mailbox lock, while the cell is `Open`.
    pub(super) fn set_diverted(&self, diverted: bool) {
        let (generation, phase) = self.load();
        self.0
            .store(encode(generation, phase, diverted), Ordering::Release);
    }

    /// Whether a push bound to `generation` (`None`: the current one) may enter.
    pub(super) fn admission(&self, generation: Option<Generation>) -> Admission {
        let (current, phase) = self.load();
        if generation.is_some_and(|g| g != current) {
            return Admission::Gone;
        }
        match phase {
            Phase::Open => Admission::Accepted,
            Phase::Closing => Admission::Closed,
            Phase::Free => Admission::Gone,
        }
    }

    /// `true` if the process of `generation` is open, diverted or not: a sender's check after
    /// its push (protocol 7, step 5).
    #[inline]
    pub(super) fn is_current(&self, generation: Generation) -> bool {
        self.0.load(Ordering::Acquire) & !DIVERTED == encode(generation, Phase::Open, false)
    }

    /// `true` if the process of `generation` is open and no diversion is on: the fast path's
    /// check (protocol 7, step 1).
    #[inline]
    pub(super) fn is_open(&self, generation: Generation) -> bool {
        self.0.load(Ordering::Acquire) == encode(generation, Phase::Open, false)
    }
}

/// The gate's bit for a diversion (module docs, "Each sender's messages stay in order").
const DIVERTED: u64 = 0b100;

fn encode(generation: Generation, phase: Phase, diverted: bool) -> u64 {
    let phase = match phase {
        Phase::Free => 0,
        Phase::Open => 1,
        Phase::Closing => 2,
    };
    generation << 3 | u64::from(diverted) << 2 | phase
}

fn decode(word: u64) -> (Generation, Phase) {
    let phase = match word & 3 {
        0 => Phase::Free,
        1 => Phase::Open,
        _ => Phase::Closing,
    };
    (word >> 3, phase)
}

/// What the intake queue held next, for the generation the consumer asked for.
#[must_use]
#[derive(Debug)]
pub(super) enum Next {
    /// Its oldest event (stale ones before it were set aside).
    Event(Event),
    /// Nothing is claimed: the queue is empty.
    Empty,
    /// The oldest slot is claimed and not yet written (`blocks.rs`, pop step 1): left for a
    /// later consumer. Its sender tells the process once it has written it (protocol 7, step 3).
    Unwritten,
}

/// The cell's intake queue, once installed (module docs, "The intake queue").
pub(super) struct Intake {
    /// Null until [`install`](Self::install); then a `Box<IntakeQueue>` owned by this `Intake`,
    /// freed only by its `Drop`.
    queue: AtomicPtr<IntakeQueue>,
}

impl Intake {
    pub(super) fn new() -> Intake {
        Intake {
            queue: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The intake queue, if installed: protocol 7's senders push into it (step 2).
    #[inline]
    pub(super) fn installed(&self) -> Option<&IntakeQueue> {
        let queue = self.queue.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` in `install` (published with
        // `Release`, read here with `Acquire`, so the queue's initialisation is visible), and it
        // is freed only by `Drop`, which has `&mut self`: it outlives every `&self` borrow.
        unsafe { queue.as_ref() }
    }

    /// `true` once an intake queue is installed.
    #[inline]
    pub(super) fn is_installed(&self) -> bool {
        self.installed().is_some()
    }

    /// Installs the intake queue if there is none. Under the mailbox lock, which makes the check
    /// and the store one step: two installs never race.
    pub(super) fn install(&self) {
        if self.is_installed() {
            return;
        }
        let queue = Box::into_raw(Box::new(IntakeQueue::new()));
        self.queue.store(queue, Ordering::Release);
    }

    /// The oldest event. Only under the mailbox lock (protocol 7, step 4).
    #[inline(always)]
    fn pop(&self) -> Pop<Stamped> {
        match self.installed() {
            // SAFETY: every caller holds the mailbox lock, which makes it the queue's one
            // consumer.
            Some(queue) => unsafe { queue.pop() },
            None => Pop::Empty,
        }
    }

    /// The oldest event sent to `generation`, setting aside the stale ones popped before it;
    /// never waits for a claimed slot's value. Only under the mailbox lock (protocol 7, step 4).
    #[inline(always)]
    pub(super) fn pop_current(&self, generation: Generation, stale: &mut Stale<'_>) -> Next {
        loop {
            match self.pop() {
                Pop::Value(stamped) => match stamped.into_parts() {
                    (sent_to, event) if sent_to == generation => return Next::Event(event),
                    (_, event) => stale.push(event),
                },
                Pop::Empty => return Next::Empty,
                Pop::Unwritten => return Next::Unwritten,
            }
        }
    }

    /// Sets aside every event up to the first unwritten slot, whatever its generation: no
    /// process is open to take them (protocol 7, step 5). Only under the mailbox lock.
    pub(super) fn set_aside_all(&self, stale: &mut Stale<'_>) {
        while let Pop::Value(stamped) = self.pop() {
            stale.push(stamped.into_parts().1);
        }
    }

    /// Events in the intake queue (stale ones included). Only under the mailbox lock, for
    /// statistics.
    pub(super) fn len(&self) -> usize {
        // SAFETY: as in `pop`.
        self.installed().map_or(0, |queue| unsafe { queue.len() })
    }

    /// `true` if no event is in the intake queue. Only under the mailbox lock.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        // SAFETY: as in `pop`.
        self.installed()
            .is_none_or(|queue| unsafe { queue.is_empty() })
    }

    /// Frees the queue's spare block: its process has ended (module docs, the bound). Only
    /// under the mailbox lock.
    pub(super) fn shrink(&self) {
        if let Some(queue) = self.installed() {
            queue.free_spare();
        }
    }
}

impl Drop for Intake {
    fn drop(&mut self) {
        // A load rather than `get_mut`, which loom's atomics lack; `&mut self` orders it anyway.
        let queue = self.queue.load(Ordering::Acquire);
        if queue.is_null() {
            return;
        }
        // SAFETY: installed by `Box::into_raw`, never freed before; `&mut self` means no sender
        // holds a reference any more.
        let queue = unsafe { Box::from_raw(queue) };
        // Payload destructors are user code: contained one by one, as everywhere else.
        // SAFETY: `&mut self`: no other consumer.
        while let Pop::Value(stamped) = unsafe { queue.pop() } {
            drop_contained(stamped.into_parts().1);
        }
    }
}

/// Events the intake queue held for a finished incarnation (protocol 7, step 4), collected
/// under the lock and dropped when this value is, after the lock: declare it *before* the guard.
/// Their destructors' panics are contained and counted in the cell's statistics.
///
/// Every locked push and every drain makes one, and nearly all stay empty: the `ManuallyDrop`
/// keeps the vector's drop glue (an out-of-line call per push) off that path.
pub(super) struct Stale<'a> {
    events: ManuallyDrop<Vec<Event>>,
    stats: &'a CellStats,
}

impl<'a> Stale<'a> {
    #[inline]
    pub(super) fn new(stats: &'a CellStats) -> Stale<'a> {
        Stale {
            events: ManuallyDrop::new(Vec::new()),
            stats,
        }
    }

    pub(super) fn push(&mut self, event: Event) {
        self.events.push(event);
    }

    #[cold]
    fn drop_events(&mut self) {
        // What is left behind is an empty, unallocated vector: nothing for `ManuallyDrop` to leak.
        let panics = drop_each(std::mem::take(&mut *self.events));
        self.stats.destructors_panicked(panics);
    }
}

impl Drop for Stale<'_> {
    #[inline]
    fn drop(&mut self) {
        // Empty and unallocated unless a stale event was pushed.
        if self.events.capacity() != 0 {
            self.drop_events();
        }
    }
}
