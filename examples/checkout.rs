//! The procsched demo: 10 000 checkout workflows, each an explicit state machine.
//!
//! Each workflow looks its cart's price up (an inline handler), charges the card (an async
//! handler running on tokio), then waits for a `confirm` message sent from another thread, and
//! finishes with a receipt. A second batch is still waiting when the scheduler shuts down: they
//! get a `Cancel` event and finish gracefully.
//!
//! Run with `cargo run --release --example checkout`.

use procsched::{
    BoxError, CommandError, Event, Events, InitError, Message, Payload, Process, ProcessContext,
    Scheduler, StepOutput,
};
use std::time::{Duration, Instant};

/// Command: price of a cart (answered inline, on the worker).
struct PriceLookup {
    items: u32,
}
procsched::command!(PriceLookup => Payload);

/// Command: charge a card (answered by an async handler on tokio).
struct Charge {
    cents: u64,
}
procsched::command!(Charge => Payload);

#[derive(Debug)]
struct Receipt {
    order: u64,
    cents: u64,
}

enum Stage {
    Start,
    Pricing,
    Charging,
    AwaitingConfirm,
}

struct Checkout {
    order: u64,
    items: u32,
    cents: u64,
    stage: Stage,
    confirmed: bool,
}

impl Checkout {
    fn new() -> Checkout {
        Checkout {
            order: 0,
            items: 0,
            cents: 0,
            stage: Stage::Start,
            confirmed: false,
        }
    }
}

impl Process for Checkout {
    type Output = Payload;
    fn init(
        &mut self,
        _: &ProcessContext<'_>,
        method: &str,
        input: Payload,
    ) -> Result<(), InitError> {
        match method {
            "checkout" => {
                let (order, items) = input.downcast::<(u64, u32)>().map_err(|p| {
                    InitError::failed(format!("expected (order, items), got {p:?}"))
                })?;
                self.order = order;
                self.items = items;
                Ok(())
            }
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            match (event, &self.stage) {
                (Event::YieldComplete { tag: 1, result }, Stage::Pricing) => {
                    self.cents = result?.downcast::<u64>().map_err(|_| "bad price")?;
                    out.yield_command(2, Charge { cents: self.cents });
                    self.stage = Stage::Charging;
                }
                (Event::YieldComplete { tag: 2, result }, Stage::Charging) => {
                    result?;
                    self.stage = Stage::AwaitingConfirm;
                }
                // The confirmation may overtake pricing and charging: remember it.
                (Event::Message(m), _) if m.topic == "confirm" => self.confirmed = true,
                (Event::Cancel { .. }, _) => {
                    out.done(Payload::new("cancelled"));
                    return Ok(());
                }
                (other, _) => return Err(format!("unexpected event {other:?}").into()),
            }
        }
        match self.stage {
            Stage::Start => {
                out.yield_command(1, PriceLookup { items: self.items });
                self.stage = Stage::Pricing;
                out.wait();
            }
            Stage::Pricing | Stage::Charging => out.wait(),
            Stage::AwaitingConfirm if self.confirmed => out.done(Payload::new(Receipt {
                order: self.order,
                cents: self.cents,
            })),
            Stage::AwaitingConfirm => out.idle(),
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sched = Scheduler::builder()
        .inline_handler(|PriceLookup { items }: PriceLookup| {
            Ok::<_, procsched::CommandError>(Payload::new(u64::from(items) * 1_250))
        })
        .async_handler(|Charge { cents }: Charge| async move {
            tokio::task::yield_now().await; // stands in for a network round trip
            if cents == 0 {
                return Err(CommandError::failed("empty cart"));
            }
            Ok(Payload::empty())
        })
        .build()?;

    let orders: u64 = 10_000;
    let started = Instant::now();
    let handles: Vec<_> = (0..orders)
        .map(|order| {
            sched.spawn(
                Checkout::new(),
                "checkout",
                Payload::new((order, 1 + (order % 5) as u32)),
            )
        })
        .collect::<Result<_, _>>()?;

    // Confirm every order from another thread, while the workflows run.
    let confirmer = {
        let sched = sched.handle().clone();
        let pids: Vec<_> = handles.iter().map(|h| h.pid()).collect();
        std::thread::spawn(move || {
            for pid in pids {
                // A workflow may still be pricing or charging: the message waits in its mailbox.
                sched
                    .send(pid, Message::new("confirm", Payload::empty()))
                    .expect("workflow is alive until confirmed");
            }
        })
    };
    let mut revenue = 0;
    for handle in handles {
        let receipt = sched
            .block_on(handle)?
            .downcast::<Receipt>()
            .map_err(|_| "not a receipt")?;
        revenue += receipt.cents;
        debug_assert!(receipt.order < orders);
    }
    confirmer.join().expect("confirmer thread");
    let elapsed = started.elapsed();
    println!(
        "{orders} checkouts done in {elapsed:.2?} ({:.0} ns each): revenue ${}.{:02}",
        elapsed.as_nanos() as f64 / orders as f64,
        revenue / 100,
        revenue % 100
    );

    // A second batch, left waiting for a confirmation that never comes.
    for order in 0..100 {
        let handle = sched.spawn(
            Checkout::new(),
            "checkout",
            Payload::new((orders + order, 1u32)),
        )?;
        drop(handle); // detached: the process keeps running
    }
    let unknown = sched.spawn(Checkout::new(), "refund", Payload::empty());
    println!(
        "spawning with an unknown entry method: {}",
        unknown.unwrap_err()
    );

    let total = sched.metrics().executor.total();
    println!(
        "workers: {} polls, {} tasks stolen in {} steals, {} parks",
        total.polls, total.stolen, total.steal_ops, total.parks
    );
    let report = sched.shutdown(Duration::from_secs(5));
    println!(
        "shutdown: {} waiting workflows finished gracefully on Cancel, {} forced",
        report.graceful, report.forced
    );
    Ok(())
}
