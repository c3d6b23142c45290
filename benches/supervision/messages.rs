//! What both peers' children are told and report.

use crate::GUARD;
use procsched::prelude::*;
use std::sync::mpsc;
use std::time::Instant;

/// A replacement (or a first instance) has started: which child, and when its body or
/// `on_start` began.
pub(crate) struct Hello {
    pub(crate) index: usize,
    /// procsched: the new instance, the next crash's target.
    pub(crate) pid: Option<Pid>,
    pub(crate) at: Instant,
}

/// Told to a child: return `Err`.
#[derive(Debug)]
pub(crate) struct Crash;

/// Told to a `spawn_exit_*` child: end.
#[derive(Debug)]
pub(crate) struct Go;

/// Which watch the `spawn_exit_*` parent puts on each child.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Watch {
    Unwatched,
    Linked,
    Monitored,
}

impl Watch {
    pub(crate) const ALL: [Watch; 3] = [Watch::Unwatched, Watch::Linked, Watch::Monitored];

    pub(crate) fn group(self) -> &'static str {
        match self {
            Watch::Unwatched => "spawn_exit_unwatched",
            Watch::Linked => "spawn_exit_linked",
            Watch::Monitored => "spawn_exit_monitored",
        }
    }
}

pub(crate) fn hello(rx: &mpsc::Receiver<Hello>) -> Hello {
    rx.recv_timeout(GUARD)
        .expect("hang guard: no replacement started")
}
