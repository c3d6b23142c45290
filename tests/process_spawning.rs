//! Public-API tests of spawning from everywhere: from inside a step (children that message
//! their parent), from plain threads, and from tokio tasks awaiting the handles, on the ambient
//! runtime or on a separate one.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::{
    error::InitError,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload, Pid, Scheduler, SchedulerHandle,
};
use std::thread;
use support::inc_counter::{counter_sched, run_counters};
use support::*;

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

fn double_handler(
    builder: &mut procsched::config::SchedulerBuilder,
) -> &mut procsched::config::SchedulerBuilder {
    builder.async_handler(|Double(n): Double| async move {
        tokio::task::yield_now().await;
        Ok::<_, procsched::error::CommandError>(Payload::new(n * 2))
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

/// Calls tokio from its step: whether a runtime's context is there, and a `tokio::spawn`.
#[cfg(not(loom))]
struct TokioInStep;

#[cfg(not(loom))]
impl Process for TokioInStep {
    type Output = bool;
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<bool>) -> Result<(), BoxError> {
        let inside = tokio::runtime::Handle::try_current().is_ok();
        if inside {
            drop(tokio::spawn(async {}));
        }
        out.done(inside);
        Ok(())
    }
}

/// A scheduler built outside any runtime, with no handler: a state machine spawned first —
/// before any async-fn body, `cx.run` or `Scheduler::block_on` could have built the runtime
/// the scheduler makes for its processes — still steps inside a tokio context, and awaited
/// from an executor that is not tokio's. (Its step saw one or not depending on what else had
/// run first: the same program passing or panicking from one run to the next.)
#[test]
#[cfg(not(loom))]
fn a_state_machine_spawned_first_outside_tokio_steps_inside_a_tokio_context() {
    assert!(tokio::runtime::Handle::try_current().is_err());
    for _ in 0..scaled(20) {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        let handle = sched.spawn(TokioInStep, "run", Payload::empty()).unwrap();
        let inside = futures::executor::block_on(handle).expect("finished");
        assert!(inside, "the step ran without a tokio context");
    }
}
