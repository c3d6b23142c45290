//! Senders waiting for room in a bounded mailbox (`Addr::send_wait`): tokio's bounded
//! `Sender::send(..).await`, where `send` alone refuses a full mailbox.
//!
//! Protocol 12 (loom model `loom_a_sender_waiting_for_room_is_woken_by_the_drain_that_makes_it`):
//! 1. A sender refused for the capacity calls [`ProcessCell::wait_for_room`]: under the lock,
//!    if the process is still open and its mailbox still full, its waker is kept; otherwise it
//!    tries again at once (room was made, or the process ended, since the refusal).
//! 2. Whatever makes room — a drain that moves messages out (`drain.rs`), a body that handled
//!    messages it held unread ([`ProcessCell::set_unread`]) — or ends the process (`close`)
//!    takes the kept wakers in the same critical section, and wakes them after the unlock.
//!
//! Both sides decide under the one lock, so a waker is never kept after the room it waits for
//! was made: no wake is lost. Every waiter is woken by any room (each tries again; those
//! refused again wait again): simple, and a waiter that gave up — its future dropped — costs
//! one spurious wake at most. A task keeps one waker however often it waits (`will_wake`).
//! Nothing here touches an unbounded mailbox, and a bounded one's paths pay one comparison.

use super::{Admission, Generation, Inner, ProcessCell};
use std::task::Waker;

/// The wakers of senders waiting for room. Boxed and `None` while empty: one word in every
/// cell.
pub(super) type RoomWaiters = Option<Box<Vec<Waker>>>;

impl Inner {
    /// Messages counted against the capacity: queued, and drained but unread.
    #[inline]
    pub(super) fn used(&self) -> usize {
        self.queued_messages + self.unread as usize
    }

    /// Step 2: the waiters to wake if room was made since the use was `before`.
    #[inline]
    pub(super) fn room_made(&mut self, before: usize) -> RoomWaiters {
        if self.room_waiters.is_some() && self.used() < before {
            self.room_waiters.take()
        } else {
            None
        }
    }
}

/// Wakes `waiters` (after the unlock).
pub(super) fn wake_all(waiters: RoomWaiters) {
    for waker in waiters.into_iter().flat_map(|waiters| *waiters) {
        waker.wake();
    }
}

impl ProcessCell {
    /// Step 1: a sender of `generation`, refused for the capacity, waits for room: `true` if
    /// `waker` is kept (woken once room is made or the process ends), `false` if it should try
    /// again now.
    pub(crate) fn wait_for_room(&self, generation: Generation, waker: &Waker) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.admission(Some(generation)) != Admission::Accepted
            || inner.used() < self.mailbox.capacity()
        {
            return false;
        }
        let waiters = inner.room_waiters.get_or_insert_with(Box::default);
        if !waiters.iter().any(|kept| kept.will_wake(waker)) {
            waiters.push(waker.clone());
        }
        true
    }
}
