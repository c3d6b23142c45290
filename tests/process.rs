//! Public-API tests of the process contract (`Process`, `Scheduler`): steps, yields, handlers,
//! messages, errors and panics.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::SendErrorKind;
use procsched::{
    BoxError, CommandError, Event, Events, InitError, Message, Payload, Pid, Process,
    ProcessContext, ProcessState, Scheduler, SchedulerHandle, SpawnError, StepOutput, Tag,
};
use std::collections::HashMap;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc;
use std::thread;
use support::*;

// ---------------------------------------------------------------------------------------------
// Shared processes and commands
// ---------------------------------------------------------------------------------------------

/// Inline command: replies `n + 1`.
struct Inc(u64);
procsched::command!(Inc => Payload);

/// Yields `Inc` until its value reaches the target, one yield per step; finishes with
/// `(value, steps)`.
struct Counter {
    target: u64,
    value: u64,
    steps: u64,
    closes: support::Counter,
}

impl Counter {
    fn new(closes: &support::Counter) -> Counter {
        Counter {
            target: 0,
            value: 0,
            steps: 0,
            closes: closes.clone(),
        }
    }
}

impl Process for Counter {
    type Output = Payload;
    fn init(
        &mut self,
        _: &ProcessContext<'_>,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        if method != "count" {
            return Err(InitError::unknown_method(method));
        }
        self.target = input
            .downcast::<u64>()
            .map_err(|_| InitError::failed("want a u64"))?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        self.steps += 1;
        for event in events.drain() {
            match event {
                Event::YieldComplete { tag, result } if tag == self.value => {
                    self.value = result?.downcast::<u64>().map_err(|_| "bad reply")?;
                }
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if self.value == self.target {
            out.done(Payload::new((self.value, self.steps)));
        } else {
            out.yield_command(self.value, Inc(self.value));
            out.wait();
        }
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

fn with_inc(builder: &mut procsched::SchedulerBuilder) -> &mut procsched::SchedulerBuilder {
    builder.inline_handler(|Inc(n): Inc| Ok::<_, procsched::CommandError>(Payload::new(n + 1)))
}

fn counter_sched(workers: usize) -> Scheduler {
    with_inc(Scheduler::builder().workers(workers))
        .build()
        .expect("scheduler starts")
}

/// Spawns `count` counters to `target` and checks each result.
fn run_counters(sched: &SchedulerHandle, n: usize, target: u64) {
    let closes = support::counter();
    let handles = (0..n)
        .map(|_| {
            sched
                .spawn(Counter::new(&closes), "count", Payload::new(target))
                .unwrap()
        })
        .collect();
    for result in join_all(handles) {
        let (value, steps) = result.unwrap().downcast::<(u64, u64)>().unwrap();
        assert_eq!((value, steps), (target, target + 1));
    }
    assert_eq!(count(&closes), n);
}

/// Yields one command (tag 7) and finishes with the `Result` its completion carried.
struct YieldOne<C: Send + 'static> {
    command: Option<C>,
}

impl<C: Send + 'static> YieldOne<C> {
    fn new(command: C) -> YieldOne<C> {
        YieldOne {
            command: Some(command),
        }
    }
}

impl<C: Send + 'static> Process for YieldOne<C> {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if let Some(command) = self.command.take() {
            assert!(events.is_empty());
            out.yield_command(7, command);
            out.wait();
            return Ok(());
        }
        match events.pop() {
            Some(Event::YieldComplete { tag: 7, result }) => {
                assert!(
                    events.is_empty(),
                    "exactly one completion: {result:?} then {events:?}"
                );
                out.done(Payload::new(result));
            }
            other => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    }
}

/// Runs a `YieldOne(command)` and returns the completion's result.
fn yield_one<C: Send + 'static>(sched: &Scheduler, command: C) -> Result<Payload, CommandError> {
    let handle = sched
        .spawn(YieldOne::new(command), "run", Payload::empty())
        .unwrap();
    join(handle)
        .expect("the process finishes")
        .downcast::<Result<Payload, CommandError>>()
        .expect("a command result")
}

// ---------------------------------------------------------------------------------------------
// Steps and yields
// ---------------------------------------------------------------------------------------------

#[test]
fn counter_with_inline_yields_completes_with_the_right_step_count() {
    for workers in [1, 4] {
        let sched = counter_sched(workers);
        run_counters(sched.handle(), scaled(50), 500);
        run_counters(sched.handle(), 1, 0);
    }
}

#[test]
fn a_thousand_processes_close_exactly_once_and_leave_no_trace() {
    let sched = counter_sched(2);
    let closes = support::counter();
    let handles = (0..scaled(1_000))
        .map(|_| {
            sched
                .spawn(Counter::new(&closes), "count", Payload::new(3u64))
                .unwrap()
        })
        .collect();
    for result in join_all(handles) {
        assert_eq!(result.unwrap().downcast::<(u64, u64)>().unwrap(), (3, 4));
    }
    assert_eq!(count(&closes), scaled(1_000));
    assert_eq!(sched.handle().registered_processes(), 0);
    assert_eq!(sched.live_processes(), 0);
}

/// Async command completed by the test: replies with the value sent on its oneshot.
struct Gate(tokio::sync::oneshot::Receiver<u64>);
procsched::command!(Gate => Payload);

fn gated_handler(builder: &mut procsched::SchedulerBuilder) -> &mut procsched::SchedulerBuilder {
    builder.async_handler(|Gate(rx): Gate| async move {
        rx.await
            .map(Payload::new)
            .map_err(|_| CommandError::failed("gate dropped"))
    })
}

/// Yields one `Gate` per `(tag, receiver)` in its first step, then reports every completion on
/// `seen` as it arrives; finishes when all completed.
struct GateWaiter {
    gates: Vec<(Tag, tokio::sync::oneshot::Receiver<u64>)>,
    pending: usize,
    seen: mpsc::Sender<(Tag, u64)>,
}

impl Process for GateWaiter {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for (tag, rx) in self.gates.drain(..) {
            out.yield_command(tag, Gate(rx));
            self.pending += 1;
        }
        for event in events.drain() {
            match event {
                Event::YieldComplete { tag, result } => {
                    let value = result?.downcast::<u64>().map_err(|_| "bad reply")?;
                    self.seen.send((tag, value))?;
                    self.pending -= 1;
                }
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if self.pending == 0 {
            out.done(Payload::empty());
        } else {
            out.wait();
        }
        Ok(())
    }
}

#[test]
fn async_yields_resume_in_completion_order_with_their_tags() {
    let sched = gated_handler(Scheduler::builder().workers(2))
        .build()
        .unwrap();
    let mut rng = Rng::new(3);
    for round in 0..scaled(100) {
        let n = 2 + round % 3;
        let mut gates = Vec::new();
        let mut senders = Vec::new();
        for i in 0..n {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tag = 100 + i as Tag;
            gates.push((tag, rx));
            senders.push((tag, tx));
        }
        let (seen_tx, seen_rx) = mpsc::channel();
        let handle = sched
            .spawn(
                GateWaiter {
                    gates,
                    pending: 0,
                    seen: seen_tx,
                },
                "run",
                Payload::empty(),
            )
            .unwrap();
        // Complete in a random order (the latest yield first, often); each completion must be
        // seen, with its own tag and value, before the next one is fired.
        while !senders.is_empty() {
            let (tag, tx) = senders.remove(rng.below(senders.len() as u64) as usize);
            tx.send(tag * 10).unwrap();
            assert_eq!(recv(&seen_rx), (tag, tag * 10));
        }
        join(handle).unwrap();
        assert!(seen_rx.try_recv().is_err(), "no completion seen twice");
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Inline,
    Async,
    AsyncYielding,
    Blocking,
}

const KINDS: [Kind; 4] = [
    Kind::Inline,
    Kind::Async,
    Kind::AsyncYielding,
    Kind::Blocking,
];

struct InlineCmd(Tag);
procsched::command!(InlineCmd => Payload);
struct AsyncCmd(Tag);
procsched::command!(AsyncCmd => Payload);
struct AsyncYieldingCmd(Tag);
procsched::command!(AsyncYieldingCmd => Payload);
struct BlockingCmd(Tag);
procsched::command!(BlockingCmd => Payload);

/// Handler invocations per kind.
#[derive(Clone, Default)]
struct KindCounts([support::Counter; 4]);

impl KindCounts {
    fn get(&self, kind: Kind) -> usize {
        count(&self.0[kind as usize])
    }
}

fn reply(tag: Tag) -> Payload {
    Payload::new(tag.wrapping_mul(3) + 1)
}

/// Registers one handler per `Kind`, each replying `reply(tag)` and counting its invocations.
fn kind_handlers(builder: &mut procsched::SchedulerBuilder, counts: &KindCounts) {
    let c = counts.clone();
    builder.inline_handler(move |InlineCmd(tag): InlineCmd| {
        c.0[Kind::Inline as usize].fetch_add(1, SeqCst);
        Ok::<_, procsched::CommandError>(reply(tag))
    });
    let c = counts.clone();
    builder.async_handler(move |AsyncCmd(tag): AsyncCmd| {
        c.0[Kind::Async as usize].fetch_add(1, SeqCst);
        async move { Ok::<_, procsched::CommandError>(reply(tag)) }
    });
    let c = counts.clone();
    builder.async_handler(move |AsyncYieldingCmd(tag): AsyncYieldingCmd| {
        c.0[Kind::AsyncYielding as usize].fetch_add(1, SeqCst);
        async move {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            Ok::<_, CommandError>(reply(tag))
        }
    });
    let c = counts.clone();
    builder.blocking_handler(move |BlockingCmd(tag): BlockingCmd| {
        c.0[Kind::Blocking as usize].fetch_add(1, SeqCst);
        Ok::<_, CommandError>(reply(tag))
    });
}

fn yield_kind(out: &mut StepOutput, tag: Tag, kind: Kind) {
    match kind {
        Kind::Inline => out.yield_command(tag, InlineCmd(tag)),
        Kind::Async => out.yield_command(tag, AsyncCmd(tag)),
        Kind::AsyncYielding => out.yield_command(tag, AsyncYieldingCmd(tag)),
        Kind::Blocking => out.yield_command(tag, BlockingCmd(tag)),
    }
}

/// Emits one batch of yields per step (whatever woke it), then waits for every completion;
/// finishes with how many times it saw each tag.
struct Staggered {
    plan: Vec<Vec<(Tag, Kind)>>,
    next: usize,
    seen: HashMap<Tag, usize>,
    emitted: usize,
    completions: usize,
    total: usize,
}

impl Staggered {
    fn new(plan: Vec<Vec<(Tag, Kind)>>) -> Staggered {
        let total = plan.iter().map(Vec::len).sum();
        Staggered {
            plan,
            next: 0,
            seen: HashMap::new(),
            emitted: 0,
            completions: 0,
            total,
        }
    }
}

impl Process for Staggered {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            match event {
                Event::YieldComplete { tag, result } => {
                    let value = result?.downcast::<u64>().map_err(|_| "bad reply")?;
                    if value != tag.wrapping_mul(3) + 1 {
                        return Err(format!("tag {tag} got the reply {value}").into());
                    }
                    *self.seen.entry(tag).or_default() += 1;
                    self.completions += 1;
                }
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if let Some(batch) = self.plan.get(self.next) {
            for &(tag, kind) in batch {
                yield_kind(out, tag, kind);
            }
            self.emitted += batch.len();
            self.next += 1;
        }
        if self.next == self.plan.len() && self.completions == self.total {
            out.done(Payload::new(std::mem::take(&mut self.seen)));
        } else if self.emitted == self.completions {
            // Nothing outstanding (an empty batch): nothing would wake a waiting process.
            out.continue_();
        } else {
            out.wait();
        }
        Ok(())
    }
}

fn check_seen_once(seen: &HashMap<Tag, usize>, plan: &[Vec<(Tag, Kind)>]) {
    let expected: Vec<Tag> = plan.iter().flatten().map(|&(tag, _)| tag).collect();
    assert_eq!(seen.len(), expected.len(), "{seen:?}");
    for tag in expected {
        assert_eq!(seen.get(&tag), Some(&1), "tag {tag}: {seen:?}");
    }
}

#[test]
fn staggered_mixed_yields_are_each_seen_exactly_once() {
    let counts = KindCounts::default();
    let mut builder = Scheduler::builder();
    builder.workers(2);
    kind_handlers(&mut builder, &counts);
    let sched = builder.build().unwrap();

    use Kind::*;
    let fixed = vec![
        vec![(1, Inline), (2, Async), (3, Blocking)],
        vec![(4, AsyncYielding), (5, Async)],
        vec![(6, Blocking), (7, Inline)],
        vec![(8, Inline)],
        vec![],
        vec![
            (9, Async),
            (10, Blocking),
            (11, AsyncYielding),
            (12, Inline),
        ],
    ];
    let mut rng = Rng::new(0x5eed);
    let mut plans = vec![fixed; scaled(100)];
    for _ in 0..scaled(100) {
        let mut tag = 0;
        let plan = (0..1 + rng.below(5))
            .map(|_| {
                (0..rng.below(4))
                    .map(|_| {
                        tag += 1;
                        (tag, KINDS[rng.below(4) as usize])
                    })
                    .collect()
            })
            .collect();
        plans.push(plan);
    }
    let handles = plans
        .iter()
        .map(|plan| {
            sched
                .spawn(Staggered::new(plan.clone()), "run", Payload::empty())
                .unwrap()
        })
        .collect();
    for (result, plan) in join_all(handles).into_iter().zip(&plans) {
        let seen = result.unwrap().downcast::<HashMap<Tag, usize>>().unwrap();
        check_seen_once(&seen, plan);
    }
    for kind in KINDS {
        let expected = plans
            .iter()
            .flatten()
            .flatten()
            .filter(|y| y.1 == kind)
            .count();
        assert_eq!(counts.get(kind), expected, "{kind:?} handler invocations");
    }
}

// ---------------------------------------------------------------------------------------------
// Init errors
// ---------------------------------------------------------------------------------------------

enum InitMode {
    UnknownMethod,
    Fail,
    Panic,
}

struct BadInit {
    mode: InitMode,
    closes: support::Counter,
}

impl Process for BadInit {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        match self.mode {
            InitMode::UnknownMethod => Err(InitError::unknown_method(method)),
            InitMode::Fail => Err(InitError::failed("bad input")),
            InitMode::Panic => panic!("{EXPECTED_PANIC}: in init"),
        }
    }

    fn step(&mut self, _: &mut Events, _: &mut StepOutput) -> Result<(), BoxError> {
        panic!("a process whose init failed was stepped");
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn init_errors_are_returned_by_spawn_and_close_still_runs() {
    quiet_panics();
    let sched = counter_sched(1);
    let closes = support::counter();
    let spawn = |mode| {
        let process = BadInit {
            mode,
            closes: closes.clone(),
        };
        sched.spawn(process, "walk", Payload::empty()).unwrap_err()
    };

    let err = spawn(InitMode::UnknownMethod);
    assert!(err.is_unknown_method(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "process init failed: unknown entry method `walk`"
    );
    assert_eq!(count(&closes), 1);

    let err = spawn(InitMode::Fail);
    assert!(!err.is_unknown_method());
    match &err {
        SpawnError::Init(InitError::Failed(source)) => assert_eq!(source.to_string(), "bad input"),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&closes), 2);

    match spawn(InitMode::Panic) {
        SpawnError::InitPanicked(message) => {
            assert_eq!(message, format!("{EXPECTED_PANIC}: in init"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&closes), 3);

    // Also through the real entry-point check of a well-behaved process.
    let err = sched
        .spawn(Counter::new(&closes), "walk", Payload::new(1u64))
        .unwrap_err();
    assert!(err.is_unknown_method());
    assert_eq!(count(&closes), 4);

    assert_eq!(sched.live_processes(), 0, "failed spawns hold no slot");
    assert_eq!(sched.handle().registered_processes(), 0);
    run_counters(sched.handle(), 10, 10);
}

// ---------------------------------------------------------------------------------------------
// Command errors
// ---------------------------------------------------------------------------------------------

struct Unhandled;
struct Refused;
procsched::command!(Refused => Payload);
struct InlinePanics;
procsched::command!(InlinePanics => Payload);
struct AsyncPanics;
procsched::command!(AsyncPanics => Payload);
struct AsyncPanicsOnCreate;
procsched::command!(AsyncPanicsOnCreate => Payload);
struct BlockingPanics;
procsched::command!(BlockingPanics => Payload);

#[test]
fn command_errors_and_handler_panics_reach_the_process() {
    quiet_panics();
    let sched = with_inc(Scheduler::builder().workers(1))
        .inline_handler(|_: Refused| Err(CommandError::failed("nope")))
        .inline_handler(|_: InlinePanics| -> Result<Payload, CommandError> {
            panic!("{EXPECTED_PANIC}: inline")
        })
        .async_handler(|_: AsyncPanics| async {
            tokio::task::yield_now().await;
            if true {
                panic!("{EXPECTED_PANIC}: async");
            }
            Ok::<Payload, CommandError>(Payload::empty())
        })
        .blocking_handler(|_: BlockingPanics| -> Result<Payload, CommandError> {
            panic!("{EXPECTED_PANIC}: blocking")
        })
        .build()
        .unwrap();

    for _ in 0..scaled(20) {
        match yield_one(&sched, Unhandled).unwrap_err() {
            CommandError::NoHandler(name) => assert!(name.ends_with("Unhandled"), "{name}"),
            other => panic!("{other:?}"),
        }
        match yield_one(&sched, Refused).unwrap_err() {
            e @ CommandError::Failed(_) => assert_eq!(e.to_string(), "command failed: nope"),
            other => panic!("{other:?}"),
        }
        let panics = [
            (yield_one(&sched, InlinePanics), "inline"),
            (yield_one(&sched, AsyncPanics), "async"),
            (yield_one(&sched, BlockingPanics), "blocking"),
        ];
        for (result, which) in panics {
            match result.unwrap_err() {
                CommandError::Panicked(message) => {
                    assert_eq!(message, format!("{EXPECTED_PANIC}: {which}"));
                }
                other => panic!("{which}: {other:?}"),
            }
        }
        // The one worker, the tokio runtime and the blocking pool all keep working.
        run_counters(sched.handle(), 5, 20);
    }
    assert_eq!(sched.live_processes(), 0);
}

#[test]

fn an_async_handler_panicking_before_returning_its_future_completes_the_yield_once() {
    quiet_panics();
    let sched = Scheduler::builder()
        .workers(1)
        .async_handler(
            |_: AsyncPanicsOnCreate| -> std::future::Ready<Result<Payload, CommandError>> {
                panic!("{EXPECTED_PANIC}: async handler creation")
            },
        )
        .build()
        .unwrap();
    match yield_one(&sched, AsyncPanicsOnCreate).unwrap_err() {
        CommandError::Panicked(message) => {
            assert_eq!(message, format!("{EXPECTED_PANIC}: async handler creation"));
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Step errors and panics
// ---------------------------------------------------------------------------------------------

#[test]
fn step_errors_step_panics_and_close_panics_are_reported_and_the_worker_survives() {
    quiet_panics();
    let sched = counter_sched(1);
    let closes = support::counter();
    for _ in 0..scaled(20) {
        let failing = sched
            .spawn(
                FnProcess::new(&closes, |_, _| Err("out of cheese".into())),
                "run",
                Payload::empty(),
            )
            .unwrap();
        let pid = failing.pid();
        let err = join(failing).unwrap_err();
        assert!(err.is_failed(), "{err:?}");
        assert!(!err.is_panicked() && !err.is_terminated() && !err.is_cancelled());
        assert_eq!(err.pid(), pid);
        assert_eq!(
            std::error::Error::source(&err).map(|s| s.to_string()),
            Some("out of cheese".to_owned())
        );
        assert_eq!(err.into_failure().unwrap().to_string(), "out of cheese");

        let mut steps = 0;
        let panicking = sched
            .spawn(
                FnProcess::new(&closes, move |_, out| {
                    steps += 1;
                    if steps == 3 {
                        panic!("{EXPECTED_PANIC}: in step");
                    }
                    out.continue_();
                    Ok(())
                }),
                "run",
                Payload::empty(),
            )
            .unwrap();
        let err = join(panicking).unwrap_err();
        assert!(err.is_panicked(), "{err:?}");
        assert_eq!(
            err.panic_message(),
            Some(&*format!("{EXPECTED_PANIC}: in step"))
        );

        let close_panics = FnProcess::new(&closes, |_, out| {
            out.done(Payload::new(1u8));
            Ok(())
        })
        .on_close(|| panic!("{EXPECTED_PANIC}: in close"));
        let err = join(sched.spawn(close_panics, "run", Payload::empty()).unwrap()).unwrap_err();
        assert!(err.is_panicked(), "{err:?}");
        assert!(
            err.panic_message()
                .unwrap()
                .contains(&format!("{EXPECTED_PANIC}: in close")),
            "{err:?}"
        );

        // The single worker keeps running.
        run_counters(sched.handle(), 3, 10);
    }
    assert_eq!(count(&closes), 3 * scaled(20), "close ran once per process");
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

#[test]
fn a_message_wakes_an_idle_process_never_lost_in_the_race_with_its_first_step() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes = support::counter();
    let n = scaled(10_000);
    // Two sender threads send to each process as soon as it is spawned, racing its first step
    // (queued, running, or already idle).
    let mut senders = Vec::new();
    let mut sender_threads = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::channel::<Pid>();
        let handle = sched.handle().clone();
        senders.push(tx);
        sender_threads.push(thread::spawn(move || {
            for pid in rx {
                handle
                    .send(pid, Message::new("wake", Payload::new(pid.as_u64())))
                    .expect("the process waits for this message");
            }
        }));
    }
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let handle = sched
                .spawn(
                    FnProcess::new(&closes, echo_step()),
                    "run",
                    Payload::empty(),
                )
                .unwrap();
            senders[i % 2].send(handle.pid()).unwrap();
            handle
        })
        .collect();
    drop(senders);
    let pids: Vec<Pid> = handles.iter().map(|h| h.pid()).collect();
    for (result, pid) in join_all(handles).into_iter().zip(pids) {
        assert_eq!(result.unwrap().downcast::<u64>().unwrap(), pid.as_u64());
    }
    for thread in sender_threads {
        thread.join().unwrap();
    }
    assert_eq!(count(&closes), n);
    assert_eq!(sched.live_processes(), 0);
}

#[test]
fn send_to_a_finished_or_never_issued_pid_is_not_found() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let closes = support::counter();
    let handle = sched
        .spawn(
            FnProcess::new(&closes, echo_step()),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let pid = handle.pid();
    sched
        .send(pid, Message::new("t", Payload::new(5u8)))
        .unwrap();
    assert_eq!(join(handle).unwrap().downcast::<u8>().unwrap(), 5);
    assert_eq!(
        refusal(sched.send(pid, Message::new("late", Payload::empty()))),
        Err((SendErrorKind::NotFound, pid))
    );
    assert_eq!(sched.state(pid), None);
    let never = Pid::from_raw(u64::MAX).unwrap();
    assert_eq!(
        refusal(sched.send(never, Message::new("t", Payload::empty()))),
        Err((SendErrorKind::NotFound, never))
    );
    assert_eq!(sched.state(never), None);
    assert_eq!(count(&closes), 1);
}

#[test]
fn a_process_that_always_continues_does_not_starve_others_on_one_worker() {
    let sched = counter_sched(1);
    let closes = support::counter();
    let (started_tx, started_rx) = mpsc::channel();
    let mut spins = 0u64;
    let spinner = sched
        .spawn(
            FnProcess::new(&closes, move |events, out| {
                spins += 1;
                if spins == 1 {
                    started_tx.send(()).unwrap();
                }
                if events.drain().any(|e| matches!(e, Event::Message(_))) {
                    out.done(Payload::new(spins));
                } else {
                    out.continue_();
                }
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    recv(&started_rx);
    // The one worker is busy with the spinner; others still complete, from outside and from
    // inside the worker (a process that spawns more).
    run_counters(sched.handle(), scaled(100), 20);
    let idle_closes = support::counter();
    let idlers: Vec<_> = (0..scaled(50))
        .map(|_| {
            sched
                .spawn(
                    FnProcess::new(&idle_closes, echo_step()),
                    "run",
                    Payload::empty(),
                )
                .unwrap()
        })
        .collect();
    for idler in &idlers {
        sched
            .send(idler.pid(), Message::new("go", Payload::new(1u32)))
            .unwrap();
    }
    for result in join_all(idlers) {
        assert_eq!(result.unwrap().downcast::<u32>().unwrap(), 1);
    }
    assert!(!spinner.is_finished(), "the spinner is still spinning");
    sched
        .send(spinner.pid(), Message::new("stop", Payload::empty()))
        .unwrap();
    let spins = join(spinner).unwrap().downcast::<u64>().unwrap();
    assert!(spins > 1);
    assert_eq!(count(&closes), 1);
}

/// Finishes after `expected` messages; records how many events each step saw and the message
/// ids in arrival order.
struct Flooded {
    expected: usize,
    batches: Vec<usize>,
    ids: Vec<u32>,
}

impl Process for Flooded {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        self.batches.push(events.len());
        for event in events.drain() {
            match event {
                Event::Message(m) => self
                    .ids
                    .push(m.payload.downcast::<u32>().map_err(|_| "id")?),
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if self.ids.len() == self.expected {
            let batches = std::mem::take(&mut self.batches);
            out.done(Payload::new((batches, std::mem::take(&mut self.ids))));
        } else {
            out.idle();
        }
        Ok(())
    }
}

const FLOOD: usize = 1_000;

/// Spawns `flooded` while the only worker is blocked, sends it [`FLOOD`] messages, releases the
/// worker, and checks that they arrive in steps of at most 8 (`max_batch`), each once, in order.
/// `flooded` finishes with `(batch sizes, message ids)`.
fn check_flood(flooded: impl Process<Output = Payload>) {
    let sched = Scheduler::builder()
        .workers(1)
        .max_batch(8)
        .build()
        .unwrap();
    let closes = support::counter();
    // Occupy the only worker so the flooded process cannot take its first step yet.
    let (gate, inside) = step_gate();
    let blocker = sched
        .spawn(
            FnProcess::new(&closes, move |_, out| {
                inside.wait();
                out.done(Payload::empty());
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    recv(&gate.entered);
    let flooded = sched.spawn(flooded, "run", Payload::empty()).unwrap();
    assert_eq!(sched.state(flooded.pid()), Some(ProcessState::Ready));
    for id in 0..FLOOD as u32 {
        sched
            .send(flooded.pid(), Message::new("flood", Payload::new(id)))
            .unwrap();
    }
    gate.release.send(()).unwrap();
    join(blocker).unwrap();
    let (batches, ids) = join(flooded)
        .unwrap()
        .downcast::<(Vec<usize>, Vec<u32>)>()
        .unwrap();
    assert!(batches.len() >= FLOOD / 8, "{} steps", batches.len());
    assert!(batches.iter().all(|&b| b <= 8), "{batches:?}");
    assert_eq!(
        ids,
        (0..FLOOD as u32).collect::<Vec<_>>(),
        "each once, in order"
    );
}

/// An idle process with a backlog past one batch keeps stepping (nothing else would wake it).
#[test]
fn a_flooded_mailbox_is_delivered_in_bounded_batches_in_order() {
    check_flood(Flooded {
        expected: FLOOD,
        batches: Vec::new(),
        ids: Vec::new(),
    });
}

/// The same contract with a process that keeps itself runnable (`Continue`).
#[test]
fn a_flooded_mailbox_is_delivered_in_bounded_batches_to_a_continuing_process() {
    let closes = support::counter();
    let mut batches = Vec::new();
    let mut ids = Vec::new();
    check_flood(FnProcess::new(&closes, move |events, out| {
        batches.push(events.len());
        for event in events.drain() {
            match event {
                Event::Message(m) => ids.push(m.payload.downcast::<u32>().unwrap()),
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if ids.len() == FLOOD {
            out.done(Payload::new((batches.clone(), ids.clone())));
        }
        Ok(())
    }));
}

#[test]
fn yields_of_a_done_step_are_dropped_without_invoking_their_handlers() {
    let counts = KindCounts::default();
    let mut builder = Scheduler::builder();
    builder.workers(1);
    kind_handlers(&mut builder, &counts);
    let sched = builder.build().unwrap();
    let closes = support::counter();
    let done_with_yields = FnProcess::new(&closes, |_, out| {
        for (tag, kind) in KINDS.into_iter().enumerate() {
            yield_kind(out, tag as Tag, kind);
        }
        out.done(Payload::new(99u32));
        Ok(())
    });
    let handle = sched
        .spawn(done_with_yields, "run", Payload::empty())
        .unwrap();
    assert_eq!(join(handle).unwrap().downcast::<u32>().unwrap(), 99);
    for kind in KINDS {
        assert_eq!(counts.get(kind), 0, "{kind:?} handler invoked");
    }
    // The same yields from a step that is not Done each run once.
    let plan = vec![KINDS
        .into_iter()
        .enumerate()
        .map(|(t, k)| (t as Tag, k))
        .collect()];
    let handle = sched
        .spawn(Staggered::new(plan.clone()), "run", Payload::empty())
        .unwrap();
    check_seen_once(&join(handle).unwrap().downcast().unwrap(), &plan);
    for kind in KINDS {
        assert_eq!(counts.get(kind), 1, "{kind:?} handler invocations");
    }
    assert_eq!(count(&closes), 1);
}

// ---------------------------------------------------------------------------------------------
// Spawning from everywhere
// ---------------------------------------------------------------------------------------------

/// Sends its input (a `u64`) to `parent`, then finishes.
struct Child {
    parent: Pid,
    value: u64,
    sched: Option<SchedulerHandle>,
}

impl Process for Child {
    type Output = Payload;
    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, input: Payload) -> Result<(), InitError> {
        self.value = input
            .downcast()
            .map_err(|_| InitError::failed("want a u64"))?;
        self.sched = Some(ctx.scheduler().clone());
        Ok(())
    }

    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        let sched = self.sched.as_ref().unwrap();
        sched.send(self.parent, Message::new("child", Payload::new(self.value)))?;
        out.done(Payload::empty());
        Ok(())
    }
}

/// Spawns `children` children from its first step, then sums what they send.
struct Parent {
    me: Option<Pid>,
    sched: Option<SchedulerHandle>,
    children: u64,
    received: u64,
    sum: u64,
}

impl Process for Parent {
    type Output = Payload;
    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, input: Payload) -> Result<(), InitError> {
        self.me = Some(ctx.pid());
        self.sched = Some(ctx.scheduler().clone());
        self.children = input
            .downcast()
            .map_err(|_| InitError::failed("want a u64"))?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        let sched = self.sched.clone().unwrap();
        if let Some(me) = self.me.take() {
            for value in 1..=self.children {
                let child = Child {
                    parent: me,
                    value,
                    sched: None,
                };
                // Dropping the handle does not stop the child.
                drop(sched.spawn(child, "run", Payload::new(value))?);
            }
        }
        for event in events.drain() {
            match event {
                Event::Message(m) => {
                    self.sum += m.payload.downcast::<u64>().map_err(|_| "bad body")?;
                    self.received += 1;
                }
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if self.received == self.children {
            out.done(Payload::new(self.sum));
        } else {
            out.idle();
        }
        Ok(())
    }
}

fn parent() -> Parent {
    Parent {
        me: None,
        sched: None,
        children: 0,
        received: 0,
        sum: 0,
    }
}

#[test]
fn processes_spawn_and_message_children_from_inside_a_step() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let handles = (0..scaled(20))
        .map(|_| sched.spawn(parent(), "run", Payload::new(50u64)).unwrap())
        .collect();
    for result in join_all(handles) {
        assert_eq!(result.unwrap().downcast::<u64>().unwrap(), 50 * 51 / 2);
    }
    // A parent can finish before its last child: the child sends, then finishes.
    wait_until("every child finished", || sched.live_processes() == 0);
    assert_eq!(sched.handle().registered_processes(), 0);
}

#[test]
fn spawn_from_plain_threads() {
    let sched = counter_sched(2);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let handle = sched.handle().clone();
            thread::spawn(move || run_counters(&handle, scaled(100), 10))
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(sched.live_processes(), 0);
}

/// Async command: replies twice its value after a tokio yield.
struct Double(u64);
procsched::command!(Double => Payload);

/// Yields `Double(input)` and finishes with the reply.
struct Doubler(u64);

impl Process for Doubler {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, input: Payload) -> Result<(), InitError> {
        self.0 = input
            .downcast()
            .map_err(|_| InitError::failed("want a u64"))?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        match events.pop() {
            None => {
                out.yield_command(1, Double(self.0));
                out.wait();
            }
            Some(Event::YieldComplete { tag: 1, result }) => out.done(result?),
            Some(other) => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    }
}

fn double_handler(builder: &mut procsched::SchedulerBuilder) -> &mut procsched::SchedulerBuilder {
    builder.async_handler(|Double(n): Double| async move {
        tokio::task::yield_now().await;
        Ok::<_, procsched::CommandError>(Payload::new(n * 2))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_and_await_inside_tokio_with_the_ambient_runtime() {
    // Built inside a runtime: async handlers run on it.
    let sched = double_handler(Scheduler::builder().workers(2))
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..4u64)
        .map(|t| {
            let handle = sched.handle().clone();
            tokio::spawn(async move {
                let mut sum = 0;
                for i in 0..scaled(100) as u64 {
                    let process = handle.spawn(Doubler(0), "run", Payload::new(t * 1000 + i));
                    sum += process.unwrap().await.unwrap().downcast::<u64>().unwrap();
                }
                sum
            })
        })
        .collect();
    let all = tokio::time::timeout(HANG_GUARD, futures::future::join_all(tasks))
        .await
        .expect("hang guard");
    for (t, sum) in all.into_iter().enumerate() {
        let t = t as u64;
        let expected: u64 = (0..scaled(100) as u64).map(|i| 2 * (t * 1000 + i)).sum();
        assert_eq!(sum.unwrap(), expected);
    }
    assert_eq!(sched.live_processes(), 0);
    // Dropping the scheduler inside the runtime shuts it down without panicking.
    drop(sched);
}

#[test]
fn handles_await_in_a_separate_tokio_runtime_with_the_owned_handler_runtime() {
    // Built outside any runtime: the scheduler starts its own for async handlers.
    let sched = double_handler(Scheduler::builder().workers(2))
        .build()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = sched.handle().clone();
    let sum = runtime.block_on(async move {
        let spawned: Vec<_> = (0..scaled(200) as u64)
            .map(|i| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let process = handle.spawn(Doubler(0), "run", Payload::new(i)).unwrap();
                    process.await.unwrap().downcast::<u64>().unwrap()
                })
            })
            .collect();
        let results = tokio::time::timeout(HANG_GUARD, futures::future::join_all(spawned))
            .await
            .expect("hang guard");
        results.into_iter().map(Result::unwrap).sum::<u64>()
    });
    assert_eq!(sum, (0..scaled(200) as u64).map(|i| 2 * i).sum::<u64>());
}

// ---------------------------------------------------------------------------------------------
// Observable state
// ---------------------------------------------------------------------------------------------

/// Async command that never completes.
struct Never;
procsched::command!(Never => Payload);

#[test]
fn state_observes_idle_blocked_and_none_after_completion() {
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|_: Never| std::future::pending::<Result<Payload, CommandError>>())
        .build()
        .unwrap();
    let closes = support::counter();

    let idle = sched
        .spawn(
            FnProcess::new(&closes, echo_step()),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let idle_pid = idle.pid();
    wait_for_state(sched.handle(), idle_pid, ProcessState::Idle);
    sched
        .send(idle_pid, Message::new("go", Payload::new(1u8)))
        .unwrap();
    assert_eq!(join(idle).unwrap().downcast::<u8>().unwrap(), 1);
    assert_eq!(sched.state(idle_pid), None);

    let mut yielded = false;
    let blocked = sched
        .spawn(
            FnProcess::new(&closes, move |events, out| {
                if !yielded {
                    yielded = true;
                    out.yield_command(1, Never);
                    out.wait();
                    return Ok(());
                }
                match events.pop() {
                    // A message wakes a blocked process too.
                    Some(Event::Message(m)) => out.done(m.payload),
                    other => return Err(format!("unexpected {other:?}").into()),
                }
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let blocked_pid = blocked.pid();
    wait_for_state(sched.handle(), blocked_pid, ProcessState::Blocked);
    sched
        .send(blocked_pid, Message::new("go", Payload::new(2u8)))
        .unwrap();
    assert_eq!(join(blocked).unwrap().downcast::<u8>().unwrap(), 2);
    assert_eq!(sched.state(blocked_pid), None);
    assert_eq!(count(&closes), 2);
}

// ---------------------------------------------------------------------------------------------
// Randomized stress
// ---------------------------------------------------------------------------------------------

/// A random script: rounds of yields, and how many messages to wait for.
#[derive(Clone)]
struct Script {
    seed: u64,
    rounds: Vec<Vec<(Tag, Kind)>>,
    messages: usize,
}

/// What a stress process saw.
struct Seen {
    tags: Vec<usize>,
    messages: Vec<usize>,
}

/// Emits its rounds of yields (the next round when all of the previous completed, or at random
/// earlier), waits for its messages, and counts every event; random statuses in between.
struct Stressed {
    script: Script,
    rng: Rng,
    next_round: usize,
    outstanding: usize,
    seen: Seen,
    events: support::Counter,
    closes: support::Counter,
}

impl Process for Stressed {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, input: Payload) -> Result<(), InitError> {
        self.script = input
            .downcast()
            .map_err(|_| InitError::failed("want a script"))?;
        self.rng = Rng::new(self.script.seed);
        let yields = self.script.rounds.iter().map(Vec::len).sum();
        self.seen = Seen {
            tags: vec![0; yields],
            messages: vec![0; self.script.messages],
        };
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            self.events.fetch_add(1, SeqCst);
            match event {
                Event::YieldComplete { tag, result } => {
                    let value = result?.downcast::<u64>().map_err(|_| "bad reply")?;
                    if value != tag.wrapping_mul(3) + 1 {
                        return Err(format!("tag {tag} got {value}").into());
                    }
                    *self.seen.tags.get_mut(tag as usize).ok_or("unknown tag")? += 1;
                    self.outstanding -= 1;
                }
                Event::Message(m) => {
                    let id = m.payload.downcast::<usize>().map_err(|_| "bad body")?;
                    *self.seen.messages.get_mut(id).ok_or("unknown message")? += 1;
                }
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        let rounds = &self.script.rounds;
        if self.next_round < rounds.len() && (self.outstanding == 0 || self.rng.one_in(3)) {
            for &(tag, kind) in &rounds[self.next_round] {
                yield_kind(out, tag, kind);
                self.outstanding += 1;
            }
            self.next_round += 1;
        }
        let all_yields = self.seen.tags.iter().sum::<usize>() == self.seen.tags.len();
        let all_messages = self.seen.messages.iter().sum::<usize>() == self.seen.messages.len();
        if self.next_round == rounds.len() && all_yields && all_messages {
            let seen = std::mem::replace(
                &mut self.seen,
                Seen {
                    tags: Vec::new(),
                    messages: Vec::new(),
                },
            );
            out.done(Payload::new(seen));
            return Ok(());
        }
        match self.rng.below(8) {
            0 => out.continue_(),
            1..=3 => out.idle(),
            // Wait, even with nothing outstanding: any event wakes it.
            _ => out.wait(),
        }
        if self.next_round < rounds.len() && self.outstanding == 0 && out.yield_count() == 0 {
            // Nothing to wake it for its next round: keep running.
            out.continue_();
        }
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn randomized_stress_every_event_is_delivered_exactly_once() {
    for (workers, seed) in [(1, 0xC0FFEE), (2, 0xBEEF), (4, 0xF00D)] {
        stress(workers, seed, scaled(5_000));
    }
}

fn stress(workers: usize, seed: u64, n: usize) {
    let counts = KindCounts::default();
    let mut builder = Scheduler::builder();
    builder.workers(workers);
    kind_handlers(&mut builder, &counts);
    let sched = builder.build().unwrap();
    let events = support::counter();
    let closes = support::counter();
    const SENDERS: usize = 3;

    let mut rng = Rng::new(seed);
    let scripts: Vec<Script> = (0..n)
        .map(|_| {
            let mut tag = 0;
            let rounds = (0..rng.below(5))
                .map(|_| {
                    (0..1 + rng.below(3))
                        .map(|_| {
                            tag += 1;
                            (tag - 1, KINDS[rng.below(4) as usize])
                        })
                        .collect()
                })
                .collect();
            // Fewer than DEFAULT_MAX_BATCH events per process in all.
            Script {
                seed: rng.next_u64(),
                rounds,
                messages: rng.below(7) as usize,
            }
        })
        .collect();

    // Sender threads: sender `s` sends the message ids `id % SENDERS == s` of every process,
    // while the processes run.
    let mut to_senders = Vec::new();
    let mut sender_threads = Vec::new();
    for s in 0..SENDERS {
        let (tx, rx) = mpsc::channel::<(Pid, usize)>();
        to_senders.push(tx);
        let handle = sched.handle().clone();
        sender_threads.push(thread::spawn(move || {
            for (pid, messages) in rx {
                for id in (s..messages).step_by(SENDERS) {
                    handle
                        .send(pid, Message::new("stress", Payload::new(id)))
                        .expect("the process waits for its messages");
                }
            }
        }));
    }
    let handles: Vec<_> = scripts
        .iter()
        .map(|script| {
            let process = Stressed {
                script: script.clone(),
                rng: Rng::new(0),
                next_round: 0,
                outstanding: 0,
                seen: Seen {
                    tags: Vec::new(),
                    messages: Vec::new(),
                },
                events: events.clone(),
                closes: closes.clone(),
            };
            let handle = sched
                .spawn(process, "run", Payload::new(script.clone()))
                .unwrap();
            for tx in &to_senders {
                tx.send((handle.pid(), script.messages)).unwrap();
            }
            handle
        })
        .collect();
    drop(to_senders);

    let results = join_all(handles);
    for thread in sender_threads {
        thread.join().unwrap();
    }
    for (result, script) in results.into_iter().zip(&scripts) {
        let seen = result.unwrap().downcast::<Seen>().unwrap();
        assert!(seen.tags.iter().all(|&c| c == 1), "tags {:?}", seen.tags);
        assert!(
            seen.messages.iter().all(|&c| c == 1),
            "messages {:?}",
            seen.messages
        );
        assert_eq!(seen.messages.len(), script.messages);
    }
    let yields: usize = scripts.iter().flat_map(|s| &s.rounds).map(Vec::len).sum();
    let messages: usize = scripts.iter().map(|s| s.messages).sum();
    assert_eq!(count(&events), yields + messages, "events seen in all");
    for kind in KINDS {
        let expected = scripts
            .iter()
            .flat_map(|s| s.rounds.iter().flatten())
            .filter(|y| y.1 == kind)
            .count();
        assert_eq!(counts.get(kind), expected, "{kind:?} handler invocations");
    }
    assert_eq!(count(&closes), n);
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
}
