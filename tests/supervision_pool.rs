//! A supervisor as a pool of sessions (dynamic children, `start_child` / `terminate_child`):
//! thousands of children keep their start order through removals from the middle, an id freed
//! by `terminate_child` can be taken again (and goes last), a temporary session that ends is
//! forgotten, and `rest_for_one` restarts exactly the children started after the crashed one —
//! dynamic ones included. Deadlines are hang guards only.

mod supervision_common;

use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Restart, Supervisor, SupervisorError, SupervisorRef};
use supervision_common::*;

/// Sessions in the pool: enough that a per-child scan would be the pool's main cost.
const SESSIONS: usize = 2_000;

/// A session `id` that ends as a [`Cmd`] tells it.
fn session(id: String, restart: Restart) -> ChildSpec {
    ChildSpec::new(id, |start| start.spawn_fn(puppet)).restart(restart)
}

fn ids(pool: &SupervisorRef) -> Vec<String> {
    run(pool.which_children())
        .unwrap()
        .iter()
        .map(|child| child.id.to_string())
        .collect()
}

#[test]
fn a_pool_keeps_its_sessions_in_start_order_through_removals_and_reuses_freed_ids() {
    let sched = scheduler(2);
    let pool = run(Supervisor::one_for_one().start(sched.handle())).unwrap();
    let pids: Vec<Pid> = (0..SESSIONS)
        .map(|i| run(pool.start_child(session(format!("s{i}"), Restart::Temporary))).unwrap())
        .collect();
    assert_eq!(ids(&pool).len(), SESSIONS);

    // Every third session is terminated, every third (from the second) ends by itself.
    for i in (0..SESSIONS).step_by(3) {
        run(pool.terminate_child(&format!("s{i}"))).unwrap();
    }
    let ended: Vec<_> = (1..SESSIONS)
        .step_by(3)
        .map(|i| {
            let down = sched.monitor(pids[i]);
            sched
                .handle()
                .addr::<Cmd>(pids[i])
                .send(Cmd::Fail("a session crashed"))
                .unwrap();
            down
        })
        .collect();
    for down in ended {
        run(down);
    }
    // Their ends reach the supervisor after their `Down`s: wait for it to forget them.
    let expected: Vec<String> = (2..SESSIONS).step_by(3).map(|i| format!("s{i}")).collect();
    run(async {
        while pool.which_children().await.unwrap().len() != expected.len() {
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(ids(&pool), expected, "the rest, in start order");

    // A freed id is taken again and goes last; a kept one is still a duplicate.
    run(pool.start_child(session("s0".into(), Restart::Temporary))).unwrap();
    assert_eq!(ids(&pool).last().map(String::as_str), Some("s0"));
    assert_eq!(
        run(pool.start_child(session("s2".into(), Restart::Temporary))),
        Err(SupervisorError::DuplicateId("s2".into()))
    );
    assert_eq!(
        run(pool.terminate_child("s1")),
        Err(SupervisorError::NoChild("s1".into())),
        "a temporary session that ended is forgotten"
    );
}

#[test]
fn rest_for_one_restarts_the_dynamic_children_started_after_the_crashed_one() {
    let sched = scheduler(2);
    let pool = run(Supervisor::rest_for_one().start(sched.handle())).unwrap();
    for i in 0..6 {
        run(pool.start_child(session(format!("s{i}"), Restart::Permanent))).unwrap();
    }
    // Removed from the middle: the crash of s1 must restart s3, s4, s5 and nothing before.
    run(pool.terminate_child("s2")).unwrap();
    let before = run(pool.which_children()).unwrap();
    let pid_of = |children: &[procsched::supervision::ChildInfo], id: &str| {
        children
            .iter()
            .find(|child| &*child.id == id)
            .and_then(|child| child.pid)
    };
    let crashed = pid_of(&before, "s1").unwrap();
    sched
        .handle()
        .addr::<Cmd>(crashed)
        .send(Cmd::Fail("crashed"))
        .unwrap();
    let after = run(async {
        loop {
            let children = pool.which_children().await.unwrap();
            let renewed = ["s1", "s3", "s4", "s5"].iter().all(|id| {
                pid_of(&children, id).is_some_and(|pid| Some(pid) != pid_of(&before, id))
            });
            if renewed {
                return children;
            }
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(
        pid_of(&after, "s0"),
        pid_of(&before, "s0"),
        "s0 is untouched"
    );
    let order: Vec<&str> = after.iter().map(|child| &*child.id).collect();
    assert_eq!(order, ["s0", "s1", "s3", "s4", "s5"]);
    assert_eq!(run(pool.restarts()).unwrap(), 1);
}
