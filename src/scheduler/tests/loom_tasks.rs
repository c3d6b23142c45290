//! Loom models of the process tasks' protocol (`scheduler/tasks.rs`): the task's reference kept in
//! the cell, taken by `close`, by the spawner's re-check or by the forced stop — on a real cell and
//! executor, with a stand-in for the process future.

use crate::executor::Executor;
use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::mailbox::ProcessCell;
use crate::process::Pid;
use crate::scheduler::tasks;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Closes its cell as the process future does: when it finishes (on its first poll, if
/// `finish_on_poll`) or, unfinished, when dropped. Otherwise it stays pending without keeping its
/// waker: parked on a waker nobody will fire.
struct StandIn {
    cell: Arc<ProcessCell>,
    closes: Arc<AtomicUsize>,
    finish_on_poll: bool,
    finished: bool,
}

impl StandIn {
    fn finish(&mut self) {
        self.finished = true;
        self.cell.close();
        self.closes.fetch_add(1, SeqCst);
    }
}

impl Future for StandIn {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.finish_on_poll {
            this.finish();
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if !self.finished {
            self.finish();
        }
    }
}

/// An open cell, its process's PID and a close counter.
fn open_cell() -> (Arc<ProcessCell>, Pid, Arc<AtomicUsize>) {
    let cell = Arc::new(ProcessCell::new(usize::MAX));
    let pid = Pid::new(0, cell.open());
    (cell, pid, Arc::new(AtomicUsize::new(0)))
}

/// Steps 1–4: a spawn racing the executor's shutdown and the forced stop's pass. The process is
/// parked forever; whoever cancels it — the spawn itself (executor already shut down), the
/// spawner's re-check or the pass — it is dropped and closed exactly once, and nothing leaks
/// (loom checks every `Arc`).
#[test]
fn loom_process_task_spawn_racing_with_the_forced_stop() {
    model(|| {
        let executor = Arc::new(Executor::builder().workers(1).build().unwrap());
        let (cell, pid, closes) = open_cell();
        let spawner = {
            let (executor, cell, closes) = (executor.clone(), cell.clone(), closes.clone());
            thread::spawn(move || {
                let future = StandIn {
                    cell: cell.clone(),
                    closes,
                    finish_on_poll: false,
                    finished: false,
                };
                tasks::spawn(executor.handle(), &cell, pid, future)
            })
        };
        executor.shutdown(Duration::from_secs(1));
        if let Some(task) = tasks::take(&cell) {
            task.shutdown();
        }
        let join = spawner.join().unwrap();
        assert_eq!(closes.load(SeqCst), 1, "closed exactly once");
        assert!(executor.block_on(join).unwrap_err().is_shutdown());
        assert!(
            cell.take_task(None).is_none(),
            "the reference left the cell"
        );
    });
}

/// `close` (the process finishing in its poll) against the pass cancelling its task, as when the
/// forced stop meets a worker inside the poll: one of them takes the reference, the process is
/// closed once, and the handle sees either the output or the cancellation.
#[test]
fn loom_process_task_finishing_while_the_forced_stop_cancels_it() {
    model(|| {
        let executor = Executor::builder().workers(1).build().unwrap();
        let (cell, pid, closes) = open_cell();
        let future = StandIn {
            cell: cell.clone(),
            closes: closes.clone(),
            finish_on_poll: true,
            finished: false,
        };
        let join = tasks::spawn(executor.handle(), &cell, pid, future);
        let pass = {
            let cell = cell.clone();
            thread::spawn(move || {
                tasks::take(&cell)
                    .map(|task| usize::from(task.shutdown()))
                    .unwrap_or(0)
            })
        };
        let result = executor.block_on(join);
        let cancelled = pass.join().unwrap();
        assert_eq!(closes.load(SeqCst), 1, "closed exactly once");
        match result {
            Ok(()) => assert_eq!(cancelled, 0),
            Err(e) => assert!(e.is_cancelled() && cancelled == 1, "{e:?}"),
        }
        assert!(
            cell.take_task(None).is_none(),
            "the reference left the cell"
        );
        executor.shutdown(Duration::from_secs(1));
    });
}
