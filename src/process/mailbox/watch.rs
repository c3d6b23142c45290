//! Links, monitors and trapped exits, kept in the process's cell under its mailbox lock: who
//! hears when the process ends, and how an exit signal from a linked process is taken.
//!
//! # Protocol 8: a watch never misses the end it watches
//! A *watch* — one side of a link, or a monitor — is registered on the watched process's cell;
//! the end takes every watch registered so far and signals each. Both happen under the mailbox
//! lock, bound to the watched process's generation:
//! 1. [`ProcessCell::watch`] accepts the watch while the incarnation has not been *released*
//!    (phases `Open` and `Closing`: the process runs, or runs its `close`), and refuses it
//!    otherwise (`Free`, or another generation): the watcher then signals itself at once with
//!    `NoProc`.
//! 2. The end: [`ProcessCell::release_asked`] — after `close` has run, when the scheduler forgets the
//!    process — moves the phase to `Free` and takes the watches in the same critical section.
//!    The scheduler delivers them (outside the lock).
//!
//! So every watch is either taken by the end (step 2 after step 1) or refused (step 1 after step
//! 2): signalled exactly once, and never before `close` has run. Checked by
//! `loom_a_watch_racing_the_end_is_signalled_exactly_once` (`process/tests/loom_watch.rs`).
//!
//! # Protocol 9: an exit signal meets the trap flag once
//! [`ProcessCell::deliver_exit`] reads the receiver's trap flag, and either queues the signal as
//! an [`Event::Exit`] (trapping) or asks the process to end with the signal's reason (not
//! trapping, reason not `Normal`), under the same lock that [`ProcessCell::set_trap_exit`] writes
//! the flag under: a signal racing a toggle is handled wholly by the old value or wholly by the
//! new one. An abnormal signal to a process already asked to end keeps the first reason.
//! Checked by `loom_trap_exit_toggled_during_delivery_takes_the_signal_once`. A process asked
//! to end whose running step ends it first (done) ended on its own: its handle has the output,
//! and its links and monitors hear `Normal` — one reason per end. Only a supervisor's end,
//! which a trapping child finishes on, gives the reason whatever the child's result (and a
//! `Cancel` the process was given and read, after which ending well is `Shutdown`:
//! `future.rs`, `finish`).
//!
//! # Monitors a process holds
//! A process that monitors others keeps the references it holds (`monitors`). A [`Down`] is
//! queued only if its reference is still held — and taking it out is part of queueing it — so a
//! `Down` is queued at most once, and never after the watcher dropped the reference
//! ([`ProcessCell::forget_monitor`], a demonitor). Checked by
//! `loom_a_demonitor_racing_the_targets_end_leaves_no_down_behind`.

use super::drain::SETTLE_AT_MOST;
use super::intake::Stale;
use super::{Generation, Inner, Lane, Phase, ProcessCell};
use crate::process::exit::{Down, Exit, ExitReason, MonitorRef};
use crate::process::{CancelReason, Event, Pid};
use std::collections::{BTreeMap, HashSet};

/// Who hears of a monitored process's end.
pub(crate) enum Watcher {
    /// A process: the `Down` goes to its mailbox.
    Process(Pid),
    /// Anyone else (an outside monitor's future): the `Down` goes to this channel, outside any
    /// lock.
    Channel(tokio::sync::oneshot::Sender<Down>),
}

/// One registration on a watched process.
pub(crate) enum Watch {
    /// The watched process is linked to this process.
    Link(Pid),
    /// A monitor of the watched process.
    Monitor {
        monitor: MonitorRef,
        watcher: Watcher,
    },
    /// The watched process holds a name, released when it ends (`scheduler/names.rs`), or
    /// removed with the name by `unregister`.
    Named,
    /// Not a registration on this process but one it made: it held this monitor of another
    /// process when it ended. Returned by the end only ([`ProcessCell::take_watches`]), so
    /// that the monitor leaves its target too (OTP: a monitor goes with its watcher) — a
    /// long-lived target monitored by many short-lived processes would otherwise keep one
    /// entry per watcher until it ends.
    Monitoring(MonitorRef),
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Watch::Link(pid) => f.debug_tuple("Link").field(pid).finish(),
            Watch::Named => f.write_str("Named"),
            Watch::Monitoring(monitor) => f.debug_tuple("Monitoring").field(monitor).finish(),
            Watch::Monitor { monitor, watcher } => f
                .debug_struct("Monitor")
                .field("monitor", monitor)
                .field(
                    "watcher",
                    &match watcher {
                        Watcher::Process(pid) => pid.to_string(),
                        Watcher::Channel(_) => "a channel".to_owned(),
                    },
                )
                .finish(),
        }
    }
}

/// A process's links, monitors and trap flag, for one incarnation. Boxed in the cell, and
/// absent until first used: most processes never link or monitor.
#[derive(Default)]
pub(crate) struct WatchState {
    /// The monitors of this process (protocol 8's `Watch::Monitor`s), by reference: a
    /// demonitor removes its monitor without a scan (a long-lived process monitored by many
    /// paid O(n) per demonitor, under its mailbox lock), and the end sends the `Down`s in the
    /// order the monitors were made (references count up: `MonitorRef::next`).
    monitored_by: BTreeMap<MonitorRef, Watcher>,
    /// Name marks on this process (protocol 8's `Watch::Named`): one per registration,
    /// `unregister` takes one back.
    named: u32,
    /// The processes linked to this one (protocol 8's `Watch::Link`s), a set: linking twice is
    /// one link (OTP), and an exit signal or `unlink` removes its link without a scan — a
    /// supervisor with n children would otherwise pay O(n) for each child's end.
    links: HashSet<Pid>,
    /// This process traps exits (protocol 9).
    trap_exit: bool,
    /// Monitors this process holds ("Monitors a process holds").
    monitors: HashSet<MonitorRef>,
    /// Why this process was asked to end by a linked process's exit (protocol 9).
    exit: Option<ExitReason>,
    /// `exit` is its supervisor's end, which a trapping child finishes on (`Stopped`): it ends
    /// with that reason even if its cleanup ends well. Otherwise (`Ending`) the process is
    /// terminated at its next step boundary — and one whose step ended it first (done, in the
    /// same step that the signal came during) ended on its own: its handle has its output, so
    /// its links and monitors hear `Normal`, the same end (one reason per end).
    exit_stands: bool,
    /// A supervisor's child, while linked to it: a scheduler shutdown leaves stopping it to
    /// its supervisor, which stops its children in reverse start order
    /// ([`ProcessCell::shutdown_target`]). Cleared when that link goes (the supervisor's exit
    /// signal, an `unlink`): an orphan is nobody's to stop, so the shutdown cancels it. Set
    /// at a spawn through the supervisor's `Start` (`set_supervised`), or when the supervisor
    /// adopts a process its child factory spawned otherwise (`adopt`).
    supervisor: Option<Pid>,
}

/// What an exit signal did to its receiver (protocol 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitDelivery {
    /// The receiver traps exits: the signal waits in its mailbox as an `Event::Exit`.
    Trapped,
    /// A `Normal` exit to a process that does not trap: nothing happens.
    Ignored,
    /// The receiver was asked to end with the signal's reason.
    Ending,
    /// The receiver traps exits and the signal is its supervisor's end: it was asked to
    /// finish (`Event::Cancel`), and ends with the signal's reason.
    Stopped,
    /// The receiver is gone (or finishing): nothing to do.
    Gone,
}

impl WatchState {
    /// The reason a finishing process ends with whatever its result, if a linked process's
    /// exit gave it one (protocol 9; only a supervisor's end, `exit_stands`); taken once.
    pub(super) fn take_exit(&mut self) -> Option<ExitReason> {
        self.exit.take().filter(|_| self.exit_stands)
    }

    /// The link to `other` is gone; if `other` was the supervisor, so is its claim to stop
    /// this process.
    fn remove_link(&mut self, other: Pid) {
        self.links.remove(&other);
        if self.supervisor == Some(other) {
            self.supervisor = None;
        }
    }
}

impl Inner {
    fn watch_state(&mut self) -> &mut WatchState {
        self.watch.get_or_insert_with(Box::default)
    }
}

impl ProcessCell {
    /// Where a locked push goes: behind the intake queue's events (`Mailbox::settle_intake`).
    fn lane_for(&self, inner: &mut Inner, stale: &mut Stale<'_>) -> Lane {
        if self.mailbox.settle_intake(inner, stale, SETTLE_AT_MOST) {
            Lane::Queue
        } else {
            Lane::Behind
        }
    }

    /// `true` if the incarnation `generation` has not been released (protocol 8, step 1).
    fn watchable(&self, generation: Generation) -> bool {
        let (current, phase) = self.mailbox.gate.load();
        current == generation && phase != Phase::Free
    }

    /// `true` if the incarnation `generation` has not been released: its end has not taken its
    /// watches yet (protocol 8).
    pub(crate) fn accepts_watches(&self, generation: Generation) -> bool {
        let _lock = self.mailbox.inner.lock();
        self.watchable(generation)
    }

    /// `true` if the incarnation `generation` is open (it may still receive).
    fn open_for(&self, generation: Generation) -> bool {
        let (current, phase) = self.mailbox.gate.load();
        current == generation && phase == Phase::Open
    }

    /// Protocol 8, step 1: registers `watch` on the process of `generation`, or hands it back
    /// if that process is gone (then the watcher signals itself `NoProc`).
    pub(crate) fn watch(&self, generation: Generation, watch: Watch) -> Result<(), Watch> {
        let mut inner = self.mailbox.inner.lock();
        if !self.watchable(generation) {
            return Err(watch);
        }
        let state = inner.watch_state();
        match watch {
            Watch::Link(pid) => {
                state.links.insert(pid);
            }
            Watch::Monitor { monitor, watcher } => {
                state.monitored_by.insert(monitor, watcher);
            }
            Watch::Named => state.named += 1,
            // Made only by an end (`take_watches`), never registered.
            Watch::Monitoring(_) => {}
        }
        Ok(())
    }

    /// `true` if the process of `generation` lives and is linked to `supervisor`, which then
    /// supervises it: a supervisor adopts this way what its child factory spawned other than
    /// through its `Start` (a nested supervisor, say) and linked to it — marked as a `Start`
    /// spawn marks its child ([`set_supervised`](Self::set_supervised)), so that the
    /// supervisor's end stops it even if it traps exits, and a scheduler shutdown leaves it to
    /// the supervisor's stop order. Unless another supervisor, still linked, has it already:
    /// that claim stands (its end still stops the process, and its stop order holds); the
    /// process is accepted, linked, but not marked.
    pub(crate) fn adopt(&self, generation: Generation, supervisor: Pid) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if !self.watchable(generation) {
            return false;
        }
        let Some(state) = inner.watch.as_mut() else {
            return false;
        };
        if !state.links.contains(&supervisor) {
            return false;
        }
        // Cleared when its link goes (`remove_link`): a claim here is a linked supervisor's.
        if state.supervisor.is_none() {
            state.supervisor = Some(supervisor);
        }
        true
    }

    /// Removes the link to `other` from the process of `generation`, if any (`unlink`).
    pub(crate) fn unwatch_link(&self, generation: Generation, other: Pid) {
        let mut inner = self.mailbox.inner.lock();
        if !self.watchable(generation) {
            return;
        }
        if let Some(state) = inner.watch.as_mut() {
            state.remove_link(other);
        }
    }

    /// Removes the monitor `monitor` from the process of `generation`; `true` if it was there
    /// (its `Down` will never be sent).
    pub(crate) fn unwatch_monitor(&self, generation: Generation, monitor: MonitorRef) -> bool {
        let removed = {
            let mut inner = self.mailbox.inner.lock();
            if !self.watchable(generation) {
                return false;
            }
            let Some(state) = inner.watch.as_mut() else {
                return false;
            };
            state.monitored_by.remove(&monitor)
        };
        // A callback's captures are dropped outside the lock.
        removed.is_some()
    }

    /// Removes the name mark from the process of `generation`, if it is there (`unregister`,
    /// under the names lock: `scheduler/names.rs`).
    pub(crate) fn unwatch_named(&self, generation: Generation) {
        let mut inner = self.mailbox.inner.lock();
        if !self.watchable(generation) {
            return;
        }
        if let Some(state) = inner.watch.as_mut() {
            state.named = state.named.saturating_sub(1);
        }
    }

    /// The registrations on the process of `generation` (links, monitors, the name mark): 0
    /// if it is gone (tests: what stays on a long-lived process).
    #[cfg(test)]
    pub(crate) fn watch_count(&self, generation: Generation) -> usize {
        let inner = self.mailbox.inner.lock();
        if !self.watchable(generation) {
            return 0;
        }
        inner.watch.as_ref().map_or(0, |state| {
            state.monitored_by.len() + state.named as usize + state.links.len()
        })
    }

    /// Protocol 8, step 2's take: the watches of the incarnation that just ended, with the
    /// cell's `Free` store (`release`, under the same lock).
    pub(super) fn take_watches(inner: &mut Inner) -> Vec<Watch> {
        inner
            .watch
            .take()
            .map(|state| {
                // The supervisor's link last: the children an end kills through their links
                // are on their way out (asked to stop) before the supervisor hears of it and
                // restarts the process — so a name one of them holds is known to be freed
                // soon (`supervisor/run.rs`, `register_child`).
                let mut watches: Vec<Watch> = state
                    .monitored_by
                    .into_iter()
                    .map(|(monitor, watcher)| Watch::Monitor { monitor, watcher })
                    .collect();
                // One mark stands for all the names: the end releases every one.
                if state.named > 0 {
                    watches.push(Watch::Named);
                }
                let supervisor = state.supervisor.filter(|pid| state.links.contains(pid));
                watches.extend(
                    state
                        .links
                        .into_iter()
                        .filter(|&pid| Some(pid) != supervisor)
                        .map(Watch::Link),
                );
                watches.extend(supervisor.map(Watch::Link));
                watches.extend(state.monitors.into_iter().map(Watch::Monitoring));
                watches
            })
            .unwrap_or_default()
    }

    /// Sets whether the process of `generation` traps exits (protocol 9). `false` if it is
    /// gone.
    pub(crate) fn set_trap_exit(&self, generation: Generation, trap: bool) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if !self.open_for(generation) {
            return false;
        }
        if trap || inner.watch.is_some() {
            inner.watch_state().trap_exit = trap;
        }
        true
    }

    /// Marks the process of `generation` as `supervisor`'s child (before its first step, and
    /// its link). `false` if it is gone.
    pub(crate) fn set_supervised(&self, generation: Generation, supervisor: Pid) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if !self.open_for(generation) {
            return false;
        }
        inner.watch_state().supervisor = Some(supervisor);
        true
    }

    /// During a shutdown: `true` if the process of `generation` is to be cancelled now — it
    /// is open, no supervisor's child (any more), and no shutdown `Cancel` has been claimed
    /// for it ([`shutdown_target`](Self::shutdown_target) claims the same mark).
    pub(crate) fn claim_shutdown_cancel(&self, generation: Generation) -> bool {
        let mut inner = self.mailbox.inner.lock();
        let supervised = inner
            .watch
            .as_ref()
            .is_some_and(|state| state.supervisor.is_some());
        if !self.open_for(generation) || supervised || inner.shutdown_cancelled {
            return false;
        }
        inner.shutdown_cancelled = true;
        true
    }

    /// `true` if the process of `generation` is on its way out: asked to stop (`terminate`, a
    /// linked process's exit), finishing, or gone. A plain `cancel` does not count: a process
    /// may hear it and run on (`RecvError::Cancelled`), and one that does is as live as any.
    pub(crate) fn is_ending(&self, generation: Generation) -> bool {
        let inner = self.mailbox.inner.lock();
        // `exit`: a linked process's exit asked it to end (its supervisor's, if it traps);
        // taken as it finishes on it, `terminate` stands in (`take_exit_reason`).
        !self.open_for(generation)
            || inner.terminate
            || inner
                .watch
                .as_ref()
                .is_some_and(|state| state.exit.is_some())
    }

    /// The generation of the process a scheduler shutdown's first pass cancels in this cell:
    /// `None` if the cell hosts no open process, or a supervisor's child (its supervisor stops
    /// it, in order; the forced pass still reaches it). Cancelling by this generation (not the
    /// cell's current process) means a cell reused meanwhile is left alone: its new process
    /// was spawned after the shutdown began, and its spawn saw to it.
    ///
    /// Claims the process's one shutdown `Cancel` ([`claim_shutdown_cancel`](Self::claim_shutdown_cancel)):
    /// `None` if it has been claimed already.
    pub(crate) fn shutdown_target(&self) -> Option<Generation> {
        let (current, _) = self.mailbox.gate.load();
        // A cell reused meanwhile fails the claim's generation check, as it must.
        self.claim_shutdown_cancel(current).then_some(current)
    }

    /// Protocol 9: an exit signal `exit` from a linked process to the process of `generation`.
    /// The link it came through is gone either way.
    pub(crate) fn deliver_exit(&self, generation: Generation, exit: Exit) -> ExitDelivery {
        // Declared before the guard, so dropped after the unlock (`intake.rs`, protocol 7 step 4).
        let mut stale = Stale::new(&self.stats);
        let mut inner = self.mailbox.inner.lock();
        if !self.open_for(generation) {
            return ExitDelivery::Gone;
        }
        let from = exit.pid;
        let (trap_exit, from_supervisor) = {
            let state = inner.watch_state();
            // A link across nodes is not registered here (the cluster keeps it): its PID is
            // another scheduler's and must not unlink a local process that shares the number.
            let from_supervisor = exit.node.is_none() && state.supervisor == Some(from);
            if exit.node.is_none() {
                state.remove_link(from);
            }
            (state.trap_exit, from_supervisor)
        };
        let (wake, delivery) = if trap_exit && from_supervisor {
            // Its supervisor ended: a child that traps exits ends too, as OTP's behaviours end
            // on their parent's `EXIT` (`terminate/2`, then exit with the parent's reason) —
            // asked to finish, so that its cleanup runs, and ending with that reason.
            if !inner.terminate {
                let state = inner.watch_state();
                state.exit = Some(exit.reason);
                state.exit_stands = true;
            }
            inner.cancel_asked = true;
            // Its one cancel of a shutdown too: a shutdown's first pass, which left it to its
            // supervisor, finds it asked already (`claim_shutdown_cancel`), not an orphan.
            inner.shutdown_cancelled = true;
            let lane = self.lane_for(&mut inner, &mut stale);
            let cancel = Event::Cancel {
                reason: CancelReason::Stop,
            };
            let _ = self.mailbox.enqueue(&mut inner, lane, cancel);
            (self.wake_if_waiting(&inner), ExitDelivery::Stopped)
        } else if trap_exit {
            let lane = self.lane_for(&mut inner, &mut stale);
            let _ = self.mailbox.enqueue(&mut inner, lane, Event::Exit(exit));
            (self.wake_if_waiting(&inner), ExitDelivery::Trapped)
        } else if exit.reason.is_normal() {
            return ExitDelivery::Ignored;
        } else {
            if !inner.terminate {
                let state = inner.watch_state();
                state.exit = Some(exit.reason);
                state.exit_stands = false;
            }
            inner.terminate = true;
            (self.wake_if_waiting(&inner), ExitDelivery::Ending)
        };
        drop(inner);
        wake.fire();
        delivery
    }

    /// Why the process was asked to end by a linked process's exit, if it was (read once it
    /// has stopped: protocol 9). Taken, the process is finishing on it: `terminate` is set, so
    /// that [`is_ending`](Self::is_ending) holds until `close` (a supervisor restarting a named
    /// child must not take it for live in between).
    pub(crate) fn take_exit_reason(&self) -> Option<ExitReason> {
        let mut inner = self.mailbox.inner.lock();
        let reason = inner.watch.as_mut().and_then(|state| state.exit.take());
        if reason.is_some() {
            inner.terminate = true;
        }
        reason
    }

    /// The process of `generation` now holds the monitor `monitor` ("Monitors a process
    /// holds"). `false` if it is gone.
    pub(crate) fn hold_monitor(&self, generation: Generation, monitor: MonitorRef) -> bool {
        let mut inner = self.mailbox.inner.lock();
        if !self.open_for(generation) {
            return false;
        }
        inner.watch_state().monitors.insert(monitor);
        true
    }

    /// The process of `generation` drops the monitor `monitor` (a demonitor): a `Down` for it
    /// is never queued from now on, and one already queued is removed. `true` if it was held.
    pub(crate) fn forget_monitor(&self, generation: Generation, monitor: MonitorRef) -> bool {
        let (held, queued) = {
            let mut inner = self.mailbox.inner.lock();
            if !self.watchable(generation) {
                return false;
            }
            let held = inner
                .watch
                .as_mut()
                .is_some_and(|state| state.monitors.remove(&monitor));
            let is_its_down =
                |event: &Event| matches!(event, Event::Down(down) if down.monitor == monitor);
            let queued = match inner.events.remove_first(is_its_down) {
                Some(down) => Some(down),
                None => inner.behind.remove_first(is_its_down),
            };
            (held, queued)
        };
        let was_queued = queued.is_some();
        // Outside the lock: its reason may hold a user's error.
        self.stats
            .destructors_panicked(crate::process::drop_contained(queued));
        held || was_queued
    }

    /// Queues `down` for the process of `generation` if it still holds the monitor, taking the
    /// monitor out in the same critical section ("Monitors a process holds"). `false` if not
    /// queued (demonitored, or the watcher is gone).
    pub(crate) fn deliver_down(&self, generation: Generation, down: Down) -> bool {
        let mut stale = Stale::new(&self.stats);
        let mut inner = self.mailbox.inner.lock();
        if !self.open_for(generation) {
            return false;
        }
        let held = inner
            .watch
            .as_mut()
            .is_some_and(|state| state.monitors.remove(&down.monitor));
        if !held {
            return false;
        }
        let lane = self.lane_for(&mut inner, &mut stale);
        let _ = self.mailbox.enqueue(&mut inner, lane, Event::Down(down));
        let wake = self.wake_if_waiting(&inner);
        drop(inner);
        wake.fire();
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::process::{Events, Payload};

    fn pid(n: u64) -> Pid {
        Pid::from_raw(1 << crate::process::INDEX_BITS | n).unwrap()
    }

    #[test]
    fn a_watch_is_taken_by_the_end_and_refused_after_it() {
        let (cell, generation) = ProcessCell::new_open();
        assert!(cell.watch(generation, Watch::Link(pid(2))).is_ok());
        let _ = cell.close();
        assert!(
            cell.watch(generation, Watch::Link(pid(3))).is_ok(),
            "closing: still watchable"
        );
        let (_, watches) = cell.release_watched();
        assert_eq!(watches.len(), 2);
        assert!(cell.watch(generation, Watch::Link(pid(4))).is_err());
    }

    #[test]
    fn an_exit_is_trapped_ignored_or_ends_the_process() {
        let (cell, generation) = ProcessCell::new_open();
        let normal = Exit::new(pid(2), ExitReason::Normal);
        assert_eq!(cell.deliver_exit(generation, normal), ExitDelivery::Ignored);
        assert!(cell.set_trap_exit(generation, true));
        let killed = Exit::new(pid(2), ExitReason::Killed);
        assert_eq!(cell.deliver_exit(generation, killed), ExitDelivery::Trapped);
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        assert!(matches!(events.pop(), Some(Event::Exit(exit)) if exit.reason.is_killed()));
        assert!(cell.set_trap_exit(generation, false));
        let failed = Exit::new(pid(3), ExitReason::failed("boom"));
        assert_eq!(cell.deliver_exit(generation, failed), ExitDelivery::Ending);
        let second = Exit::new(pid(4), ExitReason::Killed);
        assert_eq!(cell.deliver_exit(generation, second), ExitDelivery::Ending);
        assert!(
            cell.take_exit_reason()
                .is_some_and(|reason| reason.is_failed()),
            "the first reason"
        );
        let _ = Payload::empty();
    }

    #[test]
    fn a_down_is_queued_once_and_never_after_a_demonitor() {
        let (cell, generation) = ProcessCell::new_open();
        let (kept, dropped) = (MonitorRef::next(pid(9)), MonitorRef::next(pid(9)));
        assert!(cell.hold_monitor(generation, kept));
        assert!(cell.hold_monitor(generation, dropped));
        assert!(cell.forget_monitor(generation, dropped));
        assert!(!cell.deliver_down(generation, Down::new(dropped, pid(2), ExitReason::Normal)));
        assert!(cell.deliver_down(generation, Down::new(kept, pid(3), ExitReason::Normal)));
        assert!(
            !cell.deliver_down(generation, Down::new(kept, pid(3), ExitReason::Normal)),
            "once"
        );
        // A queued Down is removed by a later demonitor.
        let late = MonitorRef::next(pid(9));
        assert!(cell.hold_monitor(generation, late));
        assert!(cell.deliver_down(generation, Down::new(late, pid(4), ExitReason::Killed)));
        assert!(cell.forget_monitor(generation, late));
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        assert_eq!(events.len(), 1, "only the kept monitor's Down");
    }
}
