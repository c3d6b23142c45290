//! Public-API tests of steps and yields (`Process`, `Scheduler`): inline and async yields
//! resuming with their tags, every handler kind's completion seen exactly once, and the yields of
//! a `Done` step dropped without running.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::{
    error::{CommandError, InitError},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput, Tag},
    BoxError, Payload, Scheduler,
};
use std::collections::HashMap;
use std::sync::mpsc;
use support::handler_kinds::{kind_handlers, yield_kind, Kind, KindCounts, KINDS};
use support::inc_counter::{counter_sched, run_counters, Counter};
use support::*;

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

fn gated_handler(
    builder: &mut procsched::config::SchedulerBuilder,
) -> &mut procsched::config::SchedulerBuilder {
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
