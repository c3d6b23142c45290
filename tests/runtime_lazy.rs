//! The tokio runtime a scheduler builds for its processes (none was supplied, and none was
//! around) goes with the `Scheduler`, once its shutdown has finished — not with the last
//! `Addr` or handle, which a program may keep long after (a registry, a test's leftovers): its
//! thread would stay, one per scheduler the program built.
//!
//! The only test of this binary: it counts the process's `procsched-io` threads.

mod support;

use procsched::prelude::*;
use std::time::Duration;

/// Threads of this process named `procsched-io` (the built runtime's worker).
fn io_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|task| {
                    std::fs::read_to_string(task.path().join("comm"))
                        .is_ok_and(|name| name.trim() == "procsched-io")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn the_runtime_a_scheduler_built_goes_with_it_not_with_its_last_address() {
    if !std::path::Path::new("/proc/self/task").exists() {
        return; // no way to count threads here
    }
    let before = io_threads();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let napper = sched
        .spawn_fn(|cx: ProcessCx<u8>| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok::<_, BoxError>(cx.recv().await?)
        })
        .unwrap();
    let addr = napper.addr();
    addr.send(7).unwrap();
    assert_eq!(sched.block_on(napper).unwrap(), 7);
    assert_eq!(io_threads(), before + 1, "the scheduler built its runtime");

    drop(sched);
    support::wait_until("the runtime's thread ends with the scheduler", || {
        io_threads() == before
    });
    // The address outlives them both, and says so.
    assert!(addr.send(8).unwrap_err().is_not_found());
}
