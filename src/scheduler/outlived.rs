//! A tokio runtime the scheduler adopted that shuts down before the scheduler: its processes
//! move to a runtime of the scheduler's own.
//!
//! # Why
//! A scheduler built inside a multi-thread tokio runtime, or given one (`tokio_handle`), runs
//! its processes inside that runtime's context: bodies await its timers and I/O. It may
//! outlive that runtime — a `static` scheduler first used in one `#[tokio::test]` and then in
//! the next, each test on a runtime of its own — and then every timer, socket and
//! `tokio::spawn` of its processes failed ("being shutdown"), and `block_on` of a tokio timeout
//! panicked on the caller's thread. Tokio tells no one that a runtime shut down unless a task
//! or a timer of theirs lives on it: a task would show in its `num_alive_tasks` for as long as
//! the scheduler lives, and a far timer would move a paused clock (`start_paused`) a year ahead.
//! So the scheduler looks where the question arises: at a spawn or a `block_on` called from
//! outside the adopted runtime (from inside, or from its own processes, it is alive). Found
//! shut down, the processes' runtime becomes the scheduler's own (`lazy_runtime.rs`), built
//! then: every worker enters it before its next poll, and whatever runs from then on uses it.
//!
//! # Cost
//! A spawn from a process: a thread-local read; from a task of the adopted runtime: a
//! `Handle::try_current` and an id comparison. From elsewhere (another runtime, a plain
//! thread): a look at most once per tick of the coarse clock (a few milliseconds), and
//! `block_on` looks every time (and lets the next spawn look): a look spawns a task on the
//! adopted runtime that ends at its first poll — a runtime that shut down drops it unpolled,
//! there and then (as `dispatch/bridge.rs`'s sentinel relies on).
//!
//! # No protocol here
//! `gone` only ever goes from `false` to `true`, and what it decides — which runtime
//! `process_runtime` hands out — is published by the lazy runtime's `OnceLock` (two threads
//! finding the runtime gone at once build one runtime); a look that misses the switch (a stale
//! `false`) only leaves a process in the adopted runtime, as before the look. No loom model.
//!
//! # Not covered
//! Handlers stay on the adopted runtime (once it is gone they complete `Cancelled`,
//! `dispatch/bridge.rs`); tokio resources a process made before the switch belong to the dead
//! runtime, and a process that only receives messages after the runtime died (no spawn or
//! `block_on` looked since) meets it in its next tokio call; a process spawned from outside the
//! adopted runtime within a tick of a spawn's look that found it alive (a `block_on` in
//! between clears that) still starts in it if it shut down meanwhile; and tests run in parallel
//! that share a `static` scheduler built in one of them see that test's runtime die under
//! their processes. A scheduler shared that way should be given a runtime that outlives every
//! user (`tokio_handle` of a `static` runtime).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::*};
use std::sync::Arc;
use tokio::runtime::Handle;

/// Whether the adopted runtime is known to have shut down (module docs).
#[derive(Debug)]
pub(super) struct Outlived {
    adopted: tokio::runtime::Id,
    gone: AtomicBool,
    /// The coarse-clock tick of the last look from a spawn.
    last_look: AtomicU64,
}

/// Where a look comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Caller {
    /// A spawn at this coarse-clock time: at most one look per tick.
    Spawn(u64),
    /// A `block_on`: a look every time.
    BlockOn,
}

impl Outlived {
    /// Watches `adopted`.
    pub(super) fn new(adopted: &Handle) -> Outlived {
        Outlived {
            adopted: adopted.id(),
            gone: AtomicBool::new(false),
            last_look: AtomicU64::new(u64::MAX),
        }
    }

    /// `true` once the adopted runtime was found shut down.
    #[inline]
    pub(super) fn is_gone(&self) -> bool {
        self.gone.load(Acquire)
    }

    /// Looks, unless the caller runs inside the adopted runtime, whether `adopted` (the
    /// runtime this watches) shut down; `true` if it did, now or before.
    pub(super) fn look(&self, adopted: &Handle, from: Caller) -> bool {
        if self.is_gone() {
            return true;
        }
        // A process spawning another: its worker runs inside the processes' runtime.
        if matches!(from, Caller::Spawn(_)) && crate::executor::on_worker_thread() {
            return false;
        }
        if Handle::try_current().is_ok_and(|current| current.id() == self.adopted) {
            return false;
        }
        if let Caller::Spawn(now) = from {
            // Read first: concurrent spawns in one tick share the line without writing it.
            let tick = now / TICK_NANOS;
            if self.last_look.load(Relaxed) == tick || self.last_look.swap(tick, Relaxed) == tick {
                return false;
            }
        }
        if !shut_down(adopted) {
            if from == Caller::BlockOn {
                // The next spawn looks again: a `block_on` often awaits what was just spawned,
                // and the runtime may be dropped right after it returns.
                self.last_look.store(u64::MAX, Relaxed);
            }
            return false;
        }
        if !self.gone.swap(true, AcqRel) {
            tracing::warn!(
                "the tokio runtime this scheduler adopted has shut down: its processes now run \
                 in a runtime of the scheduler's own (handlers stay on the one that shut down)"
            );
        }
        true
    }
}

/// A tick of the coarse clock, rounded up: looks from spawns are at most one per tick.
const TICK_NANOS: u64 = 4_000_000;

/// `true` if `runtime` has shut down: it drops a task spawned there unpolled, before `spawn`
/// returns. (One that shuts down as the task is spawned may drop it later: the next look sees
/// it.)
fn shut_down(runtime: &Handle) -> bool {
    const WAITING: u8 = 0;
    const POLLED: u8 = 1;
    const DROPPED_UNPOLLED: u8 = 2;
    struct Probe(Arc<AtomicU8>);
    impl Drop for Probe {
        fn drop(&mut self) {
            let _ = self
                .0
                .compare_exchange(WAITING, DROPPED_UNPOLLED, AcqRel, Acquire);
        }
    }
    let seen = Arc::new(AtomicU8::new(WAITING));
    let probe = Probe(seen.clone());
    drop(runtime.spawn(async move {
        probe.0.store(POLLED, Release);
    }));
    seen.load(Acquire) == DROPPED_UNPOLLED
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_runtime_is_found_shut_down_once_it_is_and_not_before() {
        let runtime = runtime();
        let handle = runtime.handle().clone();
        let outlived = Outlived::new(&handle);
        assert!(!outlived.look(&handle, Caller::BlockOn), "alive");
        assert!(
            !runtime.block_on(async { outlived.look(&handle, Caller::BlockOn) }),
            "not looked at from inside"
        );
        drop(runtime);
        assert!(outlived.look(&handle, Caller::BlockOn));
        assert!(outlived.is_gone());
    }

    #[test]
    fn a_spawn_after_a_block_on_looks_again_within_the_tick() {
        let runtime = runtime();
        let handle = runtime.handle().clone();
        let outlived = Outlived::new(&handle);
        assert!(!outlived.look(&handle, Caller::Spawn(1)));
        assert!(!outlived.look(&handle, Caller::BlockOn));
        drop(runtime);
        assert!(
            outlived.look(&handle, Caller::Spawn(2)),
            "the same tick, after a block_on"
        );
    }

    #[test]
    fn spawns_look_at_most_once_per_tick() {
        let runtime = runtime();
        let handle = runtime.handle().clone();
        let outlived = Outlived::new(&handle);
        assert!(!outlived.look(&handle, Caller::Spawn(1)));
        drop(runtime);
        assert!(!outlived.look(&handle, Caller::Spawn(2)), "the same tick");
        assert!(outlived.look(&handle, Caller::Spawn(TICK_NANOS + 2)));
    }
}
