//! Senders waiting for room in a bounded mailbox (`Addr::send_wait`): tokio's bounded
//! `Sender::send(..).await`, where `send` alone refuses a full mailbox.
//!
//! # A line, not a crowd
//! Waiting senders stand in a first-come line, and room for `n` messages wakes the first `n`
//! of them, as tokio's bounded channel hands its permits out. Waking every waiter for any room
//! (this module's first version) made a drain of `n` messages wake a thousand senders of whom
//! `n` got in: with 1 000 senders behind a 16-message mailbox, 3–4× tokio's time per message,
//! and 10–70× with 10–100 senders, each round of room waiting for a crowd to be scheduled.
//!
//! A waiter is named by a [`Ticket`], unique for the life of the program, so that a sender's
//! future can find its place again whatever happened to the cell since (reused by another
//! process, its line woken by a `close`).
//!
//! # Protocol 12
//! Checked by `loom_a_sender_waiting_for_room_is_woken_by_the_drain_that_makes_it`,
//! `loom_a_woken_sender_that_gives_up_passes_the_room_on` and
//! `loom_a_sender_that_gives_up_on_its_cancel_while_polled_passes_the_room_on`
//! (`process/tests/loom_mailbox.rs`).
//! Everything below runs under the mailbox lock; wakers are woken after the unlock.
//! 1. A sender refused for the capacity calls [`ProcessCell::wait_for_room`]: if the process is
//!    still open and its mailbox still full, it takes its place — at the back when it first
//!    waits; at the front when it was woken and refused again (room it was woken for went to
//!    a sender that did not wait): its wait is kept. Otherwise it tries again at once (room was
//!    made, or the process ended, since the refusal).
//! 2. Whatever makes room — a drain that moves messages out (`drain.rs`), a body that handled
//!    messages it held unread ([`ProcessCell::set_unread`]) — takes the first waiters, as many
//!    as there is room, and wakes them. `close` wakes them all: they hear the process is gone.
//! 3. A waiter polled again tries again only if it was woken: one still in line keeps its
//!    place ([`ProcessCell::still_in_line`]) — the room there is went to those before it.
//!    Delivered, or back to step 1.
//! 4. A waiter done waiting — delivered, or given up (its future dropped, or, in a process's
//!    body, its process's cancel heard in a poll that found no room) — leaves the line
//!    ([`ProcessCell::leave_room_line`]). One no longer in it was woken, and the room it was
//!    woken for may be unused: given up, or delivered on other room (its task polled for
//!    another reason) just before being woken. It wakes the next in line if room remains.
//!
//! Both sides decide under the one lock, so a waiter is never kept after the room it waits for
//! was made, and room given to a waiter is used or passed on: no sender waits for ever beside
//! room. Nothing here touches an unbounded mailbox, and a bounded one's paths pay one
//! comparison while no one waits.

use super::{Admission, Generation, Inner, ProcessCell};
use super::{Mailbox, Phase};
use crate::process::foreign_wake;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Waker;

/// A waiting sender's name in the line of the mailbox it waits for (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket(u64);

impl Ticket {
    fn new() -> Ticket {
        // Uniqueness is all it is for: no order with anything else. A plain (not loom) atomic:
        // models never interleave on it.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Ticket(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The senders waiting for room, first in line first. Boxed and `None` while empty: one word
/// in every cell.
pub(super) type RoomWaiters = Option<Box<VecDeque<(Ticket, Waker)>>>;

/// Waiters taken from the line, to wake after the unlock.
pub(super) enum ToWake {
    None,
    One(Waker),
    /// The whole line.
    All(VecDeque<(Ticket, Waker)>),
    Some(Vec<Waker>),
}

impl ToWake {
    /// Wakes them (after the unlock); returns how many wakers panicked. Each waker is a
    /// sender's task's, which we do not own: a panic of one is contained (`foreign_wake.rs`),
    /// so the others are still woken and whoever wakes them — a drain in a body's poll, a
    /// `close` — goes on. Room made for a waiter whose waker broke is passed on by
    /// [`Mailbox::wake_room`].
    #[must_use]
    #[inline]
    pub(super) fn wake(self) -> usize {
        match self {
            ToWake::None => 0,
            to_wake => to_wake.wake_some(),
        }
    }

    /// [`wake`](Self::wake) with waiters to wake.
    fn wake_some(self) -> usize {
        let wake = |waker: Waker| {
            usize::from(foreign_wake("a sender waiting for room", move || waker.wake()).is_none())
        };
        match self {
            ToWake::None => 0,
            ToWake::One(waker) => wake(waker),
            ToWake::All(line) => line.into_iter().map(|(_, waker)| wake(waker)).sum(),
            ToWake::Some(wakers) => wakers.into_iter().map(wake).sum(),
        }
    }
}

impl Inner {
    /// Messages counted against the capacity: queued, and drained but unread.
    #[inline]
    pub(super) fn used(&self) -> usize {
        self.queued_messages + self.unread as usize
    }

    /// Step 2: the first waiters, as many as there is room under `capacity`, if room was made
    /// since the use was `before`.
    #[inline]
    pub(super) fn room_made(&mut self, before: usize, capacity: usize) -> ToWake {
        if self.room_waiters.is_none() || self.used() >= before {
            return ToWake::None;
        }
        self.take_waiters(capacity.saturating_sub(self.used()))
    }

    /// Close: every waiter, to hear that the process is gone.
    pub(super) fn take_all_waiters(&mut self) -> ToWake {
        self.room_waiters
            .take()
            .map_or(ToWake::None, |line| ToWake::All(*line))
    }

    /// The first `room` waiters, out of the line.
    fn take_waiters(&mut self, room: usize) -> ToWake {
        let Some(line) = self.room_waiters.as_mut() else {
            return ToWake::None;
        };
        if room >= line.len() {
            return self.take_all_waiters();
        }
        match room {
            0 => ToWake::None,
            1 => line
                .pop_front()
                .map_or(ToWake::None, |(_, waker)| ToWake::One(waker)),
            _ => ToWake::Some(line.drain(..room).map(|(_, waker)| waker).collect()),
        }
    }

    /// Removes `ticket` from the line: `true` if it was there (not woken since it last waited).
    fn leave_line(&mut self, ticket: Ticket) -> bool {
        let Some(line) = self.room_waiters.as_mut() else {
            return false;
        };
        let Some(at) = line.iter().position(|(kept, _)| *kept == ticket) else {
            return false;
        };
        drop(line.remove(at));
        if line.is_empty() {
            self.room_waiters = None;
        }
        true
    }
}

impl ProcessCell {
    /// Step 1: a sender of `generation`, refused for the capacity, waits for room: `true` if its
    /// wait is kept (woken once room is made for it or the process ends), `false` if it should
    /// try again now. `ticket` is its place in line: `None` until it first waits.
    pub(crate) fn wait_for_room(
        &self,
        generation: Generation,
        waker: &Waker,
        ticket: &mut Option<Ticket>,
    ) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.admission(Some(generation)) != Admission::Accepted
            || inner.used() < self.mailbox.capacity()
        {
            return false;
        }
        let line = inner.room_waiters.get_or_insert_with(Box::default);
        match *ticket {
            // Woken, and refused again: the room it was woken for went to another sender (one
            // still in line does not try: step 3).
            Some(kept) => line.push_front((kept, waker.clone())),
            None => {
                let new = Ticket::new();
                line.push_back((new, waker.clone()));
                *ticket = Some(new);
            }
        }
        true
    }

    /// Whether a sender of `generation` refused for the capacity would be let in now (room was
    /// made) or refused for good (the process ended): what a spinning sender looks for before
    /// it waits in line (`scheduler/spin_wait.rs`). Only a look: the send that follows decides.
    pub(crate) fn room_or_gone(&self, generation: Generation) -> bool {
        let inner = self.mailbox.inner.lock();
        self.mailbox.gate.admission(Some(generation)) != Admission::Accepted
            || inner.used() < self.mailbox.capacity()
    }

    /// Step 3's first half: `true` if the sender of `generation` that waits with `ticket` is
    /// still in line (not woken since it last waited): it must not try yet — the room there is
    /// was given to the senders before it — and keeps its place, with `waker` as its waker.
    /// `false` if it was woken (or the process ended): it tries again.
    pub(crate) fn still_in_line(
        &self,
        generation: Generation,
        ticket: Ticket,
        waker: &Waker,
    ) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.admission(Some(generation)) != Admission::Accepted {
            return false;
        }
        let Some(line) = inner.room_waiters.as_mut() else {
            return false;
        };
        match line.iter_mut().find(|(in_line, _)| *in_line == ticket) {
            Some((_, current)) => {
                if !current.will_wake(waker) {
                    *current = waker.clone();
                }
                true
            }
            None => false,
        }
    }

    /// Steps 3 and 4: a sender of `generation` that waited with `ticket` is done waiting —
    /// delivered, or given up. Out of the line; if it is not in it, it was woken, and the room
    /// it was woken for may be unused (it gave up, or it was delivered on other room just
    /// before): the next in line is woken, if room remains. At worst a spurious wake, which
    /// puts that waiter back at the front.
    pub(crate) fn leave_room_line(&self, generation: Generation, ticket: Ticket) {
        let to_wake = {
            let mut inner = self.mailbox.inner.lock();
            if inner.leave_line(ticket)
                || self.mailbox.gate.admission(Some(generation)) != Admission::Accepted
            {
                ToWake::None
            } else {
                let room = self.mailbox.capacity().saturating_sub(inner.used());
                inner.take_waiters(room.min(1))
            }
        };
        self.mailbox.wake_room(to_wake);
    }
}

impl Mailbox {
    /// Step 2's wake, after the unlock: the waiters room was made for. One whose waker panicked
    /// will not run to use its room (its task's waker is what broke), so the room goes on to
    /// the next in line — as a waiter that gives up passes its room on (step 4) — while the
    /// process is open (a `close` wakes the whole line, to hear it is gone).
    #[inline]
    pub(super) fn wake_room(&self, to_wake: ToWake) {
        match to_wake {
            // Nearly every drain: no one waits for room.
            ToWake::None => {}
            to_wake => self.wake_room_some(to_wake),
        }
    }

    /// [`wake_room`](Self::wake_room) with waiters to wake.
    fn wake_room_some(&self, mut to_wake: ToWake) {
        loop {
            let broken = to_wake.wake();
            if broken == 0 {
                return;
            }
            to_wake = {
                let mut inner = self.inner.lock();
                if self.gate.load().1 != Phase::Open {
                    return;
                }
                let room = self.capacity().saturating_sub(inner.used());
                inner.take_waiters(room.min(broken))
            };
        }
    }
}
