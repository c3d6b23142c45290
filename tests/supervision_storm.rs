//! A crash storm through a supervision tree: a 3-level tree — a root supervisor, 10
//! sub-supervisors (one_for_one), 1 000 children each — whose children crash at random (errors,
//! panics, terminates) for several rounds. Every restart is counted, no child is lost or
//! duplicated, and nothing leaks: the live process count returns to the tree's size after every
//! round, and the resident set stays flat between the first round and the last.
//!
//! Deterministic-ish: the crashes are drawn from a seeded PRNG (`support::Rng`), each round
//! waits (hang-guarded, by polling `which_children`) until every crashed child has been
//! replaced before it counts. Sized for a debug build on two cores.
//!
//! The sub-supervisors are started with `Supervisor::spawn` from a child spec's factory and
//! linked to the root by hand, so that each factory can publish its `SupervisorRef` for the
//! test's census (the root still sees their ends).

mod supervision_common;
mod support;

use procsched::prelude::*;
use procsched::supervision::{ChildInfo, ChildSpec, Supervisor, SupervisorRef};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervision_common::*;
use support::{quiet_panics, Rng};

const SUBS: usize = 10;
const CHILDREN: usize = 1_000;
/// The root, its sub-supervisors and their children.
const TREE: usize = 1 + SUBS + SUBS * CHILDREN;
const ROUNDS: usize = 8;
/// Crashes drawn per round (distinct children).
const CRASHES_PER_ROUND: usize = 2_500;
/// How much the resident set may grow between the first round and the last: a leak of even a
/// few hundred bytes per crash over the rounds after the first would exceed it.
const RSS_GROWTH_BOUND: u64 = 20 << 20;

/// What a child is told to crash with.
enum Crash {
    Fail,
    Panic,
}

/// A child: waits for a [`Crash`]; asked to finish, ends as cancelled.
async fn child(cx: ProcessCx<Crash>) -> Result<(), BoxError> {
    match cx.recv().await? {
        Crash::Fail => Err("crash storm: told to fail".into()),
        Crash::Panic => panic!("{PANIC}"),
    }
}

/// A sub-supervisor spec for the root: its factory spawns the sub-supervisor, links it to the
/// root, and publishes its [`SupervisorRef`] in `slot`.
fn sub_supervisor(index: usize, slot: Arc<Mutex<Option<SupervisorRef>>>) -> ChildSpec {
    ChildSpec::new(format!("sub-{index}"), move |start| {
        let sub = (0..CHILDREN).fold(
            Supervisor::one_for_one().max_restarts(u32::MAX, Duration::from_secs(60)),
            |sub, n| {
                sub.child(ChildSpec::new(format!("child-{n}"), |start| {
                    start.spawn_fn(child)
                }))
            },
        );
        let sub = sub.spawn(start.scheduler())?;
        start
            .scheduler()
            .link(sub.pid(), start.supervisor())
            .expect("the new sub-supervisor runs");
        let pid = sub.pid();
        *slot.lock().unwrap() = Some(sub);
        Ok(pid)
    })
}

/// The resident set size of this process, in bytes (Linux only).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let resident_pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(resident_pages * 4096)
}

/// Every sub-supervisor's children, once none of them is without a running instance and none
/// runs as one of the `replaced` PIDs (polled, hang-guarded).
fn settled(subs: &[SupervisorRef], replaced: &HashSet<Pid>) -> Vec<Vec<ChildInfo>> {
    run(async {
        let mut all = Vec::with_capacity(subs.len());
        for sub in subs {
            loop {
                let children = sub.which_children().await.unwrap();
                let done = children
                    .iter()
                    .all(|child| child.pid.is_some_and(|pid| !replaced.contains(&pid)));
                if done {
                    all.push(children);
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        all
    })
}

/// Checks that no child is lost or duplicated: `CHILDREN` children per sub-supervisor, with
/// their ids, every one running, every PID distinct across the tree. Returns the PIDs by
/// (sub-supervisor, child index).
fn census(trees: &[Vec<ChildInfo>]) -> BTreeMap<(usize, usize), Pid> {
    let mut pids = BTreeMap::new();
    for (sub, children) in trees.iter().enumerate() {
        assert_eq!(children.len(), CHILDREN, "sub-supervisor {sub}");
        for (n, child) in children.iter().enumerate() {
            assert_eq!(
                &*child.id,
                format!("child-{n}"),
                "sub-supervisor {sub}: start order"
            );
            pids.insert((sub, n), child.pid.expect("settled: every child runs"));
        }
    }
    let distinct: BTreeSet<Pid> = pids.values().copied().collect();
    assert_eq!(
        distinct.len(),
        SUBS * CHILDREN,
        "a PID appears twice in the tree"
    );
    pids
}

fn total_restarts(subs: &[SupervisorRef]) -> u64 {
    run(async {
        let mut total = 0;
        for sub in subs {
            total += sub.restarts().await.unwrap();
        }
        total
    })
}

#[test]
fn a_crash_storm_in_a_three_level_tree_counts_every_restart_loses_no_child_and_leaks_nothing() {
    quiet_panics();
    let sched = scheduler(2);
    let slots: Vec<Arc<Mutex<Option<SupervisorRef>>>> = (0..SUBS).map(|_| Arc::default()).collect();
    let root = run(slots
        .iter()
        .enumerate()
        .fold(Supervisor::one_for_one(), |root, (index, slot)| {
            root.child(sub_supervisor(index, slot.clone()))
        })
        .start(sched.handle()))
    .expect("the tree started");
    let subs: Vec<SupervisorRef> = slots
        .iter()
        .map(|slot| slot.lock().unwrap().clone().expect("started by the root"))
        .collect();
    let mut pids = census(&settled(&subs, &HashSet::new()));
    assert_eq!(sched.live_processes(), TREE);

    let mut rng = Rng::new(0x5EED_C4A5);
    let mut crashes = 0u64;
    let mut rss_after_first = None;
    for round in 1..=ROUNDS {
        // Draw distinct children, and crash each in one of three ways.
        let mut victims = BTreeSet::new();
        while victims.len() < CRASHES_PER_ROUND {
            let sub = rng.below(SUBS as u64) as usize;
            let n = rng.below(CHILDREN as u64) as usize;
            victims.insert((sub, n));
        }
        let mut replaced = HashSet::new();
        for &victim in &victims {
            let pid = pids[&victim];
            match rng.below(3) {
                0 => sched.handle().addr::<Crash>(pid).send(Crash::Fail).unwrap(),
                1 => sched
                    .handle()
                    .addr::<Crash>(pid)
                    .send(Crash::Panic)
                    .unwrap(),
                _ => sched.terminate(pid).unwrap(),
            }
            replaced.insert(pid);
        }
        crashes += victims.len() as u64;

        let now = census(&settled(&subs, &replaced));
        for (position, pid) in &now {
            let crashed = victims.contains(position);
            assert_eq!(
                *pid != pids[position],
                crashed,
                "round {round}: child {position:?} was {} and its PID {}",
                if crashed { "crashed" } else { "left alone" },
                if *pid != pids[position] {
                    "changed"
                } else {
                    "stayed"
                },
            );
        }
        pids = now;
        assert_eq!(
            total_restarts(&subs),
            crashes,
            "round {round}: every restart counted"
        );
        assert_eq!(
            run(root.restarts()).unwrap(),
            0,
            "no sub-supervisor gave up"
        );
        assert_eq!(
            sched.live_processes(),
            TREE,
            "round {round}: no process leaked"
        );
        if round == 1 {
            rss_after_first = rss_bytes();
        }
    }
    if let (Some(first), Some(last)) = (rss_after_first, rss_bytes()) {
        let growth = last.saturating_sub(first);
        assert!(
            growth < RSS_GROWTH_BOUND,
            "the resident set grew by {growth} bytes over {} crashes after the first round",
            crashes - CRASHES_PER_ROUND as u64
        );
    }
    let report = sched.shutdown(GUARD);
    assert_eq!(report.total(), TREE, "{report:?}");
}
