//! The ask servers of the messages bench's `ask_*` groups, on procsched and on tokio-native:
//! each answers `(n, reply)` with `n + 1`; and a state machine that asks one ([`StepAsker`]). Used by `benches/messages.rs` (criterion) and by
//! `examples/msgprobe.rs` (`ask_between`, `ask_task`, `ask_native`): one definition, so the
//! probe's numbers measure the same servers as the bench's.

use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, StepOutput};
use tokio::sync::{mpsc, oneshot};

/// procsched's server: a process answering `(n, reply)` with `n + 1` until it is terminated
/// (or the scheduler shuts down). Stop it with `sched.terminate(addr.pid())`.
pub fn spawn_server(sched: &Scheduler) -> Addr<(u64, Reply<u64>)> {
    sched
        .spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
            loop {
                let (n, reply) = cx.recv().await?;
                let _ = reply.send(n + 1);
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .expect("spawn")
        .addr()
}

/// The tokio-native server: a task on `runtime` answering `(n, oneshot)` requests with
/// `n + 1`; it ends when every clone of the returned sender is dropped.
pub fn spawn_native_server(
    runtime: &tokio::runtime::Runtime,
) -> mpsc::UnboundedSender<(u64, oneshot::Sender<u64>)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(u64, oneshot::Sender<u64>)>();
    runtime.spawn(async move {
        while let Some((n, reply)) = rx.recv().await {
            let _ = reply.send(n + 1);
        }
    });
    tx
}

/// A state machine asking `server` `asks` times, one ask after the other, each yielded with
/// [`Addr::ask_command`] and read back as its yield's completion (the step waits `Blocked`
/// between them). Spawn it with `sched.spawn(asker, "run", Payload::empty())`; it ends with
/// the number of answers.
#[derive(Debug)]
pub struct StepAsker {
    server: Addr<(u64, Reply<u64>)>,
    asks: u64,
    answered: u64,
    started: bool,
}

impl StepAsker {
    /// An asker of `asks` asks to `server`.
    pub fn new(server: Addr<(u64, Reply<u64>)>, asks: u64) -> StepAsker {
        StepAsker {
            server,
            asks,
            answered: 0,
            started: false,
        }
    }

    fn ask(&self, out: &mut StepOutput<u64>) {
        let n = self.answered;
        out.yield_command(n, self.server.ask_command(move |reply| (n, reply)));
    }
}

impl Process for StepAsker {
    type Output = u64;

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            self.ask(out);
            out.wait();
            return Ok(());
        }
        for event in events.drain() {
            if let Event::YieldComplete { tag, result } = event {
                let answer = result?.take::<u64>()?;
                debug_assert_eq!(answer, tag + 1);
                self.answered += 1;
            }
        }
        if self.answered == self.asks {
            out.done(self.answered);
        } else {
            self.ask(out);
            out.wait();
        }
        Ok(())
    }
}
