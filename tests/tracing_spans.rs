//! The spans and events procsched emits, seen through a recording `tracing` layer: the process
//! span (pid, method) is current during `init`, every step and `close`; handler spans carry the
//! pid and the command type; a missing handler and panics are `warn` events with the pid.
//!
//! One global subscriber records every event of the binary with the fields of its span scope.
//! PIDs repeat across schedulers, so the tests run one at a time ([`exclusive`]), each starting
//! from an empty record, and find their events by a marker or by their processes' PIDs.

mod support;

use procsched::prelude::*;
use procsched::state_machine::{Events, Process, StepOutput};
use procsched::{error::InitError, state_machine::ProcessContext};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use support::{quiet_panics, EXPECTED_PANIC};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event as TracingEvent, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

#[derive(Debug, Clone)]
struct SpanRecord {
    name: &'static str,
    fields: HashMap<String, String>,
}

#[derive(Debug, Clone)]
struct EventRecord {
    level: Level,
    fields: HashMap<String, String>,
    /// Innermost span first.
    scope: Vec<SpanRecord>,
}

impl EventRecord {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
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

struct Recorder;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let span = ctx.span(id).expect("a new span is registered");
        span.extensions_mut().insert(SpanRecord {
            name: attrs.metadata().name(),
            fields: fields.0,
        });
    }

    fn on_event(&self, event: &TracingEvent<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let scope = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .filter_map(|span| span.extensions().get::<SpanRecord>().cloned())
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
    events()
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches(e))
        .cloned()
        .collect()
}

/// The single event whose `marker` field is `marker`.
fn marked(marker: &str) -> EventRecord {
    let found = recorded(|e| e.field("marker") == Some(marker));
    assert_eq!(found.len(), 1, "events marked {marker}: {found:?}");
    found.into_iter().next().unwrap()
}

fn assert_process_span(span: &SpanRecord, pid: Pid, method: &str) {
    assert_eq!(span.name, "process");
    assert_eq!(
        span.fields.get("pid").map(String::as_str),
        Some(pid.to_string().as_str())
    );
    assert_eq!(span.fields.get("method").map(String::as_str), Some(method));
}

/// Emits a marked event in `init`, each step and `close`.
struct Traced {
    steps: u32,
}

impl Process for Traced {
    type Output = u32;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        tracing::info!(marker = "traced-init", "in init");
        Ok(())
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<u32>) -> Result<(), BoxError> {
        self.steps += 1;
        tracing::info!(marker = format!("traced-step-{}", self.steps), "in step");
        if self.steps == 2 {
            out.done(self.steps);
        }
        Ok(())
    }
    fn close(&mut self) {
        tracing::info!(marker = "traced-close", "in close");
    }
}

#[test]
fn the_process_span_is_current_in_init_every_step_and_close() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let handle = sched
        .spawn(Traced { steps: 0 }, "traced-run", Payload::empty())
        .unwrap();
    let pid = handle.pid();
    assert_eq!(sched.block_on(handle).unwrap(), 2);
    for marker in [
        "traced-init",
        "traced-step-1",
        "traced-step-2",
        "traced-close",
    ] {
        let event = marked(marker);
        assert_process_span(&event.scope[0], pid, "traced-run");
        assert!(
            event.scope[0].fields["kind"].ends_with("Traced"),
            "{event:?}"
        );
    }
    // Step detail at trace level, lifecycle at debug, in the same span.
    let steps = recorded(|e| {
        e.level == Level::TRACE
            && e.field("message") == Some("step")
            && e.field("pid") == Some(pid.to_string().as_str())
    });
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0].field("status"), Some("continue"));
    assert_eq!(steps[1].field("status"), Some("done"));
    assert_process_span(&steps[0].scope[0], pid, "traced-run");
    let finished = recorded(|e| {
        e.field("message") == Some("process finished")
            && e.field("pid") == Some(pid.to_string().as_str())
    });
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0].field("outcome"), Some("done"));
}

#[test]
fn a_process_span_is_a_root_not_a_child_of_its_spawners_span() {
    // A process outlives the request (or process) that spawned it: its events are filed under
    // its own span alone, however deep a chain of spawns goes.
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let handle = {
        let request = tracing::info_span!("http_request", req_id = 42);
        let _in_request = request.enter();
        sched
            .spawn_fn(|cx: ProcessCx| async move {
                tracing::info!(marker = "spawned-in-a-request");
                let child = cx.spawn_fn(|_: ProcessCx| async move {
                    tracing::info!(marker = "spawned-by-a-process");
                    Ok::<_, BoxError>(())
                })?;
                child.await?;
                Ok::<_, BoxError>(())
            })
            .unwrap()
    };
    let pid = handle.pid();
    sched.block_on(handle).unwrap();
    let event = marked("spawned-in-a-request");
    assert_eq!(event.scope.len(), 1, "{event:?}");
    assert_eq!(
        event.scope[0].fields.get("pid").map(String::as_str),
        Some(pid.to_string().as_str())
    );
    let event = marked("spawned-by-a-process");
    assert_eq!(event.scope.len(), 1, "{event:?}");
    assert_eq!(event.scope[0].name, "process");
}

struct AsyncTraced;
struct BlockingTraced;
struct Unhandled;
procsched::command!(AsyncTraced => (), BlockingTraced => (), Unhandled => ());

#[test]
fn handlers_run_in_a_span_with_the_pid_and_the_command_type() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|_: AsyncTraced| async {
            tracing::info!(marker = "async-handler", "in an async handler");
            Ok::<_, BoxError>(())
        })
        .blocking_handler(|_: BlockingTraced| {
            tracing::info!(marker = "blocking-handler", "in a blocking handler");
            Ok::<_, BoxError>(())
        })
        .build()
        .unwrap();
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            cx.call(AsyncTraced).await?;
            cx.call(BlockingTraced).await?;
            let _ = cx
                .run(async { tracing::info!(marker = "run-future", "in a cx.run future") })
                .await;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let pid = handle.pid();
    sched.block_on(handle).unwrap();
    for (marker, command, kind) in [
        ("async-handler", "AsyncTraced", "async"),
        ("blocking-handler", "BlockingTraced", "blocking"),
    ] {
        let event = marked(marker);
        let handler = &event.scope[0];
        assert_eq!(handler.name, "handler", "{event:?}");
        assert_eq!(handler.fields["pid"], pid.to_string());
        assert!(handler.fields["command"].ends_with(command), "{handler:?}");
        assert_eq!(handler.fields["kind"], kind);
        assert_process_span(&event.scope[1], pid, "run");
    }
    assert_process_span(&marked("run-future").scope[0], pid, "run");
}

#[test]
fn a_missing_handler_is_a_warn_event_with_the_pid() {
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let handle = sched
        .spawn_fn(
            |cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(Unhandled).await.is_err()) },
        )
        .unwrap();
    let pid = handle.pid();
    assert!(sched.block_on(handle).unwrap());
    let warned =
        recorded(|e| e.level == Level::WARN && e.field("pid") == Some(pid.to_string().as_str()));
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].field("command").unwrap().ends_with("Unhandled"));
    assert_process_span(&warned[0].scope[0], pid, "run");
}

struct Boom;
procsched::command!(Boom => ());

#[test]
fn panics_are_warn_events_with_the_pid_and_the_message() {
    quiet_panics();
    let _exclusive = exclusive();
    let sched = Scheduler::builder()
        .workers(1)
        .async_handler(|_: Boom| async {
            panic!("{EXPECTED_PANIC}: handler boom");
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .build()
        .unwrap();
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let _ = cx.call(Boom).await;
            panic!("{EXPECTED_PANIC}: step boom");
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let pid = handle.pid();
    assert!(sched.block_on(handle).unwrap_err().is_panicked());
    let warned =
        recorded(|e| e.level == Level::WARN && e.field("pid") == Some(pid.to_string().as_str()));
    let messages: Vec<_> = warned
        .iter()
        .map(|e| e.field("message").unwrap_or(""))
        .collect();
    let handler = warned
        .iter()
        .find(|e| e.field("message") == Some("handler panicked"))
        .unwrap_or_else(|| panic!("{messages:?}"));
    assert!(
        handler.field("panic").unwrap().contains("handler boom"),
        "{handler:?}"
    );
    let handler_span = &handler.scope[0];
    assert_eq!(handler_span.name, "handler");
    assert_eq!(handler_span.fields["pid"], pid.to_string());
    assert!(handler_span.fields["command"].ends_with("Boom"));
    let step = warned
        .iter()
        .find(|e| e.field("message") == Some("step panicked"))
        .unwrap_or_else(|| panic!("{messages:?}"));
    assert!(
        step.field("panic").unwrap().contains("step boom"),
        "{step:?}"
    );
    assert_process_span(&step.scope[0], pid, "run");
}

/// A process's result whose destructor tells `dropped`, then panics.
struct PanickyResult(std::sync::mpsc::Sender<()>);

impl Drop for PanickyResult {
    fn drop(&mut self) {
        let _ = self.0.send(());
        panic!("{EXPECTED_PANIC}: a result's destructor");
    }
}

#[test]
fn a_panicking_destructor_of_a_result_nobody_reads_is_a_warn_event_with_the_pid() {
    quiet_panics();
    let _exclusive = exclusive();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (dropped_tx, dropped) = std::sync::mpsc::channel();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.recv().await?;
            Ok::<_, BoxError>(PanickyResult(dropped_tx))
        })
        .unwrap();
    let (pid, addr) = (handle.pid(), handle.addr());
    drop(handle); // the executor drops the result
    addr.send(()).unwrap();
    let guard = std::time::Duration::from_secs(30);
    dropped.recv_timeout(guard).expect("the result was dropped");
    let pid_text = pid.to_string();
    let deadline = std::time::Instant::now() + guard; // hang guard only
    let warned = loop {
        let warned = recorded(|e| {
            e.level == Level::WARN && e.field("message").is_some_and(|m| m.contains("destructor"))
        });
        if !warned.is_empty() || std::time::Instant::now() > deadline {
            break warned;
        }
        std::thread::yield_now();
    };
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(
        warned[0].field("pid"),
        Some(pid_text.as_str()),
        "{warned:?}"
    );
}
