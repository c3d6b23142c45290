//! Unit tests of unowned tasks (`unowned.rs`): outside the owned list, cancelled by their owner.

use crate::executor::{Executor, TaskRef};
use crate::loom::{lock, Arc, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A task parked forever (its waker is never kept), counting its drop.
fn parked_forever(drops: &Arc<AtomicUsize>) -> impl std::future::Future<Output = ()> + Send {
    let guard = DropCount(drops.clone());
    async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    }
}

#[test]
fn an_unowned_task_runs_outside_the_owned_list_and_its_owner_drops_the_reference() {
    let executor = Executor::builder().workers(1).build().unwrap();
    let kept: Mutex<Option<TaskRef>> = Mutex::new(None);
    let join = executor
        .handle()
        .spawn_unowned(async { 7 }, 0, |task| *lock(&kept) = Some(task));
    assert!(lock(&kept).is_some(), "the owner got the reference");
    assert_eq!(executor.block_on(join).unwrap(), 7);
    assert_eq!(executor.handle().live_tasks(), 0);
    // The completed task's last reference: cancelling it does nothing, dropping it frees it.
    let task = lock(&kept).take().unwrap();
    assert!(!task.shutdown());
}

#[test]
fn shutdown_leaves_a_parked_unowned_task_to_its_owner_who_cancels_it() {
    let executor = Executor::builder().workers(1).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let kept: Mutex<Option<TaskRef>> = Mutex::new(None);
    let join = executor
        .handle()
        .spawn_unowned(parked_forever(&drops), 0, |task| *lock(&kept) = Some(task));
    assert_eq!(executor.handle().live_tasks(), 0, "not in the owned list");
    let report = executor.shutdown(Duration::from_secs(60));
    assert_eq!(report.cancelled, 0, "not the executor's to cancel");
    assert_eq!(drops.load(SeqCst), 0);
    let task = lock(&kept).take().unwrap();
    assert!(task.shutdown(), "the owner's cancel dropped the future");
    assert_eq!(drops.load(SeqCst), 1);
    assert!(executor.block_on(join).unwrap_err().is_shutdown());
}

#[test]
fn an_unowned_spawn_after_shutdown_is_cancelled_at_once() {
    let executor = Executor::builder().workers(1).build().unwrap();
    executor.shutdown(Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let join = executor
        .handle()
        .spawn_unowned(parked_forever(&drops), 0, |_| {
            panic!("no reference is handed out after shutdown")
        });
    assert_eq!(drops.load(SeqCst), 1, "dropped by the spawn");
    assert!(executor.block_on(join).unwrap_err().is_shutdown());
}

#[test]
fn an_aborted_unowned_task_is_cancelled_and_its_owners_cancel_does_nothing() {
    let executor = Executor::builder().workers(1).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let kept: Mutex<Option<TaskRef>> = Mutex::new(None);
    let join = executor
        .handle()
        .spawn_unowned(parked_forever(&drops), 0, |task| *lock(&kept) = Some(task));
    join.abort();
    assert!(executor.block_on(join).unwrap_err().is_cancelled());
    assert_eq!(drops.load(SeqCst), 1);
    assert!(!lock(&kept).take().unwrap().shutdown());
    assert_eq!(drops.load(SeqCst), 1);
}
