//! Bounded behaviour: per-yield deadlines, mailbox capacity and topic budgets, async shutdown,
//! and a stubborn process under a forced shutdown.
//!
//! Deadlines in these tests are *inputs* (a command's timeout), never assertions about how long
//! something took; hang guards are the only other use of time.

mod support;

use procsched::{
    config::TopicBudget,
    error::{CommandError, InitError, SendError, SendErrorKind},
    metrics::ProcessState,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload, Pid, Scheduler,
};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use support::{quiet_panics, refusal, wait_for_state, EXPECTED_PANIC, HANG_GUARD};

/// Never completes (async).
struct Never;
procsched::command!(Never => Payload);
/// Blocks its blocking-pool thread until the channel says so.
struct BlockUntil(mpsc::Receiver<()>);
procsched::command!(BlockUntil => Payload);

/// Yields one command with a deadline, finishes with what came back.
struct OneYield<C: Send + 'static> {
    command: Option<C>,
    timeout: Duration,
}

impl<C: Send + 'static> Process for OneYield<C> {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if let Some(command) = self.command.take() {
            out.yield_command_within(5, command, self.timeout);
            out.wait();
            return Ok(());
        }
        match events.pop() {
            Some(Event::YieldComplete { tag: 5, result }) => {
                out.done(Payload::new(result.map(|_| ()).map_err(|e| e.to_string())))
            }
            Some(other) => return Err(format!("unexpected {other:?}").into()),
            None => out.wait(),
        }
        Ok(())
    }
}

/// Spawns a [`OneYield`] of `command` with `timeout` and returns how its yield completed.
/// A command whose handler replies at once.
struct Ping;
procsched::command!(Ping => Payload);

fn yield_within<C: Send + 'static>(
    sched: &Scheduler,
    command: C,
    timeout: Duration,
) -> Result<(), String> {
    let process = OneYield {
        command: Some(command),
        timeout,
    };
    outcome(
        sched,
        sched.spawn(process, "run", Payload::empty()).unwrap(),
    )
}

fn outcome(sched: &Scheduler, handle: procsched::ProcessHandle) -> Result<(), String> {
    sched
        .block_on(handle)
        .expect("process completes")
        .downcast::<Result<(), String>>()
        .expect("result type")
}

#[test]
fn an_async_command_past_its_deadline_times_out() {
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|Never: Never| std::future::pending::<Result<Payload, CommandError>>())
        .build()
        .unwrap();
    assert_eq!(
        yield_within(&sched, Never, Duration::from_millis(10)),
        Err(CommandError::TimedOut.to_string())
    );
}

#[test]
fn a_blocking_command_past_its_deadline_times_out_and_its_late_result_is_dropped() {
    let sched = Scheduler::builder()
        .workers(2)
        .blocking_handler(|BlockUntil(rx): BlockUntil| {
            let _ = rx.recv_timeout(HANG_GUARD);
            Ok::<_, CommandError>(Payload::empty())
        })
        .build()
        .unwrap();
    let (release, rx) = mpsc::channel();
    assert_eq!(
        yield_within(&sched, BlockUntil(rx), Duration::from_millis(10)),
        Err(CommandError::TimedOut.to_string())
    );
    // Now let the handler finish: its result has nowhere to go, and nothing breaks.
    release.send(()).unwrap();
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_command_within_its_deadline_completes_normally() {
    let sched = Scheduler::builder()
        .workers(1)
        .async_handler(|Ping: Ping| async { Ok::<_, CommandError>(Payload::empty()) })
        .build()
        .unwrap();
    assert_eq!(yield_within(&sched, Ping, HANG_GUARD), Ok(()));
}

/// Idle until told to drain; then counts messages and overflow markers per topic until "stop".
#[derive(Default)]
struct Collector {
    seen: Vec<String>,
    started: Option<mpsc::Sender<()>>,
}

impl Process for Collector {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, input: Payload) -> Result<(), InitError> {
        self.started = input.downcast().ok();
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if let Some(started) = self.started.take() {
            let _ = started.send(());
        }
        for event in events.drain() {
            match event {
                Event::Message(m) if m.topic == "stop" => {
                    out.done(Payload::new(std::mem::take(&mut self.seen)));
                    return Ok(());
                }
                Event::Message(m) => self.seen.push(m.topic.into_owned()),
                Event::MailboxOverflow { topic } => self.seen.push(format!("overflow:{topic}")),
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        out.idle();
        Ok(())
    }
}

#[test]
fn topic_budgets_drop_with_one_overflow_marker_and_send_says_so() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let handle = sched
        .spawn(Collector::default(), "run", Payload::new(started_tx))
        .unwrap();
    started_rx.recv_timeout(HANG_GUARD).unwrap();
    // Occupy the only worker so the collector cannot drain while we flood it.
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocker = sched
        .spawn(
            Blocker {
                entered: Some(entered_tx),
                release: Some(release_rx),
            },
            "run",
            Payload::empty(),
        )
        .unwrap();
    entered_rx.recv_timeout(HANG_GUARD).unwrap();
    let pid = handle.pid();
    let budget = TopicBudget {
        max_items: 4,
        max_bytes: usize::MAX,
    };
    let outcomes: Vec<Result<(), SendError>> = (0..100)
        .map(|_| {
            sched.send(
                pid,
                Message::new("metrics", Payload::empty()).with_budget(budget, 1),
            )
        })
        .collect();
    assert!(outcomes[..4].iter().all(Result::is_ok));
    assert!(outcomes[4..]
        .iter()
        .all(|o| matches!(o, Err(e) if e.is_mailbox_full() && e.pid() == pid)));
    // Unbudgeted traffic on another topic is unaffected.
    sched
        .send(pid, Message::new("other", Payload::empty()))
        .unwrap();
    release_tx.send(()).unwrap();
    sched.block_on(blocker).unwrap();
    sched
        .send(pid, Message::new("stop", Payload::empty()))
        .unwrap();
    let seen = sched
        .block_on(handle)
        .unwrap()
        .downcast::<Vec<String>>()
        .unwrap();
    assert_eq!(
        seen,
        [
            "metrics",
            "metrics",
            "metrics",
            "metrics",
            "overflow:metrics",
            "other"
        ],
        "four accepted, exactly one marker, then the other topic"
    );
}

/// Blocks its worker inside its first step until released.
struct Blocker {
    entered: Option<mpsc::Sender<()>>,
    release: Option<mpsc::Receiver<()>>,
}

impl Process for Blocker {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if let (Some(entered), Some(release)) = (self.entered.take(), self.release.take()) {
            entered.send(())?;
            release.recv_timeout(HANG_GUARD)?;
        }
        out.done(Payload::empty());
        Ok(())
    }
}

#[test]
fn a_full_mailbox_rejects_messages_but_yield_completions_still_arrive() {
    /// Blocks its first step until released, so its mailbox fills; then finishes with what it
    /// saw.
    struct Jammed {
        release: Option<mpsc::Receiver<()>>,
        entered: Option<mpsc::Sender<()>>,
        messages: usize,
        completions: usize,
    }
    impl Process for Jammed {
        type Output = Payload;
        fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
            Ok(())
        }
        fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
            if let Some(rx) = self.release.take() {
                out.yield_command(1, Ping);
                self.entered.take().unwrap().send(()).unwrap();
                rx.recv_timeout(HANG_GUARD).unwrap();
                out.wait();
                return Ok(());
            }
            for event in events.drain() {
                match event {
                    Event::Message(_) => self.messages += 1,
                    Event::YieldComplete { .. } => self.completions += 1,
                    other => return Err(format!("unexpected {other:?}").into()),
                }
            }
            if self.completions == 1 && self.messages == 2 {
                out.done(Payload::empty());
            } else {
                out.wait();
            }
            Ok(())
        }
    }
    let sched = Scheduler::builder()
        .workers(1)
        .mailbox_capacity(2)
        .async_handler(|Ping: Ping| async { Ok::<_, CommandError>(Payload::empty()) })
        .build()
        .unwrap();
    let (release_tx, release_rx) = mpsc::channel();
    let (entered_tx, entered_rx) = mpsc::channel();
    let handle = sched
        .spawn(
            Jammed {
                release: Some(release_rx),
                entered: Some(entered_tx),
                messages: 0,
                completions: 0,
            },
            "run",
            Payload::empty(),
        )
        .unwrap();
    entered_rx.recv_timeout(HANG_GUARD).unwrap();
    let pid: Pid = handle.pid();
    let msg = || Message::new("m", Payload::empty());
    sched.send(pid, msg()).unwrap();
    sched.send(pid, msg()).unwrap();
    assert_eq!(
        refusal(sched.send(pid, msg())),
        Err((SendErrorKind::MailboxFull, pid))
    );
    release_tx.send(()).unwrap();
    sched
        .block_on(handle)
        .expect("2 messages and the completion arrive");
}

/// Ignores `Cancel` and keeps asking to run again.
struct Stubborn(Arc<AtomicUsize>);

impl Process for Stubborn {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        events.drain().for_each(drop);
        self.0.fetch_add(1, SeqCst);
        out.continue_();
        Ok(())
    }
    fn close(&mut self) {
        self.0.fetch_add(1_000_000, SeqCst);
    }
}

#[test]
fn async_shutdown_inside_tokio_forces_a_stubborn_process_and_closes_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let steps = Arc::new(AtomicUsize::new(0));
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let handle = sched
        .spawn(Stubborn(steps.clone()), "run", Payload::empty())
        .unwrap();
    let report = runtime.block_on(sched.shutdown_async(Duration::from_millis(50)));
    // Forced — or abandoned, if a loaded machine held a worker inside its step past the stop.
    assert_eq!((report.graceful, report.forced + report.abandoned), (0, 1));
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    let after = steps.load(SeqCst);
    assert!(after >= 1_000_000, "close ran");
    assert!(sched.block_on(handle).unwrap_err().is_cancelled());
    // No step runs after shutdown returned.
    for _ in 0..1_000 {
        std::thread::yield_now();
    }
    assert_eq!(steps.load(SeqCst), after);
}

/// Waits for one async command, then finishes with how its yield completed.
struct AwaitOne;

impl Process for AwaitOne {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        match events.pop() {
            None => {
                out.yield_command(1, Never);
                out.wait();
            }
            Some(Event::YieldComplete { result, .. }) => {
                out.done(Payload::new(result.map(|_| ()).map_err(|e| e.to_string())))
            }
            Some(other) => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    }
}

#[test]
fn the_handler_runtime_shutting_down_cancels_yields_instead_of_hanging() {
    let runtime = support::handler_runtime();
    let sched = Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .async_handler(|Never: Never| std::future::pending::<Result<Payload, CommandError>>())
        .build()
        .unwrap();
    // One process waits on a handler task when the runtime goes away...
    let waiting = sched.spawn(AwaitOne, "run", Payload::empty()).unwrap();
    wait_for_state(sched.handle(), waiting.pid(), ProcessState::Blocked);
    runtime.shutdown_background();
    assert_eq!(
        outcome(&sched, waiting),
        Err(CommandError::Cancelled.to_string())
    );
    // ... and one yields after it is gone.
    let late = sched.spawn(AwaitOne, "run", Payload::empty()).unwrap();
    assert_eq!(
        outcome(&sched, late),
        Err(CommandError::Cancelled.to_string())
    );
    let report = sched.shutdown(HANG_GUARD);
    assert_eq!(report.forced, 0);
}

/// A message body whose destructor panics.
struct Grenade(Arc<AtomicUsize>);

impl Drop for Grenade {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{EXPECTED_PANIC}: payload destructor");
    }
}

#[test]
fn panicking_payload_destructors_are_contained() {
    /// Never takes its events: it only looks for "done", and leaves every payload to the
    /// scheduler, which drops unread events after each step (and queued ones at close).
    struct Ignorer;
    impl Process for Ignorer {
        type Output = Payload;
        fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
            Ok(())
        }
        fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
            let done = events
                .iter()
                .any(|e| matches!(e, Event::Message(m) if m.topic == "done"));
            if done {
                out.done(Payload::empty());
            } else {
                out.idle();
            }
            Ok(())
        }
    }
    quiet_panics();
    let drops = Arc::new(AtomicUsize::new(0));
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let collector = sched
        .spawn(Collector::default(), "run", Payload::new(started_tx))
        .unwrap();
    started_rx.recv_timeout(HANG_GUARD).unwrap();
    let ignorer = sched.spawn(Ignorer, "run", Payload::empty()).unwrap();
    for _ in 0..10 {
        let grenade = Payload::new(Grenade(drops.clone()));
        let _ = sched.send(ignorer.pid(), Message::new("g", grenade));
    }
    sched
        .send(ignorer.pid(), Message::new("done", Payload::empty()))
        .unwrap();
    sched
        .block_on(ignorer)
        .expect("the ignorer finishes normally");
    // The scheduler is healthy: another process still works.
    sched
        .send(collector.pid(), Message::new("stop", Payload::empty()))
        .unwrap();
    sched.block_on(collector).unwrap();
    assert_eq!(
        drops.load(SeqCst),
        10,
        "every unread payload was dropped, once"
    );
}
