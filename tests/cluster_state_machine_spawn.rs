//! State machines spawned by name from other nodes (`Cluster::spawnable_process`), against a
//! real `nats-server`: made from the spawn's argument, initialised for the registered name as
//! entry method, reached by typed messages, joined for their output; their `init` errors and
//! their constructor's or `init`'s panics come back as the same `SpawnError` a local spawn
//! gives; and a supervised child on another node may be one.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{start_nodes, steady_cluster, stop_nodes, wait_child, NatsServer};
use procsched::cluster::{Cluster, Placement, RemoteError};
use procsched::prelude::*;
use procsched::state_machine::{Event, Events, InitError, Process, ProcessContext, StepOutput};
use procsched::supervision::Supervisor;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// Adds up `u64` messages until it has taken `left` of them; its `init` refuses an entry
/// method other than `"tally"` and an empty tally, and panics for 13.
struct Tally {
    left: u32,
    sum: u64,
}

impl Process for Tally {
    type Output = u64;

    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        if method != "tally" {
            return Err(InitError::UnknownMethod(method.to_owned()));
        }
        assert_ne!(self.left, 13, "unlucky tally");
        if self.left == 0 {
            return Err(InitError::Failed("an empty tally".into()));
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        for event in events.drain() {
            if let Event::Message(message) = event {
                self.sum += message.payload.take::<u64>()?;
                self.left -= 1;
            }
        }
        if self.left == 0 {
            out.done(self.sum);
        } else {
            out.wait();
        }
        Ok(())
    }
}

fn make_tally(left: u32) -> Tally {
    assert_ne!(left, 7, "no tally of seven");
    Tally { left, sum: 0 }
}

fn cluster(url: &str, name: &str) -> Cluster {
    steady_cluster(url, name, GUARD)
        .message::<u64>("amount")
        .spawnable_process("tally", make_tally)
        // The same type under another name: its `init` refuses the entry method.
        .spawnable_process("misnamed", make_tally)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_machine_spawned_on_another_node_takes_typed_messages_and_is_joined() {
    let nats = NatsServer::start();
    let url = nats.url();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&url, name), GUARD).await;
    let a = &nodes[0].1;

    let handle = a
        .spawn_on_with_handle::<u64, _>(Placement::Node("b".into()), "tally", 3u32)
        .await
        .unwrap();
    assert_eq!(handle.pid().node(), "b");
    let addr = a.addr::<u64>(handle.pid().clone());
    for amount in [5, 6, 7] {
        addr.send_acked(amount).await.unwrap();
    }
    let sum = tokio::time::timeout(GUARD, handle)
        .await
        .expect("hang guard: the tally ends");
    assert_eq!(sum.unwrap(), 18);

    // Spawned by name on its own node: the same process.
    let local = a
        .spawn_on_with_handle::<u64, _>(Placement::Local, "tally", 1u32)
        .await
        .unwrap();
    a.addr::<u64>(local.pid().clone()).send(40).unwrap();
    assert_eq!(
        tokio::time::timeout(GUARD, local).await.unwrap().unwrap(),
        40
    );
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_init_errors_and_panics_come_back_as_a_local_spawns_would() {
    let nats = NatsServer::start();
    let url = nats.url();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&url, name), GUARD).await;
    let a = &nodes[0].1;
    let on_b = || Placement::Node("b".into());

    let refused = a.spawn_on(on_b(), "tally", 0u32).await.unwrap_err();
    assert!(
        matches!(&refused, RemoteError::Spawn(SpawnError::Init(InitError::Failed(why))) if why.to_string().contains("an empty tally")),
        "{refused:?}"
    );
    let refused = a.spawn_on(on_b(), "misnamed", 2u32).await.unwrap_err();
    assert!(
        matches!(&refused, RemoteError::Spawn(SpawnError::Init(_))),
        "an entry method its init refuses: {refused:?}"
    );
    let refused = a.spawn_on(on_b(), "tally", 13u32).await.unwrap_err();
    assert!(
        matches!(&refused, RemoteError::Spawn(SpawnError::InitPanicked(why)) if why.contains("unlucky tally")),
        "init panicked: {refused:?}"
    );
    let refused = a.spawn_on(on_b(), "tally", 7u32).await.unwrap_err();
    assert!(
        matches!(&refused, RemoteError::Spawn(SpawnError::InitPanicked(why)) if why.contains("no tally of seven")),
        "the constructor panicked: {refused:?}"
    );
    let refused = a.spawn_on(on_b(), "tally", "three").await.unwrap_err();
    assert!(
        matches!(&refused, RemoteError::Spawn(SpawnError::Init(_))),
        "an argument that does not decode: {refused:?}"
    );

    // Node b still spawns what it registered.
    let handle = a
        .spawn_on_with_handle::<u64, _>(on_b(), "tally", 1u32)
        .await
        .unwrap();
    a.addr::<u64>(handle.pid().clone()).send(2).unwrap();
    assert_eq!(
        tokio::time::timeout(GUARD, handle).await.unwrap().unwrap(),
        2
    );
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervised_state_machine_on_another_node_is_restarted_after_it_ends() {
    let nats = NatsServer::start();
    let url = nats.url();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&url, name), GUARD).await;
    let a = &nodes[0].1;

    let (spec, child) = a
        .remote_child("tally", Placement::Node("b".into()), "tally", 1u32)
        .unwrap();
    let supervisor = Supervisor::one_for_one()
        .child(spec)
        .start(&a.scheduler())
        .await
        .unwrap();
    let first = tokio::time::timeout(GUARD, child.running())
        .await
        .expect("hang guard: the child runs");
    assert_eq!(first.node(), "b");
    // One message finishes it (a permanent child): the supervisor starts another there.
    a.addr::<u64>(first.clone()).send_acked(1).await.unwrap();
    let second = wait_child(&child, |pid| *pid != first, GUARD).await;
    assert_eq!(second.node(), "b");
    assert_eq!(supervisor.restarts().await.unwrap(), 1);
    stop_nodes(nodes, GUARD).await;
}
