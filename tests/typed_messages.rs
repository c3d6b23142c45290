//! Typed mailboxes and addresses: `ProcessCx<M>` receives `M`s, `Addr<M>` sends them — from
//! tokio code, plain threads, other processes' bodies and state machines' steps — exactly once,
//! in each sender's order; refusals hand the typed message back; the untyped form keeps
//! working beside them.

mod support;

use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, StepOutput};
use procsched::{error::SendErrorKind, state_machine::Status};
use std::sync::{Arc, Barrier};
use std::thread;
use support::*;

const SENDERS: usize = 4;

/// What the counting process receives: numbered messages from several senders, then a stop.
enum Counted {
    From { sender: usize, sequence: u64 },
    Stop(Reply<u64>),
}

#[test]
fn typed_sends_from_four_threads_arrive_exactly_once_in_each_senders_order() {
    let per_sender = scaled(50_000) as u64;
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let counter = sched
        .spawn_fn(|cx: ProcessCx<Counted>| async move {
            let mut next = [0u64; SENDERS];
            let mut received = 0;
            loop {
                match cx.recv().await? {
                    Counted::From { sender, sequence } => {
                        if sequence != next[sender] {
                            return Err(format!(
                                "sender {sender}: {sequence} where {} was due",
                                next[sender]
                            )
                            .into());
                        }
                        next[sender] += 1;
                        received += 1;
                    }
                    Counted::Stop(reply) => {
                        let _ = reply.send(received);
                        return Ok::<_, BoxError>(next);
                    }
                }
            }
        })
        .unwrap();
    let addr = counter.addr();
    let start = Arc::new(Barrier::new(SENDERS));
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let (addr, start) = (addr.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for sequence in 0..per_sender {
                    addr.send(Counted::From { sender, sequence }).unwrap();
                }
            })
        })
        .collect();
    for sender in senders {
        sender.join().unwrap();
    }
    let received = sched.block_on(addr.ask(Counted::Stop)).unwrap();
    assert_eq!(received, per_sender * SENDERS as u64);
    assert_eq!(
        join_typed(counter).unwrap(),
        [per_sender; SENDERS],
        "every sender's messages, each once"
    );
}

#[test]
fn a_refused_typed_send_hands_the_typed_message_back_with_its_kind() {
    let sched = Scheduler::builder()
        .workers(1)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let (gate, inside) = step_gate();
    let inside = std::sync::Mutex::new(Some(inside));
    let busy = sched
        .spawn_fn(move |cx: ProcessCx<String>| async move {
            // Holds its worker until released, so its mailbox fills.
            if let Some(inside) = inside.lock().unwrap().take() {
                inside.wait();
            }
            let first = cx.recv().await?;
            Ok::<_, BoxError>(first)
        })
        .unwrap();
    recv(&gate.entered);
    let addr = busy.addr();
    addr.send("first".to_owned()).unwrap();
    let full = addr.send("second".to_owned()).unwrap_err();
    assert_eq!(
        (full.kind(), full.pid()),
        (SendErrorKind::MailboxFull, busy.pid())
    );
    assert_eq!(full.into_message().as_deref(), Some("second"));
    gate.release.send(()).unwrap();
    assert_eq!(join_typed(busy).unwrap(), "first");
    let gone = addr.send("late".to_owned()).unwrap_err();
    assert!(gone.is_not_found());
    assert_eq!(gone.into_message().as_deref(), Some("late"));
}

#[test]
fn addresses_compare_by_process_are_cheap_to_clone_and_debug_with_their_pid() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let a = sched
        .spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    let b = sched
        .spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    let (addr_a, addr_b) = (a.addr(), b.addr());
    assert_eq!(addr_a, addr_a.clone());
    assert_ne!(addr_a, addr_b);
    assert_eq!(addr_a, sched.handle().addr::<u8>(a.pid()));
    assert_eq!(std::mem::size_of::<Addr<u8>>(), 16, "a PID and a reference");
    let debug = format!("{addr_a:?}");
    assert!(
        debug.contains("u8") && debug.contains(&a.pid().to_string()),
        "{debug}"
    );
    fn is_send_sync<T: Send + Sync + Clone>() {}
    // Even for a message type that is not `Sync`.
    is_send_sync::<Addr<std::cell::Cell<u8>>>();
    addr_a.send(1).unwrap();
    addr_b.send(2).unwrap();
    assert_eq!(join_typed(a).unwrap() + join_typed(b).unwrap(), 3);
}

/// A state machine addressed with the type it reads from its `Event::Message` payloads.
struct Doubler;

impl Process for Doubler {
    type Output = u64;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        match events.pop() {
            Some(Event::Message(message)) => out.done(message.payload.take::<u64>()? * 2),
            _ => out.idle(),
        }
        Ok(())
    }
}

#[test]
fn a_state_machine_gets_a_typed_address_and_the_untyped_form_still_works() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let typed = sched.spawn(Doubler, "run", Payload::empty()).unwrap();
    sched.handle().addr::<u64>(typed.pid()).send(21).unwrap();
    assert_eq!(join_typed(typed).unwrap(), 42);
    let untyped = sched.spawn(Doubler, "run", Payload::empty()).unwrap();
    let addr: Addr<Message> = untyped.addr();
    addr.send(Message::new("n", Payload::new(4u64))).unwrap();
    assert_eq!(join_typed(untyped).unwrap(), 8);

    // An untyped body receives whole messages, topics included, typed sends too.
    let topics = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let first = cx.recv().await?;
            let second = cx.recv_message().await?;
            Ok::<_, BoxError>((first.topic.into_owned(), second.topic.into_owned()))
        })
        .unwrap();
    sched
        .send(topics.pid(), Message::new("cart.updated", Payload::empty()))
        .unwrap();
    topics.addr().retyped::<u32>().send(7).unwrap();
    assert_eq!(
        join_typed(topics).unwrap(),
        ("cart.updated".to_owned(), "u32".to_owned())
    );
}

#[test]
fn one_process_sends_to_another_from_its_body_and_a_step_sends_from_its_step() {
    struct Forward {
        to: Addr<u64>,
    }
    impl Process for Forward {
        type Output = ();
        fn step(&mut self, events: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
            match events.pop() {
                Some(Event::Message(message)) => {
                    self.to.send(message.payload.take::<u64>()? + 1)?;
                    out.done(());
                }
                _ => out.idle(),
            }
            Ok(())
        }
    }
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let sink = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    let forward = sched
        .spawn(Forward { to: sink.addr() }, "run", Payload::empty())
        .unwrap();
    let forward_addr = sched.handle().addr::<u64>(forward.pid());
    let source = sched
        .spawn_fn(move |_: ProcessCx| async move {
            forward_addr.send(40)?;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    join_typed(source).unwrap();
    join_typed(forward).unwrap();
    assert_eq!(join_typed(sink).unwrap(), 41);
}

#[test]
fn a_harness_steps_a_typed_body_with_its_typed_messages() {
    let mut harness = procsched::testing::Harness::for_fn(|cx: ProcessCx<u32>| async move {
        Ok::<_, BoxError>(cx.recv().await? + cx.recv().await?)
    });
    harness.init("run", Payload::empty()).unwrap();
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    harness
        .send(Message::new("u32", Payload::new(40u32)))
        .send(Message::new("u32", Payload::new(2u32)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(42)));
}
