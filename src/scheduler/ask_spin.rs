//! An ask from outside any process spins a few microseconds for its answer before its task
//! sleeps — one asker at a time, and only while spinning pays.
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
//! either when the next request comes.
//!
//! # The gate
//! Spinning helps only if the answering worker has a core to run on while the caller spins.
//! Sixty-four tasks asking at once on two cores (`msgprobe ask_tasks64`) are the opposite case:
//! a spinner holds a core the answering worker needs — an experiment that let every asker spin
//! lost 20× there, and one spinner at a time pausing for up to 20 µs still lost 1.5–2×. So:
//! - **One spinner at a time** per scheduler (`spinning`): the other asks in flight sleep at
//!   once, as before, and a thread whose ask finds another spinning skips spinning for its next
//!   [`CONTENDED_SKIP`] asks — overlapping asks are the shape spinning hurts.
//! - **The spinner gives its core away** after [`YIELD_AFTER`]: past it, it yields the thread
//!   between looks (`sched_yield`), so a worker waiting for a core runs and answers. With
//!   that, the 64 askers read as without spinning (320 against 333–357 ns an ask).
//! - **A spin that misses backs off**: after `k` misses in a row ([`SPIN_FOR`] without an
//!   answer) the thread's next `2^k` outside asks (at most 2^[`MAX_BACKOFF_SHIFT`]) do not spin;
//!   a hit resets it. The backoff is per thread: an ask that does not spin writes no shared
//!   memory.
//! - **Not on one core**, where the answer cannot come while the caller spins.
//!
//! Only the first poll spins (the one that sent the request): a future polled again by a
//! `select!` or a join does not spin each time.
//!
//! # No protocol here
//! Nothing the ask returns depends on the gate: the answer is taken from the ask's own
//! channel (`try_recv`, the channel the poll then reads, registering its waker), and a race
//! on `spinning` only decides whether some ask spins — two spinners at once, or none — never
//! what it gets. So it is `Relaxed`, and no loom model is needed.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long one ask spins for its answer at most.
const SPIN_FOR: Duration = Duration::from_micros(20);
/// Spinning longer than this, the spinner yields its core between looks.
const YIELD_AFTER: Duration = Duration::from_micros(2);
/// Polls of the channel between two looks at the clock.
const TRIES_PER_CLOCK: u32 = 32;
/// Outside asks that skip spinning after one found another ask spinning.
const CONTENDED_SKIP: u32 = 64;
/// The most consecutive misses counted: a backoff of at most 2^10 asks.
const MAX_BACKOFF_SHIFT: u32 = 10;

/// The spin gate of one scheduler (module docs).
#[derive(Debug)]
pub(super) struct AskSpin {
    /// More than one core: an answer can come while the caller spins.
    enabled: bool,
    /// An ask is spinning now.
    spinning: AtomicBool,
}

/// An asking thread's backoff (module docs, "The gate"): per thread, so that an ask that does
/// not spin — most of them, where asks overlap — writes no shared memory.
#[derive(Debug, Default)]
struct Backoff {
    /// Consecutive spins that missed (capped at [`MAX_BACKOFF_SHIFT`]).
    misses: Cell<u32>,
    /// Outside asks still to skip spinning before the next try.
    skip: Cell<u32>,
}

std::thread_local! {
    static BACKOFF: Backoff = const { Backoff { misses: Cell::new(0), skip: Cell::new(0) } };
}

/// What a spin found on the channel.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Spun<R> {
    /// The answer.
    Answered(R),
    /// The port was dropped unanswered.
    Closed,
}

impl AskSpin {
    pub(super) fn new() -> AskSpin {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        AskSpin::with_cores(cores)
    }

    fn with_cores(cores: usize) -> AskSpin {
        AskSpin {
            enabled: cores > 1,
            spinning: AtomicBool::new(false),
        }
    }

    /// Spins for the answer on `receiver` (just sent), if the gate lets this ask spin; `None`
    /// if it did not spin or found nothing, and the caller polls the channel as usual (which
    /// registers its waker). Called before that poll: an answer the spin takes then finds no
    /// waker to wake — a remote schedule of the asking task, and perhaps an unpark of another
    /// of its runtime's threads, saved.
    pub(super) fn wait<R>(&self, receiver: &mut oneshot::Receiver<R>) -> Option<Spun<R>> {
        if !self.enabled {
            return None;
        }
        BACKOFF
            .try_with(|backoff| self.wait_with(backoff, receiver))
            .ok()
            .flatten()
    }

    fn wait_with<R>(
        &self,
        backoff: &Backoff,
        receiver: &mut oneshot::Receiver<R>,
    ) -> Option<Spun<R>> {
        let skip = backoff.skip.get();
        if skip > 0 {
            backoff.skip.set(skip - 1);
            return None;
        }
        if self.spinning.swap(true, Relaxed) {
            // Asks overlap: the spinner's core is one the others' tasks and the answering
            // worker need.
            backoff.skip.set(CONTENDED_SKIP);
            return None;
        }
        let found = spin(receiver);
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

/// Polls `receiver` until it has an answer, is closed, or [`SPIN_FOR`] has passed.
fn spin<R>(receiver: &mut oneshot::Receiver<R>) -> Option<Spun<R>> {
    let start = Instant::now();
    loop {
        for _ in 0..TRIES_PER_CLOCK {
            std::hint::spin_loop();
            match receiver.try_recv() {
                Ok(answer) => return Some(Spun::Answered(answer)),
                Err(oneshot::error::TryRecvError::Closed) => return Some(Spun::Closed),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
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

    #[test]
    fn a_spin_takes_an_answer_already_sent_or_a_dropped_port() {
        let gate = AskSpin::with_cores(2);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(7u64).unwrap();
        assert_eq!(gate.wait(&mut receiver), Some(Spun::Answered(7)));
        let (reply, mut receiver) = oneshot::channel::<u64>();
        drop(reply);
        assert_eq!(gate.wait(&mut receiver), Some(Spun::Closed));
    }

    #[test]
    fn an_answer_sent_from_another_thread_during_the_spin_is_taken() {
        let gate = AskSpin::with_cores(2);
        // A spin that ends before the other thread has run misses (and backs off, as it
        // should); the answer is then on the channel for the poll, which parked meanwhile.
        let (reply, mut receiver) = oneshot::channel();
        let (go, ready) = std::sync::mpsc::channel::<()>();
        let answerer = std::thread::spawn(move || {
            ready.recv().unwrap();
            reply.send(9u64).unwrap();
        });
        go.send(()).unwrap();
        let spun = gate.wait(&mut receiver);
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
        let gate = AskSpin::with_cores(2);
        let (_reply, mut silent) = oneshot::channel::<u64>();
        assert_eq!(gate.wait(&mut silent), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 2);
        // The next two asks do not spin: an answer already there is left for the poll.
        for _ in 0..2 {
            let (reply, mut receiver) = oneshot::channel();
            reply.send(1u64).unwrap();
            assert_eq!(gate.wait(&mut receiver), None);
            assert_eq!(receiver.try_recv(), Ok(1));
        }
        assert_eq!(gate.wait(&mut silent), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 4);
        for _ in 0..4 {
            assert_eq!(gate.wait(&mut silent), None);
        }
        let (reply, mut receiver) = oneshot::channel();
        reply.send(2u64).unwrap();
        assert_eq!(gate.wait(&mut receiver), Some(Spun::Answered(2)));
        assert_eq!(BACKOFF.with(|b| b.misses.get()), 0);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 0);
    }

    #[test]
    fn one_ask_spins_at_a_time_and_none_on_one_core() {
        let gate = AskSpin::with_cores(2);
        gate.spinning.store(true, Relaxed);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(3u64).unwrap();
        assert_eq!(gate.wait(&mut receiver), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), CONTENDED_SKIP);
        gate.spinning.store(false, Relaxed);
        BACKOFF.with(|b| b.skip.set(0));
        assert_eq!(gate.wait(&mut receiver), Some(Spun::Answered(3)));
        let single = AskSpin::with_cores(1);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(4u64).unwrap();
        assert_eq!(single.wait(&mut receiver), None);
    }
}
