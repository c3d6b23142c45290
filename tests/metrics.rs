//! `Scheduler::metrics`, `process_info` and `processes` against a known workload: every value
//! asserted exactly.

mod support;

use procsched::prelude::*;
use procsched::{
    error::{CommandError, InitError},
    state_machine::ProcessContext,
};
use procsched::{
    metrics::ProcessState,
    state_machine::{Events, Process, StepOutput},
};
use std::time::Duration;
use support::{quiet_panics, wait_for_state, EXPECTED_PANIC};

/// Inline: `n + 1`, an error for 0.
struct Add(u64);
/// Async: `n`; an error for 0, a panic for 1, never completes for 2.
struct Fetch(u64);
/// Blocking: `n`; a panic for 1.
struct Load(u64);
/// No handler registered.
struct Unregistered;
procsched::command!(Add => u64, Fetch => u64, Load => u64, Unregistered => ());

/// A state machine whose 64 steps all sleep: one step in 64 of each process is timed, so one
/// of them is, and it is the longest recent step.
struct Slow(u32);
const SLOW_STEPS: u32 = 64;
const SLOW_STEP: Duration = Duration::from_millis(10);

impl Process for Slow {
    type Output = ();
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        std::thread::sleep(SLOW_STEP);
        self.0 += 1;
        if self.0 == SLOW_STEPS {
            out.done(());
        }
        Ok(())
    }
}

/// Sends itself `SENT` messages during `init`, into a mailbox of capacity `CAPACITY`; finishes
/// with the number its first step received.
struct Filler;
const SENT: usize = 6;
const CAPACITY: usize = 4;

impl Process for Filler {
    type Output = usize;
    fn init(
        &mut self,
        ctx: &ProcessContext<'_>,
        method: &str,
        _: Payload,
    ) -> Result<(), InitError> {
        if method != "fill" {
            return Err(InitError::unknown_method(method));
        }
        for n in 0..SENT {
            let _ = ctx
                .scheduler()
                .send(ctx.pid(), Message::new("n", Payload::new(n)));
        }
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<usize>) -> Result<(), BoxError> {
        out.done(events.drain().count());
        Ok(())
    }
}

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(1)
        .mailbox_capacity(CAPACITY)
        .inline_handler(|Add(n): Add| {
            if n == 0 {
                return Err(CommandError::failed("zero"));
            }
            Ok(n + 1)
        })
        .async_handler(|Fetch(n): Fetch| async move {
            match n {
                0 => Err(CommandError::failed("zero")),
                1 => panic!("{EXPECTED_PANIC}: async handler"),
                2 => std::future::pending().await,
                n => Ok(n),
            }
        })
        .blocking_handler(|Load(n): Load| {
            if n == 1 {
                panic!("{EXPECTED_PANIC}: blocking handler");
            }
            Ok::<_, BoxError>(n)
        })
        .build()
        .expect("build")
}

#[test]
fn metrics_match_a_known_workload_exactly() {
    quiet_panics();
    let sched = scheduler();
    let h = sched.handle();
    let nothing = sched.metrics();
    assert_eq!(nothing.spawned, 0);
    assert_eq!(nothing.finished.total(), 0);
    assert_eq!(nothing.longest_step, None);

    let slow = sched.spawn(Slow(0), "run", Payload::empty()).unwrap();
    let slow_pid = slow.pid();
    sched.block_on(slow).unwrap();

    // 5 done, 3 failed, 2 panicked.
    let mut handles = Vec::new();
    for _ in 0..5 {
        handles.push(
            sched
                .spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })
                .unwrap(),
        );
    }
    for _ in 0..3 {
        handles.push(
            sched
                .spawn_fn(|_: ProcessCx| async { Err::<(), _>("failed on purpose") })
                .unwrap(),
        );
    }
    for _ in 0..2 {
        handles.push(
            sched
                .spawn_fn(|_: ProcessCx| async {
                    panic!("{EXPECTED_PANIC}: step");
                    #[allow(unreachable_code)]
                    Ok::<(), BoxError>(())
                })
                .unwrap(),
        );
    }
    let results: Vec<_> = handles.into_iter().map(|h| sched.block_on(h)).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 5);
    assert_eq!(
        results
            .iter()
            .filter(|r| r.as_ref().is_err_and(|e| e.is_failed()))
            .count(),
        3
    );
    assert_eq!(
        results
            .iter()
            .filter(|r| r.as_ref().is_err_and(|e| e.is_panicked()))
            .count(),
        2
    );

    // 2 terminated while idle.
    for _ in 0..2 {
        let idle = sched
            .spawn_fn(|cx: ProcessCx<u32>| async move { Ok::<_, BoxError>(cx.recv().await?) })
            .unwrap();
        wait_for_state(h, idle.pid(), ProcessState::Idle);
        sched.terminate(idle.pid()).unwrap();
        assert!(sched.block_on(idle).unwrap_err().is_terminated());
    }

    // 2 init failures.
    for _ in 0..2 {
        assert!(sched
            .spawn(Filler, "nope", Payload::empty())
            .unwrap_err()
            .is_unknown_method());
    }

    // Messages: the filler's init sends 6 into a mailbox of 4 (4 delivered, 2 full); one to an
    // idle receiver; one to the finished filler (not found).
    let filler = sched.spawn(Filler, "fill", Payload::empty()).unwrap();
    let filler_pid = filler.pid();
    assert_eq!(sched.block_on(filler).unwrap(), CAPACITY);
    let receiver = sched
        .spawn_fn(|cx: ProcessCx<u32>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    wait_for_state(h, receiver.pid(), ProcessState::Idle);
    sched
        .send(receiver.pid(), Message::new("n", Payload::new(7u32)))
        .unwrap();
    assert_eq!(sched.block_on(receiver).unwrap(), 7);
    assert!(sched
        .send(filler_pid, Message::new("late", Payload::empty()))
        .unwrap_err()
        .is_not_found());

    // Yields of every kind, one after the other: 4 inline (1 error), 3 async (1 error, 1 panic),
    // 2 blocking (1 panic), 1 without a handler.
    let caller = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let mut ok = 0;
            for n in [1, 1, 1, 0] {
                ok += u32::from(cx.call(Add(n)).await.is_ok());
            }
            for n in [5, 0, 1] {
                ok += u32::from(cx.call(Fetch(n)).await.is_ok());
            }
            for n in [2, 1] {
                ok += u32::from(cx.call(Load(n)).await.is_ok());
            }
            let missing = cx.call(Unregistered).await;
            assert!(matches!(missing, Err(CommandError::NoHandler(_))));
            Ok::<_, BoxError>(ok)
        })
        .unwrap();
    assert_eq!(sched.block_on(caller).unwrap(), 3 + 1 + 1);

    // Still live at the snapshot: one idle (finishes on shutdown's Cancel), one blocked on a
    // handler that never completes (forced at shutdown).
    let idle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let _ = cx.cancelled().await;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let blocked = sched
        .spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(Fetch(2)).await?) })
        .unwrap();
    wait_for_state(h, idle.pid(), ProcessState::Idle);
    wait_for_state(h, blocked.pid(), ProcessState::Blocked);

    let m = sched.metrics();
    assert_eq!(m.processes, procsched_counts(0, 0, 1, 1));
    assert_eq!(m.spawned, 1 + 5 + 3 + 2 + 2 + 1 + 1 + 1 + 2);
    assert_eq!(m.init_failed, 2);
    // slow 64, done 5, failed 3, panicked 2, terminated 2 (one step each before parking; the
    // terminate stops them before another), filler 1, receiver 2, caller 11 (one per call, plus
    // the last), idle 1, blocked 1.
    assert_eq!(
        m.steps,
        u64::from(SLOW_STEPS) + 5 + 3 + 2 + 2 + 1 + 2 + 11 + 1 + 1
    );
    assert_eq!(
        (
            m.finished.done,
            m.finished.failed,
            m.finished.panicked,
            m.finished.terminated
        ),
        (1 + 5 + 1 + 1 + 1, 3, 2, 2)
    );
    assert_eq!((m.finished.cancelled, m.finished.forced), (0, 0));
    assert_eq!(
        (
            m.messages.delivered,
            m.messages.mailbox_full,
            m.messages.closed,
            m.messages.not_found
        ),
        (CAPACITY as u64 + 1, (SENT - CAPACITY) as u64, 0, 1)
    );
    assert_eq!(
        (
            m.yields.inline,
            m.yields.asynchronous,
            m.yields.blocking,
            m.yields.no_handler
        ),
        (4, 3 + 1, 2, 1)
    );
    assert_eq!((m.handler_errors, m.handler_panics), (2, 2));
    assert_eq!(m.mailbox_high_water, CAPACITY);
    let longest = m.longest_step.expect("one of the slow steps is sampled");
    assert_eq!(longest.pid, slow_pid);
    assert!(longest.duration >= SLOW_STEP, "{longest:?}");
    assert_eq!(m.executor.workers().len(), 1);

    // The live ones, one by one and all together.
    let info = sched.process_info(blocked.pid()).expect("live");
    assert_eq!(
        (
            info.pid,
            info.state,
            info.steps,
            info.mailbox_depth,
            info.outstanding_yields
        ),
        (blocked.pid(), ProcessState::Blocked, 1, 0, 1)
    );
    assert!(
        info.kind.contains("metrics_match_a_known_workload_exactly"),
        "{}",
        info.kind
    );
    assert!(info.age < Duration::from_secs(60));
    let mut live: Vec<_> = sched.processes().map(|p| (p.pid, p.state)).collect();
    live.sort_by_key(|(pid, _)| *pid);
    let mut expected = vec![
        (idle.pid(), ProcessState::Idle),
        (blocked.pid(), ProcessState::Blocked),
    ];
    expected.sort_by_key(|(pid, _)| *pid);
    assert_eq!(live, expected);
    assert_eq!(sched.process_info(filler_pid), None);

    // Shutdown: the idle one finishes on its Cancel (cancelled), the blocked one is forced.
    let report = sched.shutdown(Duration::from_millis(200));
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (1, 1, 0)
    );
    let m = sched.metrics();
    assert_eq!((m.finished.cancelled, m.finished.forced), (1, 1));
    assert_eq!(m.finished.total(), m.spawned);
    assert_eq!(m.processes.total(), 0);
    assert!(sched.block_on(idle).is_ok());
    assert!(sched.block_on(blocked).unwrap_err().is_cancelled());
}

fn procsched_counts(
    ready: usize,
    running: usize,
    blocked: usize,
    idle: usize,
) -> procsched::metrics::ProcessCounts {
    let mut counts = procsched::metrics::ProcessCounts::default();
    counts.ready = ready;
    counts.running = running;
    counts.blocked = blocked;
    counts.idle = idle;
    counts
}

#[test]
fn an_age_grows_and_steps_count_per_process() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let handle = sched
        .spawn_fn(|cx: ProcessCx<u32>| async move {
            for _ in 0..3 {
                cx.yield_now().await;
            }
            cx.recv().await?;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let pid = handle.pid();
    wait_for_state(sched.handle(), pid, ProcessState::Idle);
    let first = sched.process_info(pid).unwrap();
    assert_eq!(first.steps, 4);
    std::thread::sleep(Duration::from_millis(30));
    let later = sched.process_info(pid).unwrap();
    assert!(
        later.age >= first.age + Duration::from_millis(20),
        "{first:?} {later:?}"
    );
    sched
        .send(pid, Message::new("go", Payload::new(1u32)))
        .unwrap();
    sched.block_on(handle).unwrap();
    assert_eq!(sched.metrics().steps, 5);
}

#[test]
fn the_mailbox_high_water_mark_covers_a_depth_observed_while_the_process_is_stuck() {
    const FLOOD: u32 = 1_000;
    let sched = Scheduler::builder().workers(2).build().expect("build");
    let (release, stuck) = std::sync::mpsc::channel::<()>();
    let (started, running) = std::sync::mpsc::channel::<()>();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx<u32>| async move {
            // Blocks its worker: nothing it is sent is taken until it is released.
            started.send(())?;
            stuck.recv()?;
            for _ in 0..FLOOD {
                cx.recv().await?;
            }
            Ok::<_, BoxError>(())
        })
        .unwrap();
    running.recv().unwrap();
    let addr = handle.addr();
    for n in 0..FLOOD {
        addr.send(n).unwrap();
    }
    let depth = sched
        .process_info(handle.pid())
        .expect("alive")
        .mailbox_depth;
    assert_eq!(depth, FLOOD as usize);
    assert!(
        sched.metrics().mailbox_high_water >= depth,
        "the peak is at least the depth just seen"
    );
    release.send(()).unwrap();
    sched.block_on(handle).unwrap();
}
