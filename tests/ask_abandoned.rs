//! An answer to an ask its asking process gave up on (the ask timed out, was dropped, or was
//! cut short by the process's cancel) while that process lives on: `Reply::send` hands the
//! value back and `Reply::is_closed` says so — as for an asker from tokio code, or one that
//! ended — and the asker's later asks and receives never see that answer.

mod support;

use procsched::prelude::*;
use std::pin::pin;
use std::sync::mpsc;
use std::time::Duration;
use support::*;

/// What a holder is asked: to keep a port, and then to answer the kept one.
enum Holder {
    /// Keep the port, unanswered (and say so on the holder's channel).
    Hold(Reply<u64>),
    /// Answer the kept port with 42 now; report `(its is_closed, its send's result, this
    /// port's is_closed)`.
    AnswerKept(Reply<Report>),
    /// A plain ask, answered at once.
    Echo(u64, Reply<u64>),
}

type Report = (bool, Result<(), u64>, bool);

/// A two-worker scheduler running a holder process, and the channel that hears each `Hold` it
/// keeps.
fn with_holder() -> (Scheduler, ProcessHandle<(), Holder>, mpsc::Receiver<()>) {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (held_tx, held_rx) = mpsc::channel();
    let holder = holder(&sched, held_tx);
    (sched, holder, held_rx)
}

/// A holder process; `held` hears each `Hold` it keeps.
fn holder(sched: &Scheduler, held: mpsc::Sender<()>) -> ProcessHandle<(), Holder> {
    sched
        .spawn_fn(move |cx: ProcessCx<Holder>| async move {
            let mut kept = None;
            loop {
                match cx.recv().await? {
                    Holder::Hold(port) => {
                        kept = Some(port);
                        held.send(()).unwrap();
                    }
                    Holder::AnswerKept(report) => {
                        let port = kept.take().expect("a port is kept");
                        let closed = port.is_closed();
                        let sent = port.send(42);
                        let asker_gone = report.is_closed();
                        let _ = report.send((closed, sent, asker_gone));
                    }
                    Holder::Echo(n, reply) => {
                        let _ = reply.send(n);
                    }
                }
            }
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .unwrap()
}

#[test]
fn a_late_answer_to_a_live_asker_that_gave_up_is_handed_back() {
    let (sched, holder, held) = with_holder();
    let addr = holder.addr();

    // Timed out, then dropped: the asker lives on and asks again each time.
    let asker = {
        let addr = addr.clone();
        sched
            .spawn_fn(move |_: ProcessCx| async move {
                let timed_out = addr
                    .ask_within(Duration::from_millis(1), Holder::Hold)
                    .await;
                assert!(timed_out.unwrap_err().is_timed_out());
                let after_timeout = addr.ask(Holder::AnswerKept).await?;

                {
                    let mut dropped = pin!(addr.ask(Holder::Hold));
                    assert!(futures::poll!(dropped.as_mut()).is_pending());
                }
                let after_drop = addr.ask(Holder::AnswerKept).await?;

                // The refused answers never reach a later ask (nor the inbox).
                let echoed = addr.ask(|reply| Holder::Echo(7, reply)).await?;
                Ok::<_, BoxError>((after_timeout, after_drop, echoed))
            })
            .unwrap()
    };
    let (after_timeout, after_drop, echoed) = join_typed(asker).unwrap();
    for report in [after_timeout, after_drop] {
        assert_eq!(report, (true, Err(42), false), "closed, value handed back");
    }
    assert_eq!(echoed, 7);
    assert_eq!(held.try_iter().count(), 2);
    drop(holder);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_late_answer_to_an_asker_whose_cancel_cut_its_ask_short_is_handed_back() {
    let (sched, holder, held) = with_holder();
    let addr = holder.addr();
    let asker = {
        let addr = addr.clone();
        sched
            .spawn_fn(move |_: ProcessCx| async move {
                let cut_short = addr.ask(Holder::Hold).await;
                assert!(
                    matches!(cut_short, Err(AskError::Cancelled(_))),
                    "{cut_short:?}"
                );
                // An ask sent after its own cancel is answered (cleanup).
                let report = addr.ask(Holder::AnswerKept).await?;
                Ok::<_, BoxError>(report)
            })
            .unwrap()
    };
    held.recv_timeout(HANG_GUARD)
        .expect("hang guard: the holder keeps the port");
    sched.handle().cancel(asker.pid()).unwrap();
    let report = join_typed(asker).unwrap();
    assert_eq!(report, (true, Err(42), false), "closed, value handed back");
    drop(holder);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_answer_to_an_asker_that_still_waits_is_delivered() {
    // The control: the same holder, an asker that waits.
    let (sched, holder, held) = with_holder();
    let addr = holder.addr();
    let asker = {
        let addr = addr.clone();
        sched
            .spawn_fn(move |_: ProcessCx| async move {
                Ok::<_, BoxError>(addr.ask(Holder::Hold).await?)
            })
            .unwrap()
    };
    held.recv_timeout(HANG_GUARD)
        .expect("hang guard: the holder keeps the port");
    let report = sched.block_on(addr.ask(Holder::AnswerKept)).unwrap();
    assert_eq!(report, (false, Ok(()), false), "open, delivered");
    assert_eq!(join_typed(asker).unwrap(), 42);
    sched.shutdown(HANG_GUARD);
}

/// The process [`racing_answerer`] spawns.
type Answerer = ProcessHandle<(), (u64, Reply<u64>)>;

/// A process that answers each `(n, port)` with `n` — some at once, some after a little work:
/// both sides of a race with the ask's timeout — and reports `(n, whether its send was Ok)`.
fn racing_answerer(sched: &Scheduler) -> (Answerer, mpsc::Receiver<(u64, bool)>) {
    let (answers_tx, answers) = mpsc::channel();
    let answerer = sched
        .spawn_fn(move |cx: ProcessCx<(u64, Reply<u64>)>| async move {
            loop {
                let (n, reply) = cx.recv().await?;
                if n % 3 == 0 {
                    std::hint::black_box((0..n % 200).sum::<u64>());
                }
                answers_tx.send((n, reply.send(n).is_ok())).unwrap();
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap();
    (answerer, answers)
}

/// Many asks whose timeouts race their answers: each ask ends exactly one way on each side.
/// The answerer's `send` is `Ok` for an answer the asker received or gave up on after it was
/// queued, `Err` for one the asker had given up on first; the asker gets `Ok` or `TimedOut`.
/// So the answerer's `Ok`s are at least the asker's, and each side counts every ask once.
#[test]
fn answers_racing_timeouts_end_exactly_one_way_on_each_side() {
    const ASKERS: u64 = 4;
    const ASKS: u64 = 10_000;
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (answerer, answers) = racing_answerer(&sched);
    let askers: Vec<_> = (0..ASKERS)
        .map(|asker| {
            let addr = answerer.addr();
            sched
                .spawn_fn(move |_: ProcessCx| async move {
                    let (mut answered, mut timed_out) = (0u64, 0u64);
                    for i in 0..ASKS {
                        let n = asker * ASKS + i;
                        let within = Duration::from_micros(n % 50);
                        match addr.ask_within(within, |reply| (n, reply)).await {
                            Ok(m) => {
                                assert_eq!(m, n, "an answer reaches only its own ask");
                                answered += 1;
                            }
                            Err(error) => {
                                assert!(error.is_timed_out(), "{error}");
                                timed_out += 1;
                            }
                        }
                    }
                    Ok::<_, BoxError>((answered, timed_out))
                })
                .unwrap()
        })
        .collect();
    let (mut answered, mut timed_out) = (0, 0);
    for asker in askers {
        let (a, t) = join_typed(asker).unwrap();
        answered += a;
        timed_out += t;
    }
    assert_eq!(
        answered + timed_out,
        ASKERS * ASKS,
        "each ask ends once for its asker"
    );
    let sends: Vec<bool> = (0..ASKERS * ASKS)
        .map(|_| {
            answers
                .recv_timeout(HANG_GUARD)
                .expect("hang guard: every ask answered")
                .1
        })
        .collect();
    let delivered = sends.iter().filter(|ok| **ok).count() as u64;
    assert!(
        delivered >= answered,
        "{delivered} delivered, {answered} received"
    );
    assert_eq!(
        ASKERS * ASKS - delivered,
        timed_out - (delivered - answered),
        "a refused answer is an ask its asker gave up on before it came"
    );
    drop(answerer);
    sched.shutdown(HANG_GUARD);
}

/// Asks from tokio code whose timeouts race their answers: an answer the answerer's `send` saw
/// accepted (`Ok`) is the asker's answer, and one it got back was an ask that timed out — per
/// ask, exactly. (An answer sent between the asker's look at its channel and its deadline
/// firing was lost: `TimedOut` for the asker, `Ok` for the answerer.)
#[test]
fn answers_racing_the_timeouts_of_asks_from_tokio_are_received_exactly_when_sent() {
    const TASKS: u64 = 4;
    const ASKS: u64 = 10_000;
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (answerer, answers) = racing_answerer(&sched);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let received: Vec<(u64, bool)> = runtime.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let addr = answerer.addr();
                tokio::spawn(async move {
                    let mut received = Vec::new();
                    for i in 0..ASKS {
                        let n = task * ASKS + i;
                        let within = Duration::from_micros(n % 50);
                        match addr.ask_within(within, |reply| (n, reply)).await {
                            Ok(m) => {
                                assert_eq!(m, n, "an answer reaches only its own ask");
                                received.push((n, true));
                            }
                            Err(error) => {
                                assert!(error.is_timed_out(), "{error}");
                                received.push((n, false));
                            }
                        }
                    }
                    received
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    });
    let mut sent = vec![None; (TASKS * ASKS) as usize];
    for _ in 0..TASKS * ASKS {
        let (n, ok) = answers
            .recv_timeout(HANG_GUARD)
            .expect("hang guard: every ask answered");
        sent[n as usize] = Some(ok);
    }
    let lost: Vec<u64> = received
        .iter()
        .filter(|&&(n, got)| sent[n as usize] != Some(got))
        .map(|&(n, _)| n)
        .collect();
    assert!(
        lost.is_empty(),
        "{} asks whose answer's send and receipt disagree: {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    drop(answerer);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_answer_sent_before_a_bodys_ask_timed_out_is_its_answer_not_lost() {
    // The answer is queued in the asking process's mailbox during the step in which the ask's
    // deadline passes: `Reply::send` said `Ok`, so the ask must return it, not `TimedOut` (the
    // answer then dropped unread: the answerer thinks it delivered, the asker that it failed).
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (answered, answered_ok) = mpsc::channel::<bool>();
    let server = sched
        .spawn_fn(move |cx: ProcessCx<Reply<u64>>| async move {
            let reply = cx.recv().await?;
            answered.send(reply.send(7).is_ok()).unwrap();
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let addr = server.addr();
    let timeout = Duration::from_millis(1);
    let asker = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let mut ask = pin!(addr.ask_within(timeout, |reply| reply));
            assert!(
                futures::poll!(&mut ask).is_pending(),
                "sent, not answered yet"
            );
            // Within this step: the server answers, and then the deadline passes.
            let sent_ok = answered_ok.recv_timeout(HANG_GUARD).unwrap();
            let answered_at = std::time::Instant::now();
            while answered_at.elapsed() <= timeout {
                std::thread::yield_now();
            }
            Ok::<_, BoxError>((sent_ok, ask.await))
        })
        .unwrap();
    let (sent_ok, answer) = sched.block_on(asker).unwrap();
    assert!(sent_ok, "the answerer was told it delivered");
    assert_eq!(answer.unwrap(), 7);
    sched.block_on(server).unwrap();
}
