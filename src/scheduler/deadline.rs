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

use crate::process::wake_foreign;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Resolves once `Instant::now()` reaches its instant.
///
/// Registered with the timer thread at its first pending poll, and only again when polled with
/// a waker that would not wake the same task; dropped, it takes its entry out. An entry left
/// behind would keep its waker — and so the waiting task's allocation, its whole future — until
/// the instant passed: an `ask_within(30 s)` answered at once held its asker for 30 s.
#[derive(Debug)]
pub(crate) struct Deadline {
    at: Instant,
    /// Its key in the timer's entries and the waker it registered, once registered.
    registered: Option<(Key, Waker)>,
}

impl Deadline {
    pub(crate) fn new(at: Instant) -> Deadline {
        Deadline {
            at,
            registered: None,
        }
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.at {
            return Poll::Ready(());
        }
        let Some(timer) = timer() else {
            // No timer thread could be started: poll again soon rather than never.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        };
        match &mut this.registered {
            Some((_, waker)) if waker.will_wake(cx.waker()) => {}
            Some((key, waker)) => {
                *waker = cx.waker().clone();
                timer.register(*key, waker.clone());
            }
            None => {
                let key = timer.key(this.at);
                timer.register(key, cx.waker().clone());
                this.registered = Some((key, cx.waker().clone()));
            }
        }
        Poll::Pending
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let (Some((key, _)), Some(timer)) = (self.registered.take(), timer()) {
            // Gone already if it fired; otherwise its waker goes now, not at its instant.
            timer.lock().wakers.remove(&key);
        }
    }
}

/// An entry's key: its instant, then a number that tells apart entries of the same instant.
/// Ordered earliest first.
type Key = (Instant, u64);

struct Timer {
    /// Pending wake-ups, earliest first, and the next key's number.
    entries: Mutex<Entries>,
    changed: Condvar,
}

#[derive(Default)]
struct Entries {
    wakers: BTreeMap<Key, Waker>,
    next: u64,
}

fn timer() -> Option<&'static Timer> {
    static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();
    *TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            entries: Mutex::new(Entries::default()),
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
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A key for an entry at `at`, used by no other.
    fn key(&self, at: Instant) -> Key {
        let mut entries = self.lock();
        entries.next += 1;
        (at, entries.next)
    }

    /// Wakes `waker` at `key`'s instant (replacing the waker an entry of that key had).
    fn register(&self, key: Key, waker: Waker) {
        let mut entries = self.lock();
        let earliest = entries
            .wakers
            .first_key_value()
            .is_none_or(|(first, _)| key < *first);
        entries.wakers.insert(key, waker);
        if earliest {
            self.changed.notify_one();
        }
    }

    fn run(&self) {
        let mut entries = self.lock();
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while entries
                .wakers
                .first_key_value()
                .is_some_and(|((at, _), _)| *at <= now)
            {
                due.extend(entries.wakers.pop_first().map(|(_, waker)| waker));
            }
            if !due.is_empty() {
                // Wake outside the lock: a waker may run arbitrary scheduling code. Not ours: one
                // that panics must not end this thread, every deadline's (`foreign_wake.rs`).
                drop(entries);
                for waker in due {
                    wake_foreign("a task waiting for a deadline", waker);
                }
                entries = self.lock();
                continue;
            }
            entries = match entries.wakers.first_key_value().map(|((at, _), _)| *at) {
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

    /// `true` if the timer holds an entry of `deadline`'s.
    fn holds(deadline: &Deadline) -> bool {
        let key = deadline.registered.as_ref().expect("registered").0;
        timer().expect("timer").lock().wakers.contains_key(&key)
    }

    #[test]
    fn a_dropped_deadline_leaves_nothing_with_the_timer() {
        let wakes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        struct Count(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl std::task::Wake for Count {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let waker = Waker::from(std::sync::Arc::new(Count(wakes.clone())));
        let mut cx = Context::from_waker(&waker);
        let mut far = Deadline::new(Instant::now() + Duration::from_secs(3_600));
        for _ in 0..3 {
            assert!(Pin::new(&mut far).poll(&mut cx).is_pending());
        }
        assert!(holds(&far), "registered once, whatever the polls");
        let key = far.registered.as_ref().unwrap().0;
        drop(far);
        assert!(
            !timer().unwrap().lock().wakers.contains_key(&key),
            "its waker (and the task it keeps) went with it"
        );
        assert_eq!(wakes.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn a_deadline_polled_by_another_task_wakes_that_one() {
        let mut far = Deadline::new(Instant::now() + Duration::from_millis(20));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(Pin::new(&mut far).poll(&mut cx).is_pending());
        // Then awaited elsewhere: the entry's waker is replaced, not doubled.
        futures::executor::block_on(&mut far);
        assert!(Instant::now() >= far.at);
    }

    #[test]
    fn a_past_deadline_is_ready_at_once() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut past = Deadline::new(Instant::now());
        assert!(Pin::new(&mut past).poll(&mut cx).is_ready());
    }
}
