//! The process future's list of outstanding handler tasks (`outstanding.rs`): a dropped call's
//! task is aborted and leaves the list at once; finished tasks are pruned in amortized O(1)
//! per dispatch, however many tasks stay live.

use crate::loom::Arc;
use crate::process::exit::ExitReason;
use crate::process::host::{Host, Outcome, PollStats};
use crate::process::mailbox::ProcessCell;
use crate::process::outstanding::Outstanding;
use crate::process::{Events, Pid, YieldSlot};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// A task: its tag, and whether it has finished.
#[derive(Debug)]
struct FakeTask {
    tag: u64,
    finished: bool,
}

/// Counts how often a task's state is asked, and which tasks are aborted.
#[derive(Default)]
struct CountingHost {
    is_finished_calls: AtomicU64,
    aborted: Mutex<Vec<u64>>,
}

impl Host for CountingHost {
    type Outstanding = FakeTask;
    fn dispatch(
        &self,
        _: Pid,
        _: &Arc<ProcessCell>,
        _: YieldSlot<'_>,
        _: &mut Events,
        _: &mut PollStats,
    ) -> Option<FakeTask> {
        None
    }
    fn abort(&self, task: FakeTask) {
        self.aborted.lock().unwrap().push(task.tag);
    }
    fn is_finished(&self, task: &FakeTask) -> bool {
        self.is_finished_calls.fetch_add(1, Relaxed);
        task.finished
    }
    fn finished(&self, _: Pid, _: &ProcessCell, _: Outcome, _: ExitReason) -> bool {
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

#[test]
fn a_dropped_calls_task_is_aborted_and_leaves_the_list() {
    let host = CountingHost::default();
    let mut outstanding = Outstanding::default();
    for tag in 1..=3 {
        let task = FakeTask {
            tag,
            finished: false,
        };
        outstanding.push(&host, tag, task);
    }
    // Tag 9 has no task (an inline handler's, an ask's): skipped.
    let mut dropped = vec![2, 9];
    outstanding.abort_dropped(&host, &mut dropped);
    assert!(dropped.is_empty(), "the step's list is left empty");
    assert_eq!(*host.aborted.lock().unwrap(), [2]);
    assert_eq!(outstanding.len(), 2);
    outstanding.abort_all(&host);
    let mut aborted = host.aborted.lock().unwrap().clone();
    aborted.sort_unstable();
    assert_eq!(aborted, [1, 2, 3]);
    assert_eq!(outstanding.len(), 0);
}

#[test]
fn finished_tasks_are_pruned_in_amortized_constant_time_per_dispatch() {
    let host = CountingHost::default();
    let mut outstanding = Outstanding::default();
    let (live, finished) = (1_000u64, 100_000u64);
    // Many tasks stay live (a body awaiting them all), while many more come and finish.
    for tag in 0..live {
        let task = FakeTask {
            tag,
            finished: false,
        };
        outstanding.push(&host, tag, task);
    }
    for tag in live..live + finished {
        let task = FakeTask {
            tag,
            finished: true,
        };
        outstanding.push(&host, tag, task);
    }
    let pushes = live + finished;
    // A scan per doubling of the list: each task is looked at a bounded number of times. A
    // scan per dispatch would look at the live ones 100 000 times each.
    assert!(
        host.is_finished_calls.load(Relaxed) <= 4 * pushes,
        "{} looks for {pushes} pushes",
        host.is_finished_calls.load(Relaxed)
    );
    // Finished tasks do not pile up: at most twice the live ones (plus the floor) remain.
    assert!(
        outstanding.len() <= 2 * live as usize + 4,
        "{}",
        outstanding.len()
    );
    assert!(host.aborted.lock().unwrap().is_empty());
}
