//! Asks a process gave up on, so that their answers are refused.
//!
//! A body's ask waits for its answer as a call completion in the asking process's own mailbox
//! (`async_fn/asking.rs`); the answerer's [`Reply::send`](crate::Reply::send) delivers it there
//! and returns `Err(value)` "if the asker no longer waits". Only the asking body knows when it
//! stops waiting (its ask timed out, was dropped, or was cut short by its process's cancel),
//! and only the answerer's thread knows when the answer is sent: the mailbox lock is where the
//! two meet. A body that gives up on an ask whose answer has not arrived records the ask's tag
//! here ([`ProcessCell::abandon_ask`]); the answer's push, under the same lock, finds the tag,
//! removes it and is refused ([`Inner::refuses_answer`]), so the answerer gets its value back.
//!
//! Each reply port delivers exactly one event to its asker (the answer, or the port's drop), so
//! a recorded tag leaves with that event, or with the incarnation (`close`): the set holds at
//! most the asks given up on whose ports are still held somewhere. An answer that is already
//! queued when the body gives up was delivered while the body waited: the body drops it unread
//! as it always did, and the drain that moves it out forgets its tag ([`Inner::forget_answered`]:
//! one look per drained completion, only while the set is not empty). The tag is recorded
//! without looking for it in the queue first — a body dropping a `FuturesUnordered` of
//! thousands of asks whose answers wait in its mailbox must not scan the queue once per ask.
//! Which of refused and queued happens is decided under the lock:
//! `loom_an_answer_racing_its_asks_abandonment_is_refused_or_queued_never_both`
//! (`process/tests/loom_mailbox.rs`). An ask that *times out* is the exception
//! ([`ProcessCell::time_out_ask`]): an answer queued in time was sent `Ok`, and the ask takes
//! it rather than report a timeout — one scan, for a rare event.
//!
//! The set is boxed and absent while empty: an ask given up on is rare, and every cell would
//! otherwise pay for it.

use super::{Admission, Generation, Inner, ProcessCell};
use crate::process::tag_map::TagSet;
use crate::process::{Event, Tag};

/// The tags of the asks a process gave up on whose answers have not come: a set, as a body
/// may give up on tens of thousands at once (a dropped `FuturesUnordered` of asks), each
/// answer then looked up as it comes.
#[derive(Debug, Default)]
pub(super) struct Abandoned(TagSet);

impl ProcessCell {
    /// The process of `generation`, polling its body, stops waiting for the answer to its ask
    /// `tag`: if that answer is not queued already, it will be refused (module docs).
    pub(crate) fn abandon_ask(&self, generation: Generation, tag: Tag) {
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.admission(Some(generation)) != Admission::Accepted {
            return; // finishing or gone: every answer is refused anyway
        }
        // Its answer may be queued already: the drain that moves it out forgets the tag.
        inner
            .abandoned
            .get_or_insert_with(Box::default)
            .0
            .insert(tag);
    }

    /// The process of `generation` timed out waiting for the answer to its ask `tag`: `true`
    /// if that answer is queued already — delivered in time, the answerer told `Ok`: the ask
    /// takes it at the process's next step instead of timing out, and nothing is recorded —
    /// else it is given up as [`abandon_ask`](Self::abandon_ask) does, in the same critical
    /// section (a timeout is rare: the queue is scanned, as a mass drop must not be). Checked
    /// by `loom_an_answer_racing_its_asks_timeout_is_taken_or_refused_never_lost`.
    pub(crate) fn time_out_ask(&self, generation: Generation, tag: Tag) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.admission(Some(generation)) != Admission::Accepted {
            return false; // finishing or gone: every answer is refused anyway
        }
        let answers =
            |event: &Event| matches!(event, Event::YieldComplete { tag: of, .. } if *of == tag);
        if inner.events.iter().any(answers) || inner.behind.iter().any(answers) {
            return true;
        }
        inner
            .abandoned
            .get_or_insert_with(Box::default)
            .0
            .insert(tag);
        false
    }

    /// Takes back the [`abandon_ask`](Self::abandon_ask) of `tag` by the process of
    /// `generation`: `true` if it was still recorded (its answer has not come; it is now
    /// forgotten, so that answer will be queued), `false` if that answer came and was refused.
    /// A state machine's ask whose request was refused abandons its tag around the request's
    /// drop, so that a port inside it does not complete the yield a second time
    /// (`scheduler/step_ask.rs`); a port the request did not hold is taken back here.
    pub(crate) fn forget_abandoned(&self, generation: Generation, tag: Tag) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if self.mailbox.gate.admission(Some(generation)) != Admission::Accepted {
            return false; // finishing or gone: every answer is refused anyway
        }
        let Some(abandoned) = &mut inner.abandoned else {
            return false;
        };
        let recorded = abandoned.0.remove(&tag);
        if abandoned.0.is_empty() {
            inner.abandoned = None;
        }
        recorded
    }

    /// `true` if the process of `generation` lives and has not given up on its ask `tag`.
    pub(crate) fn awaits_answer(&self, generation: Generation, tag: Tag) -> bool {
        let inner = self.mailbox.inner.lock();
        self.mailbox.gate.admission(Some(generation)) == Admission::Accepted
            && !inner
                .abandoned
                .as_ref()
                .is_some_and(|abandoned| abandoned.0.contains(&tag))
    }
}

impl Inner {
    /// Under the lock, for an event about to be queued: `true` if it answers an ask the
    /// process gave up on (the tag is then forgotten: a port delivers once).
    #[inline]
    pub(super) fn refuses_answer(&mut self, event: &Event) -> bool {
        let (Some(abandoned), Event::YieldComplete { tag, .. }) = (&mut self.abandoned, event)
        else {
            return false;
        };
        if !abandoned.0.remove(tag) {
            return false;
        }
        if abandoned.0.is_empty() {
            self.abandoned = None;
        }
        true
    }

    /// Under the lock, for events a drain moved out: the answers among them were queued before
    /// their asks were given up on (delivered: the body drops them unread), so their tags are
    /// forgotten (a port delivers once).
    #[cold]
    pub(super) fn forget_answered<'a>(&mut self, drained: impl Iterator<Item = &'a Event>) {
        let Some(abandoned) = &mut self.abandoned else {
            return;
        };
        for event in drained {
            if let Event::YieldComplete { tag, .. } = event {
                abandoned.0.remove(tag);
            }
        }
        if abandoned.0.is_empty() {
            self.abandoned = None;
        }
    }
}
