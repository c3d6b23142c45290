//! The `Counter` test process (yields the inline `Inc` until it reaches a target) and the
//! schedulers and runs built around it: the process-contract tests use it as a well-behaved
//! workload that must keep completing.

use super::{self as support, count, join_all};
use procsched::{
    error::InitError,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Payload, Scheduler, SchedulerHandle,
};
use std::sync::atomic::Ordering::SeqCst;

/// Inline command: replies `n + 1`.
pub(crate) struct Inc(pub(crate) u64);
procsched::command!(Inc => Payload);

/// Yields `Inc` until its value reaches the target, one yield per step; finishes with
/// `(value, steps)`.
pub(crate) struct Counter {
    target: u64,
    value: u64,
    steps: u64,
    closes: support::Counter,
}

impl Counter {
    pub(crate) fn new(closes: &support::Counter) -> Counter {
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

pub(crate) fn with_inc(
    builder: &mut procsched::config::SchedulerBuilder,
) -> &mut procsched::config::SchedulerBuilder {
    builder
        .inline_handler(|Inc(n): Inc| Ok::<_, procsched::error::CommandError>(Payload::new(n + 1)))
}

pub(crate) fn counter_sched(workers: usize) -> Scheduler {
    with_inc(Scheduler::builder().workers(workers))
        .build()
        .expect("scheduler starts")
}

/// Spawns `count` counters to `target` and checks each result.
pub(crate) fn run_counters(sched: &SchedulerHandle, n: usize, target: u64) {
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
