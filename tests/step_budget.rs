//! A poll that ends on its step budget with inline completions not yet stepped: they must reach
//! the next poll's steps, each exactly once and in order, whatever the process's status.

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
