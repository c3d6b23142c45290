//! What a process cell records for observability: per-process figures (steps, outstanding
//! yields) and all-time figures of the cell (handler errors and panics of the completions it
//! received, its deepest queue), read by `process_info` and the scheduler's metrics snapshot.
//!
//! These are statistics, never part of a protocol: relaxed std atomics, deliberately outside
//! loom's models (they order nothing, and loom would only explore more interleavings of them).
//! The fields kept under the mailbox lock (kind, spawn time, queue high-water mark) live in the
//! mailbox's `Inner`.

use super::state::ProcessState;
use super::{CommandError, Payload};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// The relaxed counters of a cell (module docs).
#[derive(Debug, Default)]
pub(crate) struct CellStats {
    /// Steps of the current process, published by the poller after each poll (successive polls
    /// are ordered by the executor); reset by `open`.
    steps: AtomicU64,
    /// Async and blocking yields of the current process dispatched and not yet delivered:
    /// incremented at dispatch, decremented under the mailbox lock when a completion of the
    /// current generation is accepted (so a late one never touches the next process); reset by
    /// `open`.
    outstanding: AtomicU64,
    /// Messages an `async fn` body took from its mailbox and has not received (its inbox), and
    /// exit signals and `Down`s it holds likewise (its signal queue): published by the body's
    /// adapter after a step that changed them (`async_fn/mod.rs`); reset by `open`. Saturating
    /// `u32`s: together one word of the cell.
    unread_messages: AtomicU32,
    unread_signals: AtomicU32,
    /// All-time: completions of async and blocking handlers that reported an error.
    handler_errors: AtomicU64,
    /// All-time: completions of async and blocking handlers that panicked.
    handler_panics: AtomicU64,
    /// All-time: panics of user destructors contained while the cell's processes' values were
    /// dropped (`contain.rs`).
    destructor_panics: AtomicU64,
}

impl CellStats {
    /// A new process: its own figures start at zero (the all-time ones go on).
    pub(super) fn reset(&self) {
        self.steps.store(0, Relaxed);
        self.outstanding.store(0, Relaxed);
        self.unread_messages.store(0, Relaxed);
        self.unread_signals.store(0, Relaxed);
    }

    /// An `async fn` body now holds `messages` and `signals` unread (field docs).
    pub(crate) fn set_held(&self, messages: u32, signals: u32) {
        self.unread_messages.store(messages, Relaxed);
        self.unread_signals.store(signals, Relaxed);
    }

    /// The poller publishes the process's step count (after each poll, and before `close`).
    #[inline]
    pub(crate) fn set_steps(&self, steps: u64) {
        self.steps.store(steps, Relaxed);
    }

    /// An async or blocking yield was dispatched.
    pub(crate) fn yield_dispatched(&self) {
        self.outstanding.fetch_add(1, Relaxed);
    }

    /// Its completion was accepted (under the mailbox lock).
    pub(crate) fn yield_completed(&self) {
        // Never below zero, even for a completion delivered by hand (the process layer's tests).
        let _ = self
            .outstanding
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    /// An async or blocking handler finished with `result`.
    pub(crate) fn handler_finished(&self, result: &Result<Payload, CommandError>) {
        match HandlerOutcome::of(result) {
            HandlerOutcome::Error => self.handler_errors.fetch_add(1, Relaxed),
            HandlerOutcome::Panicked => self.handler_panics.fetch_add(1, Relaxed),
            HandlerOutcome::Other => return,
        };
    }

    /// `panics` destructor panics were contained while dropping this cell's process's values
    /// (`contain.rs`). Most calls add zero: one relaxed load-free branch.
    #[inline]
    pub(crate) fn destructors_panicked(&self, panics: u64) {
        if panics != 0 {
            self.destructor_panics.fetch_add(panics, Relaxed);
        }
    }

    pub(super) fn steps(&self) -> u64 {
        self.steps.load(Relaxed)
    }

    pub(super) fn outstanding(&self) -> u64 {
        self.outstanding.load(Relaxed)
    }

    /// What an `async fn` body holds unread: messages, signals (field docs).
    pub(super) fn held(&self) -> (u32, u32) {
        (
            self.unread_messages.load(Relaxed),
            self.unread_signals.load(Relaxed),
        )
    }

    pub(super) fn handler_errors(&self) -> u64 {
        self.handler_errors.load(Relaxed)
    }

    pub(super) fn handler_panics(&self) -> u64 {
        self.handler_panics.load(Relaxed)
    }

    pub(super) fn destructor_panics(&self) -> u64 {
        self.destructor_panics.load(Relaxed)
    }
}

/// How a handler's result counts in the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandlerOutcome {
    /// The handler reported an error ([`CommandError::Failed`]) or missed its deadline
    /// ([`CommandError::TimedOut`]).
    Error,
    /// [`CommandError::Panicked`].
    Panicked,
    /// A result, or a completion that is not the handler's doing (cancelled, no timer).
    Other,
}

impl HandlerOutcome {
    #[inline]
    pub(crate) fn of(result: &Result<Payload, CommandError>) -> HandlerOutcome {
        match result {
            Err(CommandError::Failed(_) | CommandError::TimedOut) => HandlerOutcome::Error,
            Err(CommandError::Panicked(_)) => HandlerOutcome::Panicked,
            _ => HandlerOutcome::Other,
        }
    }
}

/// The process a cell hosts, as `process_info` reports it (read under the mailbox lock).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CellInfo {
    pub(crate) generation: u64,
    pub(crate) state: ProcessState,
    pub(crate) kind: &'static str,
    /// When it was spawned, in the scheduler's coarse clock (nanoseconds).
    pub(crate) spawned_at: u64,
    pub(crate) steps: u64,
    /// Events queued in its mailbox.
    pub(crate) mailbox_depth: usize,
    pub(crate) outstanding: u64,
    /// What an `async fn` body holds unread, as of its last step: messages, signals.
    pub(crate) unread_messages: u32,
    pub(crate) unread_signals: u32,
}

/// What the metrics snapshot reads from every cell, in one critical section.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CellSurvey {
    /// The state of the hosted process, if one is live (not free, not closing).
    pub(crate) live: Option<ProcessState>,
    /// All-time: most events queued at once.
    pub(crate) max_depth: usize,
    /// All-time: async/blocking handler completions that reported an error.
    pub(crate) handler_errors: u64,
    /// All-time: async/blocking handler completions that panicked.
    pub(crate) handler_panics: u64,
    /// All-time: destructor panics contained for the cell's processes.
    pub(crate) destructor_panics: u64,
}
