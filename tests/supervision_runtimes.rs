//! A supervisor stops its children by their `ChildShutdown` policy on whatever tokio runtime its
//! scheduler runs in: one without a time driver, or one already dropped. The policy's timeout
//! is the crate's own timer, never tokio's (which panics there: "timers are disabled", "being
//! shutdown"), so the child's cleanup runs and the supervisor lives on; so is the bounded wait
//! for a name still held by a process on its way out. Deadlines are hang guards only, and the
//! `Timeout` the policy under test.

mod supervision_common;
mod support;

use procsched::prelude::*;
use procsched::supervision::{ChildShutdown, ChildSpec, Supervisor, SupervisorRef};
use procsched::Payload;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use supervision_common::*;
use support::{counter, echo_step, FnProcess};

/// A tokio runtime with I/O but no time driver.
fn runtime_without_timers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_io()
        .build()
        .unwrap()
}

/// A scheduler whose processes run in `runtime`'s context.
fn scheduler_in(runtime: &tokio::runtime::Runtime) -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .build()
        .unwrap()
}

/// A child `id` that reports `stop:<id>` on `log` when asked to finish, then ends as cancelled.
fn worker(id: &'static str, log: &mpsc::Sender<String>) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(id, move |start| {
        let log = log.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            let cancelled = loop {
                if let Err(error) = cx.recv().await {
                    break error;
                }
            };
            let _ = log.send(format!("stop:{id}"));
            Err::<(), BoxError>(cancelled.into())
        })
    })
}

/// A child that reports `ignored` when asked to finish and receives on: only a terminate ends it.
fn stubborn(log: &mpsc::Sender<String>) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new("stubborn", move |start| {
        let log = log.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            loop {
                if cx.recv().await.is_err() {
                    let _ = log.send("ignored".to_owned());
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
    })
}

fn start(sched: &Scheduler, child: ChildSpec) -> (SupervisorRef, Pid) {
    let sup = run(Supervisor::one_for_one().child(child).start(sched.handle())).unwrap();
    let pid = run(sup.which_children()).unwrap()[0].pid.unwrap();
    (sup, pid)
}

/// Terminates the child `id`, then checks the supervisor still answers.
fn terminate(sup: &SupervisorRef, id: &str) {
    run(sup.terminate_child(id)).expect("the supervisor stopped its child");
    assert!(run(sup.which_children()).unwrap().is_empty());
}

#[test]
fn a_child_s_stop_timeout_needs_no_tokio_time_driver() {
    let runtime = runtime_without_timers();
    let sched = scheduler_in(&runtime);
    let (log, heard) = mpsc::channel();
    // The default policy, `Timeout(5 s)`: the child ends well within it.
    let (sup, child) = start(&sched, worker("w", &log));
    let down = sched.monitor(child);
    terminate(&sup, "w");
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "stop:w");
    assert!(run(down).reason.is_shutdown());
}

#[test]
fn a_stop_timeout_that_passes_terminates_the_child_without_a_tokio_time_driver() {
    let runtime = runtime_without_timers();
    let sched = scheduler_in(&runtime);
    let (log, heard) = mpsc::channel();
    let child = stubborn(&log).shutdown(ChildShutdown::Timeout(Duration::from_millis(20)));
    let (sup, child) = start(&sched, child);
    let down = sched.monitor(child);
    terminate(&sup, "stubborn");
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "ignored");
    assert!(run(down).reason.is_killed());
}

#[test]
fn a_child_s_stop_timeout_works_after_the_scheduler_s_runtime_is_dropped() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sched = scheduler_in(&runtime);
    let (log, heard) = mpsc::channel();
    let (sup, child) = start(&sched, worker("w", &log));
    drop(runtime);
    let down = sched.monitor(child);
    terminate(&sup, "w");
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "stop:w");
    assert!(run(down).reason.is_shutdown());
}

#[test]
fn a_tree_s_shutdown_stops_its_children_by_their_policies_without_a_tokio_time_driver() {
    let runtime = runtime_without_timers();
    let sched = scheduler_in(&runtime);
    let (log, heard) = mpsc::channel();
    let (sup, child) = start(&sched, worker("w", &log));
    let (child_down, sup_down) = (sched.monitor(child), sched.monitor(sup.pid()));
    let report = run(sched.shutdown_async(GUARD));
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "stop:w");
    assert!(run(child_down).reason.is_shutdown());
    assert!(run(sup_down).reason.is_shutdown());
    assert_eq!((report.forced, report.abandoned), (0, 0), "{report:?}");
}

#[test]
fn a_name_held_by_a_process_on_its_way_out_is_waited_for_without_a_tokio_time_driver() {
    let runtime = runtime_without_timers();
    let sched = scheduler_in(&runtime);
    let (started_tx, started) = mpsc::channel();
    let (closing_tx, closing) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    // Only the first instance's close blocks, until the test releases it: it holds its name
    // meanwhile.
    let gate = Arc::new(Mutex::new(Some((closing_tx, release_rx))));
    let w = ChildSpec::new("w", move |start| {
        let gate = gate.clone();
        let process = FnProcess::new(&counter(), echo_step()).on_close(move || {
            if let Some((closing, release)) = gate.lock().unwrap().take() {
                let _ = closing.send(());
                let _ = release.recv_timeout(GUARD);
            }
        });
        let pid = start.spawn(process, "run", Payload::empty())?;
        let _ = started_tx.send(pid);
        Ok(pid)
    })
    .register_as("w");
    let sub = Supervisor::one_for_one()
        .child(w)
        .into_child("sub")
        .register_as("sub");
    let root = run(Supervisor::one_for_one().child(sub).start(sched.handle())).unwrap();
    let old = started.recv_timeout(GUARD).unwrap();
    assert_eq!(sched.handle().whereis("w"), Some(old));
    // Killing the sub-supervisor ends the old `w` through its link; the root restarts the sub,
    // whose new `w` finds the name held by the old one, still in its close.
    let sub_pid = run(root.which_children()).unwrap()[0].pid.unwrap();
    sched.terminate(sub_pid).unwrap();
    closing
        .recv_timeout(GUARD)
        .expect("the old w is in its close");
    // The new sub waits for the name (idle after its first poll) before it makes a new `w`.
    support::wait_until("the new sub waiting for the name", || {
        sched.handle().whereis("sub").is_some_and(|new_sub| {
            new_sub != sub_pid
                && sched.process_info(new_sub).is_some_and(|info| {
                    info.steps >= 1 && info.state == procsched::metrics::ProcessState::Idle
                })
        })
    });
    assert!(
        started.try_recv().is_err(),
        "no new w while the old one lives"
    );
    release.send(()).unwrap();
    let new = started.recv_timeout(GUARD).expect("the new w is spawned");
    let named = run(async {
        loop {
            match sched.handle().whereis("w") {
                Some(pid) if pid != old => return pid,
                _ => tokio::task::yield_now().await,
            }
        }
    });
    assert_eq!(named, new);
    assert_eq!(
        run(root.restarts()).unwrap(),
        1,
        "the new sub waited for the name: no second restart"
    );
}
