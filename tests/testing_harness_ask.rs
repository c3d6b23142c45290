//! Asks awaited in a body under `testing::Harness`: each is a scripted yield, like a call — the
//! step reports its request and target (`Step::asks`), the process waits, and the test answers
//! it (through the request's port, or with `Harness::reply` / `time_out` / `complete`); the
//! next step resumes the body with the answer, or with the typed `AskError`. A body that awaits
//! a future nothing can wake under a harness (a child's `ProcessHandle`) fails its step with
//! an error that says so.

use procsched::error::{AskError, CommandError};
use procsched::prelude::*;
use procsched::state_machine::Status;
use procsched::testing::{Body, Harness, ScriptError};
use std::time::Duration;

type Double = (u64, Reply<u64>);

/// Steps `harness` and asserts the body ended with a result matching the pattern.
macro_rules! assert_done {
    ($harness:expr, $result:pat) => {
        let done = $harness.step().unwrap();
        assert!(
            matches!(done.status, Status::Done($result)),
            "{:?}",
            done.status
        );
    };
}

/// Under test: receives a doubler's address, asks it to double 21 (within `timeout`, if
/// any), and returns what the ask gave, error included.
fn asker(timeout: Option<Duration>) -> Harness<Body<Result<u64, AskError>>> {
    Harness::for_fn(move |cx: ProcessCx<Addr<Double>>| async move {
        let doubler = cx.recv().await?;
        let answer = match timeout {
            Some(timeout) => doubler.ask_within(timeout, |reply| (21, reply)).await,
            None => doubler.ask(|reply| (21, reply)).await,
        };
        Ok::<_, BoxError>(answer)
    })
}

/// A PID the harness's scheduler has not issued: nothing is sent to it under a harness.
fn doubler_pid() -> Pid {
    Pid::from_raw(1 << 26 | 3).expect("non-zero")
}

/// Starts `harness` and hands it the doubler's address; returns the step that sent the ask.
fn step_to_the_ask(
    harness: &mut Harness<Body<Result<u64, AskError>>>,
) -> procsched::testing::Step<Result<u64, AskError>> {
    harness.init("run", Payload::empty()).unwrap();
    let sched = harness.scheduler().expect("built by init");
    let doubler = sched.addr::<Double>(doubler_pid());
    harness.send(Message::new("doubler", Payload::new(doubler)));
    let step = harness.step().expect("the ask is a yield, not an error");
    assert!(matches!(step.status, Status::Wait), "{:?}", step.status);
    assert!(step.yields.is_empty(), "an ask is not a call's yield");
    assert_eq!(step.asks.len(), 1);
    step
}

#[test]
fn an_ask_is_reported_with_its_request_and_target_and_a_scripted_reply_resumes_the_body() {
    let mut harness = asker(None);
    let step = step_to_the_ask(&mut harness);
    let asked = &step.asks[0];
    assert_eq!(asked.to, doubler_pid());
    assert_eq!(asked.timeout, None);
    let request = asked.request.downcast_ref::<Double>().expect("the request");
    assert_eq!(request.0, 21);

    harness.reply(asked.tag, 42u64).unwrap();
    assert_done!(harness, Ok(42));
    // The port in the request the test still holds answers no one: handed back.
    let (_, port) = step
        .asks
        .into_iter()
        .next()
        .unwrap()
        .request
        .take::<Double>()
        .unwrap();
    assert_eq!(port.send(7), Err(7));
}

#[test]
fn an_ask_is_answered_by_a_responder_the_test_steps_itself() {
    let mut harness = asker(None);
    let mut step = step_to_the_ask(&mut harness);
    let asked = step.asks.pop().unwrap();

    // The process asked, under a harness of its own: the request is delivered to it by hand.
    let mut doubler = Harness::for_fn(|cx: ProcessCx<Double>| async move {
        let (n, reply) = cx.recv().await?;
        Ok::<_, BoxError>(reply.send(n * 2).is_ok())
    });
    doubler.init("run", Payload::empty()).unwrap();
    doubler.send(Message::new("double", asked.request));
    assert!(matches!(doubler.step().unwrap().status, Status::Done(true)));

    assert_done!(harness, Ok(42));
}

#[test]
fn a_dropped_reply_port_fails_the_ask_with_no_reply() {
    let mut harness = asker(None);
    let mut step = step_to_the_ask(&mut harness);
    // As the asked process dropping the port unanswered.
    drop(step.asks.pop().unwrap().request);
    assert_done!(harness, Err(AskError::NoReply));
}

#[test]
fn a_script_does_not_replace_an_answer_given_through_the_port() {
    let mut harness = asker(None);
    let mut step = step_to_the_ask(&mut harness);
    let asked = step.asks.pop().unwrap();
    let (n, port) = asked.request.take::<Double>().unwrap();
    port.send(n * 2).unwrap();
    // Answered already: a script is refused, by tag or as a completion, and the port's answer
    // is the one the body gets.
    assert_eq!(
        harness.reply(asked.tag, 8u64).unwrap_err(),
        ScriptError::NotAsked(asked.tag)
    );
    harness.complete(asked.tag, Ok(Payload::new(8u64)));
    assert_eq!(
        harness.step().unwrap_err().to_string(),
        ScriptError::NotYielded(asked.tag).to_string()
    );
    assert_done!(harness, Ok(42));
}

#[test]
fn a_scripted_error_completion_fails_the_ask_with_no_reply() {
    let mut harness = asker(None);
    let step = step_to_the_ask(&mut harness);
    harness.complete(step.asks[0].tag, Err(CommandError::Cancelled));
    assert_done!(harness, Err(AskError::NoReply));
}

#[test]
fn a_wrongly_typed_answer_is_refused_and_the_ask_still_waits() {
    let mut harness = asker(None);
    let step = step_to_the_ask(&mut harness);
    let tag = step.asks[0].tag;
    assert!(matches!(
        harness.reply(tag, "42"),
        Err(ScriptError::WrongType { expected, actual, .. })
            if expected == "u64" && actual == "&str"
    ));
    assert!(matches!(
        harness.reply(tag + 1, 42u64),
        Err(ScriptError::NotAsked(_))
    ));
    // `complete` refuses it too: the next step says so, without stepping the process.
    harness.complete(tag, Ok(Payload::new(42u32)));
    let refused = harness.step().unwrap_err();
    assert!(
        refused.to_string().contains("waits for a `u64`"),
        "{refused}"
    );

    harness.complete(tag, Ok(Payload::new(42u64)));
    assert_done!(harness, Ok(42));
}

#[test]
fn a_timed_ask_times_out_when_the_test_says_so() {
    let mut harness = asker(Some(Duration::from_millis(1)));
    let step = step_to_the_ask(&mut harness);
    let asked = &step.asks[0];
    assert_eq!(asked.timeout, Some(Duration::from_millis(1)));
    // The clock does not run out an ask under a harness: only the script does.
    harness.push(procsched::state_machine::Event::Woken);
    assert!(matches!(harness.step().unwrap().status, Status::Wait));

    harness.time_out(asked.tag).unwrap();
    assert_done!(harness, Err(AskError::TimedOut));
}

#[test]
fn a_timed_ask_answered_in_time_gives_the_answer() {
    let mut harness = asker(Some(Duration::from_secs(5)));
    let step = step_to_the_ask(&mut harness);
    harness.reply(step.asks[0].tag, 42u64).unwrap();
    assert_done!(harness, Ok(42));
}

#[test]
fn an_ask_without_timeout_cannot_be_timed_out() {
    let mut harness = asker(None);
    let step = step_to_the_ask(&mut harness);
    let tag = step.asks[0].tag;
    assert_eq!(
        harness.time_out(tag).unwrap_err(),
        ScriptError::NoTimeout(tag)
    );
    harness.reply(tag, 42u64).unwrap();
    assert!(matches!(
        harness.step().unwrap().status,
        Status::Done(Ok(42))
    ));
}

#[test]
fn an_ask_without_timeout_cannot_be_completed_as_timed_out_either() {
    // `complete(tag, Err(TimedOut))` is how a call's timeout is scripted; for an ask made with
    // `ask` it was taken, and the body got a `TimedOut` no scheduler gives it.
    let mut harness = asker(None);
    let step = step_to_the_ask(&mut harness);
    let tag = step.asks[0].tag;
    harness.complete(tag, Err(CommandError::TimedOut));
    let refused = harness.step().unwrap_err().to_string();
    assert!(
        refused.contains(&ScriptError::NoTimeout(tag).to_string()),
        "{refused}"
    );
    harness.reply(tag, 42u64).unwrap();
    assert!(matches!(
        harness.step().unwrap().status,
        Status::Done(Ok(42))
    ));
}

#[test]
fn a_body_asking_itself_is_refused_as_on_a_scheduler() {
    let mut harness = Harness::for_fn(|cx: ProcessCx<Double>| async move {
        Ok::<_, BoxError>(cx.addr().ask(|reply| (1, reply)).await)
    });
    harness.init("run", Payload::empty()).unwrap();
    let step = harness.step().unwrap();
    assert!(step.asks.is_empty());
    assert!(
        matches!(step.status, Status::Done(Err(AskError::AskedItself))),
        "{:?}",
        step.status
    );
}

#[test]
fn awaiting_a_childs_handle_fails_the_step_saying_what_to_do_instead() {
    let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
        let child = cx
            .scheduler()
            .spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(1u8) })?;
        Ok::<_, BoxError>(child.await?)
    });
    harness.init("run", Payload::empty()).unwrap();
    let error = harness.step().unwrap_err().to_string();
    assert!(error.contains("`ProcessHandle`"), "{error}");
    assert!(error.contains("`testing::Harness`"), "{error}");
    assert!(error.contains("`Harness::send`"), "{error}");
    assert!(harness
        .step()
        .unwrap_err()
        .to_string()
        .contains("has ended"));
}

#[test]
fn a_harness_of_a_body_that_asks_can_move_to_another_thread() {
    fn assert_send<T: Send>(_: &T) {}
    let mut harness = asker(None);
    let step = step_to_the_ask(&mut harness);
    assert_send(&harness);
    assert_send(&step);
    let tag = step.asks[0].tag;
    let done = std::thread::spawn(move || {
        harness.reply(tag, 42u64).unwrap();
        harness
            .step()
            .map(|step| matches!(step.status, Status::Done(Ok(42))))
    });
    assert!(done.join().unwrap().unwrap());
}

#[test]
fn a_script_answers_an_ask_whose_port_went_with_a_dropped_step() {
    // Each script, on an ask whose `Step` (and with it the request's port) the test let go.
    type Script = fn(&mut Harness<Body<Result<u64, AskError>>>, u64);
    type Expected = fn(&Result<u64, AskError>) -> bool;
    let scripts: [(Script, Expected); 3] = [
        (
            |harness, tag| {
                harness.reply(tag, 42u64).unwrap();
            },
            |answer| matches!(answer, Ok(42)),
        ),
        (
            |harness, tag| {
                harness.time_out(tag).unwrap();
            },
            |answer| matches!(answer, Err(AskError::TimedOut)),
        ),
        (
            |harness, tag| {
                harness.complete(tag, Ok(Payload::new(8u64)));
            },
            |answer| matches!(answer, Ok(8)),
        ),
    ];
    for (script, expected) in scripts {
        let mut harness = asker(Some(Duration::from_secs(5)));
        let tag = step_to_the_ask(&mut harness).asks[0].tag; // the step is dropped here
        script(&mut harness, tag);
        let done = harness.step().unwrap();
        let Status::Done(answer) = &done.status else {
            panic!("{:?}", done.status)
        };
        assert!(expected(answer), "{answer:?}");
    }
    // Unscripted, the dropped port is the answer: `NoReply`.
    let mut harness = asker(None);
    drop(step_to_the_ask(&mut harness));
    assert_done!(harness, Err(AskError::NoReply));
}
