//! `Handle::wake_owned_tasks` (the broadcast wake, task `state.rs`) on the real executor; its
//! race with a poll is the loom model `loom_a_condition_set_before_waking_every_owned_task_is_seen`.

use crate::executor::Executor;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

#[test]
fn waking_every_owned_task_polls_each_once_more_and_leaves_finished_ones_alone() {
    let executor = Executor::builder().workers(2).build().unwrap();
    let gone = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicUsize::new(0));
    let waiting: Vec<_> = (0..8)
        .map(|_| {
            let (gone, polls) = (gone.clone(), polls.clone());
            executor.spawn(std::future::poll_fn(move |_| {
                polls.fetch_add(1, AcqRel);
                if gone.load(Acquire) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }))
        })
        .collect();
    // Each has been polled once (and is waiting) before the condition changes: a task first
    // polled after it would finish at once, without a wake.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while polls.load(Acquire) < 8 {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: first polls"
        );
        std::thread::yield_now();
    }
    gone.store(true, Release);
    let woken = executor.handle().wake_owned_tasks();
    assert!(woken >= 8, "the eight waiting tasks are listed: {woken}");
    for task in waiting {
        executor.block_on(task).unwrap();
    }
    assert!(
        polls.load(Relaxed) >= 16,
        "each polled before and after the wake"
    );
    assert_eq!(
        executor.handle().wake_owned_tasks(),
        0,
        "nothing left to wake"
    );
    assert_eq!(executor.shutdown(Duration::from_secs(5)).cancelled, 0);
}
