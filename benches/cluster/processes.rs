//! The processes both peers serve: the echo / counting process and the ring member, and the
//! nodes they run on.

use crate::GUARD;
use bytes::Bytes;
use procsched::cluster::{Cluster, Node, NodePid};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use std::time::{Duration, Instant};

/// The echo / counting process's messages.
#[derive(Serialize, Deserialize)]
pub(crate) enum Echo {
    /// Answer the bytes back.
    Ask(#[serde(with = "serde_bytes")] Vec<u8>, Reply<ByteBuf>),
    /// Count one.
    Data(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Count one: the payload as `Bytes`, decoded as a slice of its frame.
    Shared(#[serde(with = "procsched::cluster::shared_bytes")] Bytes),
    /// Answer the count and start again from 0.
    Count(Reply<u64>),
}

pub(crate) async fn echo(cx: ProcessCx<Echo>, (): ()) -> Result<(), BoxError> {
    let mut count = 0u64;
    loop {
        match cx.recv().await? {
            Echo::Ask(bytes, reply) => {
                let _ = reply.send(ByteBuf::from(bytes));
            }
            Echo::Data(_) | Echo::Shared(_) => count += 1,
            Echo::Count(reply) => {
                let _ = reply.send(std::mem::take(&mut count));
            }
        }
    }
}

/// A ring member's messages (as `tests/cluster_nodes.rs`).
#[derive(Serialize, Deserialize)]
pub(crate) enum Ring {
    Next(NodePid),
    Start { hops: u64, done: Reply<u64> },
    Token { left: u64, origin: NodePid },
    Finished,
}

pub(crate) async fn ring_member(cx: ProcessCx<Ring>, (): ()) -> Result<(), BoxError> {
    let node = Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?;
    let me = node.pid(cx.pid());
    let mut next = None;
    let mut waiting: Option<Reply<u64>> = None;
    loop {
        match cx.recv().await? {
            Ring::Next(pid) => next = Some(node.addr::<Ring>(pid)),
            Ring::Start { hops, done } => {
                waiting = Some(done);
                let next = next.as_ref().ok_or("no next member")?;
                next.send(Ring::Token {
                    left: hops - 1,
                    origin: me.clone(),
                })
                .map_err(|error| error.to_string())?;
            }
            Ring::Token { left: 0, origin } => node
                .addr::<Ring>(origin)
                .send(Ring::Finished)
                .map_err(|error| error.to_string())?,
            Ring::Token { left, origin } => {
                let next = next.as_ref().ok_or("no next member")?;
                next.send(Ring::Token {
                    left: left - 1,
                    origin,
                })
                .map_err(|error| error.to_string())?;
            }
            Ring::Finished => {
                if let Some(done) = waiting.take() {
                    let _ = done.send(0);
                }
            }
        }
    }
}

pub(crate) fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .request_timeout(GUARD)
        .message::<Echo>("echo")
        .message::<Ring>("ring")
        .spawnable("echo", echo)
        .spawnable("ring-member", ring_member)
}

/// Starts a node, retrying while the server's JetStream is still coming up.
pub(crate) async fn start_node(sched: &Scheduler, make: impl Fn() -> Cluster) -> Node {
    let deadline = Instant::now() + GUARD;
    loop {
        match Node::start(sched.handle(), make()).await {
            Ok(node) => return node,
            Err(error) if Instant::now() < deadline => {
                eprintln!("node start: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("node start: {error}"),
        }
    }
}

pub(crate) fn one_worker() -> Scheduler {
    Scheduler::builder().workers(1).build().expect("scheduler")
}
