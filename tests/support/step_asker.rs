//! A state machine that asks (`Addr::ask_command`, `RemoteAddr::ask_command`) and reports how
//! each yield completed: shared by `state_machine_ask.rs` and `cluster_state_machine_ask.rs`
//! (which includes this file by path).
//!
//! It yields its asks in its first step, waits `Blocked` for their completions, then sends
//! itself a `u64` and ends at it with every completion it saw, in order of arrival: a second
//! completion of any tag, queued before that message, would be in its output.

use procsched::error::CommandError;
use procsched::state_machine::{
    AskCommand, Event, Events, InitError, Process, ProcessContext, StepOutput, Tag,
};
use procsched::{Addr, BoxError, Payload, Pid, SchedulerHandle};
use std::time::Duration;

/// The asks a [`StepAsker`] yields: each with its tag and, for `yield_command_within`, a timeout.
pub(crate) type Asks = Vec<(Tag, AskCommand, Option<Duration>)>;

/// Makes the asks, given the asker's own PID.
pub(crate) type MakeAsks = Box<dyn FnOnce(Pid) -> Asks + Send>;

/// See the module docs; `C` is what a test makes of a completion.
pub(crate) struct StepAsker<C> {
    sched: SchedulerHandle,
    me: Option<Addr<u64>>,
    asks: Option<MakeAsks>,
    expected: usize,
    read: fn(Result<Payload, CommandError>) -> C,
    seen: Vec<(Tag, C)>,
}

impl<C> StepAsker<C> {
    /// An asker on `sched` of the asks `asks` makes, which ends once `expected` completions
    /// are in (`usize::MAX`: when the test sends it a `u64`), each read with `read`.
    pub(crate) fn new(
        sched: &SchedulerHandle,
        expected: usize,
        read: fn(Result<Payload, CommandError>) -> C,
        asks: MakeAsks,
    ) -> StepAsker<C> {
        StepAsker {
            sched: sched.clone(),
            me: None,
            asks: Some(asks),
            expected,
            read,
            seen: Vec::new(),
        }
    }
}

impl<C: Send + 'static> Process for StepAsker<C> {
    type Output = Vec<(Tag, C)>;

    fn init(
        &mut self,
        ctx: &ProcessContext<'_>,
        _method: &str,
        _input: Payload,
    ) -> Result<(), InitError> {
        self.me = Some(self.sched.addr::<u64>(ctx.pid()));
        Ok(())
    }

    fn step(
        &mut self,
        events: &mut Events,
        out: &mut StepOutput<Self::Output>,
    ) -> Result<(), BoxError> {
        let me = self.me.clone().expect("init ran");
        if let Some(asks) = self.asks.take() {
            for (tag, ask, timeout) in asks(me.pid()) {
                match timeout {
                    Some(timeout) => out.yield_command_within(tag, ask, timeout),
                    None => out.yield_command(tag, ask),
                }
            }
        }
        for event in events.drain() {
            match event {
                Event::YieldComplete { tag, result } => {
                    self.seen.push((tag, (self.read)(result)));
                    if self.seen.len() == self.expected {
                        me.send(0)?;
                    }
                }
                Event::Message(_) => {
                    out.done(std::mem::take(&mut self.seen));
                    return Ok(());
                }
                _ => {}
            }
        }
        out.wait();
        Ok(())
    }
}
