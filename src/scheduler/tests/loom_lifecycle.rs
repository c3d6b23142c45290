//! Loom models of the spawn-vs-shutdown protocol (module docs of `scheduler`): admission against
//! the shutdown flag, a finish against the seal, and the last finisher against shutdown's wait.

use crate::loom::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use crate::loom::model::{model, model_full_stack};
use crate::loom::{thread, Arc};
use crate::process::{
    BoxError, Event, Events, InitError, Payload, Process, ProcessContext, StepOutput,
};
use crate::scheduler::lifecycle::{Leave, Lifecycle};
use std::time::{Duration, Instant};

/// Idle until `Cancel`, then done; counts closes.
struct CancelAware(Arc<AtomicUsize>);

impl Process for CancelAware {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if events.drain().any(|e| matches!(e, Event::Cancel { .. })) {
            out.done(Payload::empty());
        } else {
            out.idle();
        }
        Ok(())
    }
    fn close(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// The whole protocol, through the public API: a spawn racing with `shutdown`.
#[test]
fn loom_scheduler_shutdown_racing_with_a_spawn() {
    model_full_stack(|| {
        let sched = Arc::new(crate::Scheduler::builder().workers(1).build().unwrap());
        let closes = Arc::new(AtomicUsize::new(0));
        let spawner = {
            let sched = sched.clone();
            let closes = closes.clone();
            thread::spawn(move || sched.spawn(CancelAware(closes), "run", Payload::empty()))
        };
        let report = sched.shutdown(Duration::from_secs(1));
        match spawner.join().unwrap() {
            // Admitted: it got its Cancel (or was forced), and was closed; counted once.
            Ok(handle) => {
                assert_eq!(report.total(), 1, "{report:?}");
                let _ = sched.block_on(handle);
                assert_eq!(closes.load(SeqCst), 1);
            }
            Err(e) => {
                assert!(matches!(e, crate::error::SpawnError::ShuttingDown), "{e}");
                // Refused at admission (never initialised), or initialised after the seal (then
                // it was closed, and counted only if its cell was open at the seal).
                assert!(report.total() <= closes.load(SeqCst));
            }
        }
        assert!(sched.wait_for_abandoned(Duration::from_secs(1)));
        assert_eq!(sched.live_processes(), 0);
    });
}

/// A process finishing while shutdown forces and seals is counted exactly once: by its finish
/// (`graceful` or `forced`) or by the seal (`abandoned`, its cell still occupied).
#[test]
fn loom_finish_racing_with_the_seal_is_counted_once() {
    model(|| {
        let lifecycle = Arc::new(Lifecycle::new(usize::MAX));
        lifecycle.admit().unwrap();
        assert!(lifecycle.begin_shutdown());
        let occupied = Arc::new(AtomicBool::new(true));
        let finisher = {
            let (lifecycle, occupied) = (lifecycle.clone(), occupied.clone());
            thread::spawn(move || {
                lifecycle.leave(Leave::Finished, || occupied.store(false, SeqCst));
            })
        };
        lifecycle.begin_forcing();
        let report = lifecycle.seal(|| usize::from(occupied.load(SeqCst)));
        finisher.join().unwrap();
        // Graceful (finished before forcing), forced (before the seal) or abandoned (after it):
        // exactly one of them.
        assert_eq!(report.total(), 1, "{report:?}");
        assert_eq!(lifecycle.live(), 0);
    });
}

/// The last process to finish, racing with the start of shutdown, never leaves shutdown's wait
/// sleeping: either the waiter sees `live == 0`, or the finisher sees the flag and notifies.
#[test]
fn loom_last_finish_racing_with_shutdown_wakes_the_wait() {
    model(|| {
        let lifecycle = Arc::new(Lifecycle::new(usize::MAX));
        lifecycle.admit().unwrap();
        let finisher = {
            let lifecycle = lifecycle.clone();
            thread::spawn(move || lifecycle.leave(Leave::Finished, || {}))
        };
        assert!(lifecycle.begin_shutdown());
        // Loom has no time: this waits until `live` is zero, and loom reports a deadlock if the
        // finisher's notification could be lost.
        assert!(lifecycle.wait_idle(Instant::now()));
        finisher.join().unwrap();
        let report = lifecycle.seal(|| 0);
        assert!(report.total() <= 1);
    });
}

/// A spawn admitted before shutdown is waited for; one after it is refused without touching
/// `live`.
#[test]
fn loom_admission_racing_with_begin_shutdown() {
    model(|| {
        let lifecycle = Arc::new(Lifecycle::new(usize::MAX));
        let spawner = {
            let lifecycle = lifecycle.clone();
            thread::spawn(move || {
                let admitted = lifecycle.admit().is_ok();
                if admitted {
                    lifecycle.leave(Leave::Finished, || {});
                }
                admitted
            })
        };
        assert!(lifecycle.begin_shutdown());
        assert!(lifecycle.wait_idle(Instant::now()));
        let admitted = spawner.join().unwrap();
        let report = lifecycle.seal(|| 0);
        assert_eq!(lifecycle.live(), 0);
        // An admitted process that finished after the flag is counted (graceful); one that
        // finished before it saw nothing to count.
        assert!(report.total() <= usize::from(admitted));
    });
}
