//! News before local work: a task woken from outside the executor (a message to an idle
//! process, a handler's completion) runs before the tasks already waiting in its worker's local
//! deque (`src/executor/worker.rs`, "Finding work, in order", step 2).
//!
//! One worker and no monitor, so the order in which tasks run is the worker's choice alone.
//! Deadlines are hang guards only.

mod support;

use futures::channel::oneshot;
use procsched::executor::Executor;
use std::sync::{mpsc, Arc, Mutex};
use support::{recv, HANG_GUARD};

#[test]
fn a_task_woken_from_outside_runs_before_the_local_deque() {
    let executor = Executor::builder()
        .workers(1)
        .monitor(false)
        .build()
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));

    // The task with news: it runs once (so it last ran on the one worker), then waits.
    let (news_tx, news_rx) = oneshot::channel::<()>();
    let (waiting_tx, waiting) = mpsc::channel();
    let news = executor.spawn({
        let order = order.clone();
        async move {
            waiting_tx.send(()).unwrap();
            news_rx.await.unwrap();
            order.lock().unwrap().push("news");
        }
    });
    recv(&waiting);

    // A task that fills the worker's deque with local work, then holds the worker until the news
    // has been sent from this (outside) thread.
    let (filled_tx, filled) = mpsc::channel();
    let (local_ran_tx, local_ran) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let handle = executor.handle().clone();
    let filler = executor.spawn({
        let order = order.clone();
        async move {
            for _ in 0..3 {
                let (order, local_ran_tx) = (order.clone(), local_ran_tx.clone());
                drop(handle.spawn(async move {
                    order.lock().unwrap().push("local");
                    local_ran_tx.send(()).unwrap();
                }));
            }
            filled_tx.send(()).unwrap();
            go_rx.recv_timeout(HANG_GUARD).expect("hang guard: no go");
        }
    });
    recv(&filled);
    news_tx.send(()).unwrap();
    go.send(()).unwrap();

    executor.block_on(filler).unwrap();
    executor.block_on(news).unwrap();
    for _ in 0..3 {
        recv(&local_ran);
    }
    let report = executor.shutdown(HANG_GUARD);
    assert_eq!(report.cancelled, 0);
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 4, "every task ran once: {order:?}");
    assert_eq!(
        order[0], "news",
        "the task woken from outside waited behind the local deque: {order:?}"
    );
}
