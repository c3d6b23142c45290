//! The adapter and its step scope, driven by hand (no scheduler, no threads): these also run
//! under Miri, which checks the scope's raw-pointer hand-off. The bodies use this layer's own
//! futures through a small stand-in for the scheduler layer's `ProcessCx` ([`Cx`]).

use super::{AsyncFnProcess, Call, Recv};
use crate::process::context::{HostId, Owner};
use crate::process::{BoxError, Command, CommandError, Event, Events, Message, Payload, Pid};
use crate::process::{Process, ProcessContext, RecvError, Status, StepOutput, Tag, INDEX_BITS};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// What a body gets here: its owner, and the futures `ProcessCx` would make from it.
struct Cx<M = Message>(Owner, PhantomData<fn() -> M>);

impl<M: 'static> Cx<M> {
    fn call<C: Command>(&self, command: C) -> Call<C> {
        Call::new(command, None, self.0)
    }

    fn recv(&self) -> Recv<M> {
        Recv::new(self.0)
    }
}

/// What one step produced.
struct Step<T> {
    yields: Vec<(Tag, Payload)>,
    status: Status<T>,
}

/// A process driven by hand, as `testing::Harness` drives one (boxed: a body is polled in
/// place).
struct Driver<P: Process> {
    process: Box<P>,
    owner: Owner,
    events: Events,
    out: StepOutput<P::Output>,
}

/// A driver for the body `body(cx)`.
fn driver<M, F, Fut, T, E>(body: F) -> Driver<impl Process<Output = T>>
where
    M: 'static,
    F: FnOnce(Cx<M>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Into<BoxError>,
{
    Driver {
        process: Box::new(AsyncFnProcess::new(move |owner| {
            body(Cx(owner, PhantomData))
        })),
        owner: harness_owner(),
        events: Events::default(),
        out: StepOutput::default(),
    }
}

impl<P: Process> Driver<P> {
    fn init(&mut self, method: &str, input: Payload) -> Result<(), crate::process::InitError> {
        let ctx = ProcessContext::for_host(self.owner.pid, self.owner.host);
        self.process.init(&ctx, method, input)
    }

    fn step(&mut self) -> Result<Step<P::Output>, BoxError> {
        let stepped = self.process.step(&mut self.events, &mut self.out);
        self.events.drain().for_each(drop);
        stepped?;
        Ok(Step {
            yields: self.out.take_yields().collect(),
            status: self.out.take_status(),
        })
    }

    fn complete(&mut self, tag: Tag, result: Result<Payload, CommandError>) -> &mut Self {
        self.events.push(Event::YieldComplete { tag, result });
        self
    }

    fn send(&mut self, message: Message) -> &mut Self {
        self.events.push(Event::Message(message));
        self
    }
}

impl<P: Process> Drop for Driver<P> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.process.close();
        }
    }
}

/// A process identity no driver has: futures made with it belong to no process.
fn harness_owner() -> Owner {
    Owner {
        host: HostId::next(),
        pid: Pid::from_raw(1 << INDEX_BITS).unwrap(),
    }
}

struct Add(#[allow(dead_code)] u64, #[allow(dead_code)] u64);
impl Command for Add {
    type Output = u64;
}

#[test]
fn calls_go_out_as_yields_and_their_replies_resume_the_body() {
    let mut harness = driver(|cx: Cx| async move {
        let (a, b) = futures::join!(cx.call(Add(1, 2)), cx.call(Add(3, 4)));
        Ok::<_, BoxError>(a? * b?)
    });
    harness.init("run", Payload::empty()).unwrap();
    let step = harness.step().unwrap();
    assert!(matches!(step.status, Status::Wait));
    assert_eq!(step.yields.len(), 2, "both calls in one step");
    let (first, second) = (step.yields[0].0, step.yields[1].0);
    assert_ne!(first, second);
    // Replies in the opposite order: each resumes its own call.
    harness.complete(second, Ok(Payload::new(7u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Wait));
    harness.complete(first, Ok(Payload::new(3u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(21)));
}

#[test]
fn futures_a_combinator_polls_with_their_own_wakers_are_woken_when_their_event_arrives() {
    // `FuturesUnordered` polls again only the futures whose own waker was woken: the adapter
    // wakes a call's when its completion arrives and a receive's when a message does.
    let mut harness = driver(|cx: Cx<u64>| async move {
        use futures::stream::{FuturesUnordered, StreamExt};
        let calls: FuturesUnordered<_> = (0..3).map(|n| cx.call(Add(n, n))).collect();
        let sum: u64 = calls
            .map(Result::unwrap)
            .collect::<Vec<_>>()
            .await
            .iter()
            .sum();
        let mut receives = FuturesUnordered::new();
        receives.push(cx.recv());
        let n = receives.next().await.unwrap()?;
        Ok::<_, BoxError>(sum + n)
    });
    // Steps until the body waits or ends: a `FuturesUnordered` that polled all it holds wakes
    // itself once (a yield: `Continue`), and the next step finds nothing more to poll.
    fn settle<P: Process<Output = u64>>(harness: &mut Driver<P>) -> Step<u64> {
        let mut step = harness.step().unwrap();
        for _ in 0..4 {
            if !matches!(step.status, Status::Continue) {
                break;
            }
            let next = harness.step().unwrap();
            step = Step {
                yields: step.yields.into_iter().chain(next.yields).collect(),
                status: next.status,
            };
        }
        step
    }
    harness.init("run", Payload::empty()).unwrap();
    let step = settle(&mut harness);
    assert!(matches!(step.status, Status::Wait), "{:?}", step.status);
    let tags: Vec<Tag> = step.yields.iter().map(|(tag, _)| *tag).collect();
    assert_eq!(tags.len(), 3);
    // One completion per step, the last first.
    for (i, &tag) in tags.iter().enumerate().rev() {
        harness.complete(tag, Ok(Payload::new(10u64 * (i as u64 + 1))));
        let status = settle(&mut harness).status;
        if i > 0 {
            assert!(matches!(status, Status::Wait), "{status:?}");
        } else {
            assert!(matches!(status, Status::Idle), "{status:?}");
        }
    }
    harness.send(Message::new("n", Payload::new(4u64)));
    assert!(matches!(settle(&mut harness).status, Status::Done(64)));
}

#[test]
fn a_failed_call_and_a_reply_of_the_wrong_type_are_errors_of_the_call() {
    let mut harness = driver(|cx: Cx| async move {
        let failed = cx.call(Add(0, 0)).await;
        let mistyped = cx.call(Add(0, 0)).await;
        Ok::<_, BoxError>((failed.is_err(), mistyped.unwrap_err().to_string()))
    });
    harness.init("run", Payload::empty()).unwrap();
    let tag = harness.step().unwrap().yields[0].0;
    harness.complete(tag, Err(CommandError::TimedOut));
    let tag = harness.step().unwrap().yields[0].0;
    harness.complete(tag, Ok(Payload::new("not a number")));
    match harness.step().unwrap().status {
        Status::Done((true, message)) => assert!(message.contains("`u64`"), "{message}"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_dropped_call_discards_its_late_reply() {
    let mut harness = driver(|cx: Cx<u64>| async move {
        let mut call = cx.call(Add(1, 1));
        // Poll it once (it goes out), then drop it.
        std::future::poll_fn(|task| {
            let _ = Pin::new(&mut call).poll(task);
            Poll::Ready(())
        })
        .await;
        drop(call);
        let n: u64 = cx.recv().await?;
        Ok::<_, BoxError>(n)
    });
    harness.init("run", Payload::empty()).unwrap();
    let step = harness.step().unwrap();
    assert!(
        matches!(step.status, Status::Idle),
        "only the receive waits"
    );
    let tag = step.yields[0].0;
    harness.complete(tag, Ok(Payload::new(2u64)));
    harness.send(Message::new("n", Payload::new(5u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(5)));
}

#[test]
fn a_panicking_body_leaves_no_scope_behind() {
    let mut harness = driver(|cx: Cx| async move {
        cx.call(Add(1, 1)).await?;
        if true {
            panic!("in the body");
        }
        Ok::<(), BoxError>(())
    });
    harness.init("run", Payload::empty()).unwrap();
    let tag = harness.step().unwrap().yields[0].0;
    harness.complete(tag, Ok(Payload::new(2u64)));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| harness.step()));
    assert!(caught.is_err());
    // The scope was restored: a call polled now, outside any step, fails instead of touching
    // the state of the step that panicked.
    let mut stray = Call::new(Add(0, 0), None, harness_owner());
    let mut task = Context::from_waker(Waker::noop());
    match Pin::new(&mut stray).poll(&mut task) {
        Poll::Ready(Err(CommandError::OutsideProcess)) => {}
        other => panic!("unexpected {other:?}"),
    }
    drop(harness); // a body poisoned by its panic drops like any other
}

/// A command with a dynamically typed reply.
struct Dynamic;
impl Command for Dynamic {
    type Output = Payload;
}

#[test]
fn a_dynamically_typed_reply_reaches_the_body_as_the_payload_itself() {
    let mut harness = driver(|cx: Cx| async move {
        let reply: Payload = cx.call(Dynamic).await?;
        Ok::<_, BoxError>(reply.take::<u64>()?)
    });
    harness.init("run", Payload::empty()).unwrap();
    let tag = harness.step().unwrap().yields[0].0;
    // What a handler returning `Payload::new(9u64)` delivers (`reply` does not nest payloads).
    harness.complete(tag, Ok(Payload::new(9u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(9)));
}

#[test]
fn completions_arriving_together_out_of_order_and_with_a_message_each_resume_their_call() {
    let mut harness = driver(|cx: Cx<u64>| async move {
        let (a, b) = futures::join!(cx.call(Add(1, 2)), cx.call(Add(3, 4)));
        let n: u64 = cx.recv().await?;
        Ok::<_, BoxError>(a? * 10 + b? + n * 100)
    });
    harness.init("run", Payload::empty()).unwrap();
    let step = harness.step().unwrap();
    let (first, second) = (step.yields[0].0, step.yields[1].0);
    // All in one step: the replies in the opposite order, and a message.
    harness
        .complete(second, Ok(Payload::new(7u64)))
        .send(Message::new("n", Payload::new(5u64)))
        .complete(first, Ok(Payload::new(3u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(537)));
}

/// Polls `future` once, whatever it returns.
async fn poll_once<F: Future + Unpin>(future: &mut F) {
    std::future::poll_fn(|task| {
        let _ = Pin::new(&mut *future).poll(task);
        Poll::Ready(())
    })
    .await;
}

#[test]
fn a_reply_its_call_does_not_take_at_once_is_kept_for_a_later_poll() {
    let mut harness = driver(|cx: Cx<u64>| async move {
        let mut call = cx.call(Add(1, 1));
        poll_once(&mut call).await;
        // Receiving first: the reply arrives while the call is not polled.
        let n: u64 = cx.recv().await?;
        Ok::<_, BoxError>(call.await? + n)
    });
    harness.init("run", Payload::empty()).unwrap();
    let step = harness.step().unwrap();
    assert!(
        matches!(step.status, Status::Wait),
        "the call is outstanding"
    );
    harness.complete(step.yields[0].0, Ok(Payload::new(2u64)));
    assert!(
        matches!(harness.step().unwrap().status, Status::Idle),
        "the call has its reply: only the receive waits"
    );
    harness.send(Message::new("n", Payload::new(40u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(42)));
}

#[test]
fn a_kept_reply_goes_with_its_call_when_the_call_is_dropped() {
    let replies = std::sync::Arc::new(());
    let reply = replies.clone();
    let mut harness = driver(|cx: Cx<u64>| async move {
        let mut call = cx.call(Add(1, 1));
        poll_once(&mut call).await;
        let _: u64 = cx.recv().await?;
        drop(call);
        let _: u64 = cx.recv().await?;
        Ok::<_, BoxError>(())
    });
    harness.init("run", Payload::empty()).unwrap();
    let tag = harness.step().unwrap().yields[0].0;
    harness.complete(tag, Ok(Payload::new(reply)));
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    assert_eq!(std::sync::Arc::strong_count(&replies), 2, "kept");
    harness.send(Message::new("n", Payload::new(0u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    assert_eq!(
        std::sync::Arc::strong_count(&replies),
        1,
        "dropped with its call"
    );
}

#[test]
fn a_body_borrowing_across_an_await_survives_its_harness_being_moved_between_steps() {
    // The body is polled in place (`AsyncFnProcess`'s docs): a harness boxes its process, so
    // moving the harness does not move a body that borrows from itself.
    let harness = driver(|cx: Cx| async move {
        let local = [7u64; 8];
        let borrowed = &local;
        let sum = cx.call(Add(1, 2)).await?;
        Ok::<_, BoxError>(borrowed.iter().sum::<u64>() + sum)
    });
    // First stepped inside one heap allocation, then moved out of it (freeing it) before its
    // second step.
    let mut boxed = Box::new(harness);
    boxed.init("run", Payload::empty()).unwrap();
    let step = boxed.step().unwrap();
    let tag = step.yields[0].0;
    let mut harness = *boxed;
    harness.complete(tag, Ok(Payload::new(3u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(59)));
}

#[test]
fn messages_are_received_in_arrival_order_whether_held_or_queued() {
    // The body is in a call when the first two messages arrive, one per step: the first is the
    // step's lone message (held for a receive, none takes it: it goes to the inbox), the second
    // joins the inbox behind it. Later messages arrive alone while the body receives: each is
    // handed straight to the receive, behind whatever the inbox still holds.
    let mut harness = driver(|cx: Cx<u64>| async move {
        let _ = cx.call(Add(0, 0)).await;
        let mut order = Vec::new();
        for _ in 0..4 {
            order.push(cx.recv().await?);
        }
        Ok::<_, BoxError>(order)
    });
    harness.init("run", Payload::empty()).unwrap();
    let tag = harness.step().unwrap().yields[0].0;
    harness.send(Message::new("n", Payload::new(1u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Wait));
    harness.send(Message::new("n", Payload::new(2u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Wait));
    harness.complete(tag, Ok(Payload::new(0u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    harness.send(Message::new("n", Payload::new(3u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    harness.send(Message::new("n", Payload::new(4u64)));
    match harness.step().unwrap().status {
        Status::Done(order) => assert_eq!(order, [1, 2, 3, 4]),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_batch_of_messages_is_received_in_arrival_order_whether_handed_over_whole_or_filed() {
    // The body is in a call. Three messages arrive in one step behind an empty inbox (the step
    // hands their buffer to the inbox whole), two more in one step while the inbox still holds
    // those (filed behind them one by one), then a message beside the call's completion (a
    // mixed batch: filed one by one). All are received, in arrival order.
    let mut harness = driver(|cx: Cx<u64>| async move {
        let _ = cx.call(Add(0, 0)).await;
        let mut order = Vec::new();
        for _ in 0..6 {
            order.push(cx.recv().await?);
        }
        Ok::<_, BoxError>(order)
    });
    harness.init("run", Payload::empty()).unwrap();
    let tag = harness.step().unwrap().yields[0].0;
    for n in 1..=3u64 {
        harness.send(Message::new("n", Payload::new(n)));
    }
    assert!(matches!(harness.step().unwrap().status, Status::Wait));
    assert_eq!(harness.process.unread_messages(), Some(3));
    harness.send(Message::new("n", Payload::new(4u64)));
    harness.send(Message::new("n", Payload::new(5u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Wait));
    assert_eq!(harness.process.unread_messages(), Some(5));
    harness.send(Message::new("n", Payload::new(6u64)));
    harness.complete(tag, Ok(Payload::new(0u64)));
    match harness.step().unwrap().status {
        Status::Done(order) => assert_eq!(order, [1, 2, 3, 4, 5, 6]),
        other => panic!("unexpected {other:?}"),
    }
}

/// A call and a receive made by one process and awaited in another's body (handed over through
/// a channel): each fails with its typed error there, and the other process's state is
/// untouched — no yield of its own is taken, its message stays for its own receive.
#[test]
fn a_future_awaited_in_another_process_fails_typed_and_leaves_that_process_alone() {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut maker = driver(move |cx: Cx<u8>| async move {
        tx.send((cx.call(Add(1, 1)), cx.recv())).unwrap();
        cx.recv().await?;
        Ok::<(), BoxError>(())
    });
    maker.init("run", Payload::empty()).unwrap();
    assert!(matches!(maker.step().unwrap().status, Status::Idle));
    let mut other = driver(move |cx: Cx<u8>| async move {
        let (call, recv) = rx.recv().unwrap();
        let called = call.await;
        let received = recv.await;
        let own = cx.recv().await?;
        let stray = matches!(called, Err(CommandError::OutsideProcess));
        Ok::<_, BoxError>((stray, received, own))
    });
    other.init("run", Payload::empty()).unwrap();
    other.send(Message::new("mine", Payload::new(9u8)));
    let step = other.step().unwrap();
    assert!(step.yields.is_empty(), "the stray call took no yield");
    let Status::Done((call_failed, received, own)) = step.status else {
        panic!("unexpected {:?}", step.status);
    };
    assert!(call_failed);
    assert_eq!(received, Err(RecvError::OutsideProcess));
    assert_eq!(own, 9, "its own message waited for its own receive");
}

#[test]
fn a_stray_call_fails_with_the_typed_error() {
    let mut stray = Call::new(Add(0, 0), None, harness_owner());
    let polled = Pin::new(&mut stray).poll(&mut Context::from_waker(Waker::noop()));
    assert!(matches!(
        polled,
        Poll::Ready(Err(CommandError::OutsideProcess))
    ));
}
