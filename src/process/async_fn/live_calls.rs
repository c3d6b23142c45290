//! The body's live calls, and what is kept for them between polls: completions not taken yet,
//! the wakers of calls polled with a waker not the body's (`state.rs`, "Futures polled with
//! their own waker"), and the calls dropped before their completion.
//!
//! A body that awaits one call at a time — most do — has its call's tag inline and never makes
//! the rest (the adapter lives in the process's task, which a spawn writes and a worker reads).
//! A body that holds calls together may hold many — tens of thousands of asks in a
//! `FuturesUnordered` — so past the first, everything is keyed by tag ([`TagMap`]): each
//! operation costs the same with one call in flight or a hundred thousand, and a step wakes
//! only the wakers of the calls whose completion arrived in it, never walking the others.

use super::state::Completion;
use crate::process::tag_map::{TagMap, TagSet};
use crate::process::{drop_each, Tag};
use std::task::Waker;

/// The live calls: the first one's tag inline; the others (calls awaited together) and what is
/// kept for any of them in a box made the first time it is needed.
#[derive(Debug, Default)]
pub(super) struct LiveCalls {
    /// A live call's tag; 0 when it is none (tags start at 1). Not refilled from the others when
    /// it ends (that would take an arbitrary member of a set): the next call takes it.
    first: Tag,
    extra: Option<Box<Extra>>,
}

/// What [`LiveCalls`] keeps out of line.
#[derive(Debug, Default)]
struct Extra {
    /// Live calls other than `first`.
    more: TagSet,
    /// Completions not taken in the poll of the step they arrived in, of live calls only (at
    /// most one each): a call that stops being live takes its own, or leaves it in `forgotten`.
    completions: TagMap<Completion>,
    /// Completions left by calls that stopped being live during the current poll (dropped
    /// before they took them): user values, not dropped in the scope but after the poll
    /// ([`LiveCalls::purge_forgotten`]).
    forgotten: Vec<Completion>,
    /// The wakers of live calls polled with a waker not the body's, at most one per call.
    wakers: TagMap<Waker>,
    /// Calls with a kept waker whose completion was kept since the last
    /// [`take_ready`](LiveCalls::take_ready): the wakers it wakes (it visits no other).
    ready: Vec<Tag>,
    /// The wakers of calls that stopped being live during the current poll (a waker's
    /// destructor is user code: not run in the scope), dropped after it.
    stale_wakers: Vec<Waker>,
    /// Calls dropped in the current poll before their completion came (`Call`'s drop), for the
    /// step's output: their handler tasks are aborted after it (`process/outstanding.rs`).
    dropped: Vec<Tag>,
}

impl LiveCalls {
    fn extra(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// `tag` is live from now on.
    #[inline]
    pub(super) fn insert(&mut self, tag: Tag) {
        if self.first == 0 {
            self.first = tag;
        } else {
            self.insert_more(tag);
        }
    }

    #[cold]
    #[inline(never)]
    fn insert_more(&mut self, tag: Tag) {
        self.extra().more.insert(tag);
    }

    /// `tag` is no longer live: resolved (its completion taken), or its future dropped. Its
    /// kept waker, and a completion still kept for it, are dropped after the poll
    /// ([`purge_forgotten`](Self::purge_forgotten)). Drops nothing.
    #[inline]
    pub(super) fn remove(&mut self, tag: Tag) {
        if self.first == tag {
            self.first = 0;
        }
        if self.extra.is_some() {
            self.remove_extra(tag);
        }
    }

    #[cold]
    #[inline(never)]
    fn remove_extra(&mut self, tag: Tag) {
        let Some(extra) = &mut self.extra else { return };
        extra.more.remove(&tag);
        if let Some(waker) = extra.wakers.remove(&tag) {
            extra.stale_wakers.push(waker);
        }
        // Kept completions are of live calls only (`has_outstanding` counts on it).
        if let Some(completion) = extra.completions.remove(&tag) {
            extra.forgotten.push(completion);
        }
    }

    #[inline]
    pub(super) fn contains(&self, tag: Tag) -> bool {
        tag != 0
            && (self.first == tag || self.extra.as_ref().is_some_and(|e| e.more.contains(&tag)))
    }

    /// Keeps live call `tag`'s completion for a later poll; hands it back if the call is not
    /// live, or already has one kept (for the caller to drop). Not during a poll.
    pub(super) fn keep(&mut self, tag: Tag, completion: Completion) -> Result<(), Completion> {
        if !self.contains(tag) {
            return Err(completion);
        }
        let extra = self.extra();
        if extra.completions.contains_key(&tag) {
            // A call completes once; a second completion has no one to take it.
            return Err(completion);
        }
        extra.completions.insert(tag, completion);
        if extra.wakers.contains_key(&tag) {
            extra.ready.push(tag);
        }
        Ok(())
    }

    /// The kept completion of `tag`, taken (off the fast path).
    #[cold]
    #[inline(never)]
    pub(super) fn take_kept(&mut self, tag: Tag) -> Option<Completion> {
        self.extra.as_mut()?.completions.remove(&tag)
    }

    /// `true` if a completion is kept for `tag`.
    pub(super) fn has_kept(&self, tag: Tag) -> bool {
        self.extra
            .as_ref()
            .is_some_and(|extra| extra.completions.contains_key(&tag))
    }

    /// `true` while some live call has no kept completion.
    #[inline]
    pub(super) fn has_outstanding(&self) -> bool {
        match &self.extra {
            None => self.first != 0,
            // Kept completions are of live calls, one each: some call lacks one iff there are
            // more calls than completions.
            Some(extra) => {
                usize::from(self.first != 0) + extra.more.len() > extra.completions.len()
            }
        }
    }

    /// A call dropped before its completion came: its handler task is to be aborted after the
    /// poll.
    pub(super) fn note_dropped(&mut self, tag: Tag) {
        self.extra().dropped.push(tag);
    }

    /// After a poll: the calls it dropped, into `into`.
    #[inline]
    pub(super) fn move_dropped(&mut self, into: &mut Vec<Tag>) {
        if let Some(extra) = &mut self.extra {
            if !extra.dropped.is_empty() {
                into.append(&mut extra.dropped);
            }
        }
    }

    /// After a poll: drops the completions of the calls it dropped, and the wakers of the calls
    /// that stopped being live in it; returns the destructor panics contained.
    #[inline]
    pub(super) fn purge_forgotten(&mut self) -> u64 {
        match &mut self.extra {
            Some(extra) if !extra.forgotten.is_empty() || !extra.stale_wakers.is_empty() => {
                // One at a time, contained: `clear` would drop them with default glue.
                drop_each(extra.forgotten.drain(..)) + drop_each(extra.stale_wakers.drain(..))
            }
            _ => 0,
        }
    }

    /// Live call `tag`, polled with `waker` (not the body's), waits: keeps a clone (of the
    /// latest waker that polled it); returns the one it replaced, for the caller to drop outside
    /// the scope. A call that is not live is never woken: its waker is not kept.
    #[must_use]
    pub(super) fn wait_with(&mut self, tag: Tag, waker: &Waker) -> Option<Waker> {
        if !self.contains(tag) {
            return None;
        }
        let extra = self.extra();
        match extra.wakers.get_mut(&tag) {
            Some(kept) if kept.will_wake(waker) => None,
            Some(kept) => Some(std::mem::replace(kept, waker.clone())),
            None => {
                extra.wakers.insert(tag, waker.clone());
                if extra.completions.contains_key(&tag) {
                    // Its completion is here already: woken by the next step.
                    extra.ready.push(tag);
                }
                None
            }
        }
    }

    /// `true` if some live call waits with a waker of its own.
    #[inline]
    pub(super) fn has_waiters(&self) -> bool {
        self.extra
            .as_ref()
            .is_some_and(|extra| !extra.wakers.is_empty())
    }

    /// Moves into `into` the kept wakers of the calls whose wait is over: those whose
    /// completion is here — `arrived` (the one the step holds), or kept since the last take —
    /// or all of them if `cancel_arrived` (an ask gives up). Visits only those.
    pub(super) fn take_ready(
        &mut self,
        arrived: Option<Tag>,
        cancel_arrived: bool,
        into: &mut Vec<Waker>,
    ) {
        let Some(extra) = &mut self.extra else { return };
        let Extra { wakers, ready, .. } = &mut **extra;
        if cancel_arrived {
            into.extend(wakers.drain().map(|(_, waker)| waker));
            ready.clear();
            return;
        }
        // A tag's waker is taken once: a second mention of it finds none.
        for tag in arrived.into_iter().chain(ready.drain(..)) {
            if let Some(waker) = wakers.remove(&tag) {
                into.push(waker);
            }
        }
    }
}

impl Drop for LiveCalls {
    /// The kept completions are user values: one at a time, each contained.
    fn drop(&mut self) {
        if let Some(extra) = self.extra.take() {
            let Extra {
                completions,
                forgotten,
                ..
            } = *extra;
            drop_each(completions.into_values());
            drop_each(forgotten);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::process::Payload;

    fn done(value: u64) -> Completion {
        Ok(Payload::new(value))
    }

    #[test]
    fn a_lone_call_stays_inline() {
        let mut calls = LiveCalls::default();
        calls.insert(1);
        assert!(calls.contains(1) && calls.has_outstanding());
        calls.remove(1);
        assert!(!calls.contains(1) && !calls.has_outstanding());
        assert!(calls.extra.is_none(), "one call at a time never boxes");
    }

    #[test]
    fn calls_past_the_first_are_keyed_by_tag_and_the_first_slot_is_reused() {
        let mut calls = LiveCalls::default();
        for tag in 1..=1000 {
            calls.insert(tag);
        }
        calls.remove(1);
        assert!(!calls.contains(1) && calls.contains(2) && calls.contains(1000));
        calls.insert(1001);
        assert_eq!(
            calls.first, 1001,
            "the next call takes the free inline slot"
        );
        for tag in 2..=1000 {
            assert!(calls.keep(tag, done(tag)).is_ok());
        }
        assert!(calls.has_outstanding(), "1001 has no completion");
        assert!(calls.keep(1001, done(1001)).is_ok());
        assert!(!calls.has_outstanding());
        assert!(calls.keep(5, done(0)).is_err(), "one completion per call");
        assert!(calls.keep(1, done(1)).is_err(), "1 is not live");
        let taken = calls.take_kept(500).unwrap().unwrap();
        assert_eq!(taken.take::<u64>().unwrap(), 500);
        calls.remove(500);
        calls.remove(600);
        assert!(!calls.contains(600) && !calls.has_kept(600));
        assert_eq!(calls.purge_forgotten(), 0);
        assert!(calls.extra.as_ref().unwrap().forgotten.is_empty());
    }

    #[test]
    fn only_the_wakers_of_calls_whose_completion_came_are_taken_each_once() {
        let mut calls = LiveCalls::default();
        for tag in 1..=4 {
            calls.insert(tag);
            assert!(calls.wait_with(tag, Waker::noop()).is_none());
        }
        assert!(calls.wait_with(9, Waker::noop()).is_none());
        assert_eq!(
            calls.extra.as_ref().unwrap().wakers.len(),
            4,
            "9 is not live"
        );
        assert!(calls.keep(2, done(2)).is_ok());
        let mut woken = Vec::new();
        calls.take_ready(Some(3), false, &mut woken);
        assert_eq!(woken.len(), 2, "2 (kept) and 3 (arrived)");
        woken.clear();
        calls.take_ready(Some(3), false, &mut woken);
        assert!(woken.is_empty(), "each waker once");
        // A resolved call's waker is dropped after the poll, never woken.
        calls.remove(4);
        assert_eq!(calls.extra.as_ref().unwrap().stale_wakers.len(), 1);
        assert_eq!(calls.purge_forgotten(), 0);
        calls.take_ready(None, true, &mut woken);
        assert_eq!(woken.len(), 1, "a cancellation wakes the rest: 1");
        assert!(!calls.has_waiters());
    }
}
