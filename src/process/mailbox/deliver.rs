//! Producers: events, messages and terminate requests delivered to a cell's process, through
//! the lock or — a message to a mailbox with a backlog — the intake queue (`intake.rs`,
//! protocol 7), and the wake of a process that waits (`state.rs`, protocol 2 step 2).

use super::drain::SETTLE_AT_MOST;
use super::intake::{IntakeQueue, Stale, Stamped, INTAKE_INSTALL_DEPTH};
use super::{Admission, Generation, Inner, Lane, Phase, ProcessCell};
use crate::executor::DeferredWake;
use crate::process::state::TransitionOnEvent;
use crate::process::{drop_contained, CancelReason, Event, Message};

impl ProcessCell {
    /// Delivers `event` to the process of `generation`, if it is open, waking it if it is
    /// blocked or idle (`state.rs`, protocol 2 step 2). Senders bind to the generation of the PID
    /// they name, completers to the one their yield was dispatched in.
    pub(crate) fn deliver(&self, generation: Generation, event: Event) -> Admission {
        self.push(Some(generation), event, Pushed::Event)
    }

    /// Delivers `event` like [`deliver`](Self::deliver), but hands it back when it is refused
    /// (an ask's answer, which goes back to whoever answered).
    #[allow(clippy::result_large_err)] // as `deliver_message`
    pub(crate) fn deliver_or_return(
        &self,
        generation: Generation,
        event: Event,
    ) -> Result<(), Event> {
        self.try_push(Some(generation), event, Pushed::Event)
            .map_err(|(_, event)| event)
    }

    /// Delivers the `YieldComplete` of an async or blocking yield dispatched in `generation`,
    /// as [`deliver`](Self::deliver); accepted, it no longer counts as outstanding.
    pub(crate) fn complete_yield(&self, generation: Generation, event: Event) -> Admission {
        self.push(Some(generation), event, Pushed::Completion)
    }

    /// Delivers a `Cancel` (with `reason`) to the process of `generation`, as
    /// [`deliver`](Self::deliver), marking it asked to finish as it is queued.
    pub(crate) fn deliver_cancel(&self, generation: Generation, reason: CancelReason) -> Admission {
        self.push(Some(generation), Event::Cancel { reason }, Pushed::Cancel)
    }

    /// Delivers `event` to whichever process the cell hosts, if it is open (tests).
    #[cfg(test)]
    pub(crate) fn deliver_current(&self, event: Event) -> Admission {
        self.push(None, event, Pushed::Event)
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
        self.try_push(Some(generation), event, Pushed::Event)
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
            let _ = self
                .mailbox
                .settle_intake(&mut inner, &mut stale, usize::MAX);
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

    fn push(&self, generation: Option<Generation>, event: Event, pushed: Pushed) -> Admission {
        match self.try_push(generation, event, pushed) {
            Ok(()) => Admission::Accepted,
            Err((refused, event)) => {
                self.stats.destructors_panicked(drop_contained(event));
                refused
            }
        }
    }

    /// Queues `event`, or gives it back with the reason it was refused (`Dropped`, `Closed` or
    /// `Gone`; never `Accepted`). `pushed`: what the event is to the mailbox's counts.
    #[allow(clippy::result_large_err)] // as `deliver_message`
    pub(super) fn try_push(
        &self,
        generation: Option<Generation>,
        event: Event,
        pushed: Pushed,
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
        let lane = if self
            .mailbox
            .settle_intake(&mut inner, &mut stale, SETTLE_AT_MOST)
        {
            Lane::Queue
        } else {
            Lane::Behind
        };
        // One test on a message's path, as the flag it replaced.
        if !matches!(pushed, Pushed::Event) {
            self.count_pushed(&mut inner, pushed);
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

    /// What a completion or a cancel counts, as it is queued (under the lock).
    #[cold]
    fn count_pushed(&self, inner: &mut Inner, pushed: Pushed) {
        match pushed {
            Pushed::Event => {}
            Pushed::Completion => self.stats.yield_completed(),
            // In the critical section that queues it: the process cannot read its cancel
            // before this is set, and it is set only for a cancel it was given
            // (`FinishCounts::cancelled`, and its exit reason: `future.rs`, `finish`).
            Pushed::Cancel => inner.cancel_asked = true,
        }
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
    pub(super) fn wake_if_waiting(&self, inner: &Inner) -> DeferredWake {
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

/// What a pushed event is to the mailbox's counts ([`ProcessCell::try_push`]).
#[derive(Clone, Copy)]
pub(super) enum Pushed {
    /// Any event: nothing to count.
    Event,
    /// The completion of an outstanding yield (an async or blocking handler's).
    Completion,
    /// A `Cancel`: the process is asked to finish (`Inner::cancel_asked`).
    Cancel,
}
