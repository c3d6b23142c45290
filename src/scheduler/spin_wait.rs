//! A wait from outside the scheduler — an ask's answer, a process's end — spins a few
//! microseconds before its thread parks: one waiter at a time, and only while spinning pays.
//!
//! # Why
//! A tokio task that asks a process in a loop (an HTTP handler asking its session, a
//! request/reply loop in `#[tokio::test(flavor = "multi_thread")]`) paid two thread wake-ups
//! per ask: the request wakes a parked scheduler worker, and the answer, sent from that worker,
//! wakes the tokio worker that had parked meanwhile (tokio's remote schedule, a futex wake).
//! `msgprobe ask_task` read 13–26 µs an ask where tokio-native, whose two tasks take turns on
//! one worker and never park, reads 0.4–0.6 µs. The answer is usually on its way within a
//! microsecond of the request: a caller that looks for it a little longer before it lets its
//! thread park finds it there (0.5 µs an ask), and the worker that answered has not parked
//! either when the next request comes. A task that spawns a short process and awaits its
//! handle pays the same two wake-ups, and gains the same way; so does a task whose `send_wait`
//! finds a bounded mailbox full (each message that made room woke the parked sender's thread,
//! whose next send woke the parked worker: a tokio task filling a mailbox of capacity 1 read
//! 24–28× tokio's bounded `mpsc`, 1.4–1.6× once it looks for room first).
//!
//! # The gate
//! Spinning helps only if the worker that answers has a core to run on while the waiter spins.
//! Sixty-four tasks asking at once on two cores (`msgprobe ask_tasks64`) are the opposite case:
//! a spinner holds a core the answering worker needs — an experiment that let every asker spin
//! lost 20× there, and one spinner at a time pausing for up to 20 µs still lost 1.5–2×. So:
//! - **One spinner at a time** per scheduler (`spinning`): the other waiters sleep at once, as
//!   before, and a thread whose wait finds another spinning skips spinning for its next
//!   [`CONTENDED_SKIP`] waits — overlapping waits are the shape spinning hurts.
//! - **The spinner gives its core away** after [`YIELD_AFTER`]: past it, it yields the thread
//!   between looks (`sched_yield`), so a worker waiting for a core runs and answers. With
//!   that, the 64 askers read as without spinning (320 against 333–357 ns an ask).
//! - **A spin that misses backs off**: after `k` misses in a row ([`SPIN_FOR`] without an
//!   answer) the thread's next `2^k` waits (at most 2^[`MAX_BACKOFF_SHIFT`]) do not spin; a hit
//!   resets it. The backoff is per thread: a wait that does not spin writes no shared memory.
//! - **Never on a worker's thread, nor in a process's body** (one awaiting a handle, say): a
//!   worker's thread has other processes to run, and a body driven by `testing::Harness` would
//!   see a child's result or not depending on timing, where it must fail its step the same way
//!   every time. **Nor on one core**, where the answer cannot come meanwhile, nor
//!   when the scheduler was built with `spin_waits(false)`: in a join of many asks from one
//!   task each spin holds back its siblings' requests until its answer (`msgprobe`-style
//!   `join_all` of 1 000 asks: 0.76–0.83 µs an ask without spinning, 1.00–1.04 with).
//!
//! Only the first poll spins (the one that sent the request; a handle's first): a future
//! polled again by a `select!` or a join does not spin each time. The spin runs before that
//! poll registers its waker, so an answer the spin takes wakes no one — a remote schedule of
//! the waiting task, and perhaps an unpark of another of its runtime's threads, saved.
//!
//! # No protocol here
//! Nothing a wait returns depends on the gate: the spin only looks (`try_recv` on the ask's own
//! channel, `is_finished` on the handle), and the poll that follows reads as it always did,
//! registering its waker; a race on `spinning` only decides whether some wait spins — two
//! spinners at once, or none — never what it gets. So it is `Relaxed`, and no loom model is
//! needed.

use crate::process::async_fn::asking;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long one wait spins at most.
const SPIN_FOR: Duration = Duration::from_micros(20);
/// Spinning longer than this, the spinner yields its core between looks.
const YIELD_AFTER: Duration = Duration::from_micros(2);
/// Looks (at a channel, at a task's state) between two looks at the clock.
const TRIES_PER_CLOCK: u32 = 32;
/// Waits a thread skips spinning for after one of its waits found another spinning.
const CONTENDED_SKIP: u32 = 64;
/// The most consecutive misses counted: a backoff of at most 2^10 waits.
const MAX_BACKOFF_SHIFT: u32 = 10;

/// The spin gate of one scheduler (module docs).
#[derive(Debug)]
pub(super) struct SpinGate {
    /// More than one core (an answer can come while the waiter spins), and spinning not
    /// turned off (`spin_waits(false)`).
    enabled: bool,
    /// A wait is spinning now.
    spinning: AtomicBool,
}

/// A waiting thread's backoff (module docs, "The gate"): per thread, so that a wait that does
/// not spin — most of them, where waits overlap — writes no shared memory.
#[derive(Debug, Default)]
struct Backoff {
    /// Consecutive spins that missed (capped at [`MAX_BACKOFF_SHIFT`]).
    misses: Cell<u32>,
    /// Waits still to skip spinning before the next try.
    skip: Cell<u32>,
}

std::thread_local! {
    static BACKOFF: Backoff = const { Backoff { misses: Cell::new(0), skip: Cell::new(0) } };
}

/// What a spin found on an ask's channel.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Spun<R> {
    /// The answer.
    Answered(R),
    /// The port was dropped unanswered.
    Closed,
}

impl SpinGate {
    /// The gate of a scheduler built with `spin_waits(enabled)`.
    pub(super) fn new(enabled: bool) -> SpinGate {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        SpinGate::with_cores(if enabled { cores } else { 1 })
    }

    fn with_cores(cores: usize) -> SpinGate {
        SpinGate {
            enabled: cores > 1,
            spinning: AtomicBool::new(false),
        }
    }

    /// `true` unless waits never spin here (one core, or `spin_waits(false)`).
    #[cfg(feature = "cluster")]
    pub(super) fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Spins for the answer on `receiver` (just sent), if the gate lets this wait spin; `None`
    /// if it did not spin or found nothing, and the caller polls the channel as usual (which
    /// registers its waker).
    pub(super) fn wait_answer<R>(&self, receiver: &mut oneshot::Receiver<R>) -> Option<Spun<R>> {
        self.wait_for(|| match receiver.try_recv() {
            Ok(answer) => Some(Spun::Answered(answer)),
            Err(oneshot::error::TryRecvError::Closed) => Some(Spun::Closed),
            Err(oneshot::error::TryRecvError::Empty) => None,
        })
    }

    /// Spins until `finished()` (a process's end, room in a mailbox), if the gate lets this wait spin; `false` if
    /// it did not spin or the process is still running, and the caller polls as usual.
    pub(super) fn wait_finished(&self, finished: impl Fn() -> bool) -> bool {
        self.wait_for(|| finished().then_some(())).is_some()
    }

    fn wait_for<T>(&self, look: impl FnMut() -> Option<T>) -> Option<T> {
        if !self.enabled || crate::executor::on_worker_thread() || asking::in_body() {
            return None;
        }
        BACKOFF
            .try_with(|backoff| self.gated(backoff, look))
            .ok()
            .flatten()
    }

    fn gated<T>(&self, backoff: &Backoff, look: impl FnMut() -> Option<T>) -> Option<T> {
        let skip = backoff.skip.get();
        if skip > 0 {
            backoff.skip.set(skip - 1);
            return None;
        }
        if self.spinning.swap(true, Relaxed) {
            // Waits overlap: the spinner's core is one the others' tasks and the answering
            // worker need.
            backoff.skip.set(CONTENDED_SKIP);
            return None;
        }
        let found = spin(look);
        self.spinning.store(false, Relaxed);
        if found.is_some() {
            backoff.misses.set(0);
        } else {
            let misses = (backoff.misses.get() + 1).min(MAX_BACKOFF_SHIFT);
            backoff.misses.set(misses);
            backoff.skip.set(1 << misses);
        }
        found
    }
}

/// Calls `look` until it finds something or [`SPIN_FOR`] has passed.
fn spin<T>(mut look: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        for _ in 0..TRIES_PER_CLOCK {
            if let Some(found) = look() {
                return Some(found);
            }
            std::hint::spin_loop();
        }
        let spent = start.elapsed();
        if spent >= SPIN_FOR {
            return None;
        }
        if spent >= YIELD_AFTER {
            std::thread::yield_now();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A gate, and this thread's backoff cleared (tests may share a thread).
    fn fresh_gate() -> SpinGate {
        BACKOFF.with(|backoff| {
            backoff.misses.set(0);
            backoff.skip.set(0);
        });
        SpinGate::with_cores(2)
    }

    #[test]
    fn a_spin_takes_an_answer_already_sent_or_a_dropped_port() {
        let gate = fresh_gate();
        let (reply, mut receiver) = oneshot::channel();
        reply.send(7u64).unwrap();
        assert_eq!(gate.wait_answer(&mut receiver), Some(Spun::Answered(7)));
        let (reply, mut receiver) = oneshot::channel::<u64>();
        drop(reply);
        assert_eq!(gate.wait_answer(&mut receiver), Some(Spun::Closed));
    }

    #[test]
    fn an_answer_sent_from_another_thread_during_the_spin_is_taken() {
        let gate = fresh_gate();
        // A spin that ends before the other thread has run misses (and backs off, as it
        // should); the answer is then on the channel for the poll, which parked meanwhile.
        let (reply, mut receiver) = oneshot::channel();
        let (go, ready) = std::sync::mpsc::channel::<()>();
        let answerer = std::thread::spawn(move || {
            ready.recv().unwrap();
            reply.send(9u64).unwrap();
        });
        go.send(()).unwrap();
        let spun = gate.wait_answer(&mut receiver);
        answerer.join().unwrap();
        let answer = match spun {
            Some(Spun::Answered(answer)) => answer,
            Some(Spun::Closed) => panic!("the port was not dropped"),
            None => receiver.try_recv().unwrap(),
        };
        assert_eq!(answer, 9);
    }

    #[test]
    fn a_miss_makes_the_next_asks_skip_and_a_hit_resets_the_backoff() {
        let gate = fresh_gate();
        let (_reply, mut silent) = oneshot::channel::<u64>();
        assert_eq!(gate.wait_answer(&mut silent), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 2);
        // The next two asks do not spin: an answer already there is left for the poll.
        for _ in 0..2 {
            let (reply, mut receiver) = oneshot::channel();
            reply.send(1u64).unwrap();
            assert_eq!(gate.wait_answer(&mut receiver), None);
            assert_eq!(receiver.try_recv(), Ok(1));
        }
        assert_eq!(gate.wait_answer(&mut silent), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 4);
        for _ in 0..4 {
            assert_eq!(gate.wait_answer(&mut silent), None);
        }
        let (reply, mut receiver) = oneshot::channel();
        reply.send(2u64).unwrap();
        assert_eq!(gate.wait_answer(&mut receiver), Some(Spun::Answered(2)));
        assert_eq!(BACKOFF.with(|b| b.misses.get()), 0);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 0);
    }

    #[test]
    fn a_wait_for_a_process_end_sees_it_finished() {
        let gate = fresh_gate();
        let done = std::sync::atomic::AtomicBool::new(true);
        assert!(gate.wait_finished(|| done.load(Relaxed)));
        done.store(false, Relaxed);
        assert!(!gate.wait_finished(|| done.load(Relaxed)));
    }

    #[test]
    fn one_wait_spins_at_a_time_and_none_on_one_core() {
        let gate = fresh_gate();
        gate.spinning.store(true, Relaxed);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(3u64).unwrap();
        assert_eq!(gate.wait_answer(&mut receiver), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), CONTENDED_SKIP);
        gate.spinning.store(false, Relaxed);
        BACKOFF.with(|b| b.skip.set(0));
        assert_eq!(gate.wait_answer(&mut receiver), Some(Spun::Answered(3)));
        let single = SpinGate::with_cores(1);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(5u64).unwrap();
        assert_eq!(SpinGate::new(false).wait_answer(&mut receiver), None);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(4u64).unwrap();
        assert_eq!(single.wait_answer(&mut receiver), None);
    }
}
