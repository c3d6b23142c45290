//! An ask that waits for room ([`Ask::wait_for_room`](super::ask::Ask::wait_for_room)): the
//! request, built and refused by a full bounded mailbox, is held with its place in that
//! mailbox's line of waiting senders — the line [`Addr::send_wait`] stands in
//! (`process/mailbox/room.rs`, protocol 12) — until room is made or the process ends.
//!
//! Why a separate state rather than a field of every ask: a held request is the rare case (a
//! full mailbox, and an asker that chose to wait), so it lives boxed and the common ask stays
//! the size it was.

use super::addr::Addr;
use super::error::SendErrorKind;
use crate::process::async_fn::asking::{self, AskCall};
use crate::process::drop_contained;
use crate::process::mailbox::Ticket;
use std::task::Waker;
use tokio::sync::oneshot;

/// Where the answer to a held request will come, once it is sent.
pub(super) enum Then<R> {
    /// Asked from a process's body: the answer is the completion of a call.
    InProcess(AskCall),
    /// Asked from outside any process: the answer comes on a channel.
    Outside(oneshot::Receiver<R>),
}

/// A request waiting for room in its process's mailbox. Dropped while it waits (the ask timed
/// out or was dropped), it gives up: its place in the line passes on, the request is dropped
/// (contained) and the call, if any, forgotten.
pub(super) struct Held<'a, M, R> {
    addr: &'a Addr<M>,
    /// `Some` until delivered or refused.
    request: Option<M>,
    /// Its place in the mailbox's line, once it stands in it.
    ticket: Option<Ticket>,
    /// `Some` until the ask takes it back ([`into_then`](Self::into_then)).
    then: Option<Then<R>>,
}

/// What the first try to send a request that may wait came to.
pub(super) enum Sent<'a, M, R> {
    /// In the mailbox: the answer comes as `Then` says.
    Delivered(Then<R>),
    /// Held for room.
    Held(Box<Held<'a, M, R>>),
    /// Refused for good (the request dropped, contained); the caller forgets the call.
    Refused(SendErrorKind, Then<R>),
}

/// What a poll of a held request came to.
pub(super) enum Room {
    /// Still waiting; the poller's waker is kept in the line.
    Waiting,
    /// In the mailbox: the ask now waits for its answer.
    Delivered,
    /// Not deliverable (the process ended or is ending; a capacity of 0): the request was
    /// dropped, contained.
    Refused(SendErrorKind),
}

impl<'a, M: Send + 'static, R> Held<'a, M, R> {
    /// Sends `request`, or holds it with `waker` in the mailbox's line if the mailbox is full.
    pub(super) fn send(
        addr: &'a Addr<M>,
        request: M,
        waker: &Waker,
        then: Then<R>,
    ) -> Sent<'a, M, R> {
        let mut held = Held {
            addr,
            request: Some(request),
            ticket: None,
            then: Some(then),
        };
        match held.poll_room(waker) {
            Room::Waiting => Sent::Held(Box::new(held)),
            Room::Delivered => Sent::Delivered(held.into_then()),
            Room::Refused(kind) => Sent::Refused(kind, held.into_then()),
        }
    }

    /// Delivers the request if room was made for it, or keeps waiting.
    pub(super) fn poll_room(&mut self, waker: &Waker) -> Room {
        let request = self.request.take().expect("polled after it was sent");
        let (pid, sched) = (self.addr.pid(), self.addr.scheduler());
        match sched
            .inner
            .post_typed_or_wait(pid, request, waker, &mut self.ticket)
        {
            Ok(None) => Room::Delivered,
            Ok(Some(waiting)) => {
                self.request = Some(waiting);
                Room::Waiting
            }
            Err((kind, refused)) => {
                // The request (and its port) is user code: dropped contained and counted. Its
                // port's "no reply" lands on a call the ask forgets, or a receiver it drops.
                sched.inner.contained(drop_contained(refused));
                Room::Refused(kind)
            }
        }
    }
}

impl<M, R> Held<'_, M, R> {
    /// Where the answer will come.
    pub(super) fn then(&self) -> &Then<R> {
        self.then.as_ref().expect("until taken")
    }

    /// Where the answer comes, once the request was delivered or refused.
    pub(super) fn into_then(mut self) -> Then<R> {
        debug_assert!(self.request.is_none() && self.ticket.is_none());
        self.then.take().expect("taken once")
    }
}

impl<M, R> Drop for Held<'_, M, R> {
    fn drop(&mut self) {
        let sched = self.addr.scheduler();
        if let Some(ticket) = self.ticket.take() {
            sched.inner.give_up_room(self.addr.pid(), ticket);
        }
        if let Some(request) = self.request.take() {
            sched.inner.contained(drop_contained(request));
        }
        if let Some(Then::InProcess(call)) = &self.then {
            asking::forget(call);
        }
    }
}
