//! Public-API tests of named processes (`src/scheduler/names.rs`): register, `whereis`, send and
//! ask by name; a name is released when its process ends; a taken name and a dead PID are typed
//! errors; a supervisor re-registers a child's name on every restart, so the name moves to the
//! new PID (PIDs are never reused).
//!
//! Where a test must know that a process's end has been fully handled, it awaits a monitor's
//! `Down`: names are released before links and monitors are signalled. Deadlines are hang
//! guards only.

mod supervision_common;
mod support;

use procsched::prelude::*;
use procsched::supervision::{ChildSpec, RegisterError, Supervisor};
use std::collections::BTreeSet;
use std::sync::Arc;
use supervision_common::*;
use support::join_typed;

/// A counter server: `Add` adds, `Get` answers the total, `Stop` finishes.
enum Counter {
    Add(u64),
    Get(Reply<u64>),
    Stop,
}

async fn counter(cx: ProcessCx<Counter>) -> Result<u64, BoxError> {
    let mut total = 0;
    loop {
        match cx.recv().await? {
            Counter::Add(n) => total += n,
            Counter::Get(reply) => {
                let _ = reply.send(total);
            }
            Counter::Stop => return Ok(total),
        }
    }
}

#[test]
fn register_whereis_and_named_send_and_ask_reach_the_process_by_name() {
    let sched = scheduler(2);
    let server = sched.spawn_fn(counter).unwrap();
    sched.handle().register("counter", server.pid()).unwrap();
    assert_eq!(sched.handle().whereis("counter"), Some(server.pid()));
    assert_eq!(sched.handle().whereis("nobody"), None);
    assert!(sched.handle().named::<Counter>("nobody").is_none());
    let by_name = sched.handle().named::<Counter>("counter").unwrap();
    assert_eq!(by_name.pid(), server.pid());
    by_name.send(Counter::Add(40)).unwrap();
    by_name.send(Counter::Add(2)).unwrap();
    assert_eq!(run(by_name.ask(Counter::Get)).unwrap(), 42);
    // A process registers itself from inside (`ProcessCx::register`).
    let named_self = sched
        .spawn_fn(|cx: ProcessCx<Counter>| async move {
            cx.register("self-named")?;
            counter(cx).await
        })
        .unwrap();
    let found = run(async {
        loop {
            if let Some(pid) = sched.handle().whereis("self-named") {
                return pid;
            }
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(found, named_self.pid());
    let addr = sched.handle().named::<Counter>("self-named").unwrap();
    addr.send(Counter::Add(5)).unwrap();
    assert_eq!(run(addr.ask(Counter::Get)).unwrap(), 5);
    addr.send(Counter::Stop).unwrap();
    assert_eq!(join_typed(named_self).unwrap(), 5);
    by_name.send(Counter::Stop).unwrap();
    assert_eq!(join_typed(server).unwrap(), 42);
}

#[test]
fn a_name_is_released_when_its_process_exits_normally_or_not() {
    let sched = scheduler(2);
    for terminate in [false, true] {
        let first = sched.spawn_fn(counter).unwrap();
        sched.handle().register("service", first.pid()).unwrap();
        let ended = sched.monitor(first.pid());
        if terminate {
            sched.terminate(first.pid()).unwrap();
        } else {
            first.addr().send(Counter::Stop).unwrap();
        }
        // Names are released before monitors are told.
        let _ = run(ended);
        assert_eq!(
            sched.handle().whereis("service"),
            None,
            "terminate: {terminate}"
        );
        assert!(sched.handle().named::<Counter>("service").is_none());
        // The name is free for another process.
        let second = sched.spawn_fn(counter).unwrap();
        sched.handle().register("service", second.pid()).unwrap();
        assert_eq!(sched.handle().whereis("service"), Some(second.pid()));
        second.addr().send(Counter::Stop).unwrap();
        let _ = join_typed(first);
        join_typed(second).unwrap();
    }
}

#[test]
fn registering_a_taken_name_is_a_typed_error() {
    let sched = scheduler(2);
    let holder = sched.spawn_fn(counter).unwrap();
    let other = sched.spawn_fn(counter).unwrap();
    sched.handle().register("taken", holder.pid()).unwrap();
    assert_eq!(
        sched.handle().register("taken", other.pid()),
        Err(RegisterError::Taken {
            name: Arc::from("taken"),
            holder: holder.pid(),
        })
    );
    assert_eq!(
        sched.handle().whereis("taken"),
        Some(holder.pid()),
        "unchanged"
    );
    // The holder's own second registration of it succeeds; a second name does not (OTP: a
    // process has at most one).
    assert_eq!(sched.handle().register("taken", holder.pid()), Ok(()));
    assert_eq!(
        sched.handle().register("alias", holder.pid()),
        Err(RegisterError::AlreadyNamed {
            pid: holder.pid(),
            name: Arc::from("taken"),
        })
    );
    assert_eq!(sched.handle().whereis("alias"), None);
    // `unregister` frees it.
    assert!(sched.handle().unregister("taken"));
    assert!(!sched.handle().unregister("taken"), "only once");
    assert_eq!(sched.handle().register("taken", other.pid()), Ok(()));
    assert_eq!(sched.handle().whereis("taken"), Some(other.pid()));
    for process in [&holder, &other] {
        process.addr().send(Counter::Stop).unwrap();
    }
    join_typed(holder).unwrap();
    join_typed(other).unwrap();
}

#[test]
fn registering_a_dead_pid_is_not_running() {
    let sched = scheduler(1);
    let gone = sched.spawn_fn(counter).unwrap();
    let pid = gone.pid();
    gone.addr().send(Counter::Stop).unwrap();
    join_typed(gone).unwrap();
    assert_eq!(
        sched.handle().register("ghost", pid),
        Err(RegisterError::NotRunning(pid))
    );
    let never_issued = Pid::from_raw(1 << 26).unwrap();
    assert_eq!(
        sched.handle().register("ghost", never_issued),
        Err(RegisterError::NotRunning(never_issued))
    );
    assert_eq!(sched.handle().whereis("ghost"), None);
}

#[test]
fn a_supervised_child_name_moves_to_the_new_pid_on_every_restart() {
    const RESTARTS: u64 = 5;
    let sched = scheduler(2);
    let spec = ChildSpec::new("counter", |start| start.spawn_fn(counter)).register_as("counter");
    let supervisor = run(Supervisor::one_for_one()
        .max_restarts(100, GUARD)
        .child(spec)
        .start(sched.handle()))
    .unwrap();
    let mut pids = vec![sched
        .handle()
        .whereis("counter")
        .expect("registered at start")];
    for round in 1..=RESTARTS {
        let old = *pids.last().unwrap();
        // The live instance answers by name.
        let addr = sched.handle().named::<Counter>("counter").unwrap();
        assert_eq!(addr.pid(), old);
        addr.send(Counter::Add(round)).unwrap();
        assert_eq!(
            run(addr.ask(Counter::Get)).unwrap(),
            round,
            "a fresh instance"
        );
        let ended = sched.monitor(old);
        sched.terminate(old).unwrap();
        assert!(run(ended).reason.is_killed());
        let new = run(async {
            loop {
                match sched.handle().whereis("counter") {
                    Some(pid) if pid != old => return pid,
                    _ => tokio::task::yield_now().await,
                }
            }
        });
        assert_eq!(sched.state(old), None, "the old instance is gone");
        let children = run(supervisor.which_children()).unwrap();
        assert_eq!(children.len(), 1);
        assert_eq!(
            children[0].pid,
            Some(new),
            "the name names the live instance"
        );
        pids.push(new);
    }
    assert_eq!(run(supervisor.restarts()).unwrap(), RESTARTS);
    let distinct: BTreeSet<Pid> = pids.iter().copied().collect();
    assert_eq!(distinct.len(), pids.len(), "no PID reused: {pids:?}");
    // A send to an old PID does not reach the new instance.
    let stale = sched.handle().addr::<Counter>(pids[0]);
    assert!(stale.send(Counter::Add(1)).unwrap_err().is_not_found());
    let _ = sched.shutdown(GUARD);
}

/// A monitor made while a named process ends hears `NoProc` at once once the process refuses
/// watches — before the fix, before its end had released its name. A watcher thread monitors
/// the process again and again while it ends; at its first `Down`, the name must be free.
#[test]
fn no_down_is_heard_while_the_name_still_gives_the_dead_pid() {
    use futures::FutureExt;
    use std::sync::mpsc;
    use std::time::Instant;
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let handle = sched.handle().clone();
    let (to_watch, targets) = mpsc::channel::<Pid>();
    let (watching, started) = mpsc::channel::<()>();
    let (named, names) = mpsc::channel::<Option<Pid>>();
    let watcher = {
        let handle = handle.clone();
        std::thread::spawn(move || {
            for pid in targets {
                watching.send(()).unwrap();
                let deadline = Instant::now() + support::HANG_GUARD;
                let down = loop {
                    if let Some(down) = handle.monitor(pid).now_or_never() {
                        break down;
                    }
                    assert!(Instant::now() < deadline, "hang guard: no Down");
                };
                assert_eq!(down.pid, pid);
                named.send(handle.whereis("svc")).unwrap();
            }
        })
    };
    let iterations = support::scaled(2000);
    let mut stale = 0;
    for _ in 0..iterations {
        let process = sched
            .spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
            .unwrap();
        let pid = process.pid();
        handle.register("svc", pid).unwrap();
        to_watch.send(pid).unwrap();
        support::recv(&started);
        process.addr().send(()).unwrap();
        join_typed(process).unwrap();
        if support::recv(&names) == Some(pid) {
            stale += 1;
        }
        assert_eq!(
            handle.whereis("svc"),
            None,
            "released once the handle resolved"
        );
    }
    drop(to_watch);
    watcher.join().unwrap();
    assert_eq!(
        stale, 0,
        "{stale} of {iterations}: whereis gave the dead PID after its Down"
    );
}

/// `process_info` names a supervised child after its body (here the function `counter`), not
/// the wrapper the supervisor starts it in, and the supervisor as one.
#[test]
fn a_supervised_child_is_named_after_its_body_in_process_info() {
    let sched = scheduler(2);
    let spec = ChildSpec::new("counter", |start| start.spawn_fn(counter)).register_as("counter");
    let supervisor = run(Supervisor::one_for_one().child(spec).start(sched.handle())).unwrap();
    let child = sched
        .handle()
        .whereis("counter")
        .expect("registered at start");
    let kind = sched.process_info(child).expect("live").kind;
    assert!(kind.ends_with("::counter"), "{kind}");
    let kind = sched.process_info(supervisor.pid()).expect("live").kind;
    assert_eq!(kind, "procsched::supervision::Supervisor");
    let _ = sched.shutdown(GUARD);
}

/// A named child whose shutdown timeout is `Duration::MAX` ("as long as it takes") starts and
/// restarts: the wait for its name is bounded by that timeout without overflowing an `Instant`.
#[test]
fn a_named_child_with_an_unbounded_shutdown_timeout_starts_and_restarts() {
    use procsched::supervision::ChildShutdown;
    let sched = scheduler(2);
    let spec = ChildSpec::new("counter", |start| start.spawn_fn(counter))
        .shutdown(ChildShutdown::Timeout(std::time::Duration::MAX))
        .register_as("counter");
    let supervisor = run(Supervisor::one_for_one()
        .max_restarts(100, GUARD)
        .child(spec)
        .start(sched.handle()))
    .unwrap();
    let first = sched
        .handle()
        .whereis("counter")
        .expect("registered at start");
    let ended = sched.monitor(first);
    sched.terminate(first).unwrap();
    assert!(run(ended).reason.is_killed());
    let restarted = run(async {
        loop {
            match sched.handle().whereis("counter") {
                Some(pid) if pid != first => return pid,
                _ => tokio::task::yield_now().await,
            }
        }
    });
    let addr = sched.handle().named::<Counter>("counter").unwrap();
    assert_eq!(addr.pid(), restarted);
    addr.send(Counter::Add(3)).unwrap();
    assert_eq!(run(addr.ask(Counter::Get)).unwrap(), 3);
    drop(supervisor);
}
