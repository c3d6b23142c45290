//! procsched's ring of the typed-messages issue's harness, in its three forms, run by
//! `benches/messages.rs` (`ring_pids/sm`, `ring_pids/async`, `ring_addrs/async`) and by
//! `examples/msgprobe.rs` (`ring_sm`, `ring_async`, `ring_addrs`): one definition, so the probe
//! measures exactly the bench's rows. The tokio-native peer is [`crate::native_ring`].

use procsched::metrics::ProcessState;
use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, Status, StepOutput};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How a ring member is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A state machine forwarding with `SchedulerHandle::send` from its step.
    StateMachine,
    /// An `async fn` forwarding with `SchedulerHandle::send`.
    AsyncPids,
    /// An `async fn` forwarding through an `Addr<u64>`.
    AsyncAddrs,
}

/// `members` processes of `form` learn the ring's PIDs from a shared `OnceLock` and forward a
/// `u64` token until each has seen `laps` of them; timed from the first send (to members that
/// already wait) until every handle is joined.
///
/// # Examples
///
/// ```
/// use procsched_benches::ring::{run, Form};
///
/// let sched = procsched::Scheduler::builder().workers(2).build().unwrap();
/// for form in [Form::StateMachine, Form::AsyncPids, Form::AsyncAddrs] {
///     assert!(run(&sched, form, 8, 3) > std::time::Duration::ZERO);
/// }
/// ```
pub fn run(sched: &Scheduler, form: Form, members: usize, laps: u64) -> Duration {
    match form {
        Form::StateMachine => time_ring(sched, members, laps, |me, ring| {
            let node = RingNode {
                me,
                ring,
                sched: sched.handle().clone(),
                seen: 0,
                laps,
            };
            sched.spawn(node, "run", Payload::empty()).expect("spawn")
        }),
        Form::AsyncPids => time_ring(sched, members, laps, |me, ring| {
            sched
                .spawn_fn(move |cx: ProcessCx<u64>| async move {
                    let sched = cx.scheduler();
                    for _ in 0..laps {
                        let token = cx.recv().await?;
                        let ring = ring.get().ok_or("the ring is not set")?;
                        let next = ring[(me + 1) % ring.len()];
                        // The last forward may find the next member finished.
                        let _ = sched.send(next, Message::new("token", Payload::new(token + 1)));
                    }
                    Ok::<_, BoxError>(laps)
                })
                .expect("spawn")
        }),
        Form::AsyncAddrs => time_ring(sched, members, laps, |me, ring| {
            let sched = sched.handle().clone();
            sched
                .clone()
                .spawn_fn(move |cx: ProcessCx<u64>| async move {
                    let first = cx.recv().await?;
                    let ring = ring.get().ok_or("the ring is not set")?;
                    let next = sched.addr::<u64>(ring[(me + 1) % ring.len()]);
                    let _ = next.send(first + 1);
                    for _ in 1..laps {
                        let _ = next.send(cx.recv().await? + 1);
                    }
                    Ok::<_, BoxError>(laps)
                })
                .expect("spawn")
        }),
    }
}

/// A state-machine ring member: learns the ring from `ring`, forwards every token to the next
/// member with `SchedulerHandle::send`, finishes after `laps` tokens.
struct RingNode {
    me: usize,
    ring: Arc<OnceLock<Vec<Pid>>>,
    sched: SchedulerHandle,
    seen: u64,
    laps: u64,
}

impl Process for RingNode {
    type Output = u64;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        for event in events.drain() {
            if let Event::Message(message) = event {
                let token = message.payload.take::<u64>()?;
                let ring = self.ring.get().ok_or("the ring is not set")?;
                let next = ring[(self.me + 1) % ring.len()];
                self.seen += 1;
                // The last forward may find the next member finished.
                let _ = self
                    .sched
                    .send(next, Message::new("token", Payload::new(token + 1)));
            }
        }
        out.set_status(if self.seen >= self.laps {
            Status::Done(self.seen)
        } else {
            Status::Idle
        });
        Ok(())
    }
}

/// Times one ring: spawned by `spawn` (member `i` of the ring of `ring`), then the first token,
/// then every handle joined.
fn time_ring<M: 'static>(
    sched: &Scheduler,
    members: usize,
    laps: u64,
    spawn: impl Fn(usize, Arc<OnceLock<Vec<Pid>>>) -> ProcessHandle<u64, M>,
) -> Duration {
    let ring = Arc::new(OnceLock::new());
    let handles: Vec<_> = (0..members).map(|i| spawn(i, ring.clone())).collect();
    ring.set(handles.iter().map(ProcessHandle::pid).collect())
        .expect("set once");
    for handle in &handles {
        wait_until_waiting(sched, handle.pid());
    }
    let start = Instant::now();
    sched
        .send(handles[0].pid(), Message::new("token", Payload::new(0u64)))
        .expect("first send");
    for handle in handles {
        assert_eq!(sched.block_on(handle).expect("member"), laps);
    }
    start.elapsed()
}

/// Waits (a hang guard of 60 s) until `pid` waits for a message: the timed part starts with
/// every member parked.
pub fn wait_until_waiting(sched: &Scheduler, pid: Pid) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(
        sched.state(pid),
        Some(ProcessState::Idle | ProcessState::Blocked)
    ) {
        assert!(
            Instant::now() < deadline,
            "the process never started waiting"
        );
        std::thread::yield_now();
    }
}
