//! A state machine's ask (`Addr::ask_command`, `src/dispatch/ask.rs`): yielded like a command,
//! answered as the yield's completion with its tag — the answer, a dropped port (`NoReply`), a
//! timeout, or why nothing was sent (`NotFound`, `AskedItself`, a full mailbox) — and each
//! yield completed exactly once: every asker below ends only after a message it sends itself
//! once its completions are in, so a second completion of any tag, queued before that message,
//! would be in its output.

mod support;

use procsched::error::{AskError, CommandError, SendErrorKind};
use procsched::prelude::*;
use procsched::state_machine::Tag;
use std::time::Duration;
use support::step_asker::{Asks, StepAsker};
use support::*;

/// A process that answers `Double` asks, drops `Drop` ports unanswered, keeps `Keep` ports
/// (never answering; `Kept` counts them) until `AnswerKept` answers each with `0` and reports which answers were
/// taken, and stops on `Stop`.
enum Server {
    Double(u64, Reply<u64>),
    Drop(Reply<u64>),
    Keep(Reply<u64>),
    Kept(Reply<usize>),
    AnswerKept(Reply<Vec<bool>>),
    Stop,
}

fn server(sched: &Scheduler) -> ProcessHandle<(), Server> {
    sched
        .spawn_fn(|cx: ProcessCx<Server>| async move {
            let mut kept = Vec::new();
            loop {
                match cx.recv().await? {
                    Server::Double(n, reply) => {
                        let _ = reply.send(n * 2);
                    }
                    Server::Drop(reply) => drop(reply),
                    Server::Keep(reply) => kept.push(reply),
                    Server::Kept(count) => {
                        let _ = count.send(kept.len());
                    }
                    Server::AnswerKept(report) => {
                        let taken = kept.drain(..).map(|port| port.send(0).is_ok()).collect();
                        let _ = report.send(taken);
                    }
                    Server::Stop => return Ok::<_, BoxError>(()),
                }
            }
        })
        .unwrap()
}

/// How one ask's yield completed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Completion {
    Answer(u64),
    NoReply,
    TimedOut,
    Undelivered(SendErrorKind),
    AskedItself,
    Other(String),
}

fn completion(result: Result<Payload, CommandError>) -> Completion {
    match result {
        Ok(payload) => Completion::Answer(payload.take::<u64>().expect("a u64 answer")),
        Err(CommandError::NoReply) => Completion::NoReply,
        Err(CommandError::TimedOut) => Completion::TimedOut,
        Err(CommandError::Failed(error)) => match error.downcast_ref::<AskError>() {
            Some(AskError::Undelivered(kind)) => Completion::Undelivered(*kind),
            Some(AskError::AskedItself) => Completion::AskedItself,
            _ => Completion::Other(error.to_string()),
        },
        Err(other) => Completion::Other(other.to_string()),
    }
}

type Asker = StepAsker<Completion>;

/// An [`Asker`] on `sched` of the asks `asks` makes, given the asker's own address.
fn asker(
    sched: &Scheduler,
    expected: usize,
    asks: impl FnOnce(&Addr<Reply<u64>>) -> Asks + Send + 'static,
) -> Asker {
    let handle = sched.handle().clone();
    let make = move |me| asks(&handle.addr::<Reply<u64>>(me));
    StepAsker::new(sched.handle(), expected, completion, Box::new(make))
}

/// Runs an [`Asker`] of `asks` to its end.
fn asked(
    sched: &Scheduler,
    expected: usize,
    asks: impl FnOnce(&Addr<Reply<u64>>) -> Asks + Send + 'static,
) -> Vec<(Tag, Completion)> {
    run(sched, asker(sched, expected, asks))
}

/// A [`server`] that has ended.
fn ended_server(sched: &Scheduler) -> Addr<Server> {
    let server = server(sched);
    let addr = server.addr();
    addr.send(Server::Stop).unwrap();
    join_typed(server).unwrap();
    addr
}

fn run(sched: &Scheduler, asker: Asker) -> Vec<(Tag, Completion)> {
    let handle = sched.spawn(asker, "run", Payload::empty()).unwrap();
    join_typed(handle).expect("the asker ends")
}

fn sched() -> Scheduler {
    Scheduler::builder().workers(2).build().unwrap()
}

#[test]
fn answers_come_back_as_completions_with_their_tags() {
    let sched = sched();
    let server = server(&sched);
    let addr = server.addr();
    let mut seen = asked(&sched, 3, move |_| {
        (1..=3)
            .map(|n| {
                (
                    n,
                    addr.ask_command(move |r| Server::Double(n * 10, r)),
                    None,
                )
            })
            .collect()
    });
    seen.sort_by_key(|(tag, _)| *tag);
    assert_eq!(
        seen,
        vec![
            (1, Completion::Answer(20)),
            (2, Completion::Answer(40)),
            (3, Completion::Answer(60)),
        ]
    );
    // Counted as asks, not as yields to an async handler (none ran).
    let yields = sched.metrics().yields;
    assert_eq!((yields.asks, yields.asynchronous), (3, 0), "{yields:?}");
}

#[test]
fn a_port_dropped_unanswered_completes_with_no_reply() {
    let sched = sched();
    let server = server(&sched);
    let addr = server.addr();
    let seen = asked(&sched, 1, move |_| {
        vec![(7, addr.ask_command(Server::Drop), None)]
    });
    assert_eq!(seen, vec![(7, Completion::NoReply)]);
}

#[test]
fn an_ask_to_a_finished_process_fails_not_found_once() {
    let sched = sched();
    let addr = ended_server(&sched);
    let seen = asked(&sched, 2, move |_| {
        vec![
            (1, addr.ask_command(|r| Server::Double(1, r)), None),
            (
                2,
                addr.ask_command(|r| Server::Double(1, r)),
                Some(HANG_GUARD),
            ),
        ]
    });
    assert_eq!(
        seen,
        vec![
            (1, Completion::Undelivered(SendErrorKind::NotFound)),
            (2, Completion::Undelivered(SendErrorKind::NotFound)),
        ]
    );
}

#[test]
fn a_port_its_request_does_not_hold_completes_the_refused_ask_once() {
    // The request's constructor drops the port (it answers `NoReply` at once), and the request
    // is refused: the yield completes with the port's `NoReply`, not twice.
    let sched = sched();
    let addr = ended_server(&sched);
    let seen = asked(&sched, 1, move |_| {
        let ask = addr.ask_command(|reply: Reply<u64>| {
            drop(reply);
            Server::Stop
        });
        vec![(3, ask, None)]
    });
    assert_eq!(seen, vec![(3, Completion::NoReply)]);
}

#[test]
fn a_process_asking_itself_is_refused_at_once() {
    let sched = sched();
    let seen = asked(&sched, 2, |me| {
        vec![
            (1, me.ask_command(|reply| reply), None),
            (2, me.ask_command(|reply| reply), Some(HANG_GUARD)),
        ]
    });
    assert_eq!(
        seen,
        vec![(1, Completion::AskedItself), (2, Completion::AskedItself)]
    );
}

#[test]
fn a_timed_ask_times_out_and_its_late_answer_is_handed_back() {
    let sched = sched();
    let server = server(&sched);
    let addr = server.addr();
    let asks = addr.clone();
    // The server keeps the port until told to answer: only the timeout can complete the ask.
    let seen = asked(&sched, 1, move |_| {
        vec![(
            5,
            asks.ask_command(Server::Keep),
            Some(Duration::from_millis(5)),
        )]
    });
    assert_eq!(seen, vec![(5, Completion::TimedOut)]);
    let taken = sched.block_on(addr.ask(Server::AnswerKept)).unwrap();
    assert_eq!(
        taken,
        vec![false],
        "the answer after the timeout is handed back"
    );
}

#[test]
fn a_timed_ask_answered_in_time_completes_with_the_answer() {
    let sched = sched();
    let server = server(&sched);
    let addr = server.addr();
    let seen = asked(&sched, 1, move |_| {
        vec![(
            9,
            addr.ask_command(|r| Server::Double(21, r)),
            Some(HANG_GUARD),
        )]
    });
    assert_eq!(seen, vec![(9, Completion::Answer(42))]);
}

#[test]
fn an_answer_to_an_asker_that_ended_is_handed_back() {
    let sched = sched();
    let server = server(&sched);
    let addr = server.addr();
    let asks = addr.clone();
    let asker = asker(
        &sched,
        usize::MAX, // never sends itself the end: the test does
        move |_| {
            vec![
                (1, asks.ask_command(Server::Keep), None),
                (2, asks.ask_command(Server::Keep), Some(HANG_GUARD)),
            ]
        },
    );
    let handle = sched.spawn(asker, "run", Payload::empty()).unwrap();
    let me = sched.handle().addr::<u64>(handle.pid());
    wait_until("the server holding both ports", || {
        sched.block_on(addr.ask(Server::Kept)).unwrap() == 2
    });
    me.send(0).unwrap();
    assert_eq!(join_typed(handle).unwrap(), Vec::new());
    let taken = sched.block_on(addr.ask(Server::AnswerKept)).unwrap();
    assert_eq!(taken, vec![false, false], "nobody waits for these answers");
}

#[test]
fn a_full_mailbox_refuses_the_ask() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let (open, opened) = tokio::sync::oneshot::channel::<()>();
    let stalled = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            let _ = opened.await;
            cx.recv().await?;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let addr = stalled.addr();
    addr.send(1).unwrap(); // the one message it has room for
    let asks = addr.retyped::<Reply<u64>>();
    let seen = asked(&sched, 1, move |_| {
        vec![(4, asks.ask_command(|reply| reply), None)]
    });
    assert_eq!(
        seen,
        vec![(4, Completion::Undelivered(SendErrorKind::MailboxFull))]
    );
    open.send(()).unwrap();
    join_typed(stalled).unwrap();
}

#[test]
fn thousands_of_asks_in_flight_each_complete_once() {
    let asks = scaled(4_000) as u64;
    let sched = sched();
    let server = server(&sched);
    let addr = server.addr();
    let mut seen = asked(&sched, asks as usize, move |_| {
        (0..asks)
            .map(|n| {
                let ask = addr.ask_command(move |r| Server::Double(n, r));
                // Every other one with a deadline: the channel path.
                (n, ask, (n % 2 == 1).then_some(HANG_GUARD))
            })
            .collect()
    });
    seen.sort_by_key(|(tag, _)| *tag);
    let expected: Vec<_> = (0..asks).map(|n| (n, Completion::Answer(n * 2))).collect();
    assert_eq!(seen, expected);
}
