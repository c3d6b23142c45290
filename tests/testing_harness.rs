//! The test harness (`procsched::testing::Harness`) as a test author meets it: a process that
//! serves asks is stepped with a `Reply` port built around a `oneshot`, and a process that has
//! ended (done, or failed) is not stepped again — every later step is an error, not a panic.

mod support;

use procsched::prelude::*;
use procsched::state_machine::{Events, Process, Status, StepOutput};
use procsched::testing::Harness;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

enum Room {
    Post(String),
    Count(Reply<usize>),
    Close,
}

async fn room(cx: ProcessCx<Room>) -> Result<usize, BoxError> {
    let mut posts = 0;
    loop {
        match cx.recv().await? {
            Room::Post(text) => posts += usize::from(!text.is_empty()),
            Room::Count(reply) => {
                let _ = reply.send(posts);
            }
            Room::Close => return Ok(posts),
        }
    }
}

fn message(room: Room) -> Message {
    Message::new("room", Payload::new(room))
}

#[test]
fn an_ask_is_answered_through_a_port_built_around_a_oneshot() {
    let mut harness = Harness::for_fn(room);
    harness.init("run", Payload::empty()).unwrap();
    let (port, mut answer) = oneshot::channel();
    harness
        .send(message(Room::Post("hi".into())))
        .send(message(Room::Count(port.into())));
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    assert_eq!(answer.try_recv(), Ok(1));

    let (port, mut last) = oneshot::channel();
    harness
        .send(message(Room::Count(port.into())))
        .send(message(Room::Close));
    assert!(matches!(harness.step().unwrap().status, Status::Done(1)));
    assert_eq!(last.try_recv(), Ok(1), "answered before it closed");
}

#[test]
fn an_async_body_that_ended_is_not_stepped_again() {
    let mut harness = Harness::for_fn(room);
    harness.init("run", Payload::empty()).unwrap();
    harness.send(message(Room::Close));
    assert!(matches!(harness.step().unwrap().status, Status::Done(0)));
    for _ in 0..2 {
        let error = harness.step().unwrap_err().to_string();
        assert!(error.contains("ended"), "{error}");
    }

    let mut failing = Harness::for_fn(|cx: ProcessCx<u32>| async move {
        let n = cx.recv().await?;
        Err::<(), BoxError>(format!("refused {n}").into())
    });
    failing.init("run", Payload::empty()).unwrap();
    failing.send(Message::new("n", Payload::new(7u32)));
    assert_eq!(failing.step().unwrap_err().to_string(), "refused 7");
    assert!(failing.step().unwrap_err().to_string().contains("ended"));
}

/// Fails its second step, counting every step it is given.
struct FailsOnce {
    steps: Arc<AtomicU32>,
}

impl Process for FailsOnce {
    type Output = ();
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        if self.steps.fetch_add(1, Ordering::Relaxed) + 1 == 2 {
            return Err("second step".into());
        }
        out.wait();
        Ok(())
    }
}

#[test]
fn a_state_machine_that_failed_is_not_stepped_again() {
    let steps = Arc::new(AtomicU32::new(0));
    let mut harness = Harness::new(FailsOnce {
        steps: steps.clone(),
    });
    harness.init("run", Payload::empty()).unwrap();
    assert!(matches!(harness.step().unwrap().status, Status::Wait));
    assert_eq!(harness.step().unwrap_err().to_string(), "second step");
    assert!(harness.step().unwrap_err().to_string().contains("ended"));
    assert_eq!(
        steps.load(Ordering::Relaxed),
        2,
        "a scheduler would not have stepped it a third time"
    );
}

#[test]
fn a_child_of_the_process_never_shares_its_pid_and_a_send_to_itself_arrives() {
    // The harness's scheduler runs what the process spawns, and holds the process's own entry:
    // the child gets a PID of its own, and what the process sends itself reaches its mailbox,
    // which the next step reads, as on a scheduler.
    let mut harness = Harness::for_fn(|cx: ProcessCx<String>| async move {
        let child = cx.spawn_fn(|c: ProcessCx<String>| async move {
            let note = c.recv().await?;
            Ok::<_, BoxError>(note)
        })?;
        cx.addr().send("a note to myself".to_string())?;
        child.addr().send("for the child".to_string())?;
        let note = cx.recv().await?;
        Ok::<_, BoxError>((cx.pid(), child, note))
    });
    harness.init("run", Payload::empty()).unwrap();
    // The note is in the mailbox, read at the next step (the test steps it).
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    let Status::Done((me, child, note)) = harness.step().unwrap().status else {
        panic!("the second step reads the note")
    };
    assert_eq!(me, harness.pid());
    assert_ne!(child.pid(), me);
    assert_eq!(note, "a note to myself");
    let note = futures::executor::block_on(child).unwrap();
    assert_eq!(note, "for the child", "the child got only its own message");
}

#[test]
fn a_body_whose_step_panicked_is_not_stepped_again() {
    // On a scheduler a panic ends the process: the harness steps it no more either (an
    // `async fn` body could not be resumed anyway).
    let mut harness = Harness::for_fn(|cx: ProcessCx<u8>| async move {
        if cx.recv().await? == 0 {
            panic!("expected panic: told to");
        }
        Ok::<_, BoxError>(())
    });
    harness.init("run", Payload::empty()).unwrap();
    harness.send(Message::new("n", Payload::new(0u8)));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| harness.step()));
    assert!(panicked.is_err());
    harness.send(Message::new("n", Payload::new(1u8)));
    assert!(harness.step().unwrap_err().to_string().contains("panicked"));
}

struct Fetch;
procsched::command!(Fetch => u64);

/// A started harness of a body that calls `Fetch` and returns its answer plus one, stepped to
/// its call; and the call's tag.
fn fetching() -> (
    Harness<procsched::testing::Body<u64>>,
    procsched::state_machine::Tag,
) {
    let mut harness =
        Harness::for_fn(
            |cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(Fetch).await? + 1) },
        );
    harness.init("run", Payload::empty()).unwrap();
    let tag = harness.step().unwrap().yields[0].0;
    (harness, tag)
}

#[test]
fn a_refused_second_init_leaves_the_started_body_as_it_was() {
    let (mut harness, tag) = fetching();
    let refused = harness.init("run", Payload::empty()).unwrap_err();
    assert!(refused.to_string().contains("already started"), "{refused}");
    harness.complete(tag, Ok(Payload::new(41u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(42)));
}

#[test]
fn a_completion_no_yield_waits_on_is_a_script_error() {
    use procsched::testing::ScriptError;
    let (mut harness, tag) = fetching();
    let script_error = |error: BoxError| error.downcast::<ScriptError>().map(|e| *e).ok();

    harness.complete(tag + 41, Ok(Payload::new(1u64)));
    let unknown = harness.step().unwrap_err();
    assert_eq!(
        script_error(unknown),
        Some(ScriptError::NotYielded(tag + 41))
    );

    harness
        .complete(tag, Ok(Payload::new(41u64)))
        .complete(tag, Ok(Payload::new(99u64)));
    let twice = harness.step().unwrap_err();
    assert_eq!(script_error(twice), Some(ScriptError::NotYielded(tag)));
    // The first completion stayed queued: the body gets it.
    assert!(matches!(harness.step().unwrap().status, Status::Done(42)));
}

#[test]
fn a_body_awaiting_a_tokio_timer_fails_its_step_outside_any_runtime() {
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "a plain test"
    );
    let mut harness = Harness::for_fn(|_: ProcessCx| async move {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        Ok::<_, BoxError>(())
    });
    harness.init("run", Payload::empty()).unwrap();
    let error = harness.step().unwrap_err().to_string();
    assert!(error.contains("nothing wakes it"), "{error}");
}

/// Counts its `init`s and the messages its steps saw.
struct Tally {
    inits: Arc<AtomicU32>,
    seen: usize,
}

impl Process for Tally {
    type Output = usize;

    fn init(
        &mut self,
        _: &procsched::state_machine::ProcessContext<'_>,
        _: &str,
        _: Payload,
    ) -> Result<(), procsched::error::InitError> {
        self.inits.fetch_add(1, Ordering::Relaxed);
        self.seen = 0;
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<usize>) -> Result<(), BoxError> {
        self.seen += events.drain().count();
        match self.seen {
            2.. => out.done(self.seen),
            _ => out.idle(),
        }
        Ok(())
    }
}

/// A scheduler steps a process only after its `init`, and runs `init` once: the harness
/// refuses a script that does otherwise, and leaves the state machine as it was.
#[test]
fn a_state_machine_is_not_stepped_before_init_nor_initialised_twice() {
    let inits = Arc::new(AtomicU32::new(0));
    let mut harness = Harness::new(Tally {
        inits: inits.clone(),
        seen: 0,
    });
    harness.send(Message::new("tick", Payload::empty()));
    let early = harness.step().unwrap_err();
    assert!(early.to_string().contains("call `init` first"), "{early}");

    harness.init("run", Payload::empty()).unwrap();
    // The message scripted before `init` waits for the first step.
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    let again = harness.init("run", Payload::empty()).unwrap_err();
    assert!(again.to_string().contains("already started"), "{again}");
    assert_eq!(
        inits.load(Ordering::Relaxed),
        1,
        "the second init did not run"
    );
    harness.send(Message::new("tick", Payload::empty()));
    assert!(matches!(harness.step().unwrap().status, Status::Done(2)));
}

#[test]
fn a_call_completed_with_the_wrong_type_is_a_script_error_and_the_call_still_waits() {
    use procsched::testing::ScriptError;
    let (mut harness, tag) = fetching();
    let script_error = |error: BoxError| error.downcast::<ScriptError>().map(|e| *e).ok();

    // `Fetch`'s output is a `u64`: an `i32` would reach the body as a handler's failure.
    harness.complete(tag, Ok(Payload::new(41i32)));
    assert!(matches!(
        script_error(harness.step().unwrap_err()),
        Some(ScriptError::WrongType { tag: t, expected: "u64", actual: "i32" }) if t == tag
    ));
    // Refused, nothing queued: the call still waits, for a completion of its type or an error.
    harness.complete(tag, Ok(Payload::new(41u64)));
    assert!(matches!(harness.step().unwrap().status, Status::Done(42)));
}

#[test]
fn the_first_of_two_refused_completions_is_the_one_reported() {
    use procsched::testing::ScriptError;
    let (mut harness, tag) = fetching();
    harness
        .complete(tag + 7, Ok(Payload::new(1u64)))
        .complete(tag + 8, Ok(Payload::new(1u64)));
    let refused = harness.step().unwrap_err();
    assert_eq!(
        refused.downcast::<ScriptError>().map(|e| *e).ok(),
        Some(ScriptError::NotYielded(tag + 7))
    );
}

#[test]
fn a_body_awaiting_cx_run_fails_its_step_with_an_error_naming_it() {
    let mut harness =
        Harness::for_fn(
            |cx: ProcessCx| async move { Ok::<_, BoxError>(cx.run(async { 5 }).await?) },
        );
    harness.init("run", Payload::empty()).unwrap();
    let error = harness.step().unwrap_err().to_string();
    assert!(error.contains("`cx.run`"), "{error}");
}

/// Panics when dropped (a payload whose destructor panics).
struct Grenade;

impl Drop for Grenade {
    fn drop(&mut self) {
        panic!("{}: a destructor the harness runs", support::EXPECTED_PANIC);
    }
}

#[test]
fn destructors_that_panic_are_contained_by_the_harness_as_by_a_scheduler() {
    // A scheduler drops a step's unread messages and a `Done` step's yields each inside its
    // own `catch_unwind`; the harness does too, so a test sees the outcome a scheduler gives.
    support::quiet_panics();
    struct Reader {
        steps: u32,
    }
    impl Process for Reader {
        type Output = u32;
        fn step(&mut self, _: &mut Events, out: &mut StepOutput<u32>) -> Result<(), BoxError> {
            // Reads nothing: the grenade is left for the harness to drop.
            self.steps += 1;
            if self.steps == 2 {
                out.yield_command(1, Grenade);
                out.done(self.steps);
            } else {
                out.idle();
            }
            Ok(())
        }
    }
    let mut harness = Harness::new(Reader { steps: 0 });
    harness.init("run", Payload::empty()).unwrap();
    harness.send_typed(Grenade);
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    assert!(matches!(harness.step().unwrap().status, Status::Done(2)));
}

/// An error whose `Display` panics.
#[derive(Debug)]
struct Unprintable;

impl std::fmt::Display for Unprintable {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        panic!("{}: a Display the harness runs", support::EXPECTED_PANIC);
    }
}

impl std::error::Error for Unprintable {}

#[test]
fn a_step_error_whose_display_panics_is_the_steps_error_as_on_a_scheduler() {
    // The exit reason its links and monitors hear holds the error's text: formatted
    // contained, the placeholder in its place, never a panic into the test.
    support::quiet_panics();
    struct Failing;
    impl Process for Failing {
        type Output = ();
        fn step(&mut self, _: &mut Events, _: &mut StepOutput<()>) -> Result<(), BoxError> {
            Err(Box::new(Unprintable))
        }
    }
    let mut harness = Harness::new(Failing);
    harness.init("run", Payload::empty()).unwrap();
    let error = harness.step().unwrap_err();
    assert!(error.is::<Unprintable>(), "the step's own error");
    assert!(harness.step().is_err(), "ended: not stepped again");
}

/// Yields `Work` twice under one tag, then finishes with both completions' values.
struct TwoUnderOneTag {
    started: bool,
    got: Vec<u64>,
}

struct Work;
procsched::command!(Work => u64);

impl Process for TwoUnderOneTag {
    type Output = Vec<u64>;
    fn step(
        &mut self,
        events: &mut Events,
        out: &mut StepOutput<Vec<u64>>,
    ) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.yield_command(5, Work);
            out.yield_command(5, Work);
            out.wait();
            return Ok(());
        }
        for event in events.drain() {
            if let procsched::state_machine::Event::YieldComplete { tag: 5, result } = event {
                self.got.push(result?.take::<u64>()?);
            }
        }
        if self.got.len() == 2 {
            out.done(std::mem::take(&mut self.got));
        } else {
            out.wait();
        }
        Ok(())
    }
}

#[test]
fn two_yields_under_one_tag_are_completed_twice_as_on_a_scheduler() {
    // A scheduler completes each (the docs of `Tag`); the harness refused the second
    // completion (`NotYielded`), so a test could not script what production does.
    let mut harness = Harness::new(TwoUnderOneTag {
        started: false,
        got: Vec::new(),
    });
    harness.init("run", Payload::empty()).unwrap();
    let step = harness.step().unwrap();
    assert_eq!(step.yields.iter().map(|y| y.0).collect::<Vec<_>>(), [5, 5]);
    harness.complete(5, Ok(Payload::new(1u64)));
    harness.complete(5, Ok(Payload::new(2u64)));
    let step = harness.step().unwrap();
    assert!(
        matches!(step.status, Status::Done(ref got) if got == &[1, 2]),
        "{:?}",
        step.status
    );
    // A third completion of that tag was never yielded.
    let mut harness = Harness::new(TwoUnderOneTag {
        started: false,
        got: Vec::new(),
    });
    harness.init("run", Payload::empty()).unwrap();
    harness.step().unwrap();
    harness.complete(5, Ok(Payload::new(1u64)));
    harness.complete(5, Ok(Payload::new(2u64)));
    harness.complete(5, Ok(Payload::new(3u64)));
    assert!(
        harness.step().is_err(),
        "a completion nothing waits for is refused"
    );
}
