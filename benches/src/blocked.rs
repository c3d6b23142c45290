//! The receiver of the process bench's `send_to_blocked`, on procsched and on tokio-native:
//! blocked on a call that never completes, counting the messages it is sent. Shared by the
//! bench and by `examples/send_size.rs`, which runs the same receivers with other message sizes.

use std::hint::black_box;
use std::sync::mpsc;

use procsched::{
    error::{CommandError, InitError},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Payload,
};
use tokio::runtime::Handle;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::task::JoinHandle;

/// An async command that never completes: the process yielding it stays blocked on it.
#[derive(Debug)]
pub struct Never;
procsched::command!(Never => Payload);

/// The handler of [`Never`].
pub async fn never(_: Never) -> Result<Payload, CommandError> {
    std::future::pending().await
}

/// procsched's receiver: blocks on a [`Never`] yield (spawn it with method `"run"`) and counts
/// the messages it is sent. A message on topic `flush` reports the count so far on its `ack`
/// channel; one on `stop` finishes the process with the count.
#[derive(Debug)]
pub struct Blocked {
    started: bool,
    received: u64,
    ack: mpsc::Sender<u64>,
}

impl Blocked {
    /// A receiver that reports its counts on `ack`.
    pub fn new(ack: mpsc::Sender<u64>) -> Blocked {
        Blocked {
            started: false,
            received: 0,
            ack,
        }
    }
}

impl Process for Blocked {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        match method {
            "run" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.yield_command(1, Never);
        }
        for event in events.drain() {
            let Event::Message(message) = event else {
                return Err(format!("unexpected {event:?}").into());
            };
            match &*message.topic {
                "flush" => self.ack.send(self.received)?,
                "stop" => {
                    out.done(Payload::new(self.received));
                    return Ok(());
                }
                _ => self.received += 1,
            }
        }
        out.wait();
        Ok(())
    }
}

/// The message of tokio-native's receiver: a counted message carrying a `T`, or a request.
#[derive(Debug)]
pub enum BlockedMsg<T> {
    /// One of the counted messages.
    Count(T),
    /// Report the count so far.
    Flush,
    /// Finish with the count.
    Stop,
}

/// tokio-native's receiver, as a tokio user writes it: a task that `select!`s between its
/// mailbox and a spawned call that never completes. It counts the [`BlockedMsg::Count`]s, sends
/// the count on `ack` at each [`BlockedMsg::Flush`], and finishes with it at
/// [`BlockedMsg::Stop`]. Returns the mailbox's sender and the task.
pub fn spawn_native_receiver<T: Send + 'static>(
    runtime: &Handle,
    ack: mpsc::Sender<u64>,
) -> (UnboundedSender<BlockedMsg<T>>, JoinHandle<u64>) {
    let (to, mut mailbox) = unbounded_channel::<BlockedMsg<T>>();
    let task = runtime.spawn(async move {
        // The call it is blocked on, which never completes.
        let mut call = tokio::spawn(std::future::pending::<()>());
        let mut received = 0u64;
        loop {
            tokio::select! {
                biased;
                message = mailbox.recv() => match message {
                    Some(BlockedMsg::Count(value)) => {
                        black_box(value);
                        received += 1;
                    }
                    Some(BlockedMsg::Flush) => ack.send(received).expect("bench thread gone"),
                    Some(BlockedMsg::Stop) | None => break,
                },
                _ = &mut call => unreachable!("the pending call completed"),
            }
        }
        call.abort();
        received
    });
    (to, task)
}
