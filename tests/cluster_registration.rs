//! What a node registers is unambiguous: a message name is one type's and a type has one
//! name, a spawnable name runs one body (an `async fn` or a state machine). `Node::start`
//! refuses a configuration that says otherwise, with a `Config` error naming the name and both
//! types (or bodies) — instead of one registration silently replacing the other, and the
//! other's messages refused later as `WrongType`. Registering the same thing twice changes
//! nothing.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::NatsServer;
use procsched::cluster::{Cluster, ClusterError, Node};
use procsched::prelude::*;
use procsched::state_machine::{Events, Process, StepOutput};
use procsched::supervision::ChildOptions;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize)]
struct Wrapper<T> {
    value: T,
}

#[derive(Serialize, Deserialize)]
struct Other;

async fn first(_cx: ProcessCx<()>, n: u64) -> Result<u64, BoxError> {
    Ok(n)
}

async fn second(_cx: ProcessCx<()>, n: u64) -> Result<u64, BoxError> {
    Ok(n + 1)
}

fn cluster(url: &str) -> Cluster {
    Cluster::nats(url)
        .name("a")
        .heartbeat(Duration::from_millis(200))
        .down_after(Duration::from_secs(60))
        .request_timeout(GUARD)
}

/// Starts a node on `cluster`: the configuration error it is refused with, or `None` once it
/// started (and left).
async fn refusal(cluster: Cluster) -> Option<String> {
    let sched = Scheduler::builder().workers(1).build().expect("scheduler");
    let started = tokio::time::timeout(GUARD, Node::start(sched.handle(), cluster))
        .await
        .expect("hang guard: Node::start");
    let refusal = match started {
        Ok(node) => {
            node.leave().await;
            None
        }
        Err(ClusterError::Config(why)) => Some(why),
        Err(other) => panic!("not a configuration error: {other}"),
    };
    sched.shutdown_async(GUARD).await;
    refusal
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_of_two_types_or_a_type_of_two_names_is_refused_at_start() {
    let server = NatsServer::start();
    let url = server.url();

    let why = refusal(
        cluster(&url)
            .message::<Wrapper<u64>>("wrapper")
            .message::<Wrapper<String>>("wrapper"),
    )
    .await
    .expect("two types under one name are refused");
    for part in [
        "\"wrapper\"",
        "Wrapper<u64>",
        "Wrapper<alloc::string::String>",
    ] {
        assert!(why.contains(part), "{part} in: {why}");
    }

    let why = refusal(
        cluster(&url)
            .message::<Wrapper<u64>>("wrapper")
            .message::<Wrapper<u64>>("wrapped"),
    )
    .await
    .expect("one type under two names is refused");
    for part in ["\"wrapper\"", "\"wrapped\"", "Wrapper<u64>"] {
        assert!(why.contains(part), "{part} in: {why}");
    }

    let why = refusal(
        cluster(&url)
            .spawnable("count", first)
            .spawnable("count", second),
    )
    .await
    .expect("two bodies under one name are refused");
    for part in ["\"count\"", "first", "second"] {
        assert!(why.contains(part), "{part} in: {why}");
    }

    let offset = 1u64;
    let why = refusal(
        cluster(&url)
            .spawnable("count", first)
            .spawnable("count", move |_cx: ProcessCx<()>, n: u64| async move {
                Ok::<_, BoxError>(n + offset)
            }),
    )
    .await
    .expect("a closure under a function's name is refused");
    assert!(why.contains("\"count\""), "{why}");

    let why = refusal(
        cluster(&url)
            .spawnable_with("count", ChildOptions::new().mailbox_capacity(8), first)
            .spawnable("count", first),
    )
    .await
    .expect("one body under one name with two mailbox bounds is refused");
    for part in ["\"count\"", "different options", "Capacity(8)"] {
        assert!(why.contains(part), "{part} in: {why}");
    }

    // Two `fn` pointers of one type may point at different functions: not comparable, refused
    // with a message that says so and names the way out.
    type Body = fn(
        ProcessCx<()>,
        u64,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<u64, BoxError>> + Send>,
    >;
    let pointer: Body = |cx, n| Box::pin(first(cx, n));
    let why = refusal(
        cluster(&url)
            .spawnable("count", pointer)
            .spawnable("count", pointer),
    )
    .await
    .expect("a fn pointer registered twice is refused");
    assert!(why.contains("cannot compare"), "{why}");

    // A state machine shares the bodies' names.
    let why = refusal(
        cluster(&url)
            .spawnable("count", first)
            .spawnable_process("count", |_: u64| Idle),
    )
    .await
    .expect("a state machine under a body's name is refused");
    assert!(why.contains("\"count\""), "{why}");
}

/// A state machine that waits for nothing.
struct Idle;

impl Process for Idle {
    type Output = ();
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        out.idle();
        Ok(())
    }
}

fn idle(_: u64) -> Idle {
    Idle
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_registration_twice_is_harmless() {
    let server = NatsServer::start();
    let twice = cluster(&server.url())
        .message::<Wrapper<u64>>("wrapper")
        .message::<Other>("other")
        .message::<Wrapper<u64>>("wrapper")
        .spawnable("count", first)
        .spawnable("count", first)
        .spawnable_with("bounded", ChildOptions::new().mailbox_capacity(8), first)
        .spawnable_with("bounded", ChildOptions::new().mailbox_capacity(8), first)
        .spawnable_process("idle", idle)
        .spawnable_process("idle", idle);
    assert_eq!(refusal(twice).await, None, "the node starts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_too_short_for_nats_is_refused_at_start_by_name() {
    // Refused before any connection: no server needed. 33.4 ms is just under the documented
    // floor (three of them would pass NATS's 100 ms).
    for heartbeat in [Duration::from_millis(20), Duration::from_micros(33_400)] {
        let why = refusal(
            cluster("nats://127.0.0.1:1")
                .heartbeat(heartbeat)
                .down_after(Duration::from_millis(100)),
        )
        .await
        .unwrap_or_else(|| panic!("a {heartbeat:?} heartbeat is refused"));
        assert!(why.contains("34 ms"), "{why}");
    }
}
