//! The security options of `async-nats` pass through a node's `Cluster::connect_options`: nodes
//! join a server that requires a user and password, or mutual TLS, and serve each other across
//! it; a node without the credentials, with a wrong password, or without its client
//! certificate is refused with a typed `ClusterError::Connect` at start — never a hang.
//!
//! The TLS material is a test-only CA and its server and client certificates for 127.0.0.1,
//! committed in `tests/cluster_support/tls/` (`generate.sh` there remakes them).
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{start_nodes, stop_nodes, NatsServer};
use procsched::cluster::{nats, Cluster, ClusterError, Node, Placement};
use procsched::prelude::*;
use std::path::PathBuf;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// Answers each port with the number it was spawned with.
async fn answer(cx: ProcessCx<Reply<u64>>, n: u64) -> Result<(), BoxError> {
    loop {
        let _ = cx.recv().await?.send(n);
    }
}

fn cluster(url: &str, name: &str, options: nats::ConnectOptions) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(Duration::from_secs(60))
        .request_timeout(GUARD)
        .message::<Reply<u64>>("port")
        .spawnable("answer", answer)
        .connect_options(options)
}

/// Nodes `a` and `b` over the server at `url`, each connecting with `options()`: a spawns a
/// process on b and asks it.
async fn a_asks_b(url: &str, options: impl Fn() -> nats::ConnectOptions) {
    let nodes = start_nodes(&["a", "b"], |name| cluster(url, name, options()), GUARD).await;
    let a = &nodes[0].1;
    let pid = a
        .spawn_on(Placement::Node("b".into()), "answer", 42u64)
        .await
        .unwrap();
    assert_eq!(pid.node(), "b");
    let answer: u64 = tokio::time::timeout(GUARD, a.addr::<Reply<u64>>(pid).ask(|reply| reply))
        .await
        .expect("hang guard")
        .unwrap();
    assert_eq!(answer, 42);
    stop_nodes(nodes, GUARD).await;
}

/// Starts a node named `name` with `options`: its error, which must come before the hang guard.
async fn refused(url: &str, name: &str, options: nats::ConnectOptions) -> ClusterError {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let started = tokio::time::timeout(
        GUARD,
        Node::start(sched.handle(), cluster(url, name, options)),
    )
    .await
    .expect("hang guard: a refused connection must fail the start, not retry forever");
    sched.shutdown_async(GUARD).await;
    match started {
        Ok(node) => panic!("node {} started without valid credentials", node.name()),
        Err(error) => error,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_join_a_server_that_requires_a_user_and_password() {
    let server = NatsServer::start_with(&[
        "--user".into(),
        "procsched".into(),
        "--pass".into(),
        "s3cret".into(),
    ]);
    let url = server.url();
    a_asks_b(&url, || {
        nats::ConnectOptions::new().user_and_password("procsched".into(), "s3cret".into())
    })
    .await;

    // NATS's own words for a refused login: "Authorization Violation".
    let authorization = |error: &ClusterError| matches!(error, ClusterError::Connect(why) if why.to_lowercase().contains("authorization"));
    let none = refused(&url, "c", nats::ConnectOptions::new()).await;
    assert!(authorization(&none), "{none:?}");
    let wrong = nats::ConnectOptions::new().user_and_password("procsched".into(), "guess".into());
    let wrong = refused(&url, "d", wrong).await;
    assert!(authorization(&wrong), "{wrong:?}");
}

/// A file of the test TLS material.
fn tls(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cluster_support/tls")
        .join(file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_join_a_server_that_requires_mutual_tls() {
    let arg = |flag: &str, file: &str| format!("--{flag}={}", tls(file).display());
    let server = NatsServer::start_with(&[
        "--tls".into(),
        arg("tlscert", "server-cert.pem"),
        arg("tlskey", "server-key.pem"),
        "--tlsverify".into(),
        arg("tlscacert", "ca.pem"),
    ]);
    let url = server.url();
    let trusting = || {
        nats::ConnectOptions::new()
            .require_tls(true)
            .add_root_certificates(tls("ca.pem"))
    };
    a_asks_b(&url, || {
        trusting().add_client_certificate(tls("client-cert.pem"), tls("client-key.pem"))
    })
    .await;

    // Trusting the server is not enough: the server requires this node's certificate.
    let anonymous = refused(&url, "c", trusting()).await;
    assert!(
        matches!(anonymous, ClusterError::Connect(_)),
        "{anonymous:?}"
    );
    // A node that does not trust the server's CA refuses it.
    let untrusting = nats::ConnectOptions::new()
        .require_tls(true)
        .add_client_certificate(tls("client-cert.pem"), tls("client-key.pem"));
    let untrusting = refused(&url, "d", untrusting).await;
    assert!(
        matches!(untrusting, ClusterError::Connect(_)),
        "{untrusting:?}"
    );
}
