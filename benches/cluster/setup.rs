//! The setup both peers share: the server, two nodes, two raw connections.

use crate::latency::{cpu_ticks, Cpu};
use crate::processes::{cluster, one_worker, start_node, Echo};
use crate::server::NatsServer;
use crate::GUARD;
use futures::StreamExt;
use procsched::cluster::{nats, Node, NodeStats, Placement};
use procsched::prelude::*;
use procsched_benches::WORKERS;
use std::time::Duration;

pub(crate) struct Bench {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) server: NatsServer,
    pub(crate) scheds: Vec<Scheduler>,
    pub(crate) a: Node,
    pub(crate) b: Node,
    /// The raw peer's requesting / publishing connection.
    pub(crate) raw_a: nats::Client,
    /// The raw peer's responding / counting connection.
    pub(crate) raw_b: nats::Client,
}

impl Bench {
    pub(crate) fn start() -> Bench {
        let server = NatsServer::start();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(*WORKERS)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let url = server.url();
        let scheds = vec![one_worker(), one_worker()];
        let (a, b, raw_a, raw_b) = rt.block_on(async {
            let a = start_node(&scheds[0], || cluster(&url, "a")).await;
            let b = start_node(&scheds[1], || cluster(&url, "b")).await;
            assert!(a.wait_for_nodes(1, GUARD).await, "a sees b");
            assert!(b.wait_for_nodes(1, GUARD).await, "b sees a");
            let raw_a = raw_client(&url).await;
            let raw_b = raw_client(&url).await;
            // The raw responder: what a competent async-nats user writes for an echo service.
            let mut requests = raw_b.subscribe("raw.echo").await.expect("subscribe");
            let responder = raw_b.clone();
            tokio::spawn(async move {
                while let Some(request) = requests.next().await {
                    if let Some(reply) = request.reply {
                        let _ = responder.publish(reply, request.payload).await;
                    }
                }
            });
            raw_b.flush().await.expect("flush");
            (a, b, raw_a, raw_b)
        });
        Bench {
            rt,
            server,
            scheds,
            a,
            b,
            raw_a,
            raw_b,
        }
    }

    pub(crate) fn cpu(&self) -> Cpu {
        Cpu {
            bench: cpu_ticks("self"),
            server: cpu_ticks(&self.server.child.id().to_string()),
        }
    }

    /// A fresh echo process on node `b`, addressed from node `a`.
    pub(crate) fn echo_on_b(&self) -> procsched::cluster::RemoteAddr<Echo> {
        self.rt.block_on(async {
            let pid = self
                .a
                .spawn_on(Placement::Node("b".into()), "echo", ())
                .await
                .expect("spawn echo on b");
            self.a.addr::<Echo>(pid)
        })
    }

    pub(crate) fn stop(self) {
        let Bench {
            rt,
            server,
            scheds,
            a,
            b,
            raw_a,
            raw_b,
        } = self;
        rt.block_on(async {
            a.leave().await;
            b.leave().await;
            drop((raw_a, raw_b));
        });
        for sched in scheds {
            sched.shutdown(Duration::from_secs(1));
        }
        rt.shutdown_timeout(Duration::from_secs(1));
        drop(server);
    }
}

/// A raw peer's connection: async-nats defaults; its trouble (slow consumers, disconnections)
/// on stderr.
pub(crate) async fn raw_client(url: &str) -> nats::Client {
    nats::ConnectOptions::new()
        .event_callback(|event| async move {
            if !matches!(event, nats::Event::Connected | nats::Event::Closed) {
                eprintln!("raw client: {event}");
            }
        })
        .connect(url)
        .await
        .expect("raw client")
}

pub(crate) fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 + 7) as u8).collect()
}

pub(crate) fn size_name(size: usize) -> String {
    if size >= 1024 {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// `after - before` of the traffic counters.
pub(crate) fn traffic(before: NodeStats, after: NodeStats) -> (u64, u64, u64) {
    (
        after.bytes_out - before.bytes_out,
        after.frames_out - before.frames_out,
        after.items_out - before.items_out,
    )
}
