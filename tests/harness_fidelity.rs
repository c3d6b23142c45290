//! `testing::Harness` behaves as the scheduler does: its process is an entry of its scheduler's
//! table, so PIDs are its own, supervision (links, monitors, `trap_exit`, names) works, and what
//! is sent to it — messages, exit signals, `Down`s — reaches its next step; its end is heard
//! by its links and monitors. Also: a `Done` step's yields are dropped; a body that keeps a
//! `FuturesUnordered` beside its receive waits for the receive (a combinator's clone of its
//! waker is not a foreign future), and one awaiting nothing but a foreign future fails its step.

use procsched::error::InitError;
use procsched::error::{ProcessError, RecvError};
use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, ProcessContext, Status, StepOutput};
use procsched::supervision::ExitReason;
use procsched::testing::Harness;
use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

/// Waits for `future`, the deadline a hang guard only.
fn wait<F: Future>(what: &str, future: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), future).await })
        .unwrap_or_else(|_| panic!("hang guard: {what}"))
}

/// A child that waits for one message, then fails.
async fn fails_when_told(cx: ProcessCx<()>) -> Result<(), BoxError> {
    cx.recv().await?;
    Err("crash".into())
}

enum Query {
    Get(Reply<u32>),
}

async fn server(cx: ProcessCx<Query>) -> Result<(), BoxError> {
    loop {
        match cx.recv().await? {
            Query::Get(reply) => {
                let _ = reply.send(42);
            }
        }
    }
}

async fn client(cx: ProcessCx<Addr<Query>>) -> Result<u32, BoxError> {
    let server = cx.recv().await?;
    Ok(server.ask(Query::Get).await?)
}

#[test]
fn two_harnessed_processes_have_their_own_pids_and_can_ask_each_other() {
    let mut srv = Harness::for_fn(server);
    srv.init("run", Payload::empty()).unwrap();
    let mut cli = Harness::for_fn(client);
    cli.init("run", Payload::empty()).unwrap();
    assert_ne!(srv.pid(), cli.pid());

    let to_server = cli.scheduler().unwrap().addr::<Query>(srv.pid());
    cli.send_typed(to_server);
    let mut step = cli.step().unwrap();
    assert!(matches!(step.status, Status::Wait), "{:?}", step.status);
    let asked = step.asks.pop().expect("the client asked");
    assert_eq!(asked.to, srv.pid());
    // The test hands the request to the server, which it steps itself.
    srv.send(Message::new("query", asked.request));
    assert!(matches!(srv.step().unwrap().status, Status::Idle));
    assert!(matches!(cli.step().unwrap().status, Status::Done(42)));
}

#[test]
fn a_linked_childs_crash_ends_the_process_at_its_next_step() {
    let (handles, child_handle) = mpsc::channel();
    let mut harness = Harness::for_fn(move |cx: ProcessCx<()>| async move {
        let child = cx.scheduler().spawn_fn_linked(cx.pid(), fails_when_told)?;
        handles.send(child)?;
        cx.recv().await?;
        Ok::<_, BoxError>("survived")
    });
    harness.init("run", Payload::empty()).unwrap();
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    let child = child_handle.recv().unwrap();
    child.addr().send(()).unwrap();
    // Its handle resolves after its links were signalled.
    let crashed = wait("the child's end", child).unwrap_err();
    assert!(
        crashed.exit_reason().is_failed(),
        "{crashed}: not killed at its spawn"
    );

    let error = harness.step().unwrap_err();
    let error = error
        .downcast_ref::<ProcessError>()
        .expect("a process error");
    assert!(error.exit_reason().is_failed(), "{error}");
    assert!(harness.step().is_err(), "ended");
}

#[test]
fn a_process_that_traps_exits_receives_its_linked_childs_exit() {
    let (handles, child_handle) = mpsc::channel();
    let mut harness = Harness::for_fn(move |cx: ProcessCx<()>| async move {
        cx.trap_exit(true);
        let child = cx.scheduler().spawn_fn_linked(cx.pid(), fails_when_told)?;
        let pid = child.pid();
        handles.send(child)?;
        let exit = cx.recv_exit().await?;
        Ok::<_, BoxError>((exit.pid == pid, exit.reason.is_failed()))
    });
    harness.init("run", Payload::empty()).unwrap();
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    let child = child_handle.recv().unwrap();
    child.addr().send(()).unwrap();
    let crashed = wait("the child's end", child).unwrap_err();
    assert!(
        crashed.exit_reason().is_failed(),
        "{crashed}: not killed at its spawn"
    );
    let status = harness.step().unwrap().status;
    assert!(matches!(status, Status::Done((true, true))), "{status:?}");
}

#[test]
fn a_name_a_monitor_and_a_link_on_the_harnessed_process_work_as_on_a_scheduler() {
    let (handles, child_handle) = mpsc::channel();
    let mut harness = Harness::for_fn(move |cx: ProcessCx<u8>| async move {
        cx.register("svc")?;
        // A child that waits for ever: only a linked process's end stops it.
        let child = cx
            .scheduler()
            .spawn_fn_linked(cx.pid(), |c: ProcessCx<()>| async move {
                c.recv().await?;
                Ok::<_, BoxError>(())
            })?;
        handles.send(child)?;
        match cx.recv().await? {
            0 => Ok::<_, BoxError>(()),
            n => Err(format!("told to fail: {n}").into()),
        }
    });
    harness.init("run", Payload::empty()).unwrap();
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    let sched = harness.scheduler().unwrap();
    assert_eq!(sched.whereis("svc"), Some(harness.pid()));
    let monitor = sched.monitor(harness.pid());
    let child = child_handle.recv().unwrap();

    harness.send_typed(7u8);
    assert_eq!(harness.step().unwrap_err().to_string(), "told to fail: 7");
    let down = wait("the harnessed process's Down", monitor);
    assert!(down.reason.is_failed(), "{:?}", down.reason);
    assert_eq!(sched.whereis("svc"), None, "released with its end");
    let ended = wait("the linked child's end", child).unwrap_err();
    assert!(ended.exit_reason().is_failed(), "{ended}");
}

#[test]
fn a_monitor_of_a_gone_process_gets_its_down_at_the_next_step() {
    let mut harness = Harness::for_fn(|cx: ProcessCx<()>| async move {
        let gone = Pid::from_raw(1 << 26 | 5).ok_or("a pid")?;
        let monitor = cx.monitor(gone);
        let down = cx.recv_down().await?;
        Ok::<_, BoxError>(down.monitor == monitor && down.reason.is_no_proc())
    });
    harness.init("run", Payload::empty()).unwrap();
    assert!(matches!(harness.step().unwrap().status, Status::Idle));
    assert!(matches!(harness.step().unwrap().status, Status::Done(true)));
}

/// Traps exits from `init`, as a supervising state machine does.
struct TrapsInInit;

impl Process for TrapsInInit {
    type Output = ();
    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        ctx.scheduler()
            .set_trap_exit(ctx.pid(), true)
            .map_err(InitError::failed)
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        out.done(());
        Ok(())
    }
}

#[test]
fn a_state_machine_may_trap_exits_in_its_init() {
    let mut harness = Harness::new(TrapsInInit);
    harness.init("run", Payload::empty()).unwrap();
    assert!(matches!(harness.step().unwrap().status, Status::Done(())));
}

#[test]
fn a_cancellation_propagated_with_a_question_mark_ends_the_process_shutdown() {
    let mut harness = Harness::for_fn(|cx: ProcessCx<()>| async move {
        cx.recv().await?;
        Ok::<_, BoxError>(())
    });
    harness.init("run", Payload::empty()).unwrap();
    let monitor = harness.scheduler().unwrap().monitor(harness.pid());
    harness.cancel();
    let error = harness.step().unwrap_err();
    assert!(matches!(
        error.downcast_ref::<RecvError>(),
        Some(RecvError::Cancelled(_))
    ));
    let down = wait("the Down", monitor);
    assert!(
        matches!(down.reason, ExitReason::Shutdown),
        "{:?}",
        down.reason
    );
}

#[test]
fn a_process_that_ends_well_after_its_cancel_ends_shutdown_and_one_never_asked_normal() {
    // As on a scheduler: asked to finish, it heard it and did (`Shutdown`) — the cancel pushed
    // by the test or sent through the harness's scheduler; finished on its own, `Normal`.
    for how in ["pushed", "sent", "never"] {
        let mut harness = Harness::for_fn(|cx: ProcessCx<()>| async move {
            let _ = cx.recv_any().await;
            Ok::<_, BoxError>(())
        });
        harness.init("run", Payload::empty()).unwrap();
        let sched = harness.scheduler().unwrap();
        let monitor = sched.monitor(harness.pid());
        match how {
            "pushed" => {
                harness.cancel();
            }
            "sent" => sched.cancel(harness.pid()).unwrap(),
            _ => {
                harness.send_typed(());
            }
        }
        assert!(matches!(harness.step().unwrap().status, Status::Done(())));
        let down = wait("the Down", monitor);
        let asked = how != "never";
        assert_eq!(down.reason.is_shutdown(), asked, "{how}: {:?}", down.reason);
        assert_eq!(down.reason.is_normal(), !asked, "{how}: {:?}", down.reason);
    }
}

/// Waits; finishes (`Done`) on its cancel, then panics in `close`.
struct DoneOnCancelThenClosePanics;

impl Process for DoneOnCancelThenClosePanics {
    type Output = ();
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        if events
            .drain()
            .any(|event| matches!(event, Event::Cancel { .. }))
        {
            out.done(());
        } else {
            out.idle();
        }
        Ok(())
    }
    fn close(&mut self) {
        panic!("boom");
    }
}

#[test]
fn a_close_panic_after_a_cancel_reads_as_on_a_scheduler() {
    // Ended well on its cancel, then `close` panicked: the same reason on both.
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let process = sched
        .spawn(DoneOnCancelThenClosePanics, "run", Payload::empty())
        .unwrap();
    let down = sched.monitor(process.pid());
    sched.cancel(process.pid()).unwrap();
    let _ = sched.block_on(process);
    let on_scheduler = sched.block_on(down).reason;

    let mut harness = Harness::new(DoneOnCancelThenClosePanics);
    harness.init("run", Payload::empty()).unwrap();
    let monitor = harness.scheduler().unwrap().monitor(harness.pid());
    harness.cancel();
    let _ = harness.step();
    let harnessed = wait("the Down", monitor).reason;
    assert!(on_scheduler.is_panicked(), "{on_scheduler:?}");
    assert_eq!(harnessed.to_string(), on_scheduler.to_string());
}

struct Note;
procsched::command!(Note => ());

/// Yields a command and returns `Done` in the same step.
struct DoneWithYields;

impl Process for DoneWithYields {
    type Output = u8;
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<u8>) -> Result<(), BoxError> {
        out.yield_command(1, Note);
        out.done(1);
        Ok(())
    }
}

#[test]
fn the_yields_of_a_done_step_are_dropped() {
    let mut harness = Harness::new(DoneWithYields);
    harness.init("run", Payload::empty()).unwrap();
    let step = harness.step().unwrap();
    assert!(matches!(step.status, Status::Done(1)));
    assert!(step.yields.is_empty(), "a scheduler drops them");
}

#[test]
fn a_foreign_future_awaited_alone_fails_the_step() {
    let (_keep, never) = tokio::sync::oneshot::channel::<u32>();
    let mut harness =
        Harness::for_fn(move |_: ProcessCx| async move { Ok::<_, BoxError>(never.await.is_ok()) });
    harness.init("run", Payload::empty()).unwrap();
    let error = harness.step().unwrap_err().to_string();
    assert!(error.contains("not procsched's own"), "{error}");
}

struct Price;
procsched::command!(Price => u32);

#[test]
fn a_body_keeping_a_futures_unordered_beside_its_receive_waits_for_the_receive() {
    use futures::stream::{FuturesUnordered, StreamExt};
    // The usual actor loop: calls in flight in a FuturesUnordered (empty at first, which keeps
    // the body's waker all the same), messages received beside it.
    let mut harness = Harness::for_fn(|cx: ProcessCx<u32>| async move {
        let mut in_flight = FuturesUnordered::new();
        let mut priced = 0;
        loop {
            tokio::select! {
                Some(price) = in_flight.next() => {
                    let price: Result<u32, _> = price;
                    priced += price?;
                    if priced >= 10 {
                        return Ok::<_, BoxError>(priced);
                    }
                }
                message = cx.recv() => {
                    message?;
                    in_flight.push(cx.call(Price));
                }
            }
        }
    });
    harness.init("run", Payload::empty()).unwrap();
    let first = harness.step().unwrap();
    assert!(matches!(first.status, Status::Idle), "{:?}", first.status);
    harness.send_typed(1u32);
    let second = harness.step().unwrap();
    assert_eq!(second.yields.len(), 1, "the call was made");
    let (tag, _) = &second.yields[0];
    harness.complete(*tag, Ok(Payload::new(10u32)));
    let third = harness.step().unwrap();
    assert!(
        matches!(third.status, Status::Done(_)),
        "{:?}",
        third.status
    );
}

/// Records its `close` (and panics in it when told), and finishes at its first step.
struct ClosesLoudly {
    closed: mpsc::Sender<&'static str>,
    panics: bool,
}

impl Process for ClosesLoudly {
    type Output = ();
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        out.done(());
        Ok(())
    }
    fn close(&mut self) {
        let _ = self.closed.send("close ran");
        if self.panics {
            panic!("close boom");
        }
    }
}

#[test]
fn a_step_that_ends_the_process_runs_close_before_its_monitors_hear_the_end() {
    for panics in [false, true] {
        let (closed_tx, closed) = mpsc::channel();
        let mut harness = Harness::new(ClosesLoudly {
            closed: closed_tx,
            panics,
        });
        harness.init("run", Payload::empty()).unwrap();
        let monitor = harness.scheduler().unwrap().monitor(harness.pid());
        assert!(matches!(harness.step().unwrap().status, Status::Done(())));
        // As on a scheduler: `close` ran within the step that ended the process, before the
        // `Down` was sent, and a panic in it is what the monitor hears.
        assert_eq!(closed.try_recv(), Ok("close ran"));
        let down = wait("the Down", monitor);
        if panics {
            assert!(
                matches!(&down.reason, ExitReason::Panicked(message) if message.contains("in close: close boom")),
                "{:?}",
                down.reason
            );
        } else {
            assert!(
                matches!(down.reason, ExitReason::Normal),
                "{:?}",
                down.reason
            );
        }
        // Once: neither `close()` nor the drop runs it again (nor panics).
        harness.close();
        drop(harness);
        assert!(closed.try_recv().is_err());
    }
}

/// Registers a name and is then refused by its own `init`.
struct RefusedAfterRegistering;

impl Process for RefusedAfterRegistering {
    type Output = ();
    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        ctx.scheduler()
            .register("refused", ctx.pid())
            .map_err(InitError::failed)?;
        Err(InitError::failed("nope"))
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        out.done(());
        Ok(())
    }
}

#[test]
fn a_process_whose_init_fails_never_lived_its_name_released() {
    let mut harness = Harness::new(RefusedAfterRegistering);
    assert!(harness.init("run", Payload::empty()).is_err());
    let sched = harness.scheduler().unwrap().clone();
    assert_eq!(
        sched.whereis("refused"),
        None,
        "released, as a failed spawn's"
    );
    let down = wait("the Down", sched.monitor(harness.pid()));
    assert!(down.reason.is_no_proc(), "{:?}", down.reason);
    assert!(
        harness.step().is_err(),
        "a process whose init failed never steps"
    );
}

#[test]
fn a_harnessed_process_pid_is_not_one_a_real_scheduler_issues() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let real = sched
        .spawn_fn(|cx: ProcessCx<u32>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    let mut harness =
        Harness::for_fn(|cx: ProcessCx<u32>| async move { Ok::<_, BoxError>(cx.recv().await?) });
    harness.init("run", Payload::empty()).unwrap();
    assert_ne!(harness.pid(), real.pid());
    // Sent to the real scheduler, the harnessed process's PID reaches no stranger.
    let refused = sched
        .handle()
        .addr::<u32>(harness.pid())
        .send(7)
        .unwrap_err();
    assert!(refused.is_not_found(), "{refused:?}");
    real.addr().send(1).unwrap();
    assert_eq!(sched.block_on(real).unwrap(), 1);
    sched.shutdown(Duration::from_secs(5));
}

/// Registers a name, then fails or panics in `init` as told; its `close` may panic too.
struct InitGoesWrong {
    panics_in_init: bool,
    panics_in_close: bool,
    closed: mpsc::Sender<()>,
}

impl Process for InitGoesWrong {
    type Output = ();
    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        ctx.scheduler()
            .register("goes-wrong", ctx.pid())
            .map_err(InitError::failed)?;
        if self.panics_in_init {
            panic!("init boom");
        }
        Err(InitError::failed("nope"))
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        out.done(());
        Ok(())
    }
    fn close(&mut self) {
        let _ = self.closed.send(());
        if self.panics_in_close {
            panic!("close boom");
        }
    }
}

#[test]
fn an_init_that_fails_or_panics_is_a_process_that_never_lived_whatever_its_close_does() {
    for (panics_in_init, panics_in_close) in [(false, true), (true, false), (true, true)] {
        let (closed_tx, closed) = mpsc::channel();
        let mut harness = Harness::new(InitGoesWrong {
            panics_in_init,
            panics_in_close,
            closed: closed_tx,
        });
        let init = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            harness.init("run", Payload::empty())
        }));
        match init {
            Ok(result) => assert!(!panics_in_init && result.is_err()),
            Err(_) => assert!(panics_in_init, "a panic in init reaches the test"),
        }
        let case = format!("init panics: {panics_in_init}, close panics: {panics_in_close}");
        assert_eq!(closed.try_recv(), Ok(()), "{case}: close ran");
        let sched = harness.scheduler().unwrap().clone();
        assert_eq!(sched.whereis("goes-wrong"), None, "{case}: name released");
        let down = wait("the Down", sched.monitor(harness.pid()));
        assert!(down.reason.is_no_proc(), "{case}: {:?}", down.reason);
        assert!(harness.step().is_err(), "{case}: never steps");
        drop(harness);
        assert!(closed.try_recv().is_err(), "{case}: close ran once");
    }
}

#[test]
fn a_harness_dropped_during_a_failing_test_still_runs_close_once() {
    for panics_in_close in [false, true] {
        let (closed_tx, closed) = mpsc::channel();
        let failing_test = std::thread::spawn(move || {
            let mut harness = Harness::new(ClosesLoudly {
                closed: closed_tx,
                panics: panics_in_close,
            });
            harness.init("run", Payload::empty()).unwrap();
            panic!("the test's assertion fails");
        });
        assert!(failing_test.join().is_err());
        assert_eq!(closed.try_recv(), Ok("close ran"));
        assert!(closed.try_recv().is_err(), "once");
    }
}

/// Panics when dropped: held by a body's future, as a local across an `.await`.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("future drop boom");
    }
}

#[test]
fn a_body_whose_future_panics_when_dropped_is_dropped_contained_even_in_a_failing_test() {
    let failing_test = std::thread::spawn(|| {
        let mut harness = Harness::for_fn(|cx: ProcessCx<u8>| async move {
            let _bomb = Bomb;
            cx.recv().await?;
            Ok::<_, BoxError>(())
        });
        harness.init("run", Payload::empty()).unwrap();
        assert!(matches!(harness.step().unwrap().status, Status::Idle));
        panic!("the test's assertion fails");
    });
    // The thread unwinds with the test's panic: the harness's drop did not abort the process.
    assert!(failing_test.join().is_err());
}

#[test]
fn a_state_machine_whose_init_failed_is_not_started_again() {
    let (closed_tx, closed) = mpsc::channel();
    let mut harness = Harness::new(InitGoesWrong {
        panics_in_init: false,
        panics_in_close: false,
        closed: closed_tx,
    });
    assert!(harness.init("run", Payload::empty()).is_err());
    let again = harness.init("run", Payload::empty()).unwrap_err();
    assert!(again.to_string().contains("ended"), "{again}");
    assert_eq!(closed.try_recv(), Ok(()));
    assert!(
        closed.try_recv().is_err(),
        "its init did not run after its close"
    );
}
