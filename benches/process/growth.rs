//! Cost per process as the number of live processes grows (flat is the goal).
//!
//! In a fresh child process per peer and size (see [`crate::rss`]), the bench thread:
//! 1. spawns `live` resident processes, each of which counts down once on its first step, and
//!    waits for all of them: **spawn** time per process (spawn until first step, so the work
//!    the workers do for a spawn is included) and the growth of the RSS high-water mark, per
//!    live process (**memory**);
//! 2. sends one message to each of them in turn: **send** time per message, on the sending
//!    thread only, as `send_to_blocked` measures it;
//! 3. waits until every process has handled its message: **send → handled** per message;
//! 4. sends each a `stop` and waits until all have finished.
//!
//! Addresses are kept in a vector filled (and so paged in) before the first measurement, so
//! they are not counted as the peer's memory. No handles are kept: processes are detached.

use std::time::Instant;

use procsched::{
    error::InitError,
    state_machine::{Event, Events, ProcessContext, StepOutput},
    BoxError, Message, Payload,
};
use procsched_benches::{CountDown, CountDownHandle};
use tokio::runtime::Runtime;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::net::Net;
use crate::process_peer::ProcessPeer;
use crate::processes::expect_run;
use crate::samples::{vm_hwm_kib, GrowthSample};

/// Live processes of each growth measurement, in a full run.
pub(crate) const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];
/// The same with `--quick` (the million costs the slower peer tens of seconds).
pub(crate) const QUICK_SIZES: [usize; 2] = [10_000, 100_000];

/// Runs the four phases of the module docs, given how to spawn a resident (counting down on
/// `round`) and how to send it a ping or a stop.
fn measure<A>(
    live: usize,
    mut spawn: impl FnMut(&CountDownHandle) -> A,
    mut send: impl FnMut(&A, bool),
) -> GrowthSample {
    let done = CountDown::new(format!("growth with {live} processes"));
    let mut addrs: Vec<Option<A>> = Vec::with_capacity(live);
    addrs.resize_with(live, || None);
    let before_kib = vm_hwm_kib();
    let round = done.arm(live);
    let started = Instant::now();
    for slot in &mut addrs {
        *slot = Some(spawn(&round));
    }
    drop(round);
    done.wait();
    let spawned = started.elapsed();
    let after_kib = vm_hwm_kib();

    let _round = done.arm(live);
    let started = Instant::now();
    for addr in addrs.iter().flatten() {
        send(addr, true);
    }
    let sent = started.elapsed();
    done.wait();
    let handled = started.elapsed();

    let _round = done.arm(live);
    for addr in addrs.iter().flatten() {
        send(addr, false);
    }
    done.wait();
    GrowthSample::new(live, [spawned, sent, handled], before_kib, after_kib)
}

/// A process that stays alive until told to stop; counts down its round on its first step,
/// on every `ping` and on `stop`.
struct Resident {
    round: CountDownHandle,
    started: bool,
}

impl procsched::state_machine::Process for Resident {
    type Output = procsched::Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        expect_run(method)
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            self.round.count_down();
        }
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            self.round.count_down();
            if &*message.topic == "stop" {
                out.done(Payload::empty());
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    }
}

/// [`Peer::growth`](crate::workload::Peer::growth) of a process peer.
pub(crate) fn processes<R: ProcessPeer>(peer: &R, live: usize) -> GrowthSample {
    measure::<<R::Net as Net>::Addr>(
        live,
        |round| {
            let resident = Resident {
                round: round.clone(),
                started: false,
            };
            // Dropping the handle detaches the process.
            R::addr(&peer.spawn(resident, Payload::empty()))
        },
        |addr, ping| {
            let topic = if ping { "ping" } else { "stop" };
            peer.send(addr, Message::new(topic, Payload::empty()));
        },
    )
}

/// The message of a native resident task.
enum ResidentMsg {
    Ping,
    Stop,
}

/// A native resident: the same as [`Resident`], as a task with a typed mailbox.
async fn resident(mut mailbox: UnboundedReceiver<ResidentMsg>, round: CountDownHandle) {
    round.count_down();
    while let Some(message) = mailbox.recv().await {
        round.count_down();
        match message {
            ResidentMsg::Ping => {}
            ResidentMsg::Stop => break,
        }
    }
}

/// [`Peer::growth`](crate::workload::Peer::growth) of the tokio-native peer.
pub(crate) fn native(runtime: &Runtime, live: usize) -> GrowthSample {
    measure(
        live,
        |round| {
            let (to, mailbox) = unbounded_channel();
            // Dropping the `JoinHandle` detaches the task.
            drop(runtime.spawn(resident(mailbox, round.clone())));
            to
        },
        |to, ping| {
            let message = if ping {
                ResidentMsg::Ping
            } else {
                ResidentMsg::Stop
            };
            if to.send(message).is_err() {
                panic!("growth: a resident task has finished");
            }
        },
    )
}
