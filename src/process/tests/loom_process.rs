//! Loom models of the process protocols (`state.rs`, `future.rs`), end to end on the real
//! executor (one worker): the process future's poll, completions and terminate against it. The
//! state word's protocols alone, at two preemptions, are in `loom_state.rs`.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use crate::executor::Executor;
use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::model::{model, model_full_stack};
use crate::loom::{thread, Arc};
use crate::process::exit::ExitReason;
use crate::process::future::ProcessFuture;
use crate::process::host::{Host, Outcome, PollStats};
use crate::process::mailbox::{Admission, Generation, ProcessCell};
use crate::process::Payload;
use crate::process::Pid;
use crate::process::{
    BoxError, CommandError, Event, Events, InitError, Message, Process, ProcessContext,
    ProcessError, StepOutput, YieldSlot,
};
use std::time::Duration;

const INLINE_TAG: u64 = 2;

/// A host with no handlers: yields are dropped, so completions can only come from the model.
#[derive(Default)]
struct ToyHost {
    finished: AtomicUsize,
}

impl Host for ToyHost {
    type Outstanding = ();
    fn dispatch(
        &self,
        _: Pid,
        _: &Arc<ProcessCell>,
        _: YieldSlot<'_>,
        _: &mut Events,
        _: &mut PollStats,
    ) -> Option<()> {
        None
    }
    fn abort(&self, _: ()) {}
    fn is_finished(&self, _: &()) -> bool {
        true
    }
    fn finished(&self, pid: Pid, cell: &ProcessCell, _: Outcome, _: ExitReason) -> bool {
        // As the scheduler's table does: the cell may host another process from here on.
        assert_eq!(cell.release().0, pid.generation());
        self.finished.fetch_add(1, SeqCst);
        false
    }
    fn max_batch(&self) -> usize {
        4
    }
    fn step_budget(&self) -> usize {
        2
    }
    fn should_stop(&self) -> bool {
        false
    }
}

/// Waits (`Idle` or `Wait`) until it has seen `expected` events, counting steps and closes.
struct Waiter {
    wait: bool,
    expected: usize,
    seen: usize,
    closes: Arc<AtomicUsize>,
}

impl Process for Waiter {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        self.seen += events.drain().count();
        if self.seen >= self.expected {
            out.done(Payload::new(self.seen));
        } else if self.wait {
            out.yield_command(1, ());
            out.wait();
        } else {
            out.idle();
        }
        Ok(())
    }
    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

/// Delivers the completion of the waiter's yield (tag 1).
fn complete_yield(cell: &ProcessCell, generation: Generation) -> Admission {
    cell.deliver(
        generation,
        Event::YieldComplete {
            tag: 1,
            result: Err(CommandError::TimedOut),
        },
    )
}

/// An open cell and the PID of its first incarnation.
fn open_cell() -> (Arc<ProcessCell>, Pid) {
    let cell = Arc::new(ProcessCell::new(usize::MAX));
    let pid = Pid::new(0, cell.open());
    (cell, pid)
}

/// What [`start`] sets up: the executor, the cell and generation of the process, its close
/// counter and its join handle.
type Started = (
    Executor,
    Arc<ProcessCell>,
    Generation,
    Arc<AtomicUsize>,
    crate::executor::JoinHandle<Result<Payload, ProcessError>>,
);

fn start(wait: bool, expected: usize) -> Started {
    let executor = Executor::builder().workers(1).build().unwrap();
    let (cell, pid) = open_cell();
    let closes = Arc::new(AtomicUsize::new(0));
    let process = Waiter {
        wait,
        expected,
        seen: 0,
        closes: closes.clone(),
    };
    let future = ProcessFuture::new(process, pid, cell.clone(), Arc::new(ToyHost::default()));
    let join = executor.spawn(future);
    (executor, cell, pid.generation(), closes, join)
}

#[test]
fn loom_idle_process_sent_a_message_while_stepping_or_parking() {
    model(|| {
        let (executor, cell, generation, closes, join) = start(false, 1);
        // Lands before, during, or after the first step, or between the step and the park.
        let sent = cell.deliver(
            generation,
            Event::Message(Message::new("m", Payload::empty())),
        );
        assert_eq!(sent, Admission::Accepted);
        let seen = executor.block_on(join).unwrap().unwrap();
        assert_eq!(seen.downcast::<usize>().unwrap(), 1);
        assert_eq!(closes.load(SeqCst), 1);
        executor.shutdown(Duration::from_secs(1));
    });
}

#[test]
fn loom_completion_while_running_causes_one_more_step() {
    model_full_stack(|| {
        let (executor, cell, generation, closes, join) = start(true, 1);
        let completer = {
            let cell = cell.clone();
            thread::spawn(move || complete_yield(&cell, generation))
        };
        let seen = executor.block_on(join).unwrap().unwrap();
        assert_eq!(seen.downcast::<usize>().unwrap(), 1);
        assert_eq!(completer.join().unwrap(), Admission::Accepted);
        assert_eq!(closes.load(SeqCst), 1);
        executor.shutdown(Duration::from_secs(1));
    });
}

#[test]
fn loom_terminate_racing_with_a_running_step() {
    model(|| {
        let (executor, cell, generation, closes, join) = start(false, 2);
        let _ = cell.deliver(
            generation,
            Event::Message(Message::new("m", Payload::empty())),
        );
        assert_eq!(cell.request_terminate(generation), Admission::Accepted);
        let result = executor.block_on(join).unwrap();
        assert!(result.unwrap_err().is_terminated());
        assert_eq!(closes.load(SeqCst), 1, "close exactly once");
        executor.shutdown(Duration::from_secs(1));
    });
}

#[test]
fn loom_shutdown_racing_with_a_completion() {
    model_full_stack(|| {
        let (executor, cell, generation, closes, join) = start(true, 2);
        let completer = {
            let cell = cell.clone();
            thread::spawn(move || complete_yield(&cell, generation))
        };
        executor.shutdown(Duration::from_secs(1));
        // Accepted (the process saw it or was cancelled with it queued) or rejected (closed):
        // never lost in between, never a panic, close exactly once.
        let _ = completer.join().unwrap();
        // The process needed two events: shutdown dropped it (its future's drop closed it).
        assert!(executor.block_on(join).unwrap_err().is_shutdown());
        assert_eq!(closes.load(SeqCst), 1);
    });
}

#[test]
fn loom_terminate_racing_with_the_first_poll() {
    model(|| {
        let (executor, cell, generation, closes, join) = start(false, 2);
        assert_eq!(cell.request_terminate(generation), Admission::Accepted);
        let result = executor.block_on(join).unwrap();
        assert!(result.unwrap_err().is_terminated());
        assert_eq!(closes.load(SeqCst), 1, "close exactly once");
        executor.shutdown(Duration::from_secs(1));
    });
}

/// Keeps yielding to an inline handler (stepping again within its poll, without draining the
/// mailbox) until the external completion with tag 1 arrives.
struct InlineLoop {
    closes: Arc<AtomicUsize>,
}

impl Process for InlineLoop {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if events
            .drain()
            .any(|e| matches!(e, Event::YieldComplete { tag: 1, .. }))
        {
            out.done(Payload::empty());
        } else {
            out.yield_command(INLINE_TAG, ());
            out.wait();
        }
        Ok(())
    }
    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn loom_completion_during_inline_steps_is_not_skipped() {
    model_full_stack(|| {
        let executor = Executor::builder().workers(1).build().unwrap();
        let (cell, pid) = open_cell();
        let closes = Arc::new(AtomicUsize::new(0));
        let future = ProcessFuture::new(
            InlineLoop {
                closes: closes.clone(),
            },
            pid,
            cell.clone(),
            Arc::new(ToyHost::default()),
        );
        let join = executor.spawn(future);
        assert_eq!(complete_yield(&cell, pid.generation()), Admission::Accepted);
        executor.block_on(join).unwrap().unwrap();
        assert_eq!(closes.load(SeqCst), 1);
        executor.shutdown(Duration::from_secs(1));
    });
}
