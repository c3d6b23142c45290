//! Many threads sending to processes at once: the mailbox's lock-free path and its locked path
//! together (`src/process/mailbox/intake.rs`). Every message is counted: none lost, none
//! delivered twice, none delivered to a process it was not sent to, each sender's order kept,
//! every payload dropped exactly once.
//!
//! And the mailbox's limits: past `mailbox_capacity` a send is refused while yield completions
//! still arrive; past a topic budget (`Message::with_budget`) messages are dropped with one
//! overflow marker, `send` says so, and other topics are unaffected.

mod support;

use procsched::{
    config::TopicBudget,
    error::{CommandError, InitError, SendError, SendErrorKind},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload, Pid, Scheduler,
};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use support::*;

const SENDERS: usize = 4;

/// A budget no test reaches: it only sends a message down the locked path.
const LOOSE: TopicBudget = TopicBudget {
    max_items: usize::MAX,
    max_bytes: usize::MAX,
};

/// Receives `(sender, sequence)` messages until `stop`, checking that each sender's sequence
/// numbers arrive in order with none missing; finishes with how many it received.
struct Ordered {
    next: Vec<u64>,
    received: u64,
}

impl Process for Ordered {
    type Output = u64;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            if message.topic == "stop" {
                out.done(self.received);
                return Ok(());
            }
            let (sender, sequence) = message.payload.take::<(usize, u64)>()?;
            if sequence != self.next[sender] {
                return Err(format!(
                    "sender {sender}: got {sequence}, expected {}",
                    self.next[sender]
                )
                .into());
            }
            self.next[sender] += 1;
            self.received += 1;
        }
        out.idle();
        Ok(())
    }
}

#[test]
fn every_message_from_every_sender_arrives_once_and_in_each_senders_order() {
    ordered_from(SENDERS, scaled(250_000) as u64);
}

/// Sixteen senders on two cores: senders are preempted between claiming an intake slot and
/// writing it, so drains meet unwritten slots and locked pushes meet them too (a diversion:
/// `src/process/mailbox/intake.rs`). Nothing waits for a preempted sender under the mailbox
/// lock, and still every message arrives once, in each sender's order.
#[test]
fn sixteen_senders_on_two_cores_lose_nothing_and_keep_each_senders_order() {
    ordered_from(16, scaled(60_000) as u64);
}

/// `senders` threads send `per_sender` numbered messages each to one process (one in sixteen
/// on the locked path); it checks each sender's order and counts them all.
fn ordered_from(senders: usize, per_sender: u64) {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let receiver = sched
        .spawn(
            Ordered {
                next: vec![0; senders],
                received: 0,
            },
            "run",
            Payload::empty(),
        )
        .unwrap();
    let pid = receiver.pid();
    let start = Arc::new(Barrier::new(senders));
    let threads: Vec<_> = (0..senders)
        .map(|sender| {
            let handle = sched.handle().clone();
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                for sequence in 0..per_sender {
                    let mut message = Message::new("n", Payload::new((sender, sequence)));
                    // One in sixteen takes the locked path, between lock-free ones.
                    if sequence % 16 == 0 {
                        message = message.with_budget(LOOSE, 1);
                    }
                    handle.send(pid, message).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    sched
        .send(pid, Message::new("stop", Payload::empty()))
        .unwrap();
    let received = sched.block_on(receiver).unwrap();
    assert_eq!(received, per_sender * senders as u64);
}

/// Finishes after `limit` messages, each of which must be addressed to it.
struct ShortLived {
    pid: Option<Pid>,
    limit: usize,
    received: usize,
}

impl Process for ShortLived {
    type Output = usize;
    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        self.pid = Some(ctx.pid());
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<usize>) -> Result<(), BoxError> {
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            let addressed = message.payload.take::<Tracked>()?;
            if Some(addressed.value) != self.pid.map(Pid::as_u64) {
                return Err(format!("{:?} got a message for {}", self.pid, addressed.value).into());
            }
            self.received += 1;
            if self.received == self.limit {
                out.done(self.received);
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    }
}

#[test]
fn messages_racing_their_receivers_finish_reach_no_other_process_and_are_dropped_once() {
    let rounds = scaled(200);
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let tracker = Tracker::new();
    let mut rng = Rng::new(7);
    let mut accepted = 0;
    let mut received = 0;
    for _ in 0..rounds {
        // Each round reuses the cells the last one freed.
        let receivers: Vec<_> = (0..4)
            .map(|_| {
                let process = ShortLived {
                    pid: None,
                    limit: 1 + rng.below(64) as usize,
                    received: 0,
                };
                sched.spawn(process, "run", Payload::empty()).unwrap()
            })
            .collect();
        let pids: Vec<Pid> = receivers.iter().map(|r| r.pid()).collect();
        let start = Arc::new(Barrier::new(SENDERS));
        let senders: Vec<_> = (0..SENDERS)
            .map(|sender| {
                let handle = sched.handle().clone();
                let start = start.clone();
                let pids = pids.clone();
                let tracker = tracker.clone();
                thread::spawn(move || {
                    start.wait();
                    let mut accepted = 0;
                    for n in 0..100 {
                        let pid = pids[(sender + n) % pids.len()];
                        let payload = Payload::new(tracker.track(pid.as_u64()));
                        match handle.send(pid, Message::new("n", payload)) {
                            Ok(()) => accepted += 1,
                            Err(error) => assert!(matches!(
                                error.kind(),
                                SendErrorKind::NotFound | SendErrorKind::Closed
                            )),
                        }
                    }
                    accepted
                })
            })
            .collect();
        for sender in senders {
            accepted += sender.join().unwrap();
        }
        // Whoever did not reach its limit is told to stop by its own message count.
        for receiver in receivers {
            match sched.terminate(receiver.pid()) {
                Ok(()) => {
                    let _ = sched.block_on(receiver);
                }
                Err(_) => received += sched.block_on(receiver).unwrap(),
            }
        }
    }
    assert!(
        received <= accepted,
        "{received} received of {accepted} accepted"
    );
    assert!(received > 0);
    drop(sched);
    tracker.wait_all_dropped("every payload, delivered, refused or stale, dropped once");
}

// ---------------------------------------------------------------------------------------------
// Limits: mailbox capacity and topic budgets
// ---------------------------------------------------------------------------------------------

/// A command whose handler replies at once.
struct Ping;
procsched::command!(Ping => Payload);

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

/// A started [`Collector`] on the scheduler's only worker, which is then occupied, so that the
/// collector cannot drain while a test floods it; the gate releases the worker.
fn a_collector_that_cannot_drain(
    sched: &Scheduler,
) -> (procsched::ProcessHandle, StepGate, procsched::ProcessHandle) {
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let handle = sched
        .spawn(Collector::default(), "run", Payload::new(started_tx))
        .unwrap();
    started_rx.recv_timeout(HANG_GUARD).unwrap();
    let (gate, blocker) = block_the_worker(sched, &counter());
    (handle, gate, blocker)
}

/// Releases the worker, stops the collector and returns what it saw, in order.
fn what_the_collector_saw(
    sched: &Scheduler,
    gate: StepGate,
    blocker: procsched::ProcessHandle,
    collector: procsched::ProcessHandle,
) -> Vec<String> {
    gate.release.send(()).unwrap();
    sched.block_on(blocker).unwrap();
    sched
        .send(collector.pid(), Message::new("stop", Payload::empty()))
        .unwrap();
    sched
        .block_on(collector)
        .unwrap()
        .downcast::<Vec<String>>()
        .unwrap()
}

#[test]
fn declared_sizes_past_usize_max_overflow_the_budget_instead_of_wrapping() {
    // `max_bytes: usize::MAX` is "no byte limit": two messages declaring more than half of it
    // each add up past `usize::MAX`, which fits no budget (the sum once panicked the sender).
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (handle, gate, blocker) = a_collector_that_cannot_drain(&sched);
    let pid = handle.pid();
    let huge = usize::MAX / 2 + 1;
    let send = || {
        sched.send(
            pid,
            Message::new("big", Payload::empty()).with_budget(LOOSE, huge),
        )
    };
    assert!(send().is_ok());
    assert!(matches!(send(), Err(e) if e.is_mailbox_full()));
    let seen = what_the_collector_saw(&sched, gate, blocker, handle);
    assert_eq!(seen, ["big", "overflow:big"]);
}

#[test]
fn topic_budgets_drop_with_one_overflow_marker_and_send_says_so() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (handle, gate, blocker) = a_collector_that_cannot_drain(&sched);
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
    let seen = what_the_collector_saw(&sched, gate, blocker, handle);
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

/// A `Message` sent through an `Addr<Message>` keeps its topic budget — also to a process with
/// a backlog, whose mailbox takes unbudgeted messages lock-free (the typed path): it was
/// stamped there unchecked (a debug build's assertion panicked the sender between an intake
/// slot's claim and its write, and the process's `close` then waited for that slot for good;
/// a release build ignored the budget).
#[test]
fn a_budgeted_message_through_a_typed_address_keeps_its_budget_behind_a_backlog() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (handle, gate, blocker) = a_collector_that_cannot_drain(&sched);
    let pid = handle.pid();
    const BACKLOG: usize = 20;
    for _ in 0..BACKLOG {
        sched
            .send(pid, Message::new("other", Payload::empty()))
            .unwrap();
    }
    let budget = TopicBudget {
        max_items: 2,
        max_bytes: usize::MAX,
    };
    let addr = sched.handle().addr::<Message>(pid);
    let outcomes: Vec<_> = (0..10)
        .map(|_| addr.send(Message::new("metrics", Payload::empty()).with_budget(budget, 1)))
        .collect();
    assert!(outcomes[..2].iter().all(Result::is_ok), "{outcomes:?}");
    assert!(
        outcomes[2..]
            .iter()
            .all(|o| matches!(o, Err(e) if e.is_mailbox_full())),
        "{outcomes:?}"
    );
    // `send_wait` waits for room, not for a budget (nothing wakes a sender when a topic
    // drains): past the budget it is refused as `send` is — it used to spin in one poll until
    // the process next stepped.
    let (waited_tx, waited_rx) = mpsc::channel();
    let waiting_addr = addr.clone();
    thread::spawn(move || {
        let message = Message::new("metrics", Payload::empty()).with_budget(budget, 1);
        let outcome = futures::executor::block_on(waiting_addr.send_wait(message));
        let _ = waited_tx.send(outcome.map_err(|e| e.is_mailbox_full()));
    });
    assert_eq!(
        waited_rx
            .recv_timeout(HANG_GUARD)
            .expect("send_wait returned while the process was still busy"),
        Err(true)
    );
    let seen = what_the_collector_saw(&sched, gate, blocker, handle);
    let mut expected = vec!["other".to_owned(); BACKLOG];
    expected.extend(["metrics", "metrics", "overflow:metrics"].map(String::from));
    assert_eq!(seen, expected);
    assert!(sched.shutdown(HANG_GUARD).is_complete());
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

/// An `async fn` body that is busy (awaiting something else) holds the messages its steps
/// filed in its inbox: a bounded mailbox counts them, so its senders are refused past the
/// capacity, exactly, and accepted again once the body has received them.
#[test]
fn a_busy_body_s_unread_inbox_counts_against_the_capacity() {
    use procsched::{metrics::ProcessState, prelude::ProcessCx};
    const CAPACITY: u64 = 4;
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(CAPACITY as usize)
        .build()
        .unwrap();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
    let (drained_tx, drained_rx) = mpsc::channel();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            // Busy with something that is not a receive: messages wait in the inbox.
            gate_rx.await?;
            let mut sum = 0;
            for _ in 0..CAPACITY {
                sum += cx.recv().await?;
            }
            drained_tx.send(())?;
            sum += cx.recv().await?;
            Ok::<_, BoxError>(sum)
        })
        .unwrap();
    let pid = handle.pid();
    let addr = handle.addr();
    wait_until("the body waiting on its gate", || {
        sched.state(pid) == Some(ProcessState::Blocked)
    });
    // Each accepted send wakes the body, which files the message in its inbox and waits on
    // again: the capacity holds across those steps.
    let accepted = (1..=1_000u64)
        .filter(|&n| match addr.send(n) {
            Ok(()) => true,
            Err(error) => {
                assert_eq!(error.kind(), SendErrorKind::MailboxFull);
                assert_eq!(error.into_message(), Some(n), "handed back");
                false
            }
        })
        .count();
    assert_eq!(accepted as u64, CAPACITY);
    gate_tx.send(()).unwrap();
    drained_rx.recv_timeout(HANG_GUARD).unwrap();
    // Received: room again once the body says so (before it waits for the next one).
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        match addr.send(100) {
            Ok(()) => break,
            Err(error) => assert_eq!(error.kind(), SendErrorKind::MailboxFull),
        }
        assert!(std::time::Instant::now() < deadline, "hang guard: no room");
        thread::yield_now();
    }
    assert_eq!(sched.block_on(handle).unwrap(), 1 + 2 + 3 + 4 + 100);
}

/// A state machine handles what each step delivers: with a bounded mailbox it is never
/// counted as holding anything, not even one that keeps stepping and never parks.
#[test]
fn a_state_machine_that_never_parks_keeps_its_whole_capacity() {
    const MESSAGES: u64 = 50;
    struct Busy {
        received: u64,
    }
    impl Process for Busy {
        type Output = u64;
        fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
            Ok(())
        }
        fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
            for event in events.drain() {
                if let Event::Message(_) = event {
                    self.received += 1;
                }
            }
            if self.received == MESSAGES {
                out.done(self.received);
            } // else the default status, `Continue`: step again, never park
            Ok(())
        }
    }
    let sched = Scheduler::builder()
        .workers(1)
        .mailbox_capacity(2)
        .build()
        .unwrap();
    let handle = sched
        .spawn(Busy { received: 0 }, "run", Payload::empty())
        .unwrap();
    let pid = handle.pid();
    let deadline = std::time::Instant::now() + HANG_GUARD;
    for _ in 0..MESSAGES {
        // A full mailbox drains as the process steps: send again until it takes the message.
        while let Err(error) = sched.send(pid, Message::new("m", Payload::empty())) {
            assert_eq!(error.kind(), SendErrorKind::MailboxFull);
            assert!(
                std::time::Instant::now() < deadline,
                "hang guard: never room"
            );
            thread::yield_now();
        }
    }
    assert_eq!(sched.block_on(handle).unwrap(), MESSAGES);
}

/// An `async fn` body hears a topic's overflow after the topic's messages that were accepted
/// before it, as a state machine reads `Event::MailboxOverflow` after them: the marker is the
/// last of that traffic.
#[test]
fn a_body_hears_a_topics_overflow_after_the_messages_accepted_before_it() {
    use procsched::{error::RecvError, ProcessCx};
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let one = TopicBudget {
        max_items: 1,
        max_bytes: usize::MAX,
    };
    let (go, gate) = tokio::sync::oneshot::channel::<()>();
    let body = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            // Held until the topic has overflowed: the first receive's step gets it all.
            gate.await?;
            let mut heard = Vec::new();
            for _ in 0..3 {
                match cx.recv_message().await {
                    Ok(message) => heard.push(format!(
                        "{}:{}",
                        message.topic,
                        message.payload.take::<u32>()?
                    )),
                    Err(RecvError::Overflow(topic)) => heard.push(format!("overflow:{topic}")),
                    Err(other) => return Err(other.into()),
                }
            }
            Ok::<_, BoxError>(heard)
        })
        .unwrap();
    let pid = body.pid();
    let budgeted = |n: u32| Message::new("t", Payload::new(n)).with_budget(one, 0);
    sched.send(pid, budgeted(1)).unwrap();
    assert!(
        sched.send(pid, budgeted(2)).is_err(),
        "over the topic's budget"
    );
    sched
        .send(pid, Message::new("other", Payload::new(3u32)))
        .unwrap();
    go.send(()).unwrap();
    assert_eq!(
        sched.block_on(body).unwrap(),
        ["t:1", "overflow:t", "other:3"]
    );
}
