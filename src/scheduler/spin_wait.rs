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
//! - **Nor in a join** (below).
//!
//! # Joined waits
//! A join of many waits from one task (`join_all` of asks, a `FuturesUnordered` of handles)
//! polls each one's first poll right after the last: a spin there holds back every later
//! request until its own answer came, one round trip after the other — 10 000 asks joined
//! from one task (`msgprobe ask_join`) read 1.29–1.41 µs an ask with every first poll
//! spinning, 0.60–0.82 µs with the rule below (tokio-native: 0.44–0.51 µs). Such
//! a join's futures have wakers of their own (`FuturesUnordered` gives each one its own), where
//! a loop of waits in one task polls each with the task's. So a wait that starts within
//! [`JOINED_WITHIN`] of the thread's last one, with a waker that would not wake the same task,
//! does not spin; a loop of waits in one task keeps spinning, and so do waits of different
//! tasks that come further apart. (A small join polled with its task's waker — `join!`,
//! `join_all` of at most 30 — still spins each: a bounded cost.)
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
use std::task::Waker;
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
/// A wait that starts this soon after the thread's last one, with another waker, is one of a
/// join's: it does not spin.
const JOINED_WITHIN: Duration = Duration::from_micros(10);

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
    /// The waker of this thread's last wait (its data and vtable pointers, what
    /// `Waker::will_wake` compares: no clone, and nothing to drop at the thread's exit), and
    /// when the gate let it go: a wait that comes within [`JOINED_WITHIN`] with another waker
    /// is one of a join's (module docs).
    last: Cell<Option<(WakerId, Instant)>>,
}

/// A waker's identity: its data and vtable pointers, as `Waker::will_wake` compares them (a
/// waker freed and another made at the same address reads as the same: the wait spins, as any
/// wait of one task may).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct WakerId(*const (), *const std::task::RawWakerVTable);

impl WakerId {
    fn of(waker: &Waker) -> WakerId {
        WakerId(waker.data(), waker.vtable())
    }
}

std::thread_local! {
    static BACKOFF: Backoff = const {
        Backoff { misses: Cell::new(0), skip: Cell::new(0), last: Cell::new(None) }
    };
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
    pub(super) fn wait_answer<R>(
        &self,
        receiver: &mut oneshot::Receiver<R>,
        waker: &Waker,
    ) -> Option<Spun<R>> {
        self.wait_for(waker, || match receiver.try_recv() {
            Ok(answer) => Some(Spun::Answered(answer)),
            Err(oneshot::error::TryRecvError::Closed) => Some(Spun::Closed),
            Err(oneshot::error::TryRecvError::Empty) => None,
        })
    }

    /// Spins until `finished()` (a process's end, room in a mailbox), if the gate lets this wait spin; `false` if
    /// it did not spin or the process is still running, and the caller polls as usual.
    pub(super) fn wait_finished(&self, waker: &Waker, finished: impl Fn() -> bool) -> bool {
        self.wait_for(waker, || finished().then_some(())).is_some()
    }

    /// `waker`: the waiting future's, which the caller registers if this finds nothing.
    fn wait_for<T>(&self, waker: &Waker, look: impl FnMut() -> Option<T>) -> Option<T> {
        if !self.enabled || crate::executor::on_worker_thread() || asking::in_body() {
            return None;
        }
        BACKOFF
            .try_with(|backoff| {
                let joined = backoff.joined(waker);
                let found = if joined {
                    None
                } else {
                    self.gated(backoff, look)
                };
                backoff.last.set(Some((WakerId::of(waker), Instant::now())));
                found
            })
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

impl Backoff {
    /// `true` if a wait polled with `waker` is one of a join's: it comes right after this
    /// thread's last wait, which had another waker (module docs, "Joined waits").
    fn joined(&self, waker: &Waker) -> bool {
        self.last
            .get()
            .is_some_and(|(last, at)| WakerId::of(waker) != last && at.elapsed() < JOINED_WITHIN)
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
            backoff.last.set(None);
        });
        SpinGate::with_cores(2)
    }

    #[test]
    fn a_spin_takes_an_answer_already_sent_or_a_dropped_port() {
        let gate = fresh_gate();
        let (reply, mut receiver) = oneshot::channel();
        reply.send(7u64).unwrap();
        assert_eq!(
            gate.wait_answer(&mut receiver, task_waker()),
            Some(Spun::Answered(7))
        );
        let (reply, mut receiver) = oneshot::channel::<u64>();
        drop(reply);
        assert_eq!(
            gate.wait_answer(&mut receiver, task_waker()),
            Some(Spun::Closed)
        );
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
        let spun = gate.wait_answer(&mut receiver, task_waker());
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
        assert_eq!(gate.wait_answer(&mut silent, task_waker()), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 2);
        // The next two asks do not spin: an answer already there is left for the poll.
        for _ in 0..2 {
            let (reply, mut receiver) = oneshot::channel();
            reply.send(1u64).unwrap();
            assert_eq!(gate.wait_answer(&mut receiver, task_waker()), None);
            assert_eq!(receiver.try_recv(), Ok(1));
        }
        assert_eq!(gate.wait_answer(&mut silent, task_waker()), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 4);
        for _ in 0..4 {
            assert_eq!(gate.wait_answer(&mut silent, task_waker()), None);
        }
        let (reply, mut receiver) = oneshot::channel();
        reply.send(2u64).unwrap();
        assert_eq!(
            gate.wait_answer(&mut receiver, task_waker()),
            Some(Spun::Answered(2))
        );
        assert_eq!(BACKOFF.with(|b| b.misses.get()), 0);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), 0);
    }

    #[test]
    fn a_wait_for_a_process_end_sees_it_finished() {
        let gate = fresh_gate();
        let done = std::sync::atomic::AtomicBool::new(true);
        assert!(gate.wait_finished(task_waker(), || done.load(Relaxed)));
        done.store(false, Relaxed);
        assert!(!gate.wait_finished(task_waker(), || done.load(Relaxed)));
    }

    #[test]
    fn one_wait_spins_at_a_time_and_none_on_one_core() {
        let gate = fresh_gate();
        gate.spinning.store(true, Relaxed);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(3u64).unwrap();
        assert_eq!(gate.wait_answer(&mut receiver, task_waker()), None);
        assert_eq!(BACKOFF.with(|b| b.skip.get()), CONTENDED_SKIP);
        gate.spinning.store(false, Relaxed);
        BACKOFF.with(|b| b.skip.set(0));
        assert_eq!(
            gate.wait_answer(&mut receiver, task_waker()),
            Some(Spun::Answered(3))
        );
        let single = SpinGate::with_cores(1);
        let (reply, mut receiver) = oneshot::channel();
        reply.send(5u64).unwrap();
        assert_eq!(
            SpinGate::new(false).wait_answer(&mut receiver, task_waker()),
            None
        );
        let (reply, mut receiver) = oneshot::channel();
        reply.send(4u64).unwrap();
        assert_eq!(single.wait_answer(&mut receiver, task_waker()), None);
    }

    /// One task's waker, the same at every wait (a loop of waits in one task). (Not
    /// `Waker::noop()`: its vtable may have several addresses, and `will_wake` compares them.)
    fn task_waker() -> &'static Waker {
        static WAKER: std::sync::OnceLock<Waker> = std::sync::OnceLock::new();
        WAKER.get_or_init(own_waker)
    }

    /// A waker of its own (a join's future's, as `FuturesUnordered` gives each).
    fn own_waker() -> Waker {
        struct Own;
        impl std::task::Wake for Own {
            fn wake(self: std::sync::Arc<Self>) {}
        }
        Waker::from(std::sync::Arc::new(Own))
    }

    #[test]
    fn a_wait_right_after_one_with_another_waker_is_a_joins_and_does_not_spin() {
        let gate = fresh_gate();
        let looks = Cell::new(0);
        let look = || {
            looks.set(looks.get() + 1);
            Some(())
        };
        let (first, second) = (own_waker(), own_waker());
        assert_eq!(gate.wait_for(&first, look), Some(()), "the first spins");
        assert_eq!(looks.get(), 1);
        assert_eq!(gate.wait_for(&second, look), None, "joined: no spin");
        assert_eq!(looks.get(), 1, "not even one look");
        // A loop of waits in one task (the same waker) spins each time.
        assert_eq!(gate.wait_for(&second, look), Some(()));
        assert_eq!(gate.wait_for(&second.clone(), look), Some(()));
        assert_eq!(looks.get(), 3);
    }
}
