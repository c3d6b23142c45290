//! What the process layer's loom models share: a cell driven by hand, and a waker that counts.

use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::Arc;
use crate::process::mailbox::{Drained, Generation, ProcessCell};
use crate::process::Events;
use std::task::Waker;

/// A task waker that only counts its wakes: a model asserts how many producers woke the process.
pub(super) struct WakeCounter(AtomicUsize);

impl WakeCounter {
    pub(super) fn new() -> WakeCounter {
        WakeCounter(AtomicUsize::new(0))
    }

    /// How many times it was woken.
    pub(super) fn count(&self) -> usize {
        self.0.load(SeqCst)
    }
}

impl futures::task::ArcWake for WakeCounter {
    fn wake_by_ref(arc_self: &std::sync::Arc<Self>) {
        arc_self.0.fetch_add(1, SeqCst);
    }
}

/// A cell hosting a process whose poll just started (`Running`, nothing drained yet), and the
/// waker its first drain registers.
pub(super) struct Polled {
    pub(super) cell: Arc<ProcessCell>,
    pub(super) generation: Generation,
    wakes: std::sync::Arc<WakeCounter>,
    waker: Waker,
}

impl Polled {
    pub(super) fn new() -> Polled {
        let cell = Arc::new(ProcessCell::new(usize::MAX));
        let generation = cell.open();
        cell.state.transition_to_running();
        let wakes = std::sync::Arc::new(WakeCounter(AtomicUsize::new(0)));
        let waker = futures::task::waker(wakes.clone());
        Polled {
            cell,
            generation,
            wakes,
            waker,
        }
    }

    /// Drains everything, registering the waker as the first drain of a poll does: what the
    /// drain reported, and how many events it moved.
    pub(super) fn drain_registering(&self) -> (Drained, usize) {
        drain(&self.cell, Some(&self.waker))
    }

    /// How many times a producer woke the process.
    pub(super) fn wakes(&self) -> usize {
        self.wakes.0.load(SeqCst)
    }
}

/// Drains everything: what the drain reported, and how many events it moved.
pub(super) fn drain(cell: &ProcessCell, waker: Option<&Waker>) -> (Drained, usize) {
    let mut events = Events::default();
    let drained = cell.drain_into(&mut events, usize::MAX, waker);
    (drained, events.len())
}
