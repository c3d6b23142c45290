//! A poll that ends on its step budget with inline completions not yet stepped: they must reach
//! the next poll's steps, each exactly once and in order, whatever the process's status.
//! They come to the next step all together, beyond `max_batch`.

use procsched::prelude::*;
use procsched::Message;
use procsched::{
    error::CommandError,
    state_machine::{Event, Events, Process, StepOutput},
};

struct Inc(u64);
procsched::command!(Inc => u64);

/// Yields `Inc` `remaining` times (`fan` at a time), checking that the completions come back in
/// the order of their tags; counts messages too. `Continue` instead of `Wait` when `eager`.
struct Chain {
    remaining: u64,
    fan: u64,
    next_tag: u64,
    expected_tag: u64,
    sum: u64,
    messages: u64,
    eager: bool,
}

impl Process for Chain {
    type Output = (u64, u64);
    fn step(
        &mut self,
        events: &mut Events,
        out: &mut StepOutput<(u64, u64)>,
    ) -> Result<(), BoxError> {
        let mut outstanding = self.next_tag - self.expected_tag;
        for event in events.drain() {
            match event {
                Event::YieldComplete { tag, result } => {
                    assert_eq!(tag, self.expected_tag, "completions in order, once each");
                    self.expected_tag += 1;
                    outstanding -= 1;
                    self.sum += result?.take::<u64>()?;
                }
                Event::Message(_) => self.messages += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        if self.remaining == 0 && outstanding == 0 {
            out.done((self.sum, self.messages));
            return Ok(());
        }
        if outstanding == 0 {
            for _ in 0..self.fan.min(self.remaining) {
                out.yield_command(self.next_tag, Inc(self.next_tag));
                self.next_tag += 1;
                self.remaining -= 1;
            }
        }
        if self.eager {
            out.continue_();
        } else {
            out.wait();
        }
        Ok(())
    }
}

fn run(budget: usize, fan: u64, eager: bool) {
    let sched = Scheduler::builder()
        .workers(2)
        .step_budget(budget)
        .monitor(false)
        .inline_handler(|Inc(n): Inc| Ok::<_, CommandError>(n + 1))
        .build()
        .unwrap();
    const YIELDS: u64 = 500;
    const MESSAGES: u64 = 200;
    let chain = Chain {
        remaining: YIELDS,
        fan,
        next_tag: 0,
        expected_tag: 0,
        sum: 0,
        messages: 0,
        eager,
    };
    let handle = sched.spawn(chain, "run", Payload::empty()).unwrap();
    let pid = handle.pid();
    let mut sent = 0;
    for _ in 0..MESSAGES {
        if sched.send(pid, Message::new("m", Payload::empty())).is_ok() {
            sent += 1;
        }
    }
    let (sum, messages) = sched.block_on(handle).unwrap();
    assert_eq!(sum, (1..=YIELDS).sum::<u64>());
    // Messages sent after the last completion may find the process finished.
    assert!(messages <= sent);
}

#[test]
fn inline_completions_left_at_the_end_of_a_budget_reach_the_next_poll_in_order() {
    for budget in [1, 2, 3] {
        for fan in [1, 2, 5] {
            for eager in [false, true] {
                run(budget, fan, eager);
            }
        }
    }
}

/// Yields `k` inline commands in its first step; records how many events each later step gets.
struct Burst {
    k: u64,
    started: bool,
    seen: u64,
    per_step: Vec<usize>,
}

impl Process for Burst {
    type Output = Vec<usize>;
    fn step(
        &mut self,
        events: &mut Events,
        out: &mut StepOutput<Vec<usize>>,
    ) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            for tag in 0..self.k {
                out.yield_command(tag, Inc(tag));
            }
            out.wait();
            return Ok(());
        }
        self.per_step.push(events.len());
        self.seen += events.drain().count() as u64;
        if self.seen == self.k {
            out.done(std::mem::take(&mut self.per_step));
        } else {
            out.wait();
        }
        Ok(())
    }
}

#[test]
fn a_steps_inline_completions_reach_the_next_step_together_whatever_the_budget() {
    // "At most `max_batch` mailbox events per step, plus the completions of the previous step's
    // inline yields" (module docs of `process`). With a budget of one step a poll, the
    // completions wait in the mailbox for the next poll; they were counted against `max_batch`
    // there, and split: [1, 1, ..., 1] at `max_batch(1)`, [64, 36] at 64.
    for (k, max_batch) in [(10, 1), (100, 64)] {
        for budget in [1, 2] {
            let sched = Scheduler::builder()
                .workers(1)
                .max_batch(max_batch)
                .step_budget(budget)
                .inline_handler(|Inc(n): Inc| Ok::<_, CommandError>(n))
                .build()
                .unwrap();
            let burst = Burst {
                k,
                started: false,
                seen: 0,
                per_step: Vec::new(),
            };
            let handle = sched.spawn(burst, "run", Payload::empty()).unwrap();
            let per_step = sched.block_on(handle).unwrap();
            assert_eq!(
                per_step,
                vec![k as usize],
                "k {k}, max_batch {max_batch}, step_budget {budget}"
            );
        }
    }
}
