//! What stays registered on a long-lived process: nothing for a watcher that ended, nothing
//! for a name that was unregistered (each used to leave an entry until the target ended: a
//! target monitored by a million short-lived processes held a million).

use crate::prelude::*;
use crate::process::Pid;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// Spins (yielding) until `condition` holds; `deadline` is a hang guard only.
fn wait_until(condition: impl Fn() -> bool, deadline: Duration) {
    let end = std::time::Instant::now() + deadline;
    while !condition() {
        assert!(std::time::Instant::now() < end, "hang guard");
        std::thread::yield_now();
    }
}

fn registrations(sched: &Scheduler, pid: Pid) -> usize {
    let inner = &sched.handle().inner;
    inner
        .table
        .get(pid)
        .map_or(0, |cell| cell.watch_count(pid.generation()))
}

/// A process that waits until told to finish.
fn waiting(sched: &Scheduler) -> ProcessHandle<(), ()> {
    sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            cx.recv().await?;
            Ok::<_, BoxError>(())
        })
        .unwrap()
}

#[test]
fn a_watcher_that_ends_takes_its_monitors_off_their_targets() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let target = waiting(&sched);
    let pid = target.pid();
    for _ in 0..200 {
        let watcher = sched
            .spawn_fn(move |cx: ProcessCx<()>| async move {
                cx.monitor(pid);
                Ok::<_, BoxError>(())
            })
            .unwrap();
        sched.block_on(watcher).unwrap();
        // From outside, on the watcher's behalf, too.
        let held = waiting(&sched);
        sched.handle().monitor_from(held.pid(), pid).unwrap();
        held.addr().send(()).unwrap();
        sched.block_on(held).unwrap();
    }
    // A watcher's end takes its monitors off after its handle may have resolved.
    wait_until(|| registrations(&sched, pid) == 0, GUARD);
    // A live watcher's monitor stays, and fires.
    let watcher = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.monitor(pid);
            Ok::<_, BoxError>(cx.recv_down().await?.pid)
        })
        .unwrap();
    wait_until(|| registrations(&sched, pid) == 1, GUARD);
    target.addr().send(()).unwrap();
    assert_eq!(sched.block_on(watcher).unwrap(), pid);
    sched.shutdown(GUARD);
}

#[test]
fn unregister_takes_the_name_mark_off_its_holder() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let holder = waiting(&sched);
    let pid = holder.pid();
    for round in 0..200 {
        let name = format!("name-{}", round % 3);
        sched.handle().register(name.as_str(), pid).unwrap();
        assert_eq!(registrations(&sched, pid), 1);
        assert!(sched.handle().unregister(&name));
        assert_eq!(registrations(&sched, pid), 0, "round {round}");
    }
    // Registered when it ends: the name is released then, as before.
    sched.handle().register("last", pid).unwrap();
    holder.addr().send(()).unwrap();
    sched.block_on(holder).unwrap();
    wait_until(|| sched.handle().whereis("last").is_none(), GUARD);
    sched.shutdown(GUARD);
}
