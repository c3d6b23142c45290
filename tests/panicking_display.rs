//! User code procsched calls outside the user's own call: an error's `Display` (formatted by a
//! subscriber at `debug`, by a supervisor, into a start error) and the destructor of a handler's
//! future or result dropped after its deadline. A panic there is contained and traced (`warn`,
//! with the PID), and changes nothing else: a failed process stays failed, with its reason; a
//! timed-out call stays timed out; a dropped value's panic is counted.
//!
//! One global subscriber, enabled at every level, formats every field of every event (as an
//! `fmt` subscriber at `debug` would) and records it with the fields of its span scope. PIDs
//! repeat across schedulers, so the tests run one at a time ([`exclusive`]), each starting from
//! an empty record.

mod support;

use procsched::error::{InitError, SpawnError};
use procsched::prelude::*;
use procsched::state_machine::{Events, Process, ProcessContext, StepOutput};
use procsched::supervision::{ChildSpec, Restart, Supervisor, SupervisorRef};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;
use support::{quiet_panics, recv, wait_until, EXPECTED_PANIC};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event as TracingEvent, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// What procsched writes in place of a text whose `Display` panicked.
const PLACEHOLDER: &str = "<Display panicked>";

#[derive(Debug, Clone)]
struct EventRecord {
    level: Level,
    fields: HashMap<String, String>,
    /// The fields of its spans, innermost first.
    scope: Vec<HashMap<String, String>>,
}

impl EventRecord {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// `true` if the event names `pid`: as its own field, or its span's.
    fn names(&self, pid: Pid) -> bool {
        let pid = pid.to_string();
        self.field("pid") == Some(pid.as_str())
            || self.scope.iter().any(|span| span.get("pid") == Some(&pid))
    }
}

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

struct SpanFields(HashMap<String, String>);

struct Recorder;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let span = ctx.span(id).expect("a new span is registered");
        span.extensions_mut().insert(SpanFields(fields.0));
    }

    fn on_event(&self, event: &TracingEvent<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let scope = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .filter_map(|span| span.extensions().get::<SpanFields>().map(|f| f.0.clone()))
                    .collect()
            })
            .unwrap_or_default();
        events().lock().unwrap().push(EventRecord {
            level: *event.metadata().level(),
            fields: fields.0,
            scope,
        });
    }
}

/// Serialises the tests and clears the record; hold it for the whole test (declared first, it
/// is dropped after the test's scheduler).
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    quiet_panics();
    events().lock().unwrap().clear();
    guard
}

/// Every event recorded so far; installs the subscriber on first use.
fn events() -> &'static Mutex<Vec<EventRecord>> {
    static EVENTS: OnceLock<Mutex<Vec<EventRecord>>> = OnceLock::new();
    static INSTALLED: OnceLock<()> = OnceLock::new();
    let events = EVENTS.get_or_init(|| Mutex::new(Vec::new()));
    INSTALLED.get_or_init(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Recorder))
            .expect("the only subscriber of this binary");
    });
    events
}

fn recorded(mut matches: impl FnMut(&EventRecord) -> bool) -> Vec<EventRecord> {
    let events = events().lock().unwrap();
    events.iter().filter(|e| matches(e)).cloned().collect()
}

/// The `warn` events whose message contains `what` and that name `pid` (field or span).
fn warned(what: &str, pid: Pid) -> Vec<EventRecord> {
    recorded(|e| {
        e.level == Level::WARN
            && e.field("message").is_some_and(|m| m.contains(what))
            && e.names(pid)
    })
}

/// Asserts that one `warn` says `pid`'s value's `Display` panicked.
fn assert_display_panic_warned(pid: Pid) {
    let warned = warned("Display panicked", pid);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0]
            .field("panic")
            .is_some_and(|m| m.contains(EXPECTED_PANIC)),
        "{warned:?}"
    );
}

/// An error whose `Display` panics, every time.
#[derive(Debug)]
struct PanickyDisplay;

impl std::fmt::Display for PanickyDisplay {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        panic!("{EXPECTED_PANIC}: an error's Display");
    }
}

impl std::error::Error for PanickyDisplay {}

fn run<T>(sched: &Scheduler, future: impl std::future::Future<Output = T>) -> T {
    sched.block_on(future)
}

/// A state machine whose first step fails with [`PanickyDisplay`] once told to go (so that a
/// monitor can be set first); counts its `close`s.
struct FailingStep(Arc<AtomicUsize>, mpsc::Receiver<()>);

impl Process for FailingStep {
    type Output = ();
    fn step(&mut self, _: &mut Events, _: &mut StepOutput<()>) -> Result<(), BoxError> {
        let _ = self.1.recv_timeout(support::HANG_GUARD);
        Err(Box::new(PanickyDisplay))
    }
    fn close(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Asserts that the process behind `handle`, watched by `down`, failed with a `Failed` reason
/// and was counted so, and that the `debug` event of its failure carries the placeholder.
fn assert_failed<T: Send + 'static>(
    sched: &Scheduler,
    handle: ProcessHandle<T>,
    down: procsched::supervision::Monitor,
) {
    let pid = handle.pid();
    let error = run(sched, handle).err().expect("the process failed");
    assert!(error.is_failed(), "failed, not panicked or cancelled");
    assert!(error.failure().is_some_and(|e| e.is::<PanickyDisplay>()));
    let down = run(sched, down);
    assert!(down.reason.is_failed(), "monitors hear `Failed`");
    let finished = sched.metrics().finished;
    assert_eq!(
        (finished.failed, finished.panicked, finished.forced),
        (1, 0, 0)
    );
    let failed = recorded(|e| e.field("message") == Some("step failed") && e.names(pid));
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].field("error"), Some(PLACEHOLDER));
    assert_display_panic_warned(pid);
}

#[test]
fn a_step_error_whose_display_panics_fails_the_process() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let closes = Arc::new(AtomicUsize::new(0));
    let (go_tx, go) = mpsc::channel();
    let handle = sched
        .spawn(FailingStep(closes.clone(), go), "run", Payload::empty())
        .unwrap();
    // Set before the step fails: a monitor set after the end hears `NoProc`.
    let down = sched.monitor(handle.pid());
    go_tx.send(()).unwrap();
    assert_failed(&sched, handle, down);
    assert_eq!(closes.load(SeqCst), 1);
    // The worker lives on.
    let next = sched
        .spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(5u8) })
        .unwrap();
    assert_eq!(run(&sched, next).unwrap(), 5);
}

#[test]
fn an_async_body_error_whose_display_panics_fails_the_process() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
    let handle = sched
        .spawn_fn(|_: ProcessCx| async move {
            let _ = go.await;
            Err::<(), BoxError>(Box::new(PanickyDisplay))
        })
        .unwrap();
    let down = sched.monitor(handle.pid());
    go_tx.send(()).unwrap();
    assert_failed(&sched, handle, down);
}

/// A state machine whose `init` fails with [`PanickyDisplay`]; counts its `close`s.
struct FailingInit(Arc<AtomicUsize>);

impl Process for FailingInit {
    type Output = ();
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Err(InitError::failed(PanickyDisplay))
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        out.done(());
        Ok(())
    }
    fn close(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn an_init_error_whose_display_panics_is_a_typed_spawn_error() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let closes = Arc::new(AtomicUsize::new(0));
    let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sched.spawn(FailingInit(closes.clone()), "run", Payload::empty())
    }))
    .expect("no panic reaches the caller of spawn");
    let error = spawned.expect_err("init failed");
    assert!(
        matches!(error, SpawnError::Init(_)),
        "{:?}",
        error.is_init()
    );
    assert_eq!(closes.load(SeqCst), 1, "close ran");
    assert_eq!(sched.live_processes(), 0, "no process left in the table");
    assert_eq!(sched.metrics().init_failed, 1);
    let failed = recorded(|e| e.field("message") == Some("init failed"));
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].field("error"), Some(PLACEHOLDER));
    let warned = recorded(|e| {
        e.level == Level::WARN
            && e.field("message")
                .is_some_and(|m| m.contains("Display panicked"))
            && e.field("pid") == failed[0].field("pid")
    });
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(sched.shutdown(support::HANG_GUARD).is_complete());
}

/// Starts `supervisor` with one child, made by `child` (which sends the child's PID on `started`
/// each time it runs): the first instance fails with [`PanickyDisplay`] once started, the
/// others wait to be stopped.
fn failing_once(restart: Restart, started: mpsc::Sender<Pid>) -> ChildSpec {
    let starts = Arc::new(AtomicUsize::new(0));
    ChildSpec::new("child", move |start| {
        let first = starts.fetch_add(1, SeqCst) == 0;
        let started = started.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            let _ = started.send(cx.pid());
            if first {
                // After its first poll: the start succeeded, the child then fails.
                cx.recv().await?;
                return Err::<(), BoxError>(Box::new(PanickyDisplay));
            }
            cx.recv().await?;
            Ok(())
        })
    })
    .restart(restart)
}

/// The first instance of [`failing_once`]'s child fails; the supervisor hears it (formatting
/// its reason at `debug`) and restarts it.
fn fail_and_restart(restart: Restart) {
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (started_tx, started) = mpsc::channel();
    let supervisor = Supervisor::one_for_one()
        .max_restarts(10, Duration::from_secs(3600))
        .child(failing_once(restart, started_tx));
    let supervisor: SupervisorRef = run(&sched, supervisor.start(sched.handle())).unwrap();
    let first = recv(&started);
    sched.handle().addr::<()>(first).send(()).unwrap();
    let second = recv(&started);
    assert_ne!(first, second, "restarted");
    assert_eq!(run(&sched, supervisor.restarts()).unwrap(), 1);
    let children = run(&sched, supervisor.which_children()).unwrap();
    assert_eq!(
        children[0].pid,
        Some(second),
        "the supervisor lives and answers"
    );
    // Both formatting sites warned: the child's `step failed` and the supervisor's `child ended`.
    let warned = warned("Display panicked", first);
    assert_eq!(warned.len(), 2, "{warned:?}");
    let ended = recorded(|e| e.field("message") == Some("child ended"));
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].field("reason"), Some(PLACEHOLDER));
}

#[test]
fn a_transient_child_failing_with_a_panicking_display_is_restarted() {
    fail_and_restart(Restart::Transient);
}

#[test]
fn a_supervisor_survives_formatting_a_childs_reason_whose_display_panics() {
    fail_and_restart(Restart::Permanent);
}

#[test]
fn a_child_that_cannot_start_with_a_panicking_display_is_a_start_error() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(2).build().unwrap();
    // Its body fails in its first poll: the supervisor writes the reason into the start error.
    let first_poll = ChildSpec::new("first-poll", |start| {
        start.spawn_fn(|_: ProcessCx<()>| async { Err::<(), BoxError>(Box::new(PanickyDisplay)) })
    });
    // Its `init` fails: the supervisor writes the spawn error into the start error.
    let closes = Arc::new(AtomicUsize::new(0));
    let init = {
        let closes = closes.clone();
        ChildSpec::new("init", move |start| {
            start.spawn(FailingInit(closes.clone()), "run", Payload::empty())
        })
    };
    for (child, said) in [
        (first_poll, "it ended in its first poll: "),
        (init, "`init`"),
    ] {
        let error = run(
            &sched,
            Supervisor::one_for_one().child(child).start(sched.handle()),
        )
        .expect_err("the start failed");
        let text = error.to_string();
        assert!(text.contains(said) && text.contains(PLACEHOLDER), "{text}");
        assert!(
            !text.contains("supervisor ended"),
            "it did not panic: {text}"
        );
    }
    assert_eq!(closes.load(SeqCst), 1);
}

/// A value whose destructor panics, after saying so on its channel.
struct PanicOnDrop(mpsc::Sender<()>);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(());
        panic!("{EXPECTED_PANIC}: a destructor");
    }
}

/// An async handler's command: its future holds the value until it is dropped.
struct Stuck(PanicOnDrop);
procsched::command!(Stuck => u8);

#[test]
fn a_timed_out_async_handler_whose_future_panics_when_dropped_is_timed_out_and_counted() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder()
        .workers(1)
        .async_handler(|Stuck(held): Stuck| async move {
            let _held = held;
            std::future::pending::<()>().await;
            Ok::<_, BoxError>(0u8)
        })
        .build()
        .unwrap();
    let (dropped_tx, dropped) = mpsc::channel();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let called = cx.call_within(Stuck(PanicOnDrop(dropped_tx)), Duration::from_millis(10));
            Ok::<_, BoxError>(called.await.err())
        })
        .unwrap();
    let pid = handle.pid();
    let error = run(&sched, handle)
        .unwrap()
        .expect("the call did not succeed");
    assert!(error.is_timed_out(), "timed out, not cancelled: {error:?}");
    recv(&dropped);
    assert_eq!(sched.metrics().destructor_panics, 1);
    let warned = warned("destructor panicked", pid);
    assert_eq!(warned.len(), 1, "{warned:?}");
}

/// A blocking handler's command: its handler waits for `release`, then returns a value whose
/// destructor panics.
struct Late(mpsc::Receiver<()>, mpsc::Sender<()>);
procsched::command!(Late => PanicOnDrop);

#[test]
fn a_late_blocking_result_whose_destructor_panics_is_counted_with_the_pid() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder()
        .workers(1)
        .blocking_handler(|Late(release, dropped): Late| {
            let _ = release.recv();
            Ok::<_, BoxError>(PanicOnDrop(dropped))
        })
        .build()
        .unwrap();
    let (release_tx, release) = mpsc::channel();
    let (dropped_tx, dropped) = mpsc::channel();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let called = cx.call_within(Late(release, dropped_tx), Duration::from_millis(10));
            Ok::<_, BoxError>(called.await.err())
        })
        .unwrap();
    let pid = handle.pid();
    let error = run(&sched, handle)
        .unwrap()
        .expect("the call did not succeed");
    assert!(error.is_timed_out(), "{error:?}");
    release_tx.send(()).unwrap();
    recv(&dropped);
    wait_until("the late result's warn", || {
        !warned("late blocking result", pid).is_empty()
    });
    assert_eq!(sched.metrics().destructor_panics, 1);
}
