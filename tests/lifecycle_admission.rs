//! Public-API tests of admission under concurrent spawns: rapid build / spawn / send / shutdown
//! cycles (spawns refused once shutting down, nothing leaked, `close` once per admitted process)
//! and the `max_processes` limit, never exceeded.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards,
//! and as the shutdown timeouts under test (which bound a wait, never an assertion).

mod support;

use procsched::{
    error::{InitError, SpawnError},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload, Pid, Scheduler, SchedulerHandle,
};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Barrier};
use std::thread;
use std::time::Duration;
use support::churn::{assert_send_outcome, churn_handlers, Quick, Work};
use support::*;

// ---------------------------------------------------------------------------------------------
// Rapid build / spawn / send / shutdown cycles
// ---------------------------------------------------------------------------------------------

/// A process that counts its own drop, and finishes on `Cancel` only if `graceful`. Holds the
/// tracked input; every message yields one async `Work` and one inline `Quick`.
struct Cycler {
    _input: Option<Tracked>,
    _dropped: DropCounter,
    graceful: bool,
    tag: u64,
    closes: support::Counter,
}

impl Process for Cycler {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, input: Payload) -> Result<(), InitError> {
        self._input = Some(
            input
                .downcast()
                .map_err(|_| InitError::failed("want Tracked"))?,
        );
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            match event {
                Event::Cancel { .. } if self.graceful => {
                    out.done(Payload::empty());
                    return Ok(());
                }
                Event::Message(_) => {
                    self.tag += 2;
                    out.yield_command(self.tag, Work(self.tag));
                    out.yield_command(self.tag + 1, Quick(self.tag + 1));
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn rapid_build_spawn_send_shutdown_cycles_leak_nothing() {
    let tracker = Tracker::new();
    let created = support::counter();
    let dropped = support::counter();
    let closes = support::counter();
    let spawned = support::counter();
    for cycle in 0..scaled(20) {
        let mut builder = Scheduler::builder();
        builder.workers(2).drop_timeout(Duration::from_millis(20));
        churn_handlers(&mut builder, &tracker);
        let sched = builder.build().unwrap();
        let make = |graceful: bool| {
            created.fetch_add(1, SeqCst);
            Cycler {
                _input: None,
                _dropped: DropCounter(dropped.clone()),
                graceful,
                tag: 0,
                closes: closes.clone(),
            }
        };
        let in_flight = support::counter();
        let (to_sender, for_sender) = mpsc::channel::<Pid>();
        let handles = thread::scope(|scope| {
            let sender = {
                let handle = sched.handle().clone();
                let tracker = &tracker;
                scope.spawn(move || {
                    for pid in for_sender {
                        for i in 0..3 {
                            let body = Payload::new(tracker.track(i));
                            assert_send_outcome(handle.send(pid, Message::new("m", body)), pid);
                        }
                    }
                })
            };
            let spawners: Vec<_> = (0..2)
                .map(|t| {
                    let handle: SchedulerHandle = sched.handle().clone();
                    let to_sender = to_sender.clone();
                    let (tracker, in_flight, spawned, make) =
                        (&tracker, &in_flight, &spawned, &make);
                    scope.spawn(move || {
                        let mut handles = Vec::new();
                        for i in 0.. {
                            let input = Payload::new(tracker.track(i));
                            match handle.spawn(make((i + t) % 2 == 0), "run", input) {
                                Ok(h) => {
                                    spawned.fetch_add(1, SeqCst);
                                    in_flight.fetch_add(1, SeqCst);
                                    let _ = to_sender.send(h.pid());
                                    handles.push(h);
                                }
                                Err(SpawnError::ShuttingDown) => break,
                                Err(other) => panic!("unexpected {other:?}"),
                            }
                        }
                        handles
                    })
                })
                .collect();
            drop(to_sender);
            // Shut down while both spawners and the sender are busy.
            wait_until("spawns in flight", || count(&in_flight) >= 40 + cycle);
            let report = sched.shutdown(Duration::from_millis(20 + cycle as u64));
            let handles: Vec<_> = spawners
                .into_iter()
                .flat_map(|s| s.join().unwrap())
                .collect();
            assert!(
                report.graceful + report.forced <= count(&in_flight),
                "{report:?}"
            );
            sender.join().unwrap();
            handles
        });
        for result in join_all(handles) {
            if let Err(err) = result {
                assert!(err.is_cancelled(), "{err:?}");
            }
        }
        assert_eq!(sched.live_processes(), 0);
        assert_eq!(sched.handle().registered_processes(), 0);
        drop(sched);
    }
    assert_eq!(
        count(&closes),
        count(&spawned),
        "close once per admitted process"
    );
    wait_until("every process dropped", || {
        count(&created) == count(&dropped)
    });
    tracker.wait_all_dropped("every input, message and reply dropped exactly once");
}

// ---------------------------------------------------------------------------------------------
// max_processes
// ---------------------------------------------------------------------------------------------

#[test]
fn max_processes_is_never_exceeded_under_concurrent_spawns() {
    const LIMIT: usize = 16;
    let sched = Scheduler::builder()
        .workers(2)
        .max_processes(LIMIT)
        .build()
        .unwrap();
    let closes = support::counter();
    for round in 0..scaled(20) {
        let barrier = Barrier::new(8);
        let (admitted, refused): (Vec<_>, Vec<_>) = thread::scope(|scope| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let (sched, barrier, closes) = (&sched, &barrier, &closes);
                    scope.spawn(move || {
                        barrier.wait();
                        (0..10)
                            .map(|_| {
                                let process = FnProcess::new(closes, echo_step());
                                sched.spawn(process, "run", Payload::empty())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .partition(Result::is_ok)
        });
        assert_eq!(admitted.len(), LIMIT, "round {round}");
        for err in refused {
            assert!(matches!(err.unwrap_err(), SpawnError::Limit(LIMIT)));
        }
        assert_eq!(sched.live_processes(), LIMIT);
        let handles: Vec<_> = admitted.into_iter().map(Result::unwrap).collect();
        for handle in &handles {
            sched
                .send(handle.pid(), Message::new("go", Payload::new(1u8)))
                .unwrap();
        }
        for result in join_all(handles) {
            assert_eq!(result.unwrap().downcast::<u8>().unwrap(), 1);
        }
        assert_eq!(
            sched.live_processes(),
            0,
            "slots released after the processes finished"
        );
    }
    assert_eq!(count(&closes), LIMIT * scaled(20));
}
