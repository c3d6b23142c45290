//! Randomized stress of the process contract: many processes with random rounds of yields of
//! every handler kind, random statuses and messages from several threads; every event is
//! delivered exactly once.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::{
    error::InitError,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput, Tag},
    BoxError, Message, Payload, Pid, Scheduler,
};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc;
use std::thread;
use support::handler_kinds::{kind_handlers, yield_kind, Kind, KindCounts, KINDS};
use support::*;

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
