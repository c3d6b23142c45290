//! Loom models of the monitor's hand-off and retirement protocols (`executor/monitor.rs`), on
//! the real worker loop with one configured worker and one spare.
//!
//! Under loom there is no monitor thread: the models call `Monitor::tick` with a manual clock.
//! A task "blocks its worker" by waiting on a loom condvar the model releases.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use crate::executor::monitor::View;
use crate::executor::{block_in_place, Executor};
use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::model::model_full_stack;
use crate::loom::{lock, Arc, Condvar, Mutex};
use std::time::Duration;

/// 0: the blocking task has not started; 1: it is inside its blocking wait; 2: released.
struct Gate {
    state: Mutex<u8>,
    changed: Condvar,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::new(0),
            changed: Condvar::new(),
        })
    }

    fn set(&self, state: u8) {
        *lock(&self.state) = state;
        self.changed.notify_all();
    }

    fn wait_for(&self, state: u8) {
        let mut current = lock(&self.state);
        while *current < state {
            current = self.changed.wait(current).unwrap();
        }
    }

    /// Inside the task: announce, then block the thread until released.
    fn block(&self) {
        self.set(1);
        self.wait_for(2);
    }
}

fn executor() -> Executor {
    Executor::builder()
        .workers(1)
        .max_spare_workers(1)
        .long_poll_threshold(Duration::from_millis(10))
        .build()
        .unwrap()
}

/// Hand-off steps 1–4 from a monitor tick that sees the worker stuck; the stuck poll is released
/// as the tick returns, so it returns while the spare starts and looks for the queued task; then
/// retirement steps 1–4 as the spare finds itself idle or surplus. The queued task runs exactly
/// once, on whichever worker gets it. (A releaser thread racing the tick itself makes the model
/// take minutes; detection is a pure read of the sequence word.)
#[test]
fn loom_stuck_worker_returns_as_its_replacement_starts() {
    model_full_stack(|| {
        let executor = executor();
        let shared = executor.handle().shared.clone();
        let gate = Gate::new();
        let blocked = {
            let gate = gate.clone();
            executor.spawn(async move { gate.block() })
        };
        gate.wait_for(1);
        let runs = Arc::new(AtomicUsize::new(0));
        let queued = {
            let runs = runs.clone();
            executor.spawn(async move {
                runs.fetch_add(1, SeqCst);
            })
        };
        let mut view = View::new(&shared.monitor, 0);
        // A threshold later: stuck, with work waiting: the spare starts.
        shared.monitor.tick(&shared, &mut view, 10_000_000);
        assert_eq!(shared.monitor.needed(), 1);
        gate.set(2);
        executor.block_on(queued).unwrap();
        executor.block_on(blocked).unwrap();
        assert_eq!(executor.shutdown(Duration::from_secs(1)).cancelled, 0);
        assert_eq!(runs.load(SeqCst), 1);
        let spares = &shared.monitor.spares;
        assert_eq!(spares.started() - spares.retired(), spares.active() as u64);
    });
}

/// `block_in_place` hands the worker's deque to the injector and starts the spare; the release
/// makes the spare surplus while it may hold a child in its deque, and the returning worker
/// steals from that deque as the spare hands it back (retirement step 2). Every child runs
/// exactly once.
#[test]
fn loom_retirement_while_tasks_are_stolen() {
    model_full_stack(|| {
        let executor = executor();
        let handle = executor.handle().clone();
        let gate = Gate::new();
        let runs = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let parent = {
            let (gate, runs) = (gate.clone(), runs.clone());
            executor.spawn(async move {
                let children: Vec<_> = (0..2)
                    .map(|i| {
                        let runs = runs.clone();
                        handle.spawn(async move {
                            runs[i].fetch_add(1, SeqCst);
                        })
                    })
                    .collect();
                block_in_place(|| gate.block());
                children
            })
        };
        gate.wait_for(1);
        gate.set(2);
        let children = executor.block_on(parent).unwrap();
        for child in children {
            executor.block_on(child).unwrap();
        }
        assert_eq!(executor.shutdown(Duration::from_secs(1)).cancelled, 0);
        assert_eq!(runs[0].load(SeqCst), 1);
        assert_eq!(runs[1].load(SeqCst), 1);
        let spares = &executor.handle().shared.monitor.spares;
        assert_eq!(spares.started() - spares.retired(), spares.active() as u64);
    });
}

/// Retirement step 5 (keep-alive, `spare.rs`) racing an activation: the spare retires after a
/// first `block_in_place`, and its park times out (at once: under loom every timeout is zero)
/// while a second `block_in_place` activates a spare — the parked one, or, once it has handed
/// its deque back, a new thread in its slot, or none if it is mid-exit. A task queued behind
/// the second blocking call runs exactly once, no slot ever has two threads in its loop (the
/// deque's owner end exists once), and shutdown accounts for every thread.
#[test]
fn loom_a_spare_expiring_as_it_is_activated_runs_once() {
    // Outside the model (std): some explored execution let the spare expire.
    let expired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_expired = expired.clone();
    model_full_stack(move || {
        let executor = executor();
        let handle = executor.handle().clone();
        let runs = Arc::new(AtomicUsize::new(0));
        let parent = {
            let runs = runs.clone();
            executor.spawn(async move {
                // The first hand-off starts the spare; back from it, the spare retires.
                block_in_place(|| {});
                let child = {
                    let runs = runs.clone();
                    handle.spawn(async move {
                        runs.fetch_add(1, SeqCst);
                    })
                };
                // The second: an activation racing the spare's expiry.
                block_in_place(|| {});
                child.await.unwrap();
            })
        };
        executor.block_on(parent).unwrap();
        assert_eq!(executor.shutdown(Duration::from_secs(1)).stuck_workers, 0);
        assert_eq!(runs.load(SeqCst), 1);
        let spares = &executor.handle().shared.monitor.spares;
        assert_eq!(spares.threads(), 0, "every spare thread ended");
        if spares.expired() > 0 {
            seen_expired.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        expired.load(std::sync::atomic::Ordering::Relaxed),
        "no execution expired the spare: the model misses its point"
    );
}

/// A task spawned from inside `block_in_place`, which its closure then waits for: the blocked
/// worker pops nothing until the closure returns, so the spawn goes to the global injector and
/// starts the spare (hand-off steps 3 and 4, `schedule.rs`), which runs it. There is no monitor
/// thread under loom: a task left in the blocked worker's own queue would deadlock the model.
#[test]
fn loom_a_task_spawned_inside_block_in_place_runs_while_the_closure_waits() {
    model_full_stack(|| {
        let executor = executor();
        let handle = executor.handle().clone();
        let gate = Gate::new();
        let parent = {
            let gate = gate.clone();
            executor.spawn(async move {
                let child = block_in_place(|| {
                    let child = {
                        let gate = gate.clone();
                        handle.spawn(async move { gate.set(2) })
                    };
                    gate.wait_for(2);
                    child
                });
                // Handed out to be awaited outside: in an array, not yielded as the output.
                [child]
            })
        };
        let [child] = executor.block_on(parent).unwrap();
        executor.block_on(child).unwrap();
        assert_eq!(executor.shutdown(Duration::from_secs(1)).stuck_workers, 0);
        let spares = &executor.handle().shared.monitor.spares;
        assert_eq!(spares.started() - spares.retired(), spares.active() as u64);
    });
}
