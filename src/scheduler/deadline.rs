//! A runtime-agnostic deadline future, for the async waits of shutdown, of `ask_within` and of
//! a supervisor's stop of a child.
//!
//! `shutdown_async` may be awaited on any executor — a tokio runtime of either flavour (with or
//! without its timer enabled), `futures::executor::block_on`, a procsched task — and a
//! process's body may run in a tokio context without a time driver, or one shutting down, so
//! none of them can rely on tokio's timer. One process-wide timer thread, started on first use, wakes every
//! [`Deadline`] when it passes: one thread in all, not one per call.
//!
//! Plain std types: the timer thread is outside every loom model, like tokio's threads.

use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Resolves once `Instant::now()` reaches its instant.
#[derive(Debug)]
pub(crate) struct Deadline {
    at: Instant,
}

impl Deadline {
    pub(crate) fn new(at: Instant) -> Deadline {
        Deadline { at }
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        match timer() {
            Some(timer) => timer.register(self.at, cx.waker().clone()),
            // No timer thread could be started: poll again soon rather than never.
            None => cx.waker().wake_by_ref(),
        }
        Poll::Pending
    }
}

struct Timer {
    /// Pending wake-ups, earliest first.
    entries: Mutex<BinaryHeap<Entry>>,
    changed: Condvar,
}

struct Entry {
    at: Instant,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest deadline must come out first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

fn timer() -> Option<&'static Timer> {
    static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();
    *TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            entries: Mutex::new(BinaryHeap::new()),
            changed: Condvar::new(),
        }));
        let started = std::thread::Builder::new()
            .name("procsched-timer".to_owned())
            .spawn(move || timer.run());
        match started {
            Ok(_) => Some(timer),
            Err(error) => {
                tracing::warn!(%error, "could not start the timer thread; deadlines will spin");
                None
            }
        }
    })
}

impl Timer {
    fn register(&self, at: Instant, waker: Waker) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let earliest = entries.peek().is_none_or(|first| at < first.at);
        entries.push(Entry { at, waker });
        if earliest {
            self.changed.notify_one();
        }
    }

    fn run(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while entries.peek().is_some_and(|first| first.at <= now) {
                due.extend(entries.pop().map(|entry| entry.waker));
            }
            if !due.is_empty() {
                // Wake outside the lock: a waker may run arbitrary scheduling code.
                drop(entries);
                due.into_iter().for_each(Waker::wake);
                entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            entries = match entries.peek().map(|first| first.at) {
                Some(at) => {
                    self.changed
                        .wait_timeout(entries, at.saturating_duration_since(now))
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self
                    .changed
                    .wait(entries)
                    .unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deadline_resolves_on_a_plain_executor() {
        let start = Instant::now();
        futures::executor::block_on(Deadline::new(start + Duration::from_millis(5)));
        assert!(Instant::now() >= start + Duration::from_millis(5));
    }

    #[test]
    fn a_past_deadline_is_ready_at_once() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut past = Deadline::new(Instant::now());
        assert!(Pin::new(&mut past).poll(&mut cx).is_ready());
    }
}
