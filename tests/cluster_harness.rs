//! Tests of the NATS test harness itself (`tests/cluster_support`): the cluster tests trust it to
//! hand them a ready server or cluster, to keep a restarted server on its port, and to leave
//! nothing behind. Each check talks to the server with a plain socket (the `INFO {` greeting),
//! so these tests need no NATS client and fail on the harness, not on the code under test.
//!
//! Deadlines appear only as hang guards.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{
    free_port, free_ports, read_greeting, wait_until, NatsCluster, NatsServer, READY_GUARD,
};
use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::Duration;

/// Asserts the client port on `port` is served by a NATS server: its first line is `INFO {..}`.
fn assert_greets(port: u16) -> String {
    let line = read_greeting(port).unwrap_or_else(|e| panic!("connect/read port {port}: {e}"));
    assert!(
        line.starts_with("INFO {"),
        "port {port} greeted with {line:?}"
    );
    assert!(
        line.ends_with('}'),
        "port {port}: INFO line cut short: {line:?}"
    );
    line
}

#[test]
fn a_server_starts_and_greets_on_its_client_port() {
    let mut server = NatsServer::start();
    assert_eq!(server.url(), format!("nats://127.0.0.1:{}", server.port()));
    assert!(server.is_running());
    let info = assert_greets(server.port());
    assert!(
        info.contains(r#""jetstream":true"#),
        "JetStream not enabled: {info}"
    );
    assert!(server.store_dir().join("jetstream").is_dir());
}

#[test]
fn restart_keeps_the_port_and_store_and_greets_again() {
    let mut server = NatsServer::start();
    let (port, url, dir) = (server.port(), server.url(), server.store_dir().to_owned());
    assert_greets(port);

    server.stop();
    assert!(!server.is_running());
    assert!(
        TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
        "stopped, still accepts"
    );

    server.restart();
    assert!(server.is_running());
    assert_eq!((server.port(), server.url()), (port, url));
    assert_eq!(server.store_dir(), dir);
    assert_greets(port);
    // A second restart from the running state (stop included).
    server.restart();
    assert_greets(port);
    let log = std::fs::read_to_string(server.log_path()).unwrap();
    assert_eq!(
        log.matches("Server is ready").count(),
        3,
        "one log, three runs:\n{log}"
    );
}

#[test]
fn a_three_node_cluster_becomes_healthy_and_every_member_greets() {
    let mut cluster = NatsCluster::start(3);
    let urls = cluster.urls();
    assert_eq!(urls.len(), 3);
    assert_eq!(
        urls.iter().collect::<HashSet<_>>().len(),
        3,
        "distinct members: {urls:?}"
    );
    let cluster_field = format!(r#""cluster":"{}""#, cluster.name());
    for i in 0..cluster.len() {
        let info = assert_greets(cluster.server(i).port());
        assert!(
            info.contains(&cluster_field),
            "member {i} not in the cluster: {info}"
        );
        assert!(info.contains(r#""jetstream":true"#), "member {i}: {info}");
    }

    // One member restarted alone: the other two keep quorum, and it rejoins on its port.
    let port = cluster.server(1).port();
    cluster.server_mut(1).restart();
    assert_eq!(cluster.server(1).port(), port);
    assert_greets(port);

    // All restarted at once: healthy again once a new meta leader is elected.
    for i in 0..cluster.len() {
        cluster.server_mut(i).start_again();
    }
    cluster.wait_healthy();
    for i in 0..cluster.len() {
        assert_greets(cluster.server(i).port());
    }
}

#[test]
fn drop_removes_the_store_dir_and_frees_the_port() {
    let server = NatsServer::start();
    let (port, dir) = (server.port(), server.store_dir().to_owned());
    assert_greets(port);
    assert!(dir.is_dir());
    drop(server);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert!(
        TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
        "port {port} still served"
    );
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("the port is free again");
}

#[test]
fn dropping_a_cluster_removes_every_store_dir() {
    let cluster = NatsCluster::start(3);
    let dirs: Vec<_> = (0..3)
        .map(|i| cluster.server(i).store_dir().to_owned())
        .collect();
    drop(cluster);
    for dir in dirs {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

#[test]
fn free_ports_are_distinct_and_bindable() {
    let ports = free_ports(8);
    assert_eq!(ports.iter().collect::<HashSet<_>>().len(), 8, "{ports:?}");
    let port = free_port();
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("a free port binds");
}

#[test]
fn wait_until_returns_once_true_and_panics_with_what_on_the_deadline() {
    let mut calls = 0;
    wait_until("the third call", READY_GUARD, || {
        calls += 1;
        calls == 3
    });
    assert_eq!(calls, 3);
    let panic = std::panic::catch_unwind(|| {
        wait_until("pigs fly", Duration::from_millis(20), || false);
    })
    .expect_err("wait_until must panic on its deadline");
    let message = panic
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(message.contains("pigs fly"), "{message}");
}
