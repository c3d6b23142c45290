//! A process still inside `init` is not shown: not by `processes`, `process_info`, `state`
//! nor the `processes` gauge of `metrics`, until its spawn succeeds.

use procsched::error::InitError;
use procsched::prelude::*;
use procsched::state_machine::{Events, Process, ProcessContext, StepOutput};
use std::sync::mpsc;
use std::time::Duration;

/// Hang guard: a test that fails must not wait forever.
const GUARD: Duration = Duration::from_secs(30);

/// Tells its PID from inside `init`, then stays there until released; waits for a message.
struct HeldInInit {
    inside: mpsc::Sender<Pid>,
    release: mpsc::Receiver<()>,
}

impl Process for HeldInInit {
    type Output = ();
    fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        self.inside.send(ctx.pid()).map_err(InitError::failed)?;
        self.release.recv_timeout(GUARD).map_err(InitError::failed)
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        if events.drain().next().is_some() {
            out.done(());
        } else {
            out.idle();
        }
        Ok(())
    }
}

#[test]
fn a_process_inside_init_is_not_shown_until_its_spawn_succeeds() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let (inside_tx, inside) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let handle = sched.handle().clone();
    let spawner = std::thread::spawn(move || {
        let process = HeldInInit {
            inside: inside_tx,
            release: release_rx,
        };
        handle
            .spawn(process, "run", Payload::empty())
            .map_err(|e| e.to_string())
    });
    let pid = inside.recv_timeout(GUARD).expect("init ran");

    assert_eq!(sched.handle().processes().count(), 0, "listed inside init");
    assert_eq!(sched.metrics().processes.total(), 0, "counted inside init");
    assert_eq!(sched.state(pid), None, "a state inside init");
    assert!(
        sched.handle().process_info(pid).is_none(),
        "info inside init"
    );

    release.send(()).unwrap();
    let spawned = spawner.join().unwrap().expect("spawned");
    assert_eq!(spawned.pid(), pid);
    assert!(sched.state(pid).is_some(), "shown once spawned");
    assert!(sched.handle().process_info(pid).is_some());
    assert_eq!(sched.handle().processes().count(), 1);
    assert_eq!(sched.metrics().processes.total(), 1);

    sched
        .send(pid, Message::new("go", Payload::empty()))
        .unwrap();
    sched.block_on(spawned).unwrap();
    sched.shutdown(Duration::from_secs(5));
}
